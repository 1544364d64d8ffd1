"""Fabric tasks: thin wrappers wiring the kit's stages together (re-exported by fabfile.py).

Each task only builds a `kit` command line and runs it in-process, so `fab report ...` and
`kit report ...` are the same code path. A non-zero exit code becomes `invoke.exceptions.Exit`
so `fab` exits with it. `kit.cli` is imported lazily: `fab --list` must work even when a
stage's optional dependencies are broken.
"""

from __future__ import annotations

from fabric import task
from invoke.exceptions import Exit

from kit.config import settings

# `fab -H a,b task` calls a task once per host, one after the other. A multi-host task only
# records its host here; its post-task (which Fabric runs once, after every host's call)
# starts the one job on all recorded hosts at once.
_REGISTERED: dict[str, list[tuple[str, dict]]] = {}

__all__ = [
    "bench",
    "check_env",
    "stage_data",
    "run_single",
    "run_multinode",
    "sweep",
    "cluster",
    "gather_logs",
    "report",
    "crosscheck",
    "extract",
    "push_images",
    "verify_images",
]


def _run_kit(argv: list[str]) -> None:
    import kit.cli

    rc = kit.cli.main(argv) or 0
    if rc != 0:
        raise Exit(code=rc)


@task(help={"suite": "built-in suite name or suite YAML (default: local)", "resume": "run directory to finish"})
def bench(c, suite="local", resume=None):
    """Run a suite on this host with the kit's harness, then report (kit bench)."""
    _run_kit(["bench", "--resume", resume] if resume else ["bench", "--suite", suite])


@task(help={"run-dir": "run directory (DLPerf layout)", "out": "output directory"})
def report(c, run_dir, out=None):
    """Report a run directory (kit report)."""
    argv = ["report", run_dir]
    if out:
        argv += ["--out", out]
    _run_kit(argv)


@task(help={"claims": "claims YAML (published figures + logs)"})
def crosscheck(c, claims):
    """Re-derive published figures (kit crosscheck)."""
    _run_kit(["crosscheck", claims])


@task(help={"log": "training log file", "fmt": "log format, or auto to detect"})
def extract(c, log, fmt="auto"):
    """Extract a log's throughput (kit extract)."""
    _run_kit(["extract", log, "--format", fmt])


def _hosts_file(option: str | None) -> str | None:
    """--hosts-file to pass on: the task's option, else $KIT_HOSTS_FILE, else None (kit's own default)."""
    path = settings.configured_hosts_file(option)
    return None if path is None else str(path)


def _register(name: str, c, options: dict) -> None:
    _REGISTERED.setdefault(name, []).append((_host_of(c, name), options))


def _host_of(c, task_name: str) -> str:
    host = getattr(c, "host", None)
    if not host:
        raise Exit(f"{task_name}: give the hosts with -H, e.g. fab -H node1,node2 {task_name}", code=2)
    return host


def _run_registered(name: str, command: str, positional: tuple[str, ...] = ()) -> None:
    """Run `kit COMMAND --hosts <every registered host>` once, with the options as flags (True: bare flag)
    and the `positional` options as arguments."""
    calls = _REGISTERED.pop(name, [])
    if not calls:
        return
    argv = [*command.split(), "--hosts", ",".join(h for h, _ in calls)]
    options = dict(calls[0][1])
    tail = [str(options.pop(key)) for key in positional]
    for key, value in options.items():
        if value is True:
            argv.append(f"--{key.replace('_', '-')}")
        elif value:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    _run_kit(argv + tail)


# the flags every job over -H hosts takes (run_multinode, sweep)
_JOB_HELP = {
    "hosts-file": "inventory (default: $KIT_HOSTS_FILE or hosts.yaml)",
    "runs-dir": "where the run directory goes (default runs/)",
    "resume": "run directory to finish",
}


def _job_options(suite, hosts_file, runs_dir, resume, **more) -> dict:
    """A job's flags as kit takes them; --resume: the run's own suite."""
    return {"suite": None if resume else suite, "hosts_file": _hosts_file(hosts_file), "runs_dir": runs_dir,
            "resume": resume, **more}


@task
def _multinode_job(c):
    _run_registered("run_multinode", "multinode")


@task(
    post=[_multinode_job],
    help={
        "suite": "suite name or YAML (its cases with as many nodes as -H hosts)",
        **_JOB_HELP,
        "on-failure": "continue (default) or stop after a failed case",
        "force": "run even if check_env finds busy GPUs or mismatched hosts, or model code is not at its pin",
    },
)
def run_multinode(c, suite="v100", hosts_file=None, runs_dir="runs", resume=None, on_failure="continue",
                  force=False):
    """Start one job on ALL -H hosts at once (ranks, master, launcher flags), gather logs, report."""
    _register("run_multinode", c, _job_options(suite, hosts_file, runs_dir, resume, on_failure=on_failure,
                                               force=force))


@task
def _sweep_job(c):
    _run_registered("sweep", "sweep")


@task(
    post=[_sweep_job],
    help={
        "suite": "suite name or YAML (its one-node cases run on every -H host)",
        **_JOB_HELP,
        "force": "run on a host even where check_env refuses it, or its model code is not at its pin",
    },
)
def sweep(c, suite="v100", hosts_file=None, runs_dir="runs", resume=None, force=False):
    """Every -H host's own runs of the suite's one-node cases, all at once (SSH hosts only); the fleet table.

    kit sweep over SSH; for a Slurm partition's nodes run kit sweep --scheduler slurm [--nodes n1,n2] instead."""
    _register("sweep", c, _job_options(suite, hosts_file, runs_dir, resume, force=force))


@task
def _check_env_job(c):
    _run_registered("check_env", "check-env")


@task(
    post=[_check_env_job],
    help={
        "hosts-file": "inventory (default: $KIT_HOSTS_FILE or hosts.yaml)",
        "runs-dir": "captures go to <runs-dir>/check-env-<time>/env/<host>/",
        "require-gpu": "a host without GPUs is a problem",
        "allow-busy": "do not refuse GPUs that already run processes",
    },
)
def check_env(c, hosts_file=None, runs_dir="runs", require_gpu=False, allow_busy=False):
    """Capture GPUs, topology, CPU, OS, Docker, IB on ALL -H hosts at once; compare; refuse busy GPUs."""
    _register("check_env", c, {"hosts_file": _hosts_file(hosts_file), "runs_dir": runs_dir,
                               "require_gpu": require_gpu, "allow_busy": allow_busy})


@task(help={"suite": "suite name or YAML (its 1-node cases)", "hosts-file": "inventory (default: hosts.yaml)",
            "runs-dir": "where the run directory goes", "resume": "run directory to finish",
            "force": "run even if check_env finds a busy GPU, or model code is not at its pin"})
def run_single(c, suite="v100", hosts_file=None, runs_dir="runs", resume=None, force=False):
    """Run a suite's single-node cases on the one -H host."""
    argv = ["multinode", "--hosts", _host_of(c, "run_single"), "--runs-dir", runs_dir]
    argv += ["--resume", resume] if resume else ["--suite", suite]
    hosts_file = _hosts_file(hosts_file)
    if hosts_file:
        argv += ["--hosts-file", hosts_file]
    if force:
        argv.append("--force")
    _run_kit(argv)


@task(help={"suite": "suite name or YAML (default: v100)", "scheduler": "ssh (hosts.yaml's hosts) or slurm "
            "(hosts.yaml's slurm: section)", "hosts-file": "inventory (default: hosts.yaml)",
            "runs-dir": "where the run directory goes", "resume": "run directory to finish",
            "dry-run": "print the plan and every command; start nothing", "force": "run what check_env or the pins "
            "would refuse (run.json records it)"})
def cluster(c, suite="v100", scheduler="ssh", hosts_file=None, runs_dir="runs", resume=None, dry_run=False,
            force=False):
    """Run a whole suite on the inventory's hosts or through Slurm (kit cluster)."""
    argv = ["cluster", "--scheduler", scheduler, "--runs-dir", runs_dir]
    argv += ["--resume", resume] if resume else ["--suite", suite]
    hosts_file = _hosts_file(hosts_file)
    if hosts_file:
        argv += ["--hosts-file", hosts_file]
    argv += ["--dry-run"] * dry_run + ["--force"] * force
    _run_kit(argv)


@task
def _gather_job(c):
    _run_registered("gather_logs", "gather-logs")


@task(post=[_gather_job], help={"run-dir": "the run directory (runs/<id>)", "hosts-file": "inventory"})
def gather_logs(c, run_dir, hosts_file=None):
    """Fetch ALL -H hosts' raw logs of a run again (rank 0 = first host) and re-report."""
    _register("gather_logs", c, {"run_dir": run_dir, "hosts_file": _hosts_file(hosts_file)})


@task
def _stage_job(c):
    _run_registered("stage_data", "stage-data")


@task(post=[_stage_job], help={"format": "paddle, folder, tfrecord or recordio: stage a data_prep/convert.py "
                                         "output to <data_dir>/<format>/ (with --source)",
                               "source": "the local convert.py output directory of that format",
                               "delete": "remove files the source lacks from <data_dir>/<format>/",
                               "train-list": "list mode: local train_list.txt", "images": "list mode: also rsync "
                               "the JPEG tree", "hosts-file": "inventory (default: $KIT_HOSTS_FILE or hosts.yaml)"})
def stage_data(c, format=None, source=None, delete=False, train_list=None, images=False, hosts_file=None):
    """Stage a dataset on ALL -H hosts at once (a format to <data_dir>/<format>/, or train_list.txt [+ images]);
    verify counts and sha256 on each, in parallel."""
    _register("stage_data", c, {"format": format, "source": source, "delete": delete, "train_list": train_list,
                                "images": images, "hosts_file": _hosts_file(hosts_file)})


@task
def _push_images_job(c):
    _run_registered("push_images", "images deliver", ("image",))


@task(
    post=[_push_images_job],
    help={
        "image": "cpu, paddle/v100, ... (built here if missing) or a reference",
        "registry": "push to this registry (host:port) and let every host pull; none: docker save | ssh docker load",
        "pull-registry": "the registry's address as the hosts reach it (default: --registry)",
        "hosts-file": "inventory (default: $KIT_HOSTS_FILE or hosts.yaml)",
        "run-dir": "record the image IDs of every host in <run-dir>/images.json",
    },
)
def push_images(c, image="cpu", registry=None, pull_registry=None, hosts_file=None, run_dir=None):
    """Put the image on ALL -H hosts at once (hosts holding the same image ID are skipped), then verify."""
    _register("push_images", c, {"image": image, "registry": registry, "pull_registry": pull_registry,
                                 "hosts_file": _hosts_file(hosts_file), "run_dir": run_dir})


@task
def _verify_images_job(c):
    _run_registered("verify_images", "images verify", ("image",))


@task(post=[_verify_images_job], help={"image": "cpu, paddle/v100, ... or a reference",
                                       "hosts-file": "inventory", "run-dir": "record into <run-dir>/images.json"})
def verify_images(c, image="cpu", hosts_file=None, run_dir=None):
    """Check that ALL -H hosts hold the very same image ID as this machine; exit non-zero naming those that don't."""
    _register("verify_images", c, {"image": image, "hosts_file": _hosts_file(hosts_file),
                                   "run_dir": run_dir})
