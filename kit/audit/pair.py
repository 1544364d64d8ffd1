"""A bundle of a reproduction (`kit reproduce`'s run directory, bundled) names the bundle it reproduced: `kit verify`
prints that bundle's digest and the verdict counts, and checks reproduction.json against the run's own records.

    reproduction.json   each case's runs equal to results.json's (itself recomputed from the logs by the rules),
                        its ratio and verdict those kit.results.reproduction makes of them, the counts those verdicts'
    reproduction.md     the table those verdicts make
    provenance.json     `reproduction_of`: the same digest as reproduction.json's bundle_manifest_sha256

So an edited figure, ratio, verdict or table is a violation naming reproduction.json (or .md) and the key. The
original bundle's own figures are checked by verifying that bundle: its manifest's sha256 is the digest shown.
"""

from __future__ import annotations

from pathlib import Path

from kit.audit.rules import Violation
from kit.core.inputs import parse_json
from kit.results import reproduction as rp

RULE = "reproduction_recomputed"
RECORD, TABLE = rp.RECORD_NAME, rp.TABLE_NAME
PROVENANCE_KEY = "reproduction_of"


def reproduction_of(run_dir: Path) -> str | None:
    """The manifest digest of the bundle the run reproduced (its reproduction.json), for provenance.json; None for
    a run that is no reproduction (or whose record does not read: verify says so)."""
    try:
        record = parse_json((Path(run_dir) / RECORD).read_bytes())
    except (OSError, ValueError):
        return None
    digest = record.get("bundle_manifest_sha256") if isinstance(record, dict) else None
    return digest if isinstance(digest, str) else None


def check_pair(root: Path, run_dir: Path, provenance: dict) -> tuple[list[str], list[Violation]]:
    """(lines for verify's report, violations) of a reproduction's bundle; ([], []) for any other bundle."""
    where = f"run/{run_dir.name}/{RECORD}"
    named = provenance.get(PROVENANCE_KEY)
    if not (run_dir / RECORD).is_file():
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
    return [line], found
