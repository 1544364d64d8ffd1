"""A sweep's bundle (kit sweep's directory): each host's (or GPU's) run directory bundled and judged as a run's, by
the same rules, where it was made; the fleet table re-derived from the hosts' logs.

    kit-bundle-<sweep id>/
      run/<sweep id>/       the sweep's directory whole: sweep.json, suite.yaml, env/<host>/ (the captures the fleet's
                            evidence reads), results.json and report.md (the fleet table), hosts/<host>/[gpu<i>/]
                            (each row's run directory: run.json, logs, its own env/, report.md, results.json, ...)
      system.json           {row: the system description of its run directory}
      commands.json         {row: the commands of its runs}
      provenance.json, pins.yaml, manifest.json(.sig)   as a run's bundle

Making one: kit.audit.bundle (bundled_parts, sweep_systems); verifying one: kit.audit.verify.judge_sweep, with the
checks here. Each row's run directory is judged as a run's (kit.audit.verify.judge_run: every rule of the set, its
system description recomputed, its completion), its violations named by their place in the bundle
(run/<id>/hosts/h2/logs/...). A row sweep.json records as failed or lost stays a row: its records are judged, but
where it gives no figure (nothing of it enters the fleet table but its name and why) its violations are shown, not
counted; a row with a figure is held to every rule, as its figures set the fleet's median. Then the fleet table:
results.json's fleet and report.md recomputed (kit.results.fleet) from each row's runs with their figures
recomputed from its logs and the captures re-parsed from their raw outputs (FLEET_RULE); sweep.json's rows
against the run directories there (SWEEP_RULE); commands.json against each row's run.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kit.audit.commands import recorded_commands
from kit.audit.evidence import READ_ERRORS, Evidence
from kit.audit.rules import Violation
from kit.audit.rules.derived import json_differences, json_line, line_differences
from kit.audit.rules.engine import newest, rules_of_run
from kit.audit.rules.predicates import reparsed_captures
from kit.core import rundir
from kit.core.inputs import parse_json
from kit.core.rundir import RunEntry
from kit.results.fleet import fleet_of, sweep_report

SWEEP_RULE = "sweep_recorded"  # sweep.json's hosts and rows against the run directories the bundle holds
FLEET_RULE = "fleet_recomputed"  # results.json's fleet table and report.md against the hosts' logs
COMMANDS_RULE = "commands_recomputed"  # commands.json against each row's run.json
SHOWN = 10  # differences named per file
OK = "ok"  # a row of sweep.json whose every run gave a figure (kit.run.sweep.OK; that module needs fabric)
NOT_RECORDED = "not recorded"  # a row of which sweep.json says nothing


# ------------------------------------------------------------------- making a sweep's bundle (kit.audit.bundle)


def rules_of_sweep(metas: dict[str, dict]) -> tuple[str, str]:
    """(rule set, why) of a sweep's rows' run.json (kit.audit.rules.engine.rules_of_run): the newest of theirs."""
    judged = [rules_of_run(meta) for meta in metas.values()]
    return max(judged, key=lambda v: int(v[0][1:])) if judged else (newest(), "the newest: no row has a run.json")


def commands(metas: dict[str, dict]) -> dict[str, dict]:
    """commands.json of a sweep: {row: its runs' commands}."""
    return {row: recorded_commands(meta) for row, meta in metas.items()}


# ------------------------------------------------------------------- verifying one (kit.audit.verify.judge_sweep)


@dataclass
class Row:
    """One row of a sweep's bundle: sweep.json's word on it, and its run directory judged (None: it has none)."""
    name: str
    where: str  # its run directory in the bundle: run/<sweep id>/hosts/<host>[/gpu<i>]
    status: str
    reason: str
    judged: object = None  # kit.audit.verify.Compliance of its run directory
    counted: bool = True  # its violations fail the bundle (a row with a figure, or recorded ok)

    @property
    def violations(self) -> list[Violation]:
        return self.judged.violations if self.judged is not None else []

    def line(self) -> str:
        said = "" if self.status == OK else f"  [{self.status}: {self.reason or 'no reason recorded'}]"
        if self.judged is None:
            return f"  {self.name:<10} no run directory{said}"
        found = self.violations
        if not found:
            return f"  {self.name:<10} OK      every rule holds, {self.judged.figures} figure(s) recomputed{said}"
        rules = ", ".join(sorted({v.rule for v in found}))
        if not self.counted:
            return (f"  {self.name:<10} n/a     {len(found)} violation(s) not counted: it gives no figure, nothing "
                    f"of it enters the fleet table but its name and why ({rules}){said}")
        return f"  {self.name:<10} NOT OK  {len(found)} violation(s): {rules}{said}"

    def to_dict(self) -> dict:
        return {"row": self.name, "where": self.where, "status": self.status, "reason": self.reason,
                "judged": self.judged is not None, "counted": self.counted, "ok": not self.violations,
                "figures": self.judged.figures if self.judged is not None else 0,
                "violations": [v.to_dict() for v in self.violations]}


def rows_recorded(record: dict, rows: list[Row], sweep_dir: Path, top: str) -> list[Violation]:
    """Each row (each host of sweep.json has one: kit.core.rundir.sweep_parts) has its run directory, or sweep.json
    records why not; no host folder is one sweep.json does not list (its records would be judged by nothing)."""
    found, where = [], f"{top}/{rundir.SWEEP_JSON}"
    hosts = record["hosts"]
    for r in rows:
        if r.judged is None and r.status in (OK, NOT_RECORDED):
            said = "records no row of it" if r.status == NOT_RECORDED else f"records it {r.status!r}"
            found.append(Violation(SWEEP_RULE, f"row {r.name}: sweep.json {said}, but the bundle holds no run "
                                   f"directory of it ({top}/hosts/{r.name}/run.json)", where))
    folder = sweep_dir / "hosts"
    for extra in sorted(p.name for p in folder.iterdir() if p.name not in hosts) if folder.is_dir() else []:
        found.append(Violation(SWEEP_RULE, f"{extra} is no host of sweep.json: its records are judged by nothing",
                               f"{top}/hosts/{extra}"))
    return found


def logged_runs(part: Path, evidence: Evidence | None) -> list[RunEntry]:
    """A row's runs as run.json records them, each figure (and its case and unit) the one recomputed from its log by
    the one reader (kit.audit.evidence.Evidence.runs); None where its log gives none."""
    figures = {evidence.rel(log.path): (key, figure) for key, log, figure in evidence.runs()} if evidence else {}
    out = []
    for log, entry in rundir.read_run(part, missing_ok=True).runs.items():
        key, figure = figures.get(log, (entry.case, None))
        out.append(RunEntry(log, {**entry.fields, "case": key, "figure": figure and figure.value,
                                  "unit": figure.unit if figure else entry.unit}))
    return out


def check_fleet(sweep_dir: Path, top: str, evidences: dict[str, Evidence]) -> tuple[dict | None, list[Violation]]:
    """(the fleet table recomputed from the rows' logs and the captures' raw outputs, or None where it cannot be;
    how results.json's fleet and report.md differ from it)."""
    at = Evidence(sweep_dir)
    reparsed, problems = reparsed_captures(at)
    found = [Violation(FLEET_RULE, message, f"{top}/{file}") for message, file in problems]
    try:
        fleet = fleet_of(sweep_dir, lambda row, part: logged_runs(part, evidences.get(row)),
                         {host: again for host, (_parsed, again) in reparsed.items()})
        fleet = json.loads(json.dumps(fleet))  # as results.json holds it: lists, not tuples
        written = parse_json((sweep_dir / rundir.RESULTS_JSON).read_bytes())
    except READ_ERRORS as exc:
        return None, [*found, Violation(FLEET_RULE, f"the fleet table cannot be recomputed: {exc}",
                                        f"{top}/results.json")]
    have = written.get("fleet") if isinstance(written, dict) else None
    lines = None
    for path, was, want in list(json_differences(have, fleet, "fleet"))[:SHOWN]:
        lines = lines or at.lines_of(rundir.RESULTS_JSON)
        found.append(Violation(FLEET_RULE, f"{path}: written {str(was)[:160]!r}, recomputed from the hosts' logs "
                               f"{str(want)[:160]!r}", f"{top}/results.json", json_line(lines, path)))
    try:
        text = (sweep_dir / "report.md").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        text = []
    want_text = sweep_report(sweep_dir, fleet).splitlines()
    if text and text[0].startswith("# Sweep "):  # the title names the sweep's folder: a renamed copy keeps its own
        want_text[0] = text[0]
    for line, a, b in line_differences(text, want_text):
        found.append(Violation(FLEET_RULE, f"written {a[:160]!r}, recomputed from the hosts' logs {b[:160]!r}",
                               f"{top}/report.md", line))
        break
    return fleet, found


def commands_recomputed(root: Path, evidences: dict[str, Evidence]) -> list[Violation]:
    """commands.json: {row: the commands of its runs} as recomputed from each row's run.json."""
    try:
        written = parse_json((root / "commands.json").read_bytes())
    except (OSError, ValueError) as exc:
        return [Violation(COMMANDS_RULE, f"unreadable: {exc}", "commands.json")]
    want = {row: recorded_commands(ev.meta) for row, ev in evidences.items()}
    return [Violation(COMMANDS_RULE, f"{path}: written {str(have)[:160]!r}, recomputed from its run.json "
                      f"{str(again)[:160]!r}", "commands.json")
            for path, have, again in list(json_differences(written, want))[:SHOWN]]
