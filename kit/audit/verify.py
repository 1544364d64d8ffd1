"""`kit verify BUNDLE`: hashes, signature, system description and every rule, figures recomputed from raw logs.

Needs no GPU, no host and no Docker: only this package, Python and (for signatures) ssh-keygen.
Exit 0 only when every file is intact, the signature (if any) holds and every rule holds. Without
--allowed-signers that proves consistency only (anyone can rebuild a manifest): the verdict says
"CONSISTENT, authenticity NOT checked"; "OK" needs a good signature by an allowed signer.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from kit.audit import bundle as bd
from kit.audit import pair
from kit.audit import rules as rl
from kit.audit import sweep as sw
from kit.audit.evidence import CLAIMS_REL_TOL, READ_ERRORS, Evidence
from kit.core import rundir
from kit.core.files import SCHEMA_VERSIONS
from kit.core.inputs import InputError, parse_json, read_input
from kit.core.rundir import has_run_meta, is_sweep
from kit.core.text import printable

PUBLIC_KEY_TYPE = re.compile(r"(ssh-|ecdsa-sha2-|sk-)[A-Za-z0-9.@-]+")  # a .pub line's first field

INTEGRITY = "integrity"
SIGNATURE_RULE = "signature"
SYSTEM_RULE = "system_description_recomputed"
COMPLETE_RULE = "run_complete"  # kit bench reached its end: a partial run is never OK


@dataclass
class Compliance:
    bundle: str
    signature: bd.SignatureCheck | None = None
    integrity: list[rl.Violation] = field(default_factory=list)
    findings: list[rl.Finding] = field(default_factory=list)
    extra: list[rl.Violation] = field(default_factory=list)
    files: int = 0
    figures: int = 0
    seconds: float = 0.0
    rules_version: str = ""  # the rule set that judged it (the auditor's kit decides)
    made_under: object = None  # the rule set the bundle names (provenance.json): what its maker's kit applied
    # failing rules added or tightened after made_under, which the bundle passes as made_under judges them
    newer_rules_failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. the bundle a reproduction reproduced (kit.audit.pair)
    side: pair.Side | None = None  # its name and figures, for a reproduction of it (kit verify --original)
    rows: list = field(default_factory=list)  # a sweep's bundle: each row judged (kit.audit.sweep.Row)

    @property
    def violations(self) -> list[rl.Violation]:
        out = list(self.integrity)
        if self.signature and self.signature.state == "invalid":
            out.append(rl.Violation(SIGNATURE_RULE, self.signature.detail, bd.SIGNATURE))
        out += self.extra
        for f in self.findings:
            out += f.violations
        for row in self.rows:  # a sweep's: each row whose violations count (kit.audit.sweep.Row)
            out += row.violations if row.counted else []
        return out

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def authentic(self) -> bool:
        """Signed by a key of the auditor's allowed-signers file (else only consistency was checked)."""
        return self.signature is not None and self.signature.state == "valid"

    @property
    def verdict(self) -> str:
        return "NOT OK" if not self.ok else "OK" if self.authentic else "CONSISTENT, authenticity NOT checked"

    def lines(self) -> list[str]:
        """The report as lines to print: what came from the bundle (member names, messages quoting its files, the
        signer's output) is escaped (kit.core.text.printable): no line holds a control character, so a bundle
        can neither print a line of its own nor hide the verdict."""
        sig = self.signature.state.upper() if self.signature else "NOT CHECKED"
        out = [f"kit verify {self.bundle}: rule set {self.rules_version or '?'}" + self.rules_said(),
               f"  files: {self.files} checked against manifest.json (sha256)"
               + ("" if not self.integrity else f", {len(self.integrity)} problem(s)"),
               f"  signature: {sig}" + (f" - {self.signature.detail}" if self.signature else "")]
        if self.rows:
            out.append(f"  sweep: {len(self.rows)} row(s), each host's (GPU's) run directory judged by every rule:")
            out += [row.line() for row in self.rows]
        out += self.notes
        for f in self.findings:
            state = "FAIL" if f.violations else ("n/a " if not f.checked else "OK  ")
            note = f"  ({f.note})" if f.note else ""
            if f.rule.name in self.newer_rules_failed:
                note += (f"  (recorded before {f.rule.predicate}; passes {self.made_under}, the rule set the bundle "
                         "was made under)")
            out.append(f"  {state} {f.rule.name}: {f.checked} checked{note}")
        if self.violations:
            out.append(f"VIOLATIONS ({len(self.violations)}):")
            out += [f"  [{v.rule}] {v.where}: {v.message}" for v in self.violations]
            if self.newer_rules_failed:
                them = "them" if len(self.newer_rules_failed) > 1 else "it"
                out.append(f"  recorded before {', '.join(self.newer_rules_failed)} (added or tightened after "
                           f"{self.made_under}); the bundle passes {them} as {self.made_under} judges: "
                           f"`kit verify --rules {self.made_under}`")
            out.append(f"NOT OK: {len(self.violations)} violation(s); {self.figures} figure(s) recomputed")
        else:
            out.append(f"{self.verdict}: every file intact, every rule holds; {self.figures} figure(s) recomputed "
                       f"from the raw logs in {self.seconds:.1f} s")
            if uncounted := [row.name for row in self.rows if row.violations and not row.counted]:
                out.append(f"  but for the records of {', '.join(uncounted)}, which the sweep records as failed or "
                           "lost and which give no figure (their violations shown above, not counted)")
            if not self.authentic:
                out.append("  the bundle agrees with itself, but nothing shows who made it (a forger can rebuild "
                           "the manifest); give --allowed-signers FILE to require a signature by a key you trust")
        return [printable(line) for line in out]

    def rules_said(self) -> str:
        if self.made_under is None:
            return " (the bundle names none)"
        if self.made_under == self.rules_version:
            return " (the one the bundle was made under)"
        return f"; the bundle was made under {str(self.made_under)[:20]!r}: another rule set judges it"

    def to_dict(self) -> dict:
        # ok: what the verdict OK means (every rule, and signed by an allowed signer); consistent: rules alone
        return {"bundle": self.bundle, "ok": self.ok and self.authentic, "consistent": self.ok,
                "verdict": self.verdict, "authentic": self.authentic,
                "files": self.files, "figures": self.figures, "rules_version": self.rules_version,
                "made_under": self.made_under if isinstance(self.made_under, str) else None,
                "newer_rules_failed": self.newer_rules_failed, "notes": self.notes,
                "signature": self.signature.__dict__ if self.signature else None,
                "rules": [{"rule": f.rule.name, "predicate": f.rule.predicate, "checked": f.checked,
                           "violations": len(f.violations), "note": f.note} for f in self.findings],
                "violations": [v.to_dict() for v in self.violations]} \
            | ({"rows": [row.to_dict() for row in self.rows]} if self.rows else {})


def check_files(root: Path) -> tuple[int, list[rl.Violation]]:
    """Every file listed with its sha256 and size; none missing, none added; the manifest's own digest."""
    manifest_path = root / bd.MANIFEST
    if not manifest_path.is_file():
        return 0, [rl.Violation(INTEGRITY, "missing: the bundle has no manifest", bd.MANIFEST)]
    raw = manifest_path.read_bytes()
    problems = []
    try:
        manifest = parse_json(raw)
        files = manifest["files"]
        version = SCHEMA_VERSIONS[bd.MANIFEST]
        if manifest.get("schema_version") != version or not isinstance(files, dict):
            raise ValueError(f"schema_version {manifest.get('schema_version')!r} (this kit reads {version})")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        return 0, [rl.Violation(INTEGRITY, f"unreadable manifest: {exc}", bd.MANIFEST)]
    if not bd.manifest_self_ok(raw):
        problems.append(rl.Violation(INTEGRITY, "its own sha256 does not match its bytes (edited?)", bd.MANIFEST))
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {bd.MANIFEST, bd.SIGNATURE}
    for name in sorted(present - set(files)):
        problems.append(rl.Violation(INTEGRITY, "not listed in manifest.json (added after bundling)", name))
    for name, entry in sorted(files.items()):
        path = root / name
        if name not in present:
            problems.append(rl.Violation(INTEGRITY, "listed in manifest.json but missing", name))
            continue
        size = path.stat().st_size
        digest = bd.sha256_file(path)
        if not isinstance(entry, dict) or digest != entry.get("sha256") or size != entry.get("bytes"):
            want = entry.get("sha256", "?") if isinstance(entry, dict) else "?"
            problems.append(rl.Violation(INTEGRITY, f"sha256 {digest[:16]}... differs from manifest.json's "
                                                    f"{str(want)[:16]}... (changed after bundling)", name))
    return len(files), problems


def check_system(root: Path, run_dir: Path, row: str | None = None) -> list[rl.Violation]:
    """system.json (of a sweep: its entry of ROW) equals the description recomputed from the raw captures (submitter
    and name as written)."""
    path, of = root / "system.json", f"{row}: " if row is not None else ""
    try:
        written = parse_json(path.read_bytes())
        if row is not None:
            written = written[row]
        again = bd.system_description(run_dir, root / "pins.yaml", written["submitter"], written["system_name"],
                                      shown=run_dir.relative_to(root))
    except READ_ERRORS as exc:
        return [rl.Violation(SYSTEM_RULE, f"{of}cannot be recomputed: {exc}", "system.json")]
    except Exception as exc:  # noqa: BLE001 - as in the rules engine: a damaged file is a finding, not a crash
        return [rl.Violation(SYSTEM_RULE, f"{of}cannot be recomputed: {type(exc).__name__}: {exc}"[:300],
                             "system.json")]
    again = json.loads(json.dumps(again))
    diff = sorted(k for k in set(written) | set(again) if written.get(k) != again.get(k))
    if diff:
        return [rl.Violation(SYSTEM_RULE, f"{of}differs from the captures in {', '.join(diff)}", "system.json")]
    return []


def verify_tree(root: Path, allowed_signers: Path | None = None, rules_version: str | None = None,
                label: str | None = None, claims_rel_tol: float = CLAIMS_REL_TOL,
                original: pair.Side | None = None) -> Compliance:
    """The compliance of an unpacked bundle; ORIGINAL: the bundle it reproduced, verified (kit.audit.pair)."""
    start = time.monotonic()
    result = Compliance(label or str(root))
    members = list(root.rglob("*"))  # does not descend into linked folders
    special = sorted(p.relative_to(root).as_posix() for p in members if not (p.is_file() or p.is_dir()))
    if special:  # a pipe would block the first reader: nothing is read
        result.integrity = [rl.Violation(INTEGRITY, "not a regular file or folder (a pipe, socket, device or broken "
                                         "link): refused before reading anything", name) for name in special]
        return result
    links = sorted(p.relative_to(root).as_posix() for p in members if p.is_symlink())
    if links:  # as the archive form: a link could lead the reader out of the folder
        result.integrity = [rl.Violation(INTEGRITY, "a link (a bundle holds regular files only): refused before "
                                         "reading anything", name) for name in links]
        return result
    result.files, result.integrity = check_files(root)
    result.signature = bd.check_signature(root, allowed_signers)
    runs = sorted(p for p in (root / "run").iterdir() if p.is_dir()) if (root / "run").is_dir() else []
    if len(runs) != 1:
        result.extra.append(rl.Violation(INTEGRITY, f"expected one run folder, found {len(runs)}", "run/"))
        return result
    provenance = {}
    try:
        provenance = parse_json((root / "provenance.json").read_bytes())
    except (OSError, ValueError) as exc:
        result.extra.append(rl.Violation(INTEGRITY, f"unreadable: {exc}", "provenance.json"))
    provenance = provenance if isinstance(provenance, dict) else {}
    claims, why = inside(root, provenance.get("claims"))
    if why:
        result.extra.append(rl.Violation(INTEGRITY, f"claims {provenance.get('claims')!r}: {why}", "provenance.json"))
    version = rules_version or rl.newest()  # the auditor's kit decides; a bundle never chooses or lowers the rules
    named = provenance.get("rules_version")
    if named is not None and (not isinstance(named, str) or named not in rl.versions()):
        known = ", ".join(rl.versions())
        result.extra.append(rl.Violation(INTEGRITY, f"rules_version {named!r} is not a rule set of this kit "
                                         f"(known: {known}); judged by {version}", "provenance.json"))
    result.rules_version, result.made_under = version, named
    if is_sweep(runs[0]):  # each host's run directory judged as a run's, then the fleet table (kit.audit.sweep)
        judge_sweep(result, root, runs[0], claims, claims_rel_tol, original)
        result.seconds = time.monotonic() - start
        return result
    evidence = judge_run(result, root, runs[0], claims, claims_rel_tol)
    result.side = pair.side_of(result.bundle, bd.manifest_digest(root), runs[0])
    result.notes, found = pair.check_pair(root, runs[0], provenance, original)  # a reproduction: its figures
    result.extra += found
    completion = evidence.report.completion if evidence.report else None
    if completion is not None and not completion.complete:  # its figures are of the finished runs only
        result.extra.append(rl.Violation(COMPLETE_RULE, completion.line(), f"run/{runs[0].name}/run.json"))
    result.seconds = time.monotonic() - start
    return result


def judge_run(result: Compliance, root: Path, run_dir: Path, claims: Path | None, claims_rel_tol: float,
              row: str | None = None) -> Evidence:
    """RESULT's findings of the run directory RUN_DIR of the bundle at ROOT, by RESULT's rule set: every rule, its
    files read, its system description recomputed (ROW: a sweep's row, system.json's entry of it), its figures
    counted; its Evidence returned."""
    evidence = Evidence(run_dir, claims=claims, claims_rel_tol=claims_rel_tol)
    named = result.made_under
    result.findings = rl.evaluate(rl.load_rules(result.rules_version), evidence)
    if isinstance(named, str) and named in rl.versions() and named != result.rules_version:
        result.newer_rules_failed = newer_rules_failed(result.findings, named, evidence)
    where = run_dir.relative_to(root).as_posix()
    result.extra += [rl.Violation("readable", why, f"{where}/{file}") for file, why in evidence.problems]
    result.extra += check_system(root, run_dir, row)
    result.figures = len(evidence.runs())
    return evidence


def judge_sweep(result: Compliance, root: Path, sweep_dir: Path, claims: Path | None, claims_rel_tol: float,
                original: pair.Side | None) -> None:
    """RESULT of a sweep's bundle: each row's run directory judged as a run's (judge_run), then sweep.json's rows,
    the fleet table and commands.json (kit.audit.sweep)."""
    top = sweep_dir.relative_to(root).as_posix()
    if original is not None:
        result.extra.append(rl.Violation(pair.ORIGINAL_RULE, f"--original {original.label} given, but this bundle is "
                                         "a sweep's, no reproduction's", f"{top}/{rundir.SWEEP_JSON}"))
    try:
        record = rundir.read_sweep(sweep_dir)
    except READ_ERRORS as exc:
        result.extra.append(rl.Violation(sw.SWEEP_RULE, f"unreadable: {exc}", f"{top}/{rundir.SWEEP_JSON}"))
        return
    recorded = record.get("rows") or {}
    if "finished" not in record:
        result.extra.append(rl.Violation(sw.SWEEP_RULE, "records no end (finished): the sweep did not reach it",
                                         f"{top}/{rundir.SWEEP_JSON}"))
    evidences: dict[str, Evidence] = {}
    for name, part in rundir.sweep_parts(sweep_dir).items():
        said = recorded.get(name) or {}
        row = sw.Row(name, part.relative_to(root).as_posix(), said.get("status") or sw.NOT_RECORDED,
                     said.get("reason", ""))
        result.rows.append(row)
        if not has_run_meta(part):
            continue
        row.judged = judged = Compliance(name, rules_version=result.rules_version, made_under=result.made_under)
        evidences[name] = judge_run(judged, root, part, claims, claims_rel_tol, row=name)
        for finding in judged.findings:  # named from the bundle's top, not the row's run directory
            finding.violations = [replace(v, file=f"{row.where}/{v.file}") for v in finding.violations]
        report = evidences[name].report
        if row.status == sw.OK and report is not None and report.completion and not report.completion.complete:
            judged.extra.append(rl.Violation(COMPLETE_RULE, report.completion.line(), f"{row.where}/run.json"))
        row.counted = row.status == sw.OK or judged.figures > 0
        result.figures += judged.figures
        result.newer_rules_failed += [n for n in judged.newer_rules_failed if n not in result.newer_rules_failed]
    result.rows += [sw.Row(name, "", said.get("status", ""), said.get("reason", "")) for name, said in recorded.items()
                    if name not in evidences and name not in {r.name for r in result.rows}]
    result.extra += sw.rows_recorded(record, result.rows, sweep_dir, top)
    fleet, found = sw.check_fleet(sweep_dir, top, evidences)
    result.extra += found
    if fleet is not None:
        result.notes.append(f"  fleet table, recomputed from the rows' logs: {fleet['verdict']}")
    result.extra += sw.commands_recomputed(root, evidences)


def newer_rules_failed(findings: list[rl.Finding], made_under: str, evidence: Evidence) -> list[str]:
    """The failing rules whose predicate the rule set MADE_UNDER does not name (added or tightened since), where the
    bundle holds MADE_UNDER's rule of that name (or it has none)."""
    older = {r.name: r for r in rl.load_rules(made_under)}
    newer = [f.rule for f in findings if f.violations and (
        f.rule.name not in older or older[f.rule.name].predicate != f.rule.predicate)]
    if not newer:
        return []
    judged = {f.rule.name: f for f in rl.evaluate([older[r.name] for r in newer if r.name in older], evidence)}
    return [r.name for r in newer if r.name not in judged or not judged[r.name].violations]


def inside(root: Path, rel) -> tuple[Path | None, str]:
    """A file the bundle names, only if it is a regular file inside the bundle: (path, "") or (None, why)."""
    if rel is None:
        return None, ""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel or ".." in Path(rel).parts:
        return None, "must be a relative path inside the bundle"
    path = root / rel
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None, "no such file in the bundle"
    if not resolved.is_relative_to(root.resolve()) or path.is_symlink() or not resolved.is_file():
        return None, "not a regular file inside the bundle"
    return resolved, ""


def verify(bundle: Path, allowed_signers: Path | None = None, rules_version: str | None = None, *,
           max_unpacked_bytes: int = bd.MAX_UNPACKED_BYTES, max_ratio: float = bd.MAX_RATIO,
           claims_rel_tol: float = CLAIMS_REL_TOL, original: pair.Side | None = None) -> Compliance:
    """A .tar.gz bundle (unpacked into a temporary folder, within the size and ratio limits: a bundle past one
    is an integrity violation) or an unpacked bundle folder. The limits and the claims' tolerance are the
    verifier's: finite and positive (NaN would disable a comparison)."""
    for name, value in (("max_unpacked_bytes", max_unpacked_bytes), ("max_ratio", max_ratio),
                        ("claims_rel_tol", claims_rel_tol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise InputError(name, f"must be a finite number > 0, got {value!r}")
    bundle = Path(bundle)
    if not bundle.exists():
        raise bd.BundleError(f"{bundle}: no such bundle")
    if not (bundle.is_file() or bundle.is_dir()):  # a pipe would block the reader
        raise bd.BundleError(f"{bundle}: not a regular file or folder (a pipe, socket or device), so not a bundle")
    if allowed_signers is not None:
        text = read_input(allowed_signers, "file of allowed signers").decode("utf-8", errors="replace")
        if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
            raise InputError(allowed_signers, "names no signer (an OpenSSH allowed-signers file: one "
                             "'principal [options] key' per line)")
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split()
            if len(fields) >= 2 and PUBLIC_KEY_TYPE.fullmatch(fields[0]) and fields[1].startswith("AAAA"):
                raise InputError(allowed_signers, f"a public key ({fields[0]} ...), not an allowed-signers line: "
                                 f"put its principal first, e.g. 'auditor@example.org {fields[0]} AAAA...'", number)
    if bundle.is_dir():
        bd.refuse_non_bundle_folder(bundle)
        return verify_tree(bundle, allowed_signers, rules_version, claims_rel_tol=claims_rel_tol, original=original)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kit-verify-") as tmp:
        try:
            root = bd.unpack(bundle, Path(tmp), max_unpacked_bytes, max_ratio)
        except bd.NotABundle:
            raise
        except bd.BundleError as exc:
            result = Compliance(str(bundle))
            result.integrity.append(rl.Violation(INTEGRITY, str(exc).split(": ", 1)[-1], bundle.name))
            return result
        result = verify_tree(root, allowed_signers, rules_version, label=str(bundle), claims_rel_tol=claims_rel_tol,
                             original=original)
    result.seconds = time.monotonic() - start
    return result
