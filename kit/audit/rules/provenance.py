"""What run.json records of the code that ran (rule set v3): the harness files' sha256 and the kit's commit, checked
for form and compared with the auditor's own kit, which verify says (a note, not a violation: another kit version
may rightly have run). Pure; registered in kit.audit.rules.predicates.PREDICATES like every predicate."""

from __future__ import annotations

import re

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.core.catalogue import harness_sha256

SHA256 = re.compile(r"[0-9a-f]{64}")


@predicate()
def code_that_ran_recorded(ev: Evidence, out: Finding) -> None:
    """run.json records the sha256 of every harness file (train.py among them) and the kit's commit with whether
    its checkout had changes; verify notes a dirty checkout and a harness other than this kit's."""
    out.checked = 1
    hashes, commit = ev.meta.get("harness_sha256"), ev.meta.get("kit_commit")
    if not isinstance(hashes, dict) or "train.py" not in hashes or not all(
            isinstance(v, str) and SHA256.fullmatch(v) for v in hashes.values()):
        out.fail("run.json's harness_sha256 is not the sha256 of each harness file (train.py among them)", "run.json")
        return
    if not isinstance(commit, dict) or "commit" not in commit or not (
            commit["commit"] is None or isinstance(commit["commit"], str) and re.fullmatch(r"[0-9a-f]{40}",
                                                                                          commit["commit"])):
        out.fail("run.json's kit_commit is not a commit (40 hex digits, or null with the reason)", "run.json")
        return
    notes = []
    if commit.get("dirty") is True:
        notes.append(f"the kit's checkout had uncommitted changes at {commit['commit'][:12]}")
    mine = harness_sha256()
    other = sorted(name for name in hashes.keys() | mine.keys() if hashes.get(name) != mine.get(name))
    if other:
        shown = ", ".join(other[:6]) + (f" and {len(other) - 6} more" if len(other) > 6 else "")
        notes.append(f"its harness differs from this kit's in {shown}")
    out.note = "; ".join(notes)
