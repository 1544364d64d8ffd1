"""The rules engine: kit/audit/rules/<version>/ loaded, checked against the predicates, evaluated. Pure.

A rule set is either whole (v1: its *.yaml rules files) or the set before it plus its changes (CHANGES):
    schema_version: 1
    base: v5                               # an older set of this kit
    why: what this set changes, and why    # for the people who read and audit the set
    replace:                               # a base rule whose predicate, arguments or description change
      - {name: gpu_telemetry_holds, predicate: gpu_telemetry_holds@3, description: ...}
    add:                                   # a new rule, after the rule it names (the first when after is absent)
      - {name: every_log_read, after: log_is_the_harness_own, predicate: logs_read@1, description: ...}
    remove: [a_rule_name]
so that each set says exactly what changed, and a rule's meaning lives in its versioned predicate.

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
from pathlib import Path

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import MAX_MESSAGE, Finding, Rule, Violation  # noqa: F401  (re-exported)
from kit.audit.rules.predicates import PREDICATES
from kit.core.files import SCHEMA_VERSIONS
from kit.core.inputs import aware_instant
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require

PREDICATE_REF = re.compile(r"([a-z_][a-z0-9_]*)(?:@([1-9][0-9]*))?")  # name or name@N

RULES_DIR = Path(__file__).resolve().parent
CHANGES = "changes.yaml"  # a rule set as its base plus changes
CHANGE_KEYS = ("schema_version", "base", "why", "replace", "add", "remove")
RULE_KEYS = ("name", "predicate", "args", "description")
SCHEMA_VERSION = SCHEMA_VERSIONS["rules"]


def versions() -> list[str]:
    """The rule sets this kit carries, oldest first (v1, v2, ..., v10)."""
    found = [p.name for p in RULES_DIR.iterdir() if re.fullmatch(r"v\d+", p.name) and list(p.glob("*.yaml"))]
    return sorted(found, key=lambda name: int(name[1:]))


def newest() -> str:
    return versions()[-1]


# when each set entered the kit (the commit that added it): a run whose run.json names no set (made before runs
# recorded rules_version) is judged by the set current when it started
INTRODUCED = {"v1": "2026-11-24T02:48:42+00:00", "v2": "2026-11-28T02:59:22+00:00",
              "v3": "2026-11-28T03:22:48+00:00", "v4": "2026-11-28T05:43:58+00:00",
              "v5": "2026-11-28T08:16:06+00:00", "v6": "2026-11-28T20:11:17+00:00",
              "v7": "2026-12-01T18:02:16+00:00", "v8": "2026-12-01T20:19:46+00:00",
              "v9": "2026-12-04T21:11:09+00:00", "v10": "2026-12-05T00:13:41+00:00",
              "v11": "2026-12-05T04:28:39+00:00"}


def rules_of_run(meta: dict) -> tuple[str, str]:
    """(the rule set a run's records are judged by, why): the one its run.json records (rules_version), else the
    one current when it started (run.json started, by INTRODUCED), else the newest."""
    named = meta.get("rules_version")
    if named is not None:
        if isinstance(named, str) and named in versions():
            return named, "the set run.json records the run was made under"
        return newest(), f"run.json names rule set {str(named)[:40]!r}, which this kit does not carry: the newest"
    started = aware_instant(meta.get("started"))
    if started is not None:
        then = [v for v in versions() if v in INTRODUCED and aware_instant(INTRODUCED[v]) <= started]
        if then:
            return then[-1], (f"the set current when the run started ({meta['started']}); its run.json names none, "
                              "as runs of kits before 2026-12-04 do")
    return newest(), "the newest: run.json names no set and no start time"


def load_rules(version: str | None = None) -> list[Rule]:
    """The rules of a version this kit carries (None: the newest); any other name (a path, '..', a number) is
    refused."""
    version = newest() if version is None else version
    if not isinstance(version, str) or version not in versions():
        raise ConfigError(RULES_DIR, f"no rule set {version!r} in this kit; known: {', '.join(versions())}")
    changes = RULES_DIR / version / CHANGES
    if changes.is_file():
        rules = _apply_changes(changes, version)
    else:
        rules = []
        for path in sorted((RULES_DIR / version).glob("*.yaml")):
            rules += _load_file(path)
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.name in seen:
            raise ConfigError(rule.source, f"rule {rule.name!r} is also defined at {seen[rule.name]}")
        seen[rule.name] = rule.source
    return rules


def _apply_changes(path: Path, version: str) -> list[Rule]:
    """The base set's rules with PATH's replacements, additions and removals applied (module docstring)."""
    data = load_yaml(path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "top level must be a mapping (schema_version, base, why, replace, add, remove)", 1)
    for key in data:
        if key not in CHANGE_KEYS:
            raise ConfigError(path, f"unknown key; known: {', '.join(CHANGE_KEYS)}", data.line_of(key), str(key))
    if require(data, "schema_version", int, path) != SCHEMA_VERSION:
        raise ConfigError(path, f"this kit reads schema_version {SCHEMA_VERSION}", data.line_of("schema_version"),
                          "schema_version")
    base = require(data, "base", str, path)
    if base not in versions() or int(base[1:]) >= int(version[1:]):
        raise ConfigError(path, f"base {base!r} is not an older rule set of this kit (known: "
                          f"{', '.join(versions())})", data.line_of("base"), "base")
    require(data, "why", str, path)
    rules = load_rules(base)
    names = [r.name for r in rules]
    for number, name in enumerate(optional(data, "remove", list, path, []), 1):
        if name not in names:
            raise ConfigError(path, f"{name!r} is no rule of {base}", data.line_of("remove"), f"remove[{number}]")
        rules.pop(names.index(name))
        names.remove(name)
    for entry in optional(data, "replace", list, path, []):
        name = _change_name(entry, path, "replace")
        if name not in names:
            raise ConfigError(path, f"replace: {name!r} is no rule of {base} (add it instead)", entry.line, "name")
        old = rules[names.index(name)]
        inherited = {"predicate": old.predicate, "description": old.description,
                     **({"args": dict(old.args)} if "predicate" not in entry else {})}
        rules[names.index(name)] = _rule(_like(entry, {**inherited, **entry}), path)
    for entry in optional(data, "add", list, path, []):
        name = _change_name(entry, path, "add")
        if name in names:
            raise ConfigError(path, f"add: {name!r} is already a rule of {base} (replace it instead)", entry.line,
                              "name")
        after = entry.get("after")
        if after is not None and after not in names:
            raise ConfigError(path, f"add: after {after!r}, which is no rule here", entry.line_of("after"), "after")
        at = names.index(after) + 1 if after is not None else 0
        rules.insert(at, _rule(_like(entry, {k: v for k, v in entry.items() if k != "after"}), path))
        names.insert(at, name)
    return rules


def _like(entry: LineDict, items: dict) -> LineDict:
    """ITEMS as a LineDict at ENTRY's lines (an inherited key at the entry's own line)."""
    out = LineDict(items)
    out.line, out.key_lines = entry.line, dict(entry.key_lines)
    return out


def _change_name(entry, path: Path, what: str) -> str:
    if not isinstance(entry, LineDict):
        raise ConfigError(path, f"each {what} entry must be a mapping with a name", None, what)
    return require(entry, "name", str, path)


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
        out.append(_rule(entry, path))
    return out


def _rule(entry: LineDict, path: Path) -> Rule:
    """One rule entry (name, predicate, args, description) checked against its predicate."""
    for key in entry:
        if key not in RULE_KEYS:
            raise ConfigError(path, f"unknown key; known: {', '.join(RULE_KEYS)}", entry.line_of(key), str(key))
    name = require(entry, "name", str, path)
    pred = predicate_identity(require(entry, "predicate", str, path), path, entry.line_of("predicate"))
    args = optional(entry, "args", dict, path, LineDict())
    allowed = PREDICATES[pred].defaults
    for key, value in args.items():
        if key not in allowed:
            raise ConfigError(path, f"{pred} takes no argument {key!r}; it takes: "
                              f"{', '.join(allowed) or 'none'}", _line_of(args, key, entry), f"args.{key}")
        if type(value) is not type(allowed[key]):
            raise ConfigError(path, f"expected {type(allowed[key]).__name__}, got {type(value).__name__}",
                              _line_of(args, key, entry), f"args.{key}")
    return Rule(name, pred, {**allowed, **dict(args)}, optional(entry, "description", str, path, ""),
                f"{path.parent.name}/{path.name}:{entry.line}")


def _line_of(mapping, key: str, entry: LineDict) -> int | None:
    return mapping.line_of(key) if isinstance(mapping, LineDict) else entry.line


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
