"""The run directory's records: run.json (provenance + one entry per run, written after every run), earlier
attempts under attempts/, and whether a run is done (its log yields a figure).

    runs/<run_id>/suite.yaml        the suite as run (a resume reads this copy, not kit/suites/)
    runs/<run_id>/run.json          host(s), versions, commands, per-run status; rewritten after every run
    runs/<run_id>/logs/<framework>/<model>/bz<B>/<N>n<G>g/<model>_b<B>_<precision>_<repeat>.log
    runs/<run_id>/attempts/...      earlier failed or interrupted logs of a run that was re-run
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import platform
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from kit import __version__
from kit.config import reference
from kit.config.cases import Suite
from kit.config.suites import load_suite, posing_as_builtin
from kit.core import rundir, runlock
from kit.core.catalogue import contract, harness_sha256
from kit.core.files import CURRENT_RULES
from kit.core.inputs import InputError, KitError
from kit.core.layout import RunLog, classify, sidecar_name, telemetry_name
from kit.core.revision import source_revision
from kit.core.rundir import has_run_meta, read_run, read_run_meta, read_sidecar, run_meta_path
from kit.core.runenv import run_environment
from kit.core.yamlio import ConfigError
from kit.hosts.capture import parse_cpuinfo
from kit.results.extract import HARNESS_METHOD, Figure, Method, MethodError, compute_figure
from kit.results.gpu_telemetry import run_telemetry
from kit.results.parsers import ParseError, parse_log
from kit.results.parsers.kitlog import read_what_ran
from kit.run import frozen
from kit.run.command import SAMPLE_INTERVAL_MS, SAMPLER
from kit.run.plan import PlannedRun
from kit.telemetry import TelemetryError

if TYPE_CHECKING:
    import psutil


class RunDirError(KitError):
    """A run directory that cannot be started or resumed (one line for the user)."""


RUN_ENV = "KIT_RUN_DIR"  # in the environment of every process of a local run (kit.run.local): its run directory


def new_run_dir(runs_dir: Path, suite: str) -> Path:
    """runs/<suite>-<time>[-n]: made, never shared (benches started in the same second each get their own)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = runs_dir / f"{suite}-{stamp}"
    runs_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()  # atomic: the first process to make it owns it
        except FileExistsError:
            continue
        runlock.acquire(path)
        return path
    raise RunDirError(f"{runs_dir}: 10000 run directories named {base.name}*; remove some")


def new_suite(suite_ref: str | Path) -> Suite:
    """The suite a new run would start with, checked as start() checks it (before any folder is made)."""
    suite = load_suite(suite_ref)
    _not_posing_as_builtin(suite)
    return suite


def start(suite_ref: str | Path, runs_dir: Path) -> tuple[Path, Suite]:
    """A new run directory holding a copy of the suite; the copy is what the run (and a resume) reads. Nothing is
    left behind where the copy fails."""
    suite = new_suite(suite_ref)
    run_dir = new_run_dir(Path(runs_dir), suite.name)
    try:
        shutil.copyfile(suite.path, run_dir / "suite.yaml")
        return run_dir, load_suite(run_dir / "suite.yaml")
    except BaseException:
        discard_unstarted(run_dir)
        raise


def discard_unstarted(run_dir: Path) -> bool:
    """Remove a run directory this process made where no run started in it (no run.json): a refused start leaves
    no empty folder behind. False (and nothing removed) where a run started."""
    run_dir = Path(run_dir)
    if run_meta_path(run_dir).exists():
        return False
    runlock.release(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    return True


def _not_posing_as_builtin(suite: Suite) -> None:
    """A suite file named like a built-in suite (its report is titled so) must be that suite."""
    builtin = posing_as_builtin(suite)
    if builtin is not None:
        raise RunDirError(f"{suite.path}: name {suite.name!r} is the built-in suite {builtin}, and "
                          "this file runs other cases; give it a name of its own")


def resume(run_dir: Path, write: bool = False) -> Suite:
    """The suite a run directory was started with (its own copy, as expanded then); write: this process is to add
    runs to it, so it takes the directory's lock (one writer) and refuses a suite.yaml edited since the run
    started."""
    run_dir = Path(run_dir)
    if not (run_dir / "suite.yaml").is_file():
        raise RunDirError(f"{run_dir}: not a kit bench run directory (no suite.yaml)")
    if write:
        runlock.acquire(run_dir)
        _suite_unchanged(run_dir)
        refuse_beside_live(run_dir)
    try:
        return frozen.run_suite(run_dir)[0]  # the cases as the run expanded them, where run.json froze them
    except ConfigError as exc:
        raise RunDirError(f"cannot resume: {exc}") from None


def live_processes(run_dir: Path) -> list[psutil.Process]:
    """The processes of this machine started by a local run of run_dir (RUN_ENV), this process excepted."""
    import psutil

    want, found = str(Path(run_dir).resolve()), []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(RUN_ENV) == want:
                found.append(proc)
        except psutil.Error:  # gone, a zombie, or another user's
            continue
    return found


def refuse_beside_live(run_dir: Path) -> None:
    """RunDirError naming them when processes of an earlier run of run_dir are alive (a resume must not train
    beside them, nor move their live logs)."""
    import psutil

    alive = live_processes(run_dir)
    if not alive:
        return
    named = []
    for proc in alive[:3]:
        try:
            named.append(f"pid {proc.pid} ({' '.join(proc.cmdline())[:80]})")
        except psutil.Error:
            named.append(f"pid {proc.pid}")
    more = f" and {len(alive) - 3} more" if len(alive) > 3 else ""
    raise RunDirError(f"{run_dir}: {len(alive)} process(es) of an earlier kit bench of this run still run: "
                     f"{', '.join(named)}{more}; wait for them to end or stop them, then resume")


def _suite_unchanged(run_dir: Path) -> None:
    try:
        recorded = read_run_meta(run_dir, missing_ok=True).get("suite_sha256")
    except InputError as exc:
        raise RunDirError(f"cannot resume: {exc}") from None
    if recorded and hashlib.sha256((run_dir / "suite.yaml").read_bytes()).hexdigest() != recorded:
        raise RunDirError(f"cannot resume: {run_dir / 'suite.yaml'} was edited after the run started (run.json "
                          "recorded another sha256); start a new run with the edited suite instead")


def sidecar_path(log: Path) -> Path:
    return log.with_name(sidecar_name(log.name))


def telemetry_path(log: Path) -> Path:
    return log.with_name(telemetry_name(log.name))


def reference_figures(log: Path) -> dict:
    """{'kit': samples/s by the kit's method, 'publisher': by the publisher's (None where none is published)}
    from a reference run's log and its sidecar; ParseError/MethodError when the log gives no figure."""
    meta = read_sidecar(log)
    parsed = parse_log(log, meta["log_format"])
    kit = compute_figure(parsed, Method.from_mapping(meta["kit_method"])).value
    pub = meta.get("publisher_method")
    return {"kit": kit, "publisher": compute_figure(parsed, Method.from_mapping(pub)).value if pub else None,
            "impl": meta["impl"]}


def measure_of(log: Path, logs_root: Path) -> Figure:
    """The run's figure (value and unit) from its log (below logs_root, in the DLPerf layout): the harness's kitlog
    lines by its timing rule, a published program's by its recipe's reduction; ParseError/MethodError when it
    gives none."""
    where = classify(Path(log), Path(logs_root))
    method, fmt = (reference.log_reduction(where) if isinstance(where, RunLog) else None) or (HARNESS_METHOD, "kitlog")
    return compute_figure(parse_log(log, fmt), method)


def figure_of(log: Path, logs_root: Path) -> float:
    return measure_of(log, logs_root).value


def is_done(run_dir: Path, run: PlannedRun) -> bool:
    """The run left a log that gives a figure, and run.json does not record it as failed (a rank that hung while
    rank 0 finished leaves a complete rank-0 log); RunDirError where run.json records it as finished and its log is
    gone or gives no figure."""
    log = run_dir / run.log_rel
    try:
        entry = read_run(run_dir, missing_ok=True).runs.get(str(run.log_rel))
    except InputError:
        entry = None
    finished = entry is not None and entry.ok
    if entry is not None and entry.status not in (None, "ok"):
        return False
    why = None
    if not log.is_file():
        why = "its log is missing"
    else:
        try:
            figure_of(log, run_dir / "logs")
        except (ParseError, MethodError) as exc:
            why = f"its log gives no figure ({exc})"
    if why and finished:  # a resume never replaces a finished run: best-of-N would leave no trace
        raise RunDirError(f"{run_dir}: run.json records {run.log_rel} as finished, but {why}; a resume never "
                          "replaces a finished run: restore the log, or start a new run")
    return why is None


def archive_log(run_dir: Path, log: Path) -> Path:
    """Move an earlier failed/interrupted log (or its command record) under attempts/, keeping every earlier one."""
    return _aside(run_dir, log, log.relative_to(run_dir / "logs"))


def _aside(run_dir: Path, path: Path, rel: Path) -> Path:
    n = 1
    while (target := run_dir / "attempts" / rel.with_name(f"{rel.name}.{n}")).exists():
        n += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    path.replace(target)
    return target


def clear_for_rerun(run_dir: Path, run: PlannedRun) -> None:
    """An earlier (failed or interrupted) attempt of this run moves to attempts/ before the run starts again:
    its log and command record (attempts/<path under logs/>.N) and its folders under launcher/ and
    hosts/<host>/ (attempts/launcher/..., attempts/hosts/...)."""
    run_dir = Path(run_dir)
    log = run_dir / run.log_rel
    for path in (log, sidecar_path(log)):
        if path.exists():
            archive_log(run_dir, path)
    hosts = run_dir / "hosts"
    folders = [run_dir / "launcher" / run.folder] + (
        [h / run.folder for h in sorted(hosts.iterdir()) if h.is_dir()] if hosts.is_dir() else [])
    for folder in folders:
        if folder.is_dir():
            _aside(run_dir, folder, folder.relative_to(run_dir))


def open_run_meta(run_dir: Path, suite: Suite, **fields) -> dict:
    """run.json as it is (resume), or a new one with the provenance every run directory carries."""
    if has_run_meta(run_dir):
        return read_run_meta(run_dir)
    return {
        "kit_version": __version__,
        "rules_version": CURRENT_RULES,  # the rule set kit bundle judges this run's records by
        "suite": suite.name,
        "suite_sha256": hashlib.sha256((Path(run_dir) / "suite.yaml").read_bytes()).hexdigest(),
        "harness_sha256": harness_sha256(),
        "kit_commit": source_revision(),
        "inherited_environment": run_environment(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        # every GPU run is sampled beside it (kit.run.command.sampled): verify then asks each run for its samples
        **({"gpu_telemetry": {"sampler": f"scripts/{SAMPLER}", "interval_ms": SAMPLE_INTERVAL_MS}}
           if suite.hardware == "gpu" else {}),
        **fields,
        "runs": {},
    }


def save_run_meta(run_dir: Path, meta: dict) -> None:
    rundir.save_run_meta(run_dir, meta)


def note_skipped(run_dir: Path, meta: dict, refused: dict[str, str]) -> None:
    """Cases the plan does not run, with why, into run.json `skipped_cases` (once each, across resumes)."""
    if refused:
        known = {s["case"] for s in meta.get("skipped_cases", [])}
        meta["skipped_cases"] = meta.get("skipped_cases", []) + [
            {"case": k, "reason": w} for k, w in refused.items() if k not in known]
        save_run_meta(run_dir, meta)


def note_warning(run_dir: Path, meta: dict, warning: str | None) -> None:
    """A warning about the whole run (e.g. cuDNN parity) into run.json `warnings`, once."""
    if warning and warning not in meta.get("warnings", []):
        meta["warnings"] = meta.get("warnings", []) + [warning]
        save_run_meta(run_dir, meta)


def note_forced(run_dir: Path, meta: dict, forced: list[dict]) -> None:
    """Checkouts not at the pinned commit, run anyway (--force), into run.json `model_code_forced`."""
    if forced:
        meta["model_code_forced"] = [m for m in meta.get("model_code_forced", []) if m not in forced] + forced
        save_run_meta(run_dir, meta)


def record_run(run_dir: Path, meta: dict, run: PlannedRun, status: str, value: float | None, seconds: float,
               reason: str, unit: str | None = None, **extra) -> None:
    """One run's outcome into run.json, written at once so an interruption loses nothing: its figure and the unit
    that names what it counts (images/s, sequences/s, tokens/s)."""
    figure = {"figure": value} | ({"unit": unit} if value is not None and unit else {})
    meta["runs"][str(run.log_rel)] = {"case": run.case.key, "repeat": run.repeat, "status": status, **figure,
                                      "wall_seconds": round(seconds, 3),
                                      "reason": reason, **run_settings(run_dir, run),
                                      **(run_gpu_telemetry(run_dir, run.log_rel) if meta.get("gpu_telemetry") else {}),
                                      **extra}
    save_run_meta(run_dir, meta)


def run_gpu_telemetry(run_dir: Path, log_rel: Path | str) -> dict:
    """{'telemetry': what the run's GPUs did, from its gathered samples} as run.json keeps it (results.json's
    figures, computed the same way), {'telemetry_error': why not} for samples that do not read, {} where the run
    left none."""
    try:
        tele = run_telemetry(Path(run_dir) / log_rel, Path(run_dir) / "logs", Path(run_dir))
    except TelemetryError as exc:
        return {"telemetry_error": str(exc)}
    return {"telemetry": tele} if tele else {}


def run_settings(run_dir: Path, run: PlannedRun) -> dict:
    """The case's settings the contract records (scripts/harness/contract.py: precision, layout, mode, loader where
    it has one), and what its log says ran (the math flags the framework had, compile time, the loader's own rate):
    run.json keeps both, so a reader needs no log to see either."""
    case = run.case
    declared = {s.key: getattr(case, s.key) for s in contract.SETTINGS
                if s.recorded and (s.given != contract.SET or getattr(case, s.key))}
    if case.impl != "harness":
        return declared
    return declared | {"ran": read_what_ran(Path(run_dir) / run.log_rel)}


def note_planned(meta: dict, runs: list[PlannedRun], add: bool = False) -> None:
    """The runs this bench is to do into run.json `planned_runs` (add: beside those planned already, as each host
    group of `kit cluster` plans its own), and the directory partial (no `finished`) until finish_run_meta: a bench
    stopped by any means, kill -9 included, leaves it so (kit.results.compose)."""
    planned = list(meta.get("planned_runs") or []) if add else []
    known = {p.get("log") for p in planned if isinstance(p, dict)}
    planned += [{"case": r.case.key, "repeat": r.repeat, "log": str(r.log_rel)} for r in runs
                if str(r.log_rel) not in known]
    meta["planned_runs"] = planned
    meta.pop("finished", None)


def finish_run_meta(run_dir: Path, meta: dict | None = None) -> None:
    """run.json `finished`: the bench reached its end (meta: run.json as this process holds it, else as on disk)."""
    meta = meta if meta is not None else read_run_meta(run_dir)
    meta["finished"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    save_run_meta(run_dir, meta)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        model = parse_cpuinfo(Path("/proc/cpuinfo").read_text()).model_name
        if model:
            return model
    return platform.processor() or platform.machine()


def host_description() -> dict:
    import psutil

    return {
        "hostname": socket.gethostname(),
        "cpu": _cpu_model(),
        "cores": cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
