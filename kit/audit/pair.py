"""A bundle of a reproduction (`kit reproduce`'s run directory, bundled) names the bundle it reproduced: `kit verify`
prints that bundle's digest and the verdict counts, and checks reproduction.json against the run's own records.

    reproduction.json   each case's runs equal to results.json's (itself recomputed from the logs by the rules),
                        its ratio and verdict those kit.results.reproduction makes of them, the counts those verdicts'
    reproduction.md     the table those verdicts make
    run.json            the runs made while the host was busy (host_load), which a version-3 record names
                        (disturbed_runs) and sets aside: an undisturbed re-run called disturbed is a violation
    provenance.json     `reproduction_of`: the same digest as reproduction.json's bundle_manifest_sha256

So an edited figure, ratio, verdict or table is a violation naming reproduction.json (or .md) and the key. The
"original" figures each verdict holds are tied to the bundle reproduced only when the auditor has it:
`kit verify REPRO --original ORIG` verifies ORIG, then holds its manifest's sha256 to the digest reproduction.json
names and each verdict's original figures to ORIG's results.json (ORIGINAL_RULE); without it they are shown as
unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kit.audit.rules import Violation
from kit.core.inputs import InputError, parse_json
from kit.core.rundir import read_run
from kit.results import reproduction as rp

RULE = "reproduction_recomputed"
ORIGINAL_RULE = "reproduction_of_original"
RECORD, TABLE = rp.RECORD_NAME, rp.TABLE_NAME
PROVENANCE_KEY = "reproduction_of"


@dataclass
class Side:
    """What a bundle brings to a pair, read while it is unpacked: its name (its manifest's sha256) and its
    results.json's run figures per case; verify's verdict on it beside them (its caller's, once verify ends)."""
    label: str
    digest: str | None
    figures: dict[str, list[float]] = field(default_factory=dict)
    ok: bool = False
    violations: int = 0


def side_of(label: str, digest: str | None, run_dir: Path | None) -> Side:
    """A bundle's side of a pair: DIGEST, its manifest's sha256 (kit.audit.bundle.manifest_digest)."""
    try:
        results = parse_json((run_dir / "results.json").read_bytes()) if run_dir else {}
        figures = rp.figures_by_case(results) if isinstance(results, dict) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        figures = {}
    return Side(label, digest, figures)


def check_original(record: dict, where: str, original: Side) -> tuple[str, list[Violation]]:
    """(line, violations) of a reproduction's record against the bundle it names, verified: that bundle verifies,
    its manifest's sha256 is the digest the record names, and each verdict's original figures are its results.json's
    runs of that case."""
    found = []
    if not original.ok:
        found.append(Violation(ORIGINAL_RULE, f"the original bundle {original.label} does not verify "
                               f"({original.violations} violation(s)): its figures cannot stand", original.label))
    digest = record.get("bundle_manifest_sha256")
    if original.digest != digest:
        found.append(Violation(ORIGINAL_RULE, f"bundle_manifest_sha256 {digest!r}, but {original.label}'s manifest "
                               f"sha256 is {original.digest!r}: not the bundle reproduced", where))
    else:
        for i, v in enumerate(record.get("verdicts") or []):
            if isinstance(v, dict) and v.get("original") != original.figures.get(str(v.get("case"))):
                found.append(Violation(ORIGINAL_RULE, f"verdicts[{i}].original {v.get('original')!r}, but "
                                       f"{original.label}'s results.json gives {v.get('case')} "
                                       f"{original.figures.get(str(v.get('case')))!r}", where))
    line = (f"  original {original.label}: verified, the bundle reproduced, every case's original figures its own"
            if not found else f"  original {original.label}: {len(found)} violation(s) below")
    return line, found


def reproduction_of(run_dir: Path) -> str | None:
    """The manifest digest of the bundle the run reproduced (its reproduction.json), for provenance.json; None for
    a run that is no reproduction (or whose record does not read: verify says so)."""
    try:
        record = parse_json((Path(run_dir) / RECORD).read_bytes())
    except (OSError, ValueError):
        return None
    digest = record.get("bundle_manifest_sha256") if isinstance(record, dict) else None
    return digest if isinstance(digest, str) else None


def _disturbed_held(record: dict, run_dir: Path, where: str) -> list[Violation]:
    """The record's disturbed_runs against the busy runs its run.json's host_load gives (kit.results.noise's rule)."""
    try:
        busy = rp.disturbed_runs(read_run(run_dir).runs.values())
    except (InputError, OSError) as exc:
        return [Violation(RULE, f"disturbed_runs cannot be held to run.json: {exc}", where)]
    said = record.get("disturbed_runs")
    if said == busy:
        return []
    return [Violation(RULE, f"disturbed_runs {said!r}, but run.json's host_load gives {busy!r} (the runs made "
                      "while the host was busy)", where)]


def check_pair(root: Path, run_dir: Path, provenance: dict,
               original: Side | None = None) -> tuple[list[str], list[Violation]]:
    """(lines for verify's report, violations) of a reproduction's bundle, held to its ORIGINAL where the auditor
    gave it (check_original); ([], []) for any other bundle."""
    where = f"run/{run_dir.name}/{RECORD}"
    named = provenance.get(PROVENANCE_KEY)
    if not (run_dir / RECORD).is_file():
        if original is not None:
            return [], [Violation(ORIGINAL_RULE, f"--original {original.label} given, but this bundle is no "
                                  f"reproduction's (no {RECORD})", where)]
        if named is not None:
            return [], [Violation(RULE, f"{PROVENANCE_KEY} names a reproduced bundle, but the run has no {RECORD}",
                                  "provenance.json")]
        return [], []
    try:
        record = parse_json((run_dir / RECORD).read_bytes())
        results = parse_json((run_dir / "results.json").read_bytes())
        if not isinstance(record, dict) or not isinstance(results, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return [], [Violation(RULE, f"unreadable: {exc}", where)]
    problems, verdicts = rp.check_record(record, results)
    found = [Violation(RULE, f"{key}: {what}", where) for key, what in problems]
    if record.get("schema_version", 0) >= 3:
        found += _disturbed_held(record, run_dir, where)
    digest = record.get("bundle_manifest_sha256")
    if named != digest:
        found.append(Violation(RULE, f"{PROVENANCE_KEY} {named!r} is not {RECORD}'s bundle_manifest_sha256 "
                               f"{digest!r}", "provenance.json"))
    if not found:
        notes = record.get("noted_differences") if isinstance(record.get("noted_differences"), list) else []
        table = rp.to_markdown(verdicts, Path(str(record.get("bundle"))).name, record["tolerance"],
                               record["schema_version"], [str(n) for n in notes])
        try:
            same = (run_dir / TABLE).read_text() == table
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            found.append(Violation(RULE, f"is not the table of {RECORD}'s verdicts (edited, or missing)",
                                   f"run/{run_dir.name}/{TABLE}"))
    counts = record.get("counts") if isinstance(record.get("counts"), dict) else {}
    said = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "no verdict"
    line = (f"  reproduction of bundle {digest if isinstance(digest, str) else '?'} (its manifest's sha256): "
            f"{said}, tolerance {record.get('tolerance')!r}"
            + ("" if not found else f"; {len(found)} violation(s) below"))
    if original is None:
        return [line, "  its original figures: unchecked (kit verify --original ORIG.tar.gz holds them to the bundle "
                      "reproduced)"], found
    tie, more = check_original(record, where, original)
    return [line, tie], found + more
