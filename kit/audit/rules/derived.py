"""Predicates on what a run derived from its raw logs: results.json, report.md, results.csv and (in a bundle)
commands.json, each recomputed and compared with the written file, and the published claims a bundle carries,
re-derived from their logs. Pure; registered in kit.audit.rules.predicates.PREDICATES like every predicate.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

from kit.audit.commands import recorded_commands
from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.config.expansion import FROZEN_KEY, freeze
from kit.core.inputs import parse_json
from kit.core.yamlio import ConfigError, LineDict
from kit.results.parsers.kitlog import NO_FIGURE
from kit.results.parsers.records import NON_FINITE

REL_TOL = 1e-9


@predicate()
def results_match_logs(ev: Evidence, out: Finding) -> None:
    """results.json holds the figures recomputed from the raw logs: every run value, median, speedup (in the report
    layout it declares: kit.audit.evidence.Evidence.layout)."""
    from kit.results.exporters import to_json

    if ev.report is None:
        return
    written, recomputed = ev.results, json.loads(to_json(ev.report))
    if written is None:
        out.fail("results.json is missing or unreadable", "results.json")
        return
    lines: list = []  # results.json read again for its line numbers only where a figure differs (a slow parse)
    for path, have, want in json_differences(written, recomputed, skip={"source"}):
        if not lines:
            lines.append(ev.lines_of("results.json"))
        out.fail(f"{path}: written {have!r}, recomputed from the logs {want!r}", "results.json",
                 json_line(lines[0], path))
    out.checked = sum(len(c["runs"]) for g in recomputed["groups"] for c in g["cases"])


@predicate()
def suite_expansion_recorded(ev: Evidence, out: Finding) -> None:
    """Where run.json records the suite as the run expanded it (expanded_suite: what its report was written from,
    and `kit report` reads again), that expansion is suite.yaml's as this kit expands it (what verify recomputes the
    report from): the same cases in the same order, field for field."""
    recorded = ev.meta.get(FROZEN_KEY)
    if recorded is None or ev.suite is None:
        return
    want = json.loads(json.dumps(freeze(ev.suite)))  # as run.json holds it: lists, not tuples
    out.checked = len(want["cases"])
    lines = ev.lines_of("run.json")
    for path, have, wanted in list(json_differences(recorded, want))[:5]:
        out.fail(f"{FROZEN_KEY}.{path}: recorded {str(have)[:120]!r}, suite.yaml expands to {str(wanted)[:120]!r}",
                 "run.json", json_line(lines, f"{FROZEN_KEY}.{path}"))


FAILURE_LINE = re.compile(r"line (\d+): ")  # how kit.results.report keeps a ParseError's line in its reason


@predicate(versions={1: {"non_finite_named": False}, 2: {"non_finite_named": True}})
def logs_read(ev: Evidence, out: Finding, non_finite_named: bool) -> None:
    """Every log of the run that run.json records as finished (or does not record) yields a figure: a log the one
    reader refuses (a harness log's grammar, kit.results.parsers.harnesslog; a program log's format) is named with
    its line and why. A run recorded as failed gives no figure by design; v2: so does one whose log shows it trained
    on a non-finite loss (named in the note: the training failed, the log is whole)."""
    if ev.report is None:
        return
    recorded = ev.meta.get("runs") if isinstance(ev.meta.get("runs"), dict) else {}
    out.checked = sum(len(c.runs) for g in ev.report.groups for c in g.cases) + len(ev.report.failures)
    named = []
    for path, reason in ev.report.failures:
        rel = ev.rel(path)
        entry = recorded.get(rel)
        if isinstance(entry, dict) and entry.get("status") not in (None, "ok"):
            continue
        if non_finite_named and NON_FINITE in reason:
            named.append(rel)
            continue
        line = FAILURE_LINE.match(reason)
        said = "run.json records it as finished" if isinstance(entry, dict) else "run.json does not record it"
        why = (reason[line.end():] if line else reason).removeprefix(NO_FIGURE)
        out.fail(f"{said}, but it gives no figure: {why}", rel,
                 int(line.group(1)) if line else None)
    if named:
        out.note = f"{len(named)} log(s) trained on a non-finite loss, no figure (named): {', '.join(named[:3])}"[:300]


def _without_block(lines: list[str], block: list[str]) -> list[str]:
    """LINES with the first exact run of BLOCK taken out (LINES as they were where it is not there)."""
    for i in range(len(lines) - len(block) + 1):
        if lines[i:i + len(block)] == block:
            return lines[:i] + lines[i + len(block):]
    return lines


@predicate(versions={1: {"standing": False}, 2: {"standing": True}})
def report_matches_logs(ev: Evidence, out: Finding, standing: bool = False) -> None:
    """report.md is the report recomputed from the raw logs, line for line; from version 2 (STANDING), a GPU run's
    report starts with where it stands against the published figures the kit holds (kit.results.standing), which
    reports of earlier kits did not write: version 1 compares the rest, and a report that has the block has it as
    recomputed (a later kit's bundle judged under an earlier set). In the layout results.json declares."""
    from kit.results.exporters import to_markdown

    if ev.report is None:
        return
    path = ev.root / "report.md"
    if not path.is_file():
        out.fail("report.md is missing", "report.md")
        return
    have = path.read_text(encoding="utf-8", errors="replace").splitlines()
    want = to_markdown(ev.report if standing else dataclasses.replace(ev.report, standing="")).splitlines()
    if not standing and ev.report.standing:
        have = _without_block(have, [*ev.report.standing.rstrip().splitlines(), ""])
    name = ev.root.name  # the title names the run's folder: a renamed copy keeps the name it was written with
    if have and want and want[0].endswith(name) and re.fullmatch(re.escape(want[0][:-len(name)]) + r"[A-Za-z0-9_.-]+",
                                                                  have[0]):
        want[0] = have[0]
    out.checked = len(want)
    for line, a, b in line_differences(have, want):
        out.fail(f"written {a[:160]!r}, recomputed {b[:160]!r}", "report.md", line)
        if len(out.violations) >= 20:
            break


@predicate()
def derived_files_recomputed(ev: Evidence, out: Finding) -> None:
    """results.csv equals the CSV recomputed from the raw logs; in a bundle, commands.json equals the commands
    recomputed from run.json (every derived file is recomputed, none taken on trust)."""
    from kit.results.exporters import to_csv

    if ev.report is None:
        return
    csv_path = ev.root / "results.csv"
    out.checked += 1
    if not csv_path.is_file():
        out.fail("results.csv is missing", "results.csv")
    else:
        have = csv_path.read_text(encoding="utf-8", errors="replace").splitlines()
        want = to_csv(ev.report).splitlines()
        for line, a, b in line_differences(have, want):
            out.fail(f"written {a[:160]!r}, recomputed {b[:160]!r}", "results.csv", line)
            break
    commands = ev.root.parent.parent / "commands.json"  # <bundle>/run/<id>/ -> <bundle>/commands.json
    if ev.root.parent.name == "run" and commands.is_file():
        out.checked += 1
        try:
            written = parse_json(commands.read_bytes())
        except ValueError as exc:
            out.fail(f"not valid JSON: {exc}", "commands.json")
            return
        for path, have, want in json_differences(written, recorded_commands(ev.meta)):
            out.fail(f"{path}: written {str(have)[:160]!r}, recomputed from run.json {str(want)[:160]!r}",
                     "commands.json")
            break


@predicate(versions={1: {"strict": False}, 2: {"strict": True}})
def claims_derive(ev: Evidence, out: Finding, strict: bool) -> None:
    """Every published claim carried in the bundle re-derives from its log by its stated method (crosscheck); from
    version 2 (strict), a method's scale is bounded by the ranks its log shows and no claim lists a log twice."""
    from kit.results.crosscheck import MATCH, check_claims

    if ev.claims is None:
        out.note = "no published claims in this bundle"
        return
    name = f"claims/{ev.claims.name}"
    try:
        verdicts = check_claims(ev.claims, confine=ev.claims.parent, max_rel_tol=ev.claims_rel_tol,
                                strict=strict)
    except ConfigError as exc:  # named as the bundle names it, never by the auditor's temporary path
        out.fail(f"claims cannot be read: {exc.key + ': ' if exc.key else ''}{exc.reason}", name, exc.line)
        return
    except OSError as exc:
        out.fail(f"claims cannot be read: {exc}", name)
        return
    for v in verdicts:
        out.checked += 1
        if v.status != MATCH:
            said = " (the claims file itself says derives: false)" if not v.declared_derives else ""
            got = "no figure" if v.recomputed is None else f"{v.recomputed:.6g}"
            out.fail(f"{v.claim}: published {v.published:g}, recomputed {got}{said} {v.detail}".rstrip(),
                     name, v.source_line)


def line_differences(have: list[str], want: list[str]):
    """(line number, written, recomputed) of each line where the written lines HAVE and the recomputed WANT differ
    ('<end of file>' past either's end)."""
    for i in range(max(len(have), len(want))):
        a = have[i] if i < len(have) else "<end of file>"
        b = want[i] if i < len(want) else "<end of file>"
        if a != b:
            yield i + 1, a, b


def json_differences(have, want, path: str = "", skip=frozenset()):
    if isinstance(want, dict) and isinstance(have, dict):
        for key in sorted(set(have) | set(want)):
            if key in skip and not path:
                continue
            sub = f"{path}.{key}" if path else key
            if key not in have or key not in want:
                yield sub, have.get(key, "<absent>"), want.get(key, "<absent>")
            else:
                yield from json_differences(have[key], want[key], sub)
    elif isinstance(want, list) and isinstance(have, list):
        if len(have) != len(want):
            yield f"{path} (length)", len(have), len(want)
        for i, (a, b) in enumerate(zip(have, want, strict=False)):
            yield from json_differences(a, b, f"{path}[{i}]")
    elif isinstance(want, float) and isinstance(have, (int, float)) and not isinstance(have, bool):
        if not (math.isclose(have, want, rel_tol=REL_TOL, abs_tol=1e-12) or (math.isnan(have) and math.isnan(want))):
            yield path, have, want
    elif have != want or type(have) is not type(want):
        yield path, have, want


def json_line(lines: LineDict | None, path: str) -> int | None:
    """Line of a 'groups[0].cases[1].median' path in a JSON file read as YAML (the deepest key found)."""
    node, line = lines, None
    for part in path.replace("]", "").replace("[", ".").split("."):
        if node is None or part == "":
            break
        if isinstance(node, LineDict) and part in node:
            line = node.line_of(part) or line
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            line = getattr(node, "line", None) or line
        else:
            break
    return line
