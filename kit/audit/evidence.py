"""What a run directory proves, read back from its files alone: the facts the compliance rules judge. Pure.

Evidence.load(run_dir) reads suite.yaml, run.json, images.json, results.json and the environment captures, and
RECOMPUTES the report from the raw logs with the spine's parsers and stats (kit.results.compose, given what this
kit knows of the published programs, as kit.run.bench.compose_report gives it), so no rule ever trusts a figure
the run wrote about itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from kit.config import programs, reference
from kit.config.cases import Case, Suite
from kit.config.expansion import as_expanded_then
from kit.config.suites import load_suite
from kit.core.inputs import InputError, KitError, parse_json
from kit.core.layout import RunLog, run_folder
from kit.core.yamlio import LineDict, load_yaml
from kit.hosts import capture as ec
from kit.images.parity import program_stacks
from kit.results.compose import compose_report
from kit.results.parsers.kitlog import events as kit_events
from kit.results.report import LAYOUTS, Report

READ_ERRORS = (KitError, InputError, OSError, ValueError)  # a file that cannot be read: a finding, not a crash


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


CLAIMS_REL_TOL = 1e-3  # the verifier's default for a carried claim (the loosest the shared claims need)


@dataclass
class Evidence:
    root: Path  # the run directory (runs/<id>/, or <bundle>/<id>/)
    claims: Path | None = None  # published claims that ride in a bundle (a kit crosscheck claims file)
    claims_rel_tol: float = CLAIMS_REL_TOL  # the verifier's tolerance for re-derived claims (never the bundle's)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, why it could not be read)

    # ----------------------------------------------------------------- files as written by the run
    def rel(self, path: Path) -> str:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def _json(self, name: str) -> dict | None:
        path = self.root / name
        if not path.is_file():
            return None
        try:
            data = parse_json(path.read_bytes())
        except (OSError, ValueError) as exc:
            self.problems.append((name, f"not valid JSON: {exc}"))
            return None
        if not isinstance(data, dict):
            self.problems.append((name, "not a JSON object"))
            return None
        return data

    def lines_of(self, name: str) -> LineDict | None:
        """A JSON file read as YAML (JSON is YAML) for the line of each key; None when unreadable."""
        try:
            data = load_yaml(self.root / name)
        except READ_ERRORS:
            return None
        return data if isinstance(data, LineDict) else None

    @cached_property
    def meta(self) -> dict:
        return self._json("run.json") or {}

    @cached_property
    def results(self) -> dict | None:
        return self._json("results.json")

    @cached_property
    def images(self) -> dict | None:
        return self._json("images.json")

    @cached_property
    def suite(self) -> Suite | None:
        """suite.yaml as this kit expands it (rule set v8 holds run.json's expanded_suite, what the report was
        written from, equal to it: suite_expansion_recorded)."""
        try:
            return as_expanded_then(load_suite(self.root / "suite.yaml"), self.meta)
        except READ_ERRORS as exc:
            self.problems.append(("suite.yaml", str(exc)))
            return None

    @cached_property
    def cases(self) -> dict[str, Case]:
        return {c.key: c for c in self.suite.cases} if self.suite else {}

    @cached_property
    def layout(self) -> int:
        """The layout results.json declares its report in (kit.results.report.LAYOUTS; absent: 1), in which the
        report is recomputed; one this kit does not know is a problem, and the report is recomputed in its newest."""
        declared = (self.results or {}).get("layout", 1)
        if declared in LAYOUTS and not isinstance(declared, bool):
            return declared
        self.problems.append(("results.json", f"layout: {declared!r} is no report layout this kit knows "
                                              f"({', '.join(map(str, LAYOUTS))})"))
        return LAYOUTS[-1]

    # ----------------------------------------------------------------- recomputed from the raw logs
    @cached_property
    def report(self) -> Report | None:
        if self.suite is None:
            return None
        try:  # the composer the run used, with the same knowledge of the programs (kit.run.bench.compose_report)
            return compose_report(self.root, self.suite, method_for=reference.log_reduction, ran_as=programs.ran_as,
                                  program_stacks=program_stacks, layout=self.layout)
        except Exception as exc:  # noqa: BLE001 - as in the rules engine: a damaged file is a finding, not a crash
            self.problems.append(("logs/", f"cannot recompute the report: {type(exc).__name__}: {exc}"[:300]))
            return None

    def events(self, path: Path) -> list:
        """The ':::KITLOG' events of a run's log (kit.results.parsers.kitlog.events), read once: several rules
        judge the same log."""
        cache = self.__dict__.setdefault("_events", {})
        if path not in cache:
            cache[path] = kit_events(path)
        return cache[path]

    def memo(self, key: str, compute):
        """compute() once per Evidence (what several rules derive alike, e.g. the published programs' runs)."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def runs(self) -> list[tuple[str, RunLog, object]]:
        """(case key, log, figure) of every run that yields a figure in the recomputed report."""
        out = []
        for group in self.report.groups if self.report else []:
            for case in group.cases:
                out += [(group.key.case_key(case.name), r.log, r.figure) for r in case.runs]
        return out

    def side_files(self, log: RunLog) -> list[Path]:
        """Files a run left beside its log: the launcher's per-rank logs, each host's gathered output."""
        folder = run_folder(log.path.relative_to(self.root / "logs"))
        dirs = [self.root / "launcher" / folder]
        hosts = self.root / "hosts"
        if hosts.is_dir():
            dirs += [h / folder for h in sorted(hosts.iterdir()) if h.is_dir()]
        return [p for d in dirs if d.is_dir() for p in sorted(d.rglob("*")) if p.is_file()]

    # ----------------------------------------------------------------- environment
    @cached_property
    def captures(self) -> dict[str, tuple[ec.HostCapture | None, dict | None, str]]:
        """host -> (capture re-parsed from the raw probe outputs, capture.json as written, problem)."""
        out: dict[str, tuple[ec.HostCapture | None, dict | None, str]] = {}
        env = self.root / "env"
        for host_dir in sorted(p for p in env.iterdir() if p.is_dir()) if env.is_dir() else []:
            stored = self._json(f"env/{host_dir.name}/capture.json")
            try:
                out[host_dir.name] = (ec.capture_from_dir(host_dir.name, host_dir), stored, "")
            except READ_ERRORS as exc:
                out[host_dir.name] = (None, stored, str(exc))
        return out
