"""PURE: the seeds' own benchmark programs, launched as published: (case, place in the cluster) -> argv + env + cwd.

    impl = implementation("torch", "resnet50")             # ReferenceError names the combinations that exist
    cmd = build(RefJob("torch", "resnet50", "amp", 256, 8, 1), Cluster(rank=0, hosts=("10.0.0.1",)))
    cmd.argv, cmd.env, cmd.cwd                              # what the publisher ran, from where
    cmd.publisher_method, cmd.kit_method                    # their reduction (their figure) and the kit's

Each recipe (its program's module, kit/config/programs/) is the publisher's script with its flags, read where
the comments say; where the recorded logs (tests/test_reference.py checks them) and a script disagree, the log
wins. Model code is never vendored: it is checked out at the pinned commits (docker/pins.yaml) under CODE_ROOT in
the images, or under a host's `model_code` root, beside the small packages a program imports (Impl.packages: DLE
PyTorch's dllogger), which are put before the PYTHONPATH it inherits on its host. Where it is safe
(RefCommand.scratch) a program runs in a scratch folder outside the run's folder that mirrors its checkout folder,
so what it saves where it runs (checkpoints) never lands in the checkout or the run (scripts/reference/launch.py).
No process starts here.

Beside the catalogue (kit.config.programs) because two layers build the commands: the run's command builder
(kit.run.command) launches each program from here, and `kit verify` rebuilds each recorded command from here
(kit.audit.rules.programs), which imports nothing of kit.run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from kit.config.programs import (  # noqa: F401  (the catalogue, also read through this module)
    BERT_SEQUENCES_PER_STEP,
    BY_NAME,
    CODE_DIRS,
    CODE_ROOT,
    PLSC_PATCH,
    SCRIPTS_DIR,
    UNPINNED_CODE_DIRS,
    Cluster,
    Impl,
    ReferenceError,
    RefJob,
    check,
    combinations,
    implementation,
    layout_and_mode,
    program,
)
from kit.core.layout import RunLog
from kit.core.secrets import redact
from kit.results.extract import Method

ONE_HOST = Cluster()  # rank 0 of one node at 127.0.0.1


@dataclass(frozen=True)
class RefCommand:
    impl: Impl
    argv: list[str]  # empty: nothing starts on this host (rank 0's mpirun reaches it over ssh)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    publisher_method: Method | None = None
    kit_method: Method = Method()
    work_copy: str | None = None  # run from a patched copy of cwd (PLSC), see scripts/reference/launch.py
    patch: str | None = None  # relative to scripts/
    add: tuple[str, ...] = ()  # files (relative to scripts/) copied into the work copy
    note: str = ""
    outputs: tuple[str, ...] = ()  # files the program writes besides its output (where it runs, or absolute)
    data_dir: str | None = None  # what it reads; None: its publisher's default path, or its synthetic mode
    code_root: str = CODE_ROOT  # where it found the checkouts, and the kit's scripts (for the record)
    scripts_dir: str = SCRIPTS_DIR
    pythonpath: tuple[str, ...] = ()  # put before the PYTHONPATH the program inherits on its host (Impl.packages)
    scratch: bool = False  # run in a scratch mirror of cwd outside the run's folder, removed after the run
    checkout: str = ""  # the top folder of cwd's git checkout (git's safe.directory names it)

    def shell(self) -> str:
        """One line to paste into a shell: cd, environment, command (every argument quoted)."""
        if not self.argv:
            return f"# {self.note}"
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        if self.pythonpath:
            env.append(f"PYTHONPATH={shlex.quote(':'.join(self.pythonpath))}${{PYTHONPATH:+:$PYTHONPATH}}")
        where = f"cd {shlex.quote(self.work_copy or self.cwd)} && " if self.cwd else ""
        return where + "".join(f"{e} " for e in env) + shlex.join(self.argv)


def listing_file(key: str) -> str:
    """The pinned tree's listing of a model_code key or package folder, relative to scripts/ (code_state.py: a copy
    that is no checkout is at the pin when its files are these)."""
    return f"reference/trees/{key}.txt"


def checkout_dir(root: str, impl: Impl) -> str:
    """The top folder of the program's git checkout under a model-code root (its code is `impl.subdir` inside)."""
    return "/".join(p for p in (root.rstrip("/"), impl.checkout) if p)


def runs_in_scratch(impl: Impl, argv: list[str], nodes: int) -> bool:
    """Whether the program may run in a scratch folder of its host (RefCommand.scratch): kit.config.programs
    Program.in_scratch."""
    return program(impl).in_scratch(argv, nodes)


def methods(impl: Impl, job: RefJob) -> tuple[Method | None, Method]:
    """(the publisher's reduction, the kit's): expected.yaml's rules per log, as the program's module states them."""
    return program(impl).methods(job)


def log_reduction(log: RunLog) -> tuple[Method, str] | None:
    """A published program's log (logs/<impl>/<model>/bz<B>/<N>n<G>g/...): (the reduction its figure takes — the
    publisher's where one is published, else the kit's — and its log format). None for any other log.
    Decided by the recipe in this kit, never by anything written beside the log."""
    impl = BY_NAME.get(log.group.framework)
    if impl is None or impl.model != log.group.model:
        return None
    publisher, kit = methods(impl, RefJob(impl.framework, impl.model, log.group.precision, log.group.batch,
                                          log.gpus_per_node, log.nodes))
    return publisher or kit, impl.log_format


def build(job: RefJob, cluster: Cluster = ONE_HOST, *, code_root: str | None = None, data_dir: str | None = None,
          scripts_dir: str = SCRIPTS_DIR, recipe_only: bool = False) -> RefCommand:
    """recipe_only: the command of a program no image checks out yet (kit.config.programs.UNPINNED_CODE_DIRS)."""
    check(job, recipe_only)
    impl = implementation(job.framework, job.model)
    if len(cluster.hosts) != job.nodes or not 0 <= cluster.rank < job.nodes:
        raise ReferenceError(f"{job.nodes} node(s) need as many host addresses and a rank below that; got rank "
                             f"{cluster.rank} of {len(cluster.hosts)} host(s)")
    root = (code_root or CODE_ROOT).rstrip("/")
    checkout = checkout_dir(root, impl)
    cwd = "/".join(p for p in (checkout, impl.subdir) if p)
    prog = program(impl)
    argv, env = prog.recipe(job, cluster, data_dir, scripts_dir)
    if job.device == "cpu" and argv:
        argv, env = prog.on_cpu(argv, env, job)
    copy = prog.work_copy
    work_copy, patch, add = (copy.folder, copy.patch, copy.add) if copy else (None, None, ())
    if cluster.nic and argv:
        env = {**env, "NCCL_SOCKET_IFNAME": cluster.nic}
    # its small dependencies from checkouts beside its code (nothing installed), before what its host's Python finds
    pythonpath = tuple(f"{root}/{p.folder}" for p in impl.packages) if argv else ()
    note = "" if argv else f"nothing to start here: rank 0's mpirun starts this host's {job.gpus_per_node} ranks"
    if job.data == "synthetic" and argv:
        argv, data_dir = synthetic(impl, argv), None
    publisher, kit = methods(impl, job)
    return RefCommand(impl, argv, env, cwd, publisher, kit, work_copy, patch, add, note, outputs(impl, argv),
                      data_dir, code_root or CODE_ROOT, scripts_dir, pythonpath,
                      bool(argv) and runs_in_scratch(impl, argv, job.nodes), checkout)


def data_path(root: str | None, job: RefJob) -> str | None:
    """Where the job's program reads its data under a host's data root: <root>/<its format>/ (data_prep), or
    None (synthetic, a program whose data the kit does not make, or no root: the publisher's default path)."""
    impl = implementation(job.framework, job.model)
    if not root or job.data != "imagenet" or not impl.data_format:
        return None
    return f"{root.rstrip('/')}/{impl.data_format}"


def synthetic(impl: Impl, argv: list[str]) -> list[str]:
    """The published argv switched to the program's own synthetic-data mode (Impl.synthetic)."""
    return program(impl).synthetic(argv)


def outputs(impl: Impl, argv: list[str]) -> tuple[str, ...]:
    """The files a program's flags make it write besides its output (Program.output_flags: DLE's DLLogger raport,
    its results folder, ...). Paddle's launcher logs go to PADDLE_LOG_DIR (kit.run.command); PLSC runs in a work
    copy inside the run's folder."""
    found = []
    for flag in program(impl).output_flags:
        found += [value for key, value in zip(argv, argv[1:], strict=False) if key == flag]
        found += [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")]
    return tuple(found)


def record(cmd: RefCommand, job: RefJob, cluster: Cluster) -> dict:
    """The static part of the sidecar <log>.cmd.json (scripts/reference/launch.py adds what it finds at run time)."""
    return {
        "schema_version": 1,
        "impl": cmd.impl.name, "title": cmd.impl.title, "source": cmd.impl.source,
        "framework": job.framework, "model": job.model, "precision": job.precision, "batch_size": job.batch_size,
        "nodes": job.nodes, "gpus_per_node": job.gpus_per_node, "rank": cluster.rank,
        "device": job.device, "image_size": job.image_size,
        "cwd": cmd.cwd, "argv": cmd.argv, "env": redact(cmd.env), "pythonpath": list(cmd.pythonpath),
        "command": cmd.shell(),
        "log_format": cmd.impl.log_format,
        "publisher_method": cmd.publisher_method.to_dict() if cmd.publisher_method else None,
        "kit_method": cmd.kit_method.to_dict(),
        "model_code": cmd.impl.code, "work_copy": cmd.work_copy, "patch": cmd.patch, "add": list(cmd.add),
        "data": {"mode": job.data, "format": None if job.data == "synthetic" else cmd.impl.data_format,
                 "path": cmd.data_dir, "synthetic": cmd.impl.synthetic if job.data == "synthetic" else None},
        "cluster": {"hosts": list(cluster.hosts), "port": cluster.port, "nic": cluster.nic},
        "code_root": cmd.code_root, "scripts_dir": cmd.scripts_dir,
    }


def rebuild(meta: dict) -> RefCommand:
    """What the recipe builds for the job and placement a sidecar records (kit verify compares the two);
    ReferenceError/KeyError/TypeError/ValueError when the record does not name a job this kit knows."""
    data = meta.get("data") or {}
    size = meta.get("image_size")  # records before the CPU recipes have neither: a GPU job
    job = RefJob(meta["framework"], meta["model"], meta["precision"], int(meta["batch_size"]),
                 int(meta["gpus_per_node"]), int(meta["nodes"]), data.get("mode"), str(meta.get("device", "gpu")),
                 None if size is None else int(size))
    place = meta["cluster"]
    cluster = Cluster(int(meta["rank"]), tuple(str(h) for h in place["hosts"]), int(place["port"]), place.get("nic"))
    return build(job, cluster, code_root=str(meta["code_root"]), data_dir=data.get("path"),
                 scripts_dir=str(meta["scripts_dir"]))
