"""`kit bench --dry-run`: every case of a suite (harness and reference) with its command on each host; starts nothing.

One-node cases show the command `kit bench` runs on this host; n-node cases show one line per host and
rank: the inventory's first n hosts (--hosts-file, $KIT_HOSTS_FILE or hosts.yaml when present), else
placeholders node1..nodeN whose addresses read <node1> (the master) ... <nodeN>. Reference cases show the
publisher's command line (cd, environment, argv); the kit runs it under scripts/reference/launch.py,
which first records it in <log stem>.cmd.json beside the log. Ports are picked per run (29500 shown).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from kit.config.hosts import HostConfig
from kit.config.suites import Case, Suite
from kit.run import bench, reference, refrun
from kit.run.command import IMAGE_HARNESS, Placement, build_command

PORT = 29500


def placeholder_hosts(count: int) -> list[HostConfig]:
    return [HostConfig(name=f"node{i}", address=f"<node{i}>", user="-", gpus=8) for i in range(1, count + 1)]


def _method(method) -> str:
    if method is None:
        return "none published"
    shown = {"skip": 0, "count": None, "reduce": None, "scale": 1.0, "round": None, "sig": None}
    data = {k: v for k, v in method.to_dict().items() if k in shown and v != shown[k]}
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in data.items())


def _header(case: Case, done: list[int]) -> list[str]:
    impl = case.impl == "reference" and reference.implementation(case.framework, case.model)
    what = f"reference: {impl.title}" if impl else "harness"
    line = f"{case.key} [{what}] x{case.repeats} -> logs/{case.log_path(1).as_posix()} (repeat 1)"
    out = [line + (f" (done: repeats {', '.join(map(str, done))})" if done else "")]
    if impl:
        pub, kit = reference.methods(impl, case.ref_job())
        out.append(f"  methods: publisher's {_method(pub)}; kit's {_method(kit)}")
    return out


def _remote_harness(case: Case, hosts: list[HostConfig], hardware: str, run_dir: Path) -> list[str]:
    from kit.run.multinode import Job  # its harness directory on a host (content-addressed)

    job = Job(None, hosts, None, run_dir)
    lines = []
    for rank, host in enumerate(hosts):
        docker = host.runtime == "docker"
        cmd = build_command(case, Placement(len(hosts), rank, hosts[0].address, PORT, host.nic, host.address),
                            python="python" if docker else host.python,
                            harness=IMAGE_HARNESS if docker else posixpath.join(job.harness_dir(host), "train.py"),
                            device="cpu" if hardware == "cpu" else "gpu")
        lines.append(f"  {host.name}{' (in the image)' if docker else ''}: {cmd.shell()}")
    return lines


def _reference(case: Case, hosts: list[HostConfig] | None, model_code: str, in_image: bool) -> list[str]:
    if hosts is None:  # this host
        root = reference.CODE_ROOT if in_image else model_code
        cmd = reference.build(case.ref_job(), reference.Cluster(port=PORT), code_root=root,
                              scripts_dir=reference.SCRIPTS_DIR if in_image else str(refrun.SCRIPTS))
        return [f"  local{' (in the image)' if in_image else ''}: {cmd.shell()}", *_copy_note(cmd)]
    lines = []
    addresses = tuple(h.address for h in hosts)
    for rank, host in enumerate(hosts):
        docker = host.runtime == "docker"
        root = reference.CODE_ROOT if docker else host.model_code or reference.CODE_ROOT
        scripts = reference.SCRIPTS_DIR if docker else posixpath.join(host.work_dir, "kit-scripts")
        cmd = reference.build(case.ref_job(), reference.Cluster(rank, addresses, PORT, host.nic), code_root=root,
                              scripts_dir=scripts)
        lines.append(f"  {host.name}{' (in the image)' if docker else ''}: {cmd.shell()}")
    return lines + _copy_note(cmd)


def _copy_note(cmd: reference.RefCommand) -> list[str]:
    if not cmd.work_copy:
        return []
    extra = " and ".join([f"scripts/{cmd.patch} applied"] * bool(cmd.patch) + [f"scripts/{a} added" for a in cmd.add])
    return [f"  ({cmd.work_copy}/: a fresh copy of {cmd.cwd} in the run's directory, {extra})"]


def render(suite: Suite, runner: bench.LocalRunner, hosts: list[HostConfig] | None, hosts_source: str,
           run_dir: Path | None = None, model_code: str | None = None) -> list[str]:
    """The dry-run text, one string per line."""
    root = model_code or refrun.model_code_root()
    _runs, skipped = bench.plan(suite, root)
    why = {id(c): reason for c, reason in skipped}
    most = max(c.nodes for c in suite.cases)
    placeholders = hosts is None
    inventory = hosts if hosts is not None else placeholder_hosts(most)
    lines = [f"kit bench --dry-run: suite {suite.name}, {len(suite.cases)} cases; nothing is started."]
    if most > 1:
        lines.append(f"n-node cases: hosts {hosts_source}" if not placeholders else
                     f"n-node cases: node1..node{most} are placeholders (no hosts file): <node1> stands for the "
                     "master's address, <nodeK> for host K's; give --hosts-file for the real lines")
    if any(c.impl == "reference" for c in suite.cases):
        lines.append("reference cases: the publisher's command; the kit starts it through scripts/reference/launch.py, "
                     "which records <log stem>.cmd.json beside the log. Ports are picked per run (29500 shown).")
    for case in suite.cases:
        done = [r for r in range(1, case.repeats + 1)
                if run_dir is not None and bench.is_done(run_dir, bench.PlannedRun(case, r))]
        lines += _header(case, done)
        if case.nodes == 1 and case.impl == "harness":
            lines.append(f"  local: {runner.command(bench.PlannedRun(case, 1), suite.hardware).shell()}")
        elif case.nodes == 1:
            lines += _reference(case, None, root, bool(runner.images))
        elif len(inventory) < case.nodes:
            lines.append(f"  needs {case.nodes} hosts; the inventory has {len(inventory)}")
        elif case.impl == "harness":
            lines += _remote_harness(case, inventory[:case.nodes], suite.hardware, runner.run_dir)
        else:
            lines += _reference(case, inventory[:case.nodes], root, False)
        if id(case) in why:
            lines.append(f"  not run by `kit bench` on this host: {why[id(case)]}")
    return lines
