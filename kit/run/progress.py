"""The ETA column of `kit bench`'s progress bar (rich): the runs left, each timed by kit.run.estimate.Eta from this
bench's finished runs and this host's earlier runs of the same cases; the running one's elapsed time taken off."""

from __future__ import annotations

import time
from pathlib import Path

from rich.progress import ProgressColumn
from rich.text import Text

from kit.run import records
from kit.run.estimate import Eta, duration, history
from kit.run.frozen import Selection
from kit.run.plan import PlannedRun, model_code_root, plan


class EtaColumn(ProgressColumn):
    def __init__(self, left: list[PlannedRun], eta: Eta, clock=time.monotonic):
        super().__init__()
        self.left, self.eta, self.clock = list(left), eta, clock
        self.began: float | None = None  # when the running run started

    @classmethod
    def for_bench(cls, run_dir: Path, suite, selection: Selection | None, force: bool,
                  runs_dir: Path | None, past: dict[str, list[float]] | None = None) -> EtaColumn:
        """The runs run_bench will do (those not done yet) and their earlier durations: `past` where given (a
        bundle's own, kit reproduce), else this host's under runs_dir."""
        runs, _skipped = plan((selection or Selection()).apply(suite), model_code_root(), force)
        try:
            left = [r for r in runs if not records.is_done(run_dir, r)]
        except records.RunDirError:
            left = runs  # run_bench refuses it, naming why
        return cls(left, Eta(past=past if past is not None else history(runs_dir)[0] if runs_dir else {}))

    def update(self, phase: str, run: PlannedRun, outcome) -> None:
        if phase == "start":
            self.began = self.clock()
            return
        if outcome is not None and outcome.status == "ok":
            self.eta.done(run, outcome.seconds)
        self.left = [r for r in self.left if r != run]
        self.began = None

    def seconds_left(self) -> float | None:
        elapsed = self.clock() - self.began if self.began is not None else 0.0
        return self.eta.remaining(self.left, elapsed)

    def text(self) -> str:
        if not self.left:
            return "ETA 0 s"
        left = self.seconds_left()
        return "ETA ?" if left is None else f"ETA {duration(left)}"

    def render(self, task) -> Text:
        return Text(self.text(), style="progress.remaining")
