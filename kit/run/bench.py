"""`kit bench`: a suite's cases on this host through the local runner, one log per run in the DLPerf layout,
run.json and the report's text files (results.json, report.md, results.csv: partial until the last run) after every
run, then the whole report. A run counts as done when its log yields a figure; `--resume`
re-runs only runs whose log is missing or gave no figure (kit.run.records).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit import REPO_ROOT
from kit.config import expansion, programs, reference
from kit.config.cases import Case, Suite
from kit.core import filecache, rundir, runlock
from kit.core.inputs import KitError
from kit.hosts import probe
from kit.hosts.yardstick import gpu_present
from kit.hosts.yardstick import measure as measure_yardstick
from kit.images.parity import program_stacks
from kit.results import compose
from kit.results.html import write_report_files
from kit.results.report import Report
from kit.run import records
from kit.run.command import HARNESS
from kit.run.frozen import Selection
from kit.run.local import BenchError, LocalRunner
from kit.run.plan import PlannedRun, local_mismatches, model_code_root, plan
from kit.run.runner import Runner, RunOutcome, execute

REPORT_SHARE = 0.05  # at most this share of a bench's time goes to rewriting its report between runs


class ReportPacer:
    """When kit bench rewrites its partial report between runs: after a run whenever the rewrites so far took at
    most REPORT_SHARE of the time since the loop began (a report's composition grows with the runs it holds, so
    one after every run would grow with their square); where the loop stops on an error or Ctrl-C, once more for
    runs not yet in it (after a loop that ends, its caller writes the whole report). run.json records every run at
    once either way."""

    def __init__(self, write: Callable[[], object], share: float | None = None, clock=time.monotonic):
        self.write, self.share, self.clock = write, REPORT_SHARE if share is None else share, clock
        self.began, self.spent, self.pending, self.rewrites = clock(), 0.0, False, 0

    def ran(self) -> None:
        """A run finished: rewrite now if within the share, else later."""
        self.pending = True
        if self.spent <= self.share * (self.clock() - self.began):
            self.flush()

    def flush(self) -> None:
        if self.pending:
            start = self.clock()
            self.write()
            self.spent += self.clock() - start
            self.pending = False
            self.rewrites += 1


SYNTHETIC_TREE = {"classes": 8, "images_per_class": 16, "size": 80}
Progress = Callable[[str, PlannedRun | None, RunOutcome | None, int, int], None]


@dataclass
class BenchResult:
    run_dir: Path
    outcomes: list[RunOutcome]
    skipped: list[tuple[Case, str]]
    report_files: list[Path]

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status not in ("ok", "done")]


def host_refusal(suite: Suite) -> str | None:
    """Why this host cannot run the suite at all (no GPUs for a GPU suite, no harness), or None."""
    if suite.hardware == "gpu" and shutil.which("nvidia-smi") is None:
        return f"suite {suite.name} needs NVIDIA GPUs; this host has no nvidia-smi (try --suite local)"
    if not HARNESS.is_file():
        return f"the harness is missing: {HARNESS}"
    return None


def check_host(suite: Suite) -> None:
    if why := host_refusal(suite):
        raise BenchError(why)


def reads_train_list(cases) -> bool:
    """Whether any of these cases reads a train list: the harness's `data: imagenet` cases (a published program
    reads its own data path)."""
    return any(c.data == "imagenet" and c.impl == "harness" for c in cases)


def check_train_list(suite: Suite, train_list: str | Path | None, cases=None) -> str | None:
    """The given train list of `data: imagenet` harness cases (of `cases`, default the suite's), resolved; None
    where none is needed or (CPU suites) the synthetic tree stands in; BenchError where it is missing or a GPU
    suite has none. Makes nothing."""
    if not reads_train_list(suite.cases if cases is None else cases):
        return None
    if train_list is not None:
        path = Path(train_list).resolve()
        if not path.is_file():
            raise BenchError(f"{train_list}: no such train list (make one with data_prep/make_train_list.py)")
        return str(path)
    if suite.hardware != "cpu":
        raise BenchError(f"suite {suite.name} reads ImageNet: give --train-list /path/to/train_list.txt")
    return None


def preflight(suite: Suite, train_list: str | Path | None, model_code: str, force: bool = False,
              host: bool = True) -> tuple[list[PlannedRun], list[tuple[Case, str]]]:
    """Every check of a run before its folder is made (host: this host's too; `kit bench --dry-run` reports that
    one instead): BenchError with the line the run would refuse with; else the plan."""
    if host:
        check_host(suite)
    runs, skipped = plan(suite, model_code, force)
    if not runs:
        raise BenchError(f"suite {suite.name}: no case can run on this host ({len(skipped)} need other runners/nodes)")
    check_train_list(suite, train_list, [r.case for r in runs])
    return runs, skipped


def resolve_train_list(run_dir: Path, suite: Suite, train_list: str | Path | None, cases=None) -> str | None:
    """The train_list.txt for `data: imagenet` harness cases (of `cases`, default the suite's): the one given, else
    (CPU suites) a synthetic JPEG tree."""
    if not reads_train_list(suite.cases if cases is None else cases):
        return None
    if given := check_train_list(suite, train_list, cases):
        return given
    return str(synthetic_tree(run_dir) / "train_list.txt")


def synthetic_tree(run_dir: Path) -> Path:
    """The run's synthetic JPEG tree (train/, train_list.txt), made once."""
    tree = run_dir.resolve() / "data" / "synthetic-imagenet"
    if not (tree / "train_list.txt").is_file():
        tool = REPO_ROOT / "data_prep" / "make_synthetic_imagenet.py"
        args = ["--classes", str(SYNTHETIC_TREE["classes"]), "--images-per-class",
                str(SYNTHETIC_TREE["images_per_class"]), "--size", str(SYNTHETIC_TREE["size"])]
        made = subprocess.run([sys.executable, str(tool), str(tree), *args], capture_output=True, text=True)
        if made.returncode != 0:
            raise BenchError(f"could not make the synthetic JPEG tree: {made.stderr.strip()}")
    return tree


def resolve_data_dir(run_dir: Path, suite: Suite, cases: list, data_dir: str | None) -> str | None:
    """The root of the data the published programs of `cases` read (<root>/<format>/, kit.config.reference.
    data_path): the one given (KIT_DATA_DIR), else on a CPU suite each format they read written from the run's
    synthetic JPEG tree into <run_dir>/data/ (data_prep/convert.py), else None (their publishers' default paths)."""
    formats = sorted({f for c in cases if c.impl == "reference" and c.data == "imagenet"
                      and (f := reference.implementation(c.framework, c.model).data_format)})
    if data_dir or not formats or suite.hardware != "cpu":
        return str(Path(data_dir).resolve()) if data_dir else None
    root, tree = run_dir.resolve() / "data", synthetic_tree(run_dir)
    for fmt in formats:
        if not (root / fmt / "manifest.json").is_file():
            made = subprocess.run([sys.executable, str(REPO_ROOT / "data_prep" / "convert.py"), "--to", fmt,
                                   str(tree / "train"), str(root / fmt)], capture_output=True, text=True)
            if made.returncode != 0:
                raise BenchError(f"could not write the {fmt} data from the synthetic JPEG tree: "
                                 f"{made.stderr.strip()[-500:]}")
    return str(root)


def run_bench(run_dir: Path, suite: Suite, progress: Progress | None = None, runner: LocalRunner | None = None,
              train_list: str | Path | None = None, images: dict[str, str] | None = None,
              force: bool = False, selection: Selection | None = None, yardstick: bool = True,
              time_limits: dict[str, float] | None = None) -> BenchResult:
    """The suite's runs (its cases `selection` keeps) into run_dir, holding its lock (one writer) until they end; a
    GPU suite on a host with an NVIDIA GPU measures the hardware first (yardstick: measure_hardware); time_limits:
    case key -> a run's seconds in place of the suite's timeout_s (kit reproduce's), recorded in run.json."""
    runlock.acquire(run_dir)
    try:
        with filecache.cached():  # the report rewritten after each run reads only the logs new since
            return _run_bench(Path(run_dir), suite, progress, runner, train_list, images, force,
                              selection or Selection(), yardstick, time_limits)
    finally:
        runlock.release(run_dir)


def _run_bench(run_dir: Path, suite: Suite, progress: Progress | None, runner: LocalRunner | None,
               train_list: str | Path | None, images: dict[str, str] | None, force: bool,
               selection: Selection, yardstick: bool = True,
               time_limits: dict[str, float] | None = None) -> BenchResult:
    chosen = selection.apply(suite)  # the report and run.json's frozen expansion keep the whole suite
    model_code = runner.model_code if runner else None
    runs, skipped = preflight(chosen, train_list, model_code or model_code_root(), force)
    records.refuse_beside_live(run_dir)
    cases = [r.case for r in runs]
    runner = runner or LocalRunner(run_dir, train_list=resolve_train_list(run_dir, chosen, train_list, cases),
                                   images=images, hardware=suite.hardware,
                                   data_dir=resolve_data_dir(run_dir, suite, cases, os.environ.get("KIT_DATA_DIR")))
    new = {expansion.FROZEN_KEY: expansion.freeze(suite)} | selection.recorded_in(suite)
    meta = records.open_run_meta(run_dir, suite, host=records.host_description(), **new)
    meta["skipped_cases"] = [{"case": c.key, "reason": r} for c, r in skipped]
    if force and (forced := [{"host": "local", **m} for m in local_mismatches(chosen, runner.model_code)
                             if m["case"] in {r.case.key for r in runs}]):
        meta["model_code_forced"] = forced
    capture_env(run_dir, meta)
    if suite.hardware == "gpu" and yardstick and gpu_present():
        measure_hardware(run_dir, meta)
    records.note_planned(meta, runs)
    records.save_run_meta(run_dir, meta)
    write_report(run_dir, suite, plots=False)  # partial from the start: a resumed run's report no longer complete
    outcomes: list[RunOutcome] = []
    for r in runs:
        if records.is_done(run_dir, r):
            figure = records.measure_of(run_dir / r.log_rel, run_dir / "logs")
            outcomes.append(RunOutcome(r, "done", 0.0, value=figure.value, unit=figure.unit))
    outcomes += run_each(run_dir, suite, runner, runs, meta, progress=progress, finished=len(outcomes),
                         time_limits=time_limits)
    records.finish_run_meta(run_dir, meta)
    return BenchResult(run_dir, outcomes, skipped, write_report(run_dir, suite))


def run_each(run_dir: Path, suite: Suite, runner: Runner, runs: list[PlannedRun], meta: dict,
             policy: str = "continue", progress: Progress | None = None,
             before: Callable[[PlannedRun], None] | None = None, finished: int = 0,
             time_limits: dict[str, float] | None = None) -> list[RunOutcome]:
    """The one bench loop of every runner (local, SSH, Slurm): each of `runs` not yet done, in order, through the
    runner's hooks (allocate; `before`, what the caller checks once nodes are held; start, wait, stop and gather:
    execute), recorded in run.json with what the runner keeps of it (host_load where it watches the host) and the
    report's text files rewritten (as often as ReportPacer affords; the caller writes the whole report after the
    loop), the run directory partial until its bench finishes. Policy stop: no run after
    one that failed. The runner is released at the end, on error and on Ctrl-C. time_limits: case key -> a run's
    seconds instead of its suite's timeout_s (Runner.time_limit), recorded in run.json."""
    if time_limits:  # case key -> a run's seconds, the caller's (kit reproduce: the auditor's), recorded
        runner.time_limits = time_limits
        meta["time_limits"] = {"seconds": dict(time_limits), "instead_of": "the suite's timeout_s"}
    run_dir = Path(run_dir)
    todo = [r for r in runs if not records.is_done(run_dir, r)]
    total = finished + len(todo)
    outcomes: list[RunOutcome] = []
    pacer = ReportPacer(lambda: write_report(run_dir, suite, plots=False))  # the run marked partial till its end
    ended = False
    try:
        for left, run in zip(range(len(todo), 0, -1), todo, strict=True):
            runner.allocate(run.case.nodes, left)
            if before:
                before(run)
            records.clear_for_rerun(run_dir, run)
            if progress:
                progress("start", run, None, finished, total)
            with runner.watched() as load:
                outcome = execute(runner, run, run_dir)
            outcomes.append(outcome)
            finished += 1
            watched = {} if load is None else {"host_load": load.result()}
            records.record_run(run_dir, meta, run, outcome.status, outcome.value, outcome.seconds, outcome.reason,
                               outcome.unit, **runner.recorded(outcome), **watched)
            pacer.ran()
            if progress:
                progress("end", run, outcome, finished, total)
            if outcome.status != "ok" and policy == "stop":
                break
        ended = True  # the caller writes the whole report
    finally:
        try:
            if not ended and pacer.pending:  # stopped by an error or Ctrl-C: the report holds every finished run
                with contextlib.suppress(OSError, KitError):
                    pacer.flush()
        finally:
            runner.release()
    return outcomes


def host_name(meta: dict) -> str:
    """This host's name as run.json records it (kit.run.records.host_description), else the system's."""
    return meta.get("host", {}).get("hostname") or socket.gethostname()


def capture_env(run_dir: Path, meta: dict) -> None:
    """This host's raw probe outputs + parsed capture under env/<host>/ (once per run; the bundle's source)."""
    name = host_name(meta)
    if rundir.capture_path(Path(run_dir) / "env", name).is_file():
        return
    try:
        probe.probe_local(name, Path(run_dir) / "env" / name)
    except (OSError, KitError) as exc:  # a probe that cannot be read must not stop the benchmark
        meta["env_error"] = f"{type(exc).__name__}: {exc}"


def measure_hardware(run_dir: Path, meta: dict) -> None:
    """kit yardstick on this host's GPU before the runs, kept as env/<host>/yardstick.json (once per run directory:
    a resumed run keeps the first); one that cannot run is noted in run.json, never a stop."""
    name = host_name(meta)
    if name in rundir.host_yardsticks(run_dir):
        return
    try:
        rundir.save_host_yardstick(Path(run_dir) / "env" / name, measure_yardstick("gpu", quiet=True))
    except (OSError, KitError) as exc:
        meta["yardstick_error"] = str(exc)[:300]


def compose_report(run_dir: Path, suite: Suite) -> Report:
    """The run's report from its logs alone (kit.results.compose, with what the kit knows of the published programs:
    kit.audit.evidence recomputes it with the same three, and `kit verify` compares report.md line for line)."""
    return compose.compose_report(run_dir, suite, method_for=reference.log_reduction, ran_as=programs.ran_as,
                                  program_stacks=program_stacks)


def write_report(run_dir: Path, suite: Suite, plots: bool = True) -> list[Path]:
    """The run's report files (report.md, results.json/csv, the plots) and report.html beside them."""
    with filecache.cached():  # each harness log read once for the sections and the plots
        return write_report_files(compose_report(run_dir, suite), run_dir, plots)
