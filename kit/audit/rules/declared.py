"""Predicates on what a run declared: its suite (rule set v3). Pure; registered in
kit.audit.rules.predicates.PREDICATES like every predicate.
"""

from __future__ import annotations

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.config.suites import posing_as_builtin


@predicate()
def suite_is_the_builtin_it_names(ev: Evidence, out: Finding) -> None:
    """A suite named like a built-in suite (its report is titled so) is that suite: its cases and hardware.
    The same check `kit bench` makes when a run starts (kit.config.suites.posing_as_builtin)."""
    suite = ev.suite
    if suite is None:  # an unreadable suite.yaml is reported where it is read
        return
    out.checked = 1
    builtin = posing_as_builtin(suite)
    if builtin is not None:
        lines = ev.lines_of("suite.yaml")
        out.fail(f"name {suite.name!r} is the built-in suite {builtin.name}, and this suite runs other cases or "
                 "hardware", "suite.yaml", lines.line_of("name") if lines is not None else None)
