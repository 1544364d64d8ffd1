"""Compliance rules as data (<version>/*.yaml) judged by named predicates. Pure; nothing is eval'ed.

engine: loading the rules files and evaluating them (Rule, Finding, Violation); predicates: the named checks
(closed: the closed world of a harness log; declared: on the run's suite; derived: on the files derived from the
logs; programs: on the published programs' runs), each registered by version (name@N) so that a rule set
keeps the meaning it was written with.
"""

from kit.audit.rules import closed as _closed  # noqa: F401  (registers the closed world's predicates)
from kit.audit.rules import corpus as _corpus  # noqa: F401  (an NLP run's steps against its corpus)
from kit.audit.rules import declared as _declared  # noqa: F401  (registers the declared suite's predicates)
from kit.audit.rules import derived as _derived  # noqa: F401  (registers the derived files' predicates)
from kit.audit.rules import program_clock as _program_clock  # noqa: F401  (a program's figure against its clock)
from kit.audit.rules import programs as _programs  # noqa: F401  (registers the published programs' predicates)
from kit.audit.rules import provenance as _provenance  # noqa: F401  (registers the recorded code's predicate)
from kit.audit.rules import telemetry as _telemetry  # noqa: F401  (registers the GPU samples' predicate)
from kit.audit.rules.engine import Finding, Rule, Violation, evaluate, load_rules, newest, versions
from kit.audit.rules.predicates import PREDICATES

__all__ = ["PREDICATES", "Finding", "Rule", "Violation", "evaluate", "load_rules", "newest",
           "versions"]
