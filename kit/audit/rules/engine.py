"""The rules engine: kit/audit/rules/<version>/*.yaml loaded, checked against the predicates, evaluated. Pure.

A rules file:
    schema_version: 1
    rules:
      - name: repeats_as_declared          # what a violation is reported under
        predicate: repeats_at_least         # name@N in kit.audit.rules.predicates.PREDICATES; a bare name is @1
        args: {minimum: 1}                  # only the arguments the predicate declares
        description: ...
Nothing is eval'ed: a rule names a predicate, which judges an kit.audit.evidence.Evidence and fills a Finding.
A rule set names each predicate's version, so a later version of a predicate never changes an older rule set.
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
PREDICATE_REF = re.compile(r"([a-z_][a-z0-9_]*)(?:@([1-9][0-9]*))?")  # name or name@N

RULES_DIR = Path(__file__).resolve().parent
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
    predicate: str  # its versioned identity, name@N
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


def load_rules(version: str | None = None) -> list[Rule]:
    """The rules of a version this kit carries (None: the newest); any other name (a path, '..', a number) is
    refused."""
    version = newest() if version is None else version
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
        pred = predicate_identity(require(entry, "predicate", str, path), path, entry.line_of("predicate"))
        args = optional(entry, "args", dict, path, LineDict())
        allowed = PREDICATES[pred].defaults
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


def predicate_identity(ref: str, path: Path, line: int | None) -> str:
    """A rule's predicate reference as its registered identity name@N (a bare name is name@1)."""
    match = PREDICATE_REF.fullmatch(ref)
    if match is None:
        raise ConfigError(path, f"{ref!r} is not a predicate reference (name or name@N)", line, "predicate")
    name, version = match.groups()
    identity = f"{name}@{version or 1}"
    if identity not in PREDICATES:
        known = sorted(k for k in PREDICATES if k.split("@")[0] == name) or sorted(PREDICATES)
        raise ConfigError(path, f"unknown predicate {identity}; known: {', '.join(known)}", line, "predicate")
    return identity


def evaluate(rules: list[Rule], evidence: Evidence) -> list[Finding]:
    findings = []
    for rule in rules:
        finding = Finding(rule)
        registered = PREDICATES[rule.predicate]
        try:
            registered.fn(evidence, finding, **rule.args, **registered.fixed)
        except Exception as exc:  # noqa: BLE001 - a damaged file must give a violation, never a crash
            finding.fail(f"cannot be evaluated: {type(exc).__name__}: {exc}"[:300], evidence.rel(evidence.root))
        findings.append(finding)
    return findings
