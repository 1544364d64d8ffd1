"""What a run expanded, frozen in its run.json, and which of its cases it was asked to run.

run.json `expanded_suite` holds the suite's cases as `kit bench` expanded them when the run started (every field of
each Case), so a later `kit report` or resume reads the same cases even where the kit's defaults have changed since.
suite.yaml stays the declared file (its sha256 in run.json); older run directories have no `expanded_suite` and are
read from suite.yaml as before. run.json `selection` records `--select/--exclude` (fnmatch patterns over case keys).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from kit.config.cases import Suite
from kit.config.expansion import FROZEN_KEY, as_expanded_then, thaw
from kit.config.suites import load_suite
from kit.core.inputs import InputError, KitError
from kit.core.layout import find_logs
from kit.core.rundir import read_run_meta

SELECTION_KEY = "selection"


class SelectionError(KitError):
    """A --select/--exclude pattern that matches no case, or a selection that leaves none (one line)."""


def run_meta(run_dir: Path) -> dict:
    """run.json, or {} where it is absent or unreadable (the suite then comes from suite.yaml)."""
    try:
        return read_run_meta(run_dir, missing_ok=True)
    except InputError:
        return {}


def run_suite(run_dir: Path) -> tuple[Suite, str]:
    """The run's suite: its frozen expansion where run.json has one, else suite.yaml expanded today; and which."""
    run_dir = Path(run_dir)
    meta = run_meta(run_dir)
    frozen = meta.get(FROZEN_KEY)
    if isinstance(frozen, dict):
        try:
            return thaw(frozen, run_dir / "suite.yaml"), "frozen"
        except (KeyError, TypeError, ValueError):
            pass  # a kit whose cases changed shape: suite.yaml as today's kit expands it (said by the caller)
    return as_expanded_then(load_suite(run_dir / "suite.yaml"), meta), "suite.yaml"


@dataclass(frozen=True)
class Selection:
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.select or self.exclude)

    def keys(self, suite: Suite) -> list[str]:
        """The case keys kept, in suite order; SelectionError naming a pattern that matches no case of the suite."""
        keys = [c.key for c in suite.cases]
        for flag, patterns in (("--select", self.select), ("--exclude", self.exclude)):
            for pattern in patterns:
                if not fnmatch.filter(keys, pattern):
                    raise SelectionError(f"{flag} {pattern!r} matches no case of suite {suite.name} (its cases: "
                                         f"{_sample(keys)}; `kit bench --dry-run` lists them)")
        kept = [k for k in keys if (not self.select or any(fnmatch.fnmatchcase(k, p) for p in self.select))
                and not any(fnmatch.fnmatchcase(k, p) for p in self.exclude)]
        if not kept:
            raise SelectionError(f"suite {suite.name}: {self.shown()} leaves no case to run")
        return kept

    def apply(self, suite: Suite) -> Suite:
        if not self:
            return suite
        kept = set(self.keys(suite))
        return Suite(suite.name, suite.path, suite.description, suite.hardware,
                     [c for c in suite.cases if c.key in kept])

    def shown(self) -> str:
        return " ".join([f"--select {p}" for p in self.select] + [f"--exclude {p}" for p in self.exclude])

    def record(self, suite: Suite) -> dict:
        """run.json `selection`."""
        return {"select": list(self.select), "exclude": list(self.exclude), "cases": self.keys(suite)}

    def recorded_in(self, suite: Suite) -> dict:
        """run.json's `selection` key where there is a selection, else nothing ({}), to merge into run.json."""
        return {SELECTION_KEY: self.record(suite)} if self else {}

    @classmethod
    def recorded(cls, meta: dict) -> Selection:
        data = meta.get(SELECTION_KEY) if isinstance(meta, dict) else None
        if not isinstance(data, dict):
            return cls()
        return cls(tuple(map(str, data.get("select") or ())), tuple(map(str, data.get("exclude") or ())))


def _sample(keys: list[str], most: int = 4) -> str:
    return ", ".join(keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")


def coverage_warnings(run_dir: Path, suite: Suite) -> list[str]:
    """One line each: the cases the run was to run (its selection, less the cases run.json says this host skipped)
    that left no log, and the logs that belong to no case of the suite."""
    run_dir = Path(run_dir)
    meta = run_meta(run_dir)
    skipped = {s.get("case") for s in meta.get("skipped_cases") or [] if isinstance(s, dict)}
    try:
        chosen = Selection.recorded(meta).apply(suite)
    except SelectionError:
        chosen = suite
    wanted = [c.key for c in chosen.cases if c.key not in skipped]
    logs, _strays = find_logs(run_dir / "logs") if (run_dir / "logs").is_dir() else ([], [])
    logged = {log.group.case_key(log.case) for log in logs}
    out = []
    if missing := [k for k in wanted if k not in logged]:
        out.append(f"{len(missing)} case(s) of suite {suite.name} have no logs: {_sample(missing)}")
    known = {c.key for c in suite.cases}
    if stray := [log.path.relative_to(run_dir).as_posix() for log in logs
                 if log.group.case_key(log.case) not in known]:
        out.append(f"{len(stray)} log(s) belong to no case of suite {suite.name}: {_sample(stray)}")
    return out
