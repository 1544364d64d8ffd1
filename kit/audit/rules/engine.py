"""The rules engine: kit/audit/rules/<version>/*.yaml loaded, checked against the predicates, evaluated. Pure.

A rules file:
    schema_version: 1
    rules:
      - name: repeats_as_declared          # what a violation is reported under
        predicate: repeats_at_least         # one of kit.audit.rules.predicates.PREDICATES
        args: {minimum: 1}                  # only the arguments the predicate declares
        description: ...
Nothing is eval'ed: a rule names a predicate, which judges an kit.audit.evidence.Evidence and fills a Finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kit.audit.evidence import Evidence
from kit.audit.rules.predicates import PREDICATES
from kit.core.files import SCHEMA_VERSIONS
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require

MAX_MESSAGE = 500  # characters of one violation's message

RULES_DIR = Path(__file__).resolve().parent
DEFAULT_VERSION = "v1"
SCHEMA_VERSION = SCHEMA_VERSIONS["rules"]


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    file: str
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict:
        return {"rule": self.rule, "message": self.message, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class Rule:
    name: str
    predicate: str
    args: dict = field(default_factory=dict)
    description: str = ""
    source: str = ""  # file:line of its definition


@dataclass
class Finding:
    """One rule's outcome: how many things it looked at, and what did not hold."""

    rule: Rule
    checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    note: str = ""

    def fail(self, message: str, file: str, line: int | None = None) -> None:
        if len(message) > MAX_MESSAGE:  # a value from a hostile log is never echoed whole
            message = message[:MAX_MESSAGE] + f"... ({len(message) - MAX_MESSAGE} more characters)"
        self.violations.append(Violation(self.rule.name, message, file[:MAX_MESSAGE], line))


def versions() -> list[str]:
    """The rule sets this kit carries, oldest first (v1, v2, ..., v10)."""
    found = [p.name for p in RULES_DIR.iterdir() if re.fullmatch(r"v\d+", p.name) and list(p.glob("*.yaml"))]
    return sorted(found, key=lambda name: int(name[1:]))


def newest() -> str:
    return versions()[-1]


def load_rules(version: str = DEFAULT_VERSION) -> list[Rule]:
    """The rules of a version this kit carries; any other name (a path, '..', a number) is refused."""
    if not isinstance(version, str) or version not in versions():
        raise ConfigError(RULES_DIR, f"no rule set {version!r} in this kit; known: {', '.join(versions())}")
    files = sorted((RULES_DIR / version).glob("*.yaml"))
    rules: list[Rule] = []
    for path in files:
        rules += _load_file(path)
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.name in seen:
            raise ConfigError(rule.source, f"rule {rule.name!r} is also defined at {seen[rule.name]}")
        seen[rule.name] = rule.source
    return rules


def _load_file(path: Path) -> list[Rule]:
    data = load_yaml(path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "top level must be a mapping (schema_version, rules)", 1)
    if require(data, "schema_version", int, path) != SCHEMA_VERSION:
        raise ConfigError(path, f"this kit reads schema_version {SCHEMA_VERSION}", data.line_of("schema_version"),
                          "schema_version")
    out = []
    for entry in require(data, "rules", list, path):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, "each rule must be a mapping (name, predicate, args)", data.line_of("rules"))
        for key in entry:
            if key not in ("name", "predicate", "args", "description"):
                raise ConfigError(path, "unknown key; known: args, description, name, predicate",
                                  entry.line_of(key), str(key))
        name = require(entry, "name", str, path)
        pred = require(entry, "predicate", str, path)
        if pred not in PREDICATES:
            raise ConfigError(path, f"unknown predicate; known: {', '.join(sorted(PREDICATES))}",
                              entry.line_of("predicate"), "predicate")
        args = optional(entry, "args", dict, path, LineDict())
        allowed = PREDICATES[pred][1]
        for key, value in args.items():
            if key not in allowed:
                raise ConfigError(path, f"{pred} takes no argument {key!r}; it takes: "
                                  f"{', '.join(allowed) or 'none'}", args.line_of(key), f"args.{key}")
            if type(value) is not type(allowed[key]):
                raise ConfigError(path, f"expected {type(allowed[key]).__name__}, got {type(value).__name__}",
                                  args.line_of(key), f"args.{key}")
        out.append(Rule(name, pred, {**allowed, **dict(args)}, optional(entry, "description", str, path, ""),
                        f"{path.parent.name}/{path.name}:{entry.line}"))
    return out


def evaluate(rules: list[Rule], evidence: Evidence) -> list[Finding]:
    findings = []
    for rule in rules:
        finding = Finding(rule)
        fn, _ = PREDICATES[rule.predicate]
        try:
            fn(evidence, finding, **rule.args)
        except Exception as exc:  # noqa: BLE001 - a damaged file must give a violation, never a crash
            finding.fail(f"cannot be evaluated: {type(exc).__name__}: {exc}"[:300], evidence.rel(evidence.root))
        findings.append(finding)
    return findings
