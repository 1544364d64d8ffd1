"""`kit bench`: run a suite's harness cases on this host, one log per run in the DLPerf layout, then report.

    runs/<run_id>/suite.yaml        the suite as run (a resume reads this copy, not kit/suites/)
    runs/<run_id>/run.json          host, versions, commands; rewritten after every run
    runs/<run_id>/logs/<framework>/<model>/bz<B>/<N>n<G>g/<model>_b<B>_<precision>_<repeat>.log
    runs/<run_id>/attempts/...      earlier failed or interrupted logs of a run that was re-run
    runs/<run_id>/report.md (+ results.json, results.csv, scaling.png)

Repeats are interleaved (repeat 1 of every case, then repeat 2, ...) so slow drift of the machine
spreads over all cases alike. A run counts as done when its log yields a figure; `--resume`
re-runs only runs whose log is missing or gave no figure.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kit import REPO_ROOT, __version__
from kit.config.suites import Case, Suite, load_suite
from kit.core.inputs import KitError
from kit.core.layout import run_folder
from kit.core.yamlio import ConfigError
from kit.hosts.capture import parse_cpuinfo
from kit.results.extract import Method, MethodError, compute_figure
from kit.results.parsers import ParseError, parse_log
from kit.results.parsers.kitlog import read_run_start
from kit.results.report import build_report, write_outputs
from kit.run import reference, refrun
from kit.run.command import (
    HARNESS,
    IMAGE_HARNESS,
    Command,
    DockerRun,
    Mount,
    Placement,
    build_command,
    cleanup_command,
    container_name,
    docker_command,
)

RUN_SCHEMA_VERSION = 1
# The harness logs measured steps only, so the run's figure is global batch x steps / sum of step
# seconds: the harmonic mean of the per-step throughputs (the harness's own run_stop figure).
HARNESS_METHOD = Method(skip=0, reduce="harmonic_mean")
KILL_GRACE_S = 10.0


class BenchError(KitError):
    """Why a bench cannot start or go on (one line for the user)."""


@dataclass(frozen=True)
class PlannedRun:
    case: Case
    repeat: int

    @property
    def log_rel(self) -> Path:
        return Path("logs") / self.case.log_path(self.repeat)

    @property
    def folder(self) -> PurePosixPath:
        """The run's own folder under launcher/ and hosts/<host>/ (kit.layout.run_folder)."""
        return run_folder(self.case.log_path(self.repeat))

    @property
    def label(self) -> str:
        return f"{self.case.key} #{self.repeat}"


@dataclass
class RunOutcome:
    run: PlannedRun
    status: str  # ok | failed | timeout | skipped
    seconds: float
    value: float | None = None
    reason: str = ""
    exit_code: int | None = None


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def new_run_dir(runs_dir: Path, suite: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = runs_dir / f"{suite}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def plan(suite: Suite, model_code: str | None = None) -> tuple[list[PlannedRun], list[tuple[Case, str]]]:
    """Runs this host can do (interleaved repeats) and the cases it cannot, with the reason.

    A reference case (impl: reference) runs here when its program's checkout is under model_code
    (default: KIT_MODEL_CODE, else the images' /opt/models)."""
    root = model_code or refrun.model_code_root()
    skipped: list[tuple[Case, str]] = []
    for case in suite.cases:
        if case.nodes > 1:
            skipped.append((case, f"{case.nodes} nodes: run it with `fab -H ... run_multinode`"))
        elif case.impl == "reference" and (why := refrun.missing_code(case, root)):
            skipped.append((case, why))
    ok = {id(c) for c in suite.cases} - {id(c) for c, _ in skipped}
    return plan_for_nodes(suite, 1, lambda c: id(c) in ok), skipped


def plan_for_nodes(suite: Suite, nodes: int, accept: Callable[[Case], bool] | None = None) -> list[PlannedRun]:
    """The runs of cases on exactly `nodes` hosts, repeats interleaved: harness cases, or those `accept` takes."""
    take = accept or (lambda c: c.impl == "harness")
    cases = [c for c in suite.cases if c.nodes == nodes and take(c)]
    most = max((c.repeats for c in cases), default=0)
    return [PlannedRun(c, r) for r in range(1, most + 1) for c in cases if r <= c.repeats]


def figure_of(log: Path) -> float:
    """The run's figure from its log; ParseError/MethodError when it gives none."""
    return compute_figure(parse_log(log, "kitlog"), HARNESS_METHOD).value


def is_done(run_dir: Path, run: PlannedRun) -> bool:
    log = run_dir / run.log_rel
    if not log.is_file():
        return False
    try:
        figure_of(log)
    except (ParseError, MethodError):
        return False
    return True


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def archive_log(run_dir: Path, log: Path) -> Path:
    """Move an earlier failed/interrupted log under attempts/, keeping every earlier one."""
    rel = log.relative_to(run_dir / "logs")
    n = 1
    while (target := run_dir / "attempts" / rel.with_name(f"{rel.name}.{n}")).exists():
        n += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    log.replace(target)
    return target


class LocalRunner:
    """Starts one harness run on this host as its own process group; kills the whole group on timeout/Ctrl-C.

    With an image (runtime docker) each run is one `docker run` of that image; the run directory is mounted
    at the same path, the data read-only, and every container of the run is removed after a timeout or Ctrl-C.
    """

    def __init__(self, run_dir: Path, python: str = sys.executable, threads_per_host: int | None = None,
                 train_list: str | None = None, images: dict[str, str] | None = None):
        self.run_dir = Path(run_dir).resolve()
        self.python = python
        self.threads_per_host = threads_per_host or cpu_count()
        self.train_list = train_list
        self.images = images or {}  # framework -> image reference (runtime docker); empty: native

    def command(self, run: PlannedRun, hardware: str) -> Command:
        case = run.case
        if case.impl == "reference":
            return self.reference_command(run, hardware)
        threads = max(1, self.threads_per_host // case.gpus_per_node) if hardware == "cpu" else None
        placement = Placement(master_port=free_port(), socket_ifname="lo" if case.processes > 1 else None)
        launcher_dir = self.run_dir / "launcher" / run.folder
        image = self.images.get(case.framework)
        if self.images and image is None:
            raise BenchError(f"case {case.key}: no image for framework {case.framework}")
        inner = build_command(
            case,
            placement,
            python="python" if image else self.python,
            harness=IMAGE_HARNESS if image else HARNESS,
            threads=threads,
            data_list=self.train_list,
            device="cpu" if hardware == "cpu" else "gpu",
            launcher_log_dir=str(launcher_dir) if case.processes > 1 else None,
        )
        if not image:
            return inner
        mounts = [Mount(str(self.run_dir), str(self.run_dir))]
        if self.train_list:
            data = str(Path(self.train_list).parent)
            mounts.append(Mount(data, data, read_only=True))
        inner = Command(inner.argv, {**inner.env, "HOME": "/tmp"})
        return docker_command(inner, DockerRun(
            image=image, run_id=self.run_dir.name, case_key=case.key,
            name=container_name(self.run_dir.name, case.key, run.repeat, "local"),
            gpus=case.gpus_per_node if hardware == "gpu" else 0, shm_size="2g", mounts=tuple(mounts),
            user=f"{os.getuid()}:{os.getgid()}", workdir=str(self.run_dir), memlock_unlimited=hardware == "gpu"))

    def reference_command(self, run: PlannedRun, hardware: str) -> Command:
        """The published program (kit.reference) through scripts/reference/launch.py, which records
        <log stem>.cmd.json beside the log; in the pinned image (its model code, scripts/ mounted) or here."""
        case = run.case
        image = self.images.get(case.framework)
        if self.images and image is None:
            raise BenchError(f"case {case.key}: no image for framework {case.framework}")
        cluster = reference.Cluster(port=free_port())
        scripts = reference.SCRIPTS_DIR if image else str(refrun.SCRIPTS)
        ref = reference.build(case.ref_job(), cluster, code_root=reference.CODE_ROOT if image else
                              refrun.model_code_root(), scripts_dir=scripts)
        record = str(refrun.sidecar_path(self.run_dir / run.log_rel))
        argv = refrun.launch_argv("python3" if image else self.python, scripts, ref, case.ref_job(), cluster, record)
        inner = Command(argv, {"PYTHONUNBUFFERED": "1", **ref.env})
        if not image:
            return inner
        mounts = (Mount(str(self.run_dir), str(self.run_dir)), Mount(str(refrun.SCRIPTS), scripts, read_only=True))
        return docker_command(Command(inner.argv, {**inner.env, "HOME": "/tmp"}), DockerRun(
            image=image, run_id=self.run_dir.name, case_key=case.key,
            name=container_name(self.run_dir.name, case.key, run.repeat, "local"),
            gpus=case.gpus_per_node if hardware == "gpu" else 0, mounts=mounts,
            user=f"{os.getuid()}:{os.getgid()}", workdir=str(self.run_dir), memlock_unlimited=hardware == "gpu"))

    def remove_containers(self) -> None:
        if self.images:
            subprocess.run(cleanup_command(self.run_dir.name), capture_output=True, timeout=60)

    def execute(self, run: PlannedRun, command: Command) -> RunOutcome:
        log = self.run_dir / run.log_rel
        log.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ | command.env
        start = time.monotonic()
        with open(log, "wb") as out:
            out.write(f"# kit bench: {command.shell()}\n".encode())
            out.flush()
            proc = subprocess.Popen(command.argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.run_dir, start_new_session=True)
            try:
                code = proc.wait(timeout=run.case.timeout_s)
            except subprocess.TimeoutExpired:
                stop_group(proc)
                self.remove_containers()
                return RunOutcome(run, "timeout", time.monotonic() - start,
                                  reason=f"no end after {run.case.timeout_s:g} s: killed (every process of the run)")
            except BaseException:  # Ctrl-C or any error here: leave no process (and no container) behind
                stop_group(proc)
                self.remove_containers()
                raise
        seconds = time.monotonic() - start
        try:
            value = figure_of(log)
        except (ParseError, MethodError) as exc:
            reason = exc.reason if isinstance(exc, ParseError) else str(exc)
            return RunOutcome(run, "failed", seconds, reason=f"exit {code}: {reason}", exit_code=code)
        if code != 0:
            return RunOutcome(run, "failed", seconds, reason=f"exit {code} after a complete log", exit_code=code)
        return RunOutcome(run, "ok", seconds, value=value, exit_code=0)


def stop_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the run's whole process tree, SIGKILL what is left after the grace period.

    The tree is collected first: launchers such as paddle.distributed.launch start their workers in
    sessions of their own, which a process-group kill alone would miss.
    """
    import psutil

    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    for member in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _gone, alive = psutil.wait_procs(tree, timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=5.0)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


@dataclass
class BenchResult:
    run_dir: Path
    outcomes: list[RunOutcome]
    skipped: list[tuple[Case, str]]
    report_files: list[Path]

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status not in ("ok", "done")]


Progress = Callable[[str, PlannedRun | None, RunOutcome | None, int, int], None]


def start(suite_ref: str | Path, runs_dir: Path) -> tuple[Path, Suite]:
    suite = load_suite(suite_ref)
    run_dir = new_run_dir(Path(runs_dir), suite.name)
    shutil.copyfile(suite.path, run_dir / "suite.yaml")
    return run_dir, load_suite(run_dir / "suite.yaml")


def resume(run_dir: Path) -> Suite:
    run_dir = Path(run_dir)
    if not (run_dir / "suite.yaml").is_file():
        raise BenchError(f"{run_dir}: not a kit bench run directory (no suite.yaml)")
    try:
        return load_suite(run_dir / "suite.yaml")
    except ConfigError as exc:
        raise BenchError(f"cannot resume: {exc}") from None


def check_host(suite: Suite) -> None:
    if suite.hardware == "gpu" and shutil.which("nvidia-smi") is None:
        raise BenchError(f"suite {suite.name} needs NVIDIA GPUs; this host has no nvidia-smi (try --suite local)")
    if not HARNESS.is_file():
        raise BenchError(f"the harness is missing: {HARNESS}")


SYNTHETIC_TREE = {"classes": 8, "images_per_class": 16, "size": 80}


def resolve_train_list(run_dir: Path, suite: Suite, train_list: str | Path | None) -> str | None:
    """The train_list.txt for `data: imagenet` cases: the one given, else (CPU suites) a synthetic JPEG tree."""
    if not any(c.data == "imagenet" for c in suite.cases):
        return None
    if train_list is not None:
        path = Path(train_list).resolve()
        if not path.is_file():
            raise BenchError(f"{train_list}: no such train list (make one with data_prep/make_train_list.py)")
        return str(path)
    if suite.hardware != "cpu":
        raise BenchError(f"suite {suite.name} reads ImageNet: give --train-list /path/to/train_list.txt")
    tree = run_dir.resolve() / "data" / "synthetic-imagenet"
    if not (tree / "train_list.txt").is_file():
        tool = REPO_ROOT / "data_prep" / "make_synthetic_imagenet.py"
        args = ["--classes", str(SYNTHETIC_TREE["classes"]), "--images-per-class",
                str(SYNTHETIC_TREE["images_per_class"]), "--size", str(SYNTHETIC_TREE["size"])]
        made = subprocess.run([sys.executable, str(tool), str(tree), *args], capture_output=True, text=True)
        if made.returncode != 0:
            raise BenchError(f"could not make the synthetic JPEG tree: {made.stderr.strip()}")
    return str(tree / "train_list.txt")


def run_bench(
    run_dir: Path,
    suite: Suite,
    progress: Progress | None = None,
    runner: LocalRunner | None = None,
    train_list: str | Path | None = None,
    images: dict[str, str] | None = None,
) -> BenchResult:
    run_dir = Path(run_dir)
    check_host(suite)
    runner = runner or LocalRunner(run_dir, train_list=resolve_train_list(run_dir, suite, train_list),
                                  images=images)
    runs, skipped = plan(suite)
    if not runs:
        raise BenchError(f"suite {suite.name}: no case can run on this host ({len(skipped)} need other runners/nodes)")
    meta = open_run_meta(run_dir, suite, host=host_description())
    meta["skipped_cases"] = [{"case": c.key, "reason": r} for c, r in skipped]
    capture_env(run_dir, meta)
    write_json(run_dir / "run.json", meta)
    outcomes: list[RunOutcome] = []
    todo = [r for r in runs if not is_done(run_dir, r)]
    for r in runs:
        if r not in todo:
            outcomes.append(RunOutcome(r, "done", 0.0, value=figure_of(run_dir / r.log_rel)))
    total = len(runs)
    finished = total - len(todo)
    for run in todo:
        clear_for_rerun(run_dir, run)
        command = runner.command(run, suite.hardware)
        if progress:
            progress("start", run, None, finished, total)
        outcome = runner.execute(run, command)
        outcomes.append(outcome)
        finished += 1
        record_run(run_dir, meta, run, outcome.status, outcome.value, outcome.seconds, outcome.reason,
                   command=command.shell(), argv=list(command.argv), env=dict(command.env))
        if progress:
            progress("end", run, outcome, finished, total)
    meta["finished"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    write_json(run_dir / "run.json", meta)
    files = write_report(run_dir, suite)
    return BenchResult(run_dir, outcomes, skipped, files)


def open_run_meta(run_dir: Path, suite: Suite, **fields) -> dict:
    """run.json as it is (resume), or a new one with the provenance every run directory carries."""
    path = Path(run_dir) / "run.json"
    if path.is_file():
        return json.loads(path.read_text())
    return {
        "schema_version": RUN_SCHEMA_VERSION,
        "kit_version": __version__,
        "suite": suite.name,
        "suite_sha256": hashlib.sha256((Path(run_dir) / "suite.yaml").read_bytes()).hexdigest(),
        "harness_sha256": _harness_digest(),
        "kit_commit": source_revision(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        **fields,
        "runs": {},
    }


def clear_for_rerun(run_dir: Path, run: PlannedRun) -> None:
    """An earlier (failed or interrupted) log of this run moves to attempts/ before the run starts again."""
    log = Path(run_dir) / run.log_rel
    if log.exists():
        archive_log(Path(run_dir), log)


def record_run(run_dir: Path, meta: dict, run: PlannedRun, status: str, value: float | None, seconds: float,
               reason: str, **extra) -> None:
    """One run's outcome into run.json, written at once so an interruption loses nothing."""
    meta["runs"][str(run.log_rel)] = {"case": run.case.key, "repeat": run.repeat, "status": status,
                                      "samples_per_sec": value, "wall_seconds": round(seconds, 3),
                                      "reason": reason, **extra}
    write_json(Path(run_dir) / "run.json", meta)


def capture_env(run_dir: Path, meta: dict) -> None:
    """This host's raw probe outputs + parsed capture under env/<host>/ (once per run; the bundle's source)."""
    from kit.hosts import probe as envprobe

    name = meta.get("host", {}).get("hostname") or socket.gethostname()
    if (Path(run_dir) / "env" / name / "capture.json").is_file():
        return
    try:
        envprobe.probe_local(name, Path(run_dir) / "env" / name)
    except (OSError, KitError) as exc:  # a probe that cannot be read must not stop the benchmark
        meta["env_error"] = f"{type(exc).__name__}: {exc}"


def source_revision() -> dict:
    """The kit's own git commit (and whether its tree had changes), or why it is unknown."""
    root = REPO_ROOT
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": None, "error": str(exc)}
    if head.returncode != 0:
        return {"commit": None, "error": (head.stderr.strip() or "not a git checkout")[:200]}
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def _harness_digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(HARNESS.parent.glob("*.py"))}


def compose_report(run_dir: Path, suite: Suite):
    """The run's report from its logs alone (what write_report writes; what `kit verify` recomputes)."""
    report = build_report(Path(run_dir) / "logs", HARNESS_METHOD)
    report.title = f"{suite.name} benchmark: {Path(run_dir).name}"
    report.settings = settings_section(Path(run_dir), suite) + references_section(report, suite)
    report.devices = "processes" if suite.hardware == "cpu" else "GPUs"
    return report


def write_report(run_dir: Path, suite: Suite) -> list[Path]:
    return write_outputs(compose_report(run_dir, suite), run_dir)


def references_section(report, suite: Suite) -> str:
    """Each measured case that carries a published reference: median vs (value, lower, upper)."""
    by_key = {c.key: c for c in suite.cases if c.reference}
    rows = []
    for group in report.groups:
        for case in group.cases:
            key = group.key.case_key(case.name)
            ref = by_key[key].reference if key in by_key else None
            if ref is None:
                continue
            low, high = ref.bounds()
            verdict = "within" if ref.holds(case.median) else "OUTSIDE"
            rows.append(f"| {key} | {case.median:.2f} | {ref.value:g} {ref.unit} | "
                        f"{'' if low is None else f'{low:.2f}'} .. {'' if high is None else f'{high:.2f}'} | "
                        f"{case.median / ref.value - 1:+.1%} | {verdict} | {ref.source} |")
    if not rows:
        return ""
    head = ["", "### Against published references", "",
            "| case | median | reference | bounds | difference | verdict | source |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    return "\n".join(head + rows) + "\n"


def _run_starts(run_dir: Path) -> list[dict]:
    found = (read_run_start(log) for log in sorted((run_dir / "logs").rglob("*.log")))
    return [start for start in found if start]


def settings_section(run_dir: Path, suite: Suite) -> str:
    """What was run, on what: the lines a reader needs before trusting the tables."""
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    host = meta.get("host", {})
    starts = _run_starts(run_dir)
    lines = [f"Suite `{suite.name}` ({suite.description})."]
    if host:
        lines.append(f"Host: {host.get('hostname')}, {host.get('cpu')}, {host.get('cores')} cores, "
                     f"{host.get('memory_gib')} GiB, {host.get('os')}, Python {host.get('python')}.")
    versions = sorted({f"{s.get('framework')} {s.get('framework_version')}" for s in starts})
    if versions:
        lines.append("Frameworks: " + ", ".join(versions) + ".")
    shapes = sorted({(s.get("model"), s.get("image_size"), s.get("num_classes"), s.get("warmup_steps"),
                      s.get("measure_steps"), s.get("data"), s.get("device"), s.get("threads"), s.get("ranks"))
                     for s in starts}, key=str)
    if shapes:
        lines.append("\n| model | image size | classes | warm-up steps | measured steps | data | device | "
                     "threads/process | processes |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        lines += ["| " + " | ".join(str(v) for v in shape) + " |" for shape in shapes]
        lines.append("")
    repeats = sorted({c.repeats for c in suite.cases})
    lines.append(f"Repeats per case: {'/'.join(map(str, repeats))} (interleaved); figure per run: global batch x "
                 "measured steps / sum of step seconds (the harness's timing rule); per case: median.")
    if suite.hardware == "cpu":
        lines.append("On a CPU, `<N>n<G>g` counts processes and they share this host's cores (threads/process "
                     "above): speedup compares one process on every core with G data-parallel processes on "
                     "cores/G each, so linear scaling is not expected; the gap is the data-parallel overhead.")
    if any(s.get("precision") == "amp" and not s.get("amp_effective") for s in starts):
        lines.append("**AMP was requested on a CPU: those runs are FP32** (AMP needs a GPU); their tables say amp "
                     "only because the suite asked for it.")
    skipped = meta.get("skipped_cases") or []
    if skipped:
        lines.append(f"Not run on this host: {len(skipped)} case(s) (other runners or several nodes), see run.json.")
    refs = [c for c in suite.cases if c.reference]
    if refs:
        lines.append(f"{len(refs)} case(s) carry a published reference (value, bounds) in suite.yaml.")
    return "\n".join(lines) + "\n"
