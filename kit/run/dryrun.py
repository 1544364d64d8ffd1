"""`kit bench --dry-run`: every case of a suite (harness and reference) with its command on each host; starts nothing.

One-node cases show the command `kit bench` runs on this host; n-node cases show one line per host and
rank: the inventory's first n hosts (--hosts-file, $KIT_HOSTS_FILE or hosts.yaml when present), else
placeholders node1..nodeN whose addresses read <node1> (the master) ... <nodeN>. Reference cases show the
publisher's command line (cd, environment, argv); the kit runs it under scripts/reference/launch.py,
which first records it in <log stem>.cmd.json beside the log. Ports are picked per run (29500 shown).
Every line comes from the one command builder (kit.run.command.command_for) the runners use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kit.config import reference
from kit.config.cases import Case, Suite
from kit.config.inventory import HostConfig
from kit.config.runtimes import runtime
from kit.images.parity import cudnn_of, parity_warning
from kit.run import records
from kit.run.command import RunCommand, command_for
from kit.run.estimate import estimate
from kit.run.local import LocalRunner
from kit.run.plan import PlannedRun, cluster_plan, plan, unfit
from kit.run.ssh import ssh_site

PORT = 29500


def placeholder_hosts(count: int) -> list[HostConfig]:
    return [HostConfig(name=f"node{i}", address=f"<node{i}>", user="-", gpus=8) for i in range(1, count + 1)]


def _method(method) -> str:
    if method is None:
        return "none published"
    shown = {"skip": 0, "count": None, "reduce": None, "scale": 1.0, "round": None, "sig": None, "trim": 0,
             "trunc": None}
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


def _copy_note(cmd: reference.RefCommand) -> list[str]:
    if not cmd.work_copy:
        return []
    extra = " and ".join([f"scripts/{cmd.patch} applied"] * bool(cmd.patch) + [f"scripts/{a} added" for a in cmd.add])
    return [f"  ({cmd.work_copy}/: a fresh copy of {cmd.cwd} in the run's directory, {extra})"]


def _shown(cmd: RunCommand, local: bool) -> str:
    """A publisher's command as published (cd, env, argv); the harness as started (locally: with its container)."""
    if cmd.reference is not None:
        return cmd.reference.shell()
    return (cmd.launched if local else cmd.program).shell()


def _local(case: Case, runner: LocalRunner, hardware: str) -> list[str]:
    cmd = runner.command(PlannedRun(case, 1), hardware, port=PORT)
    boxed = case.impl == "reference" and bool(runner.images)
    lines = [f"  local{' (in the image)' if boxed else ''}: {_shown(cmd, True)}"]
    return lines + (_copy_note(cmd.reference) if cmd.reference else [])


def _remote(case: Case, hosts: list[HostConfig], hardware: str) -> list[str]:
    sites = [ssh_site(h, None, case.log_path(1).name, None, case.impl == "reference") for h in hosts]
    lines, cmd = [], None
    for rank, host in enumerate(hosts):
        cmd = command_for(case, 1, rank, sites, PORT, hardware)
        lines.append(f"  {host.name}{' (in the image)' if runtime(host.runtime) else ''}: {_shown(cmd, False)}")
    return lines + (_copy_note(cmd.reference) if cmd and cmd.reference else [])


def render(suite: Suite, runner: LocalRunner, hosts: list[HostConfig] | None, hosts_source: str,
           run_dir: Path | None = None) -> list[str]:
    """The dry-run text, one string per line."""
    _runs, skipped = plan(suite, runner.model_code)
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
                if run_dir is not None and records.is_done(run_dir, PlannedRun(case, r))]
        lines += _header(case, done)
        if case.nodes == 1:
            lines += _local(case, runner, suite.hardware)
        elif len(inventory) < case.nodes:
            lines.append(f"  needs {case.nodes} hosts; the inventory has {len(inventory)}")
        else:
            lines += _remote(case, inventory[:case.nodes], suite.hardware)
        if id(case) in why:
            lines.append(f"  not run by `kit bench` on this host: {why[id(case)]}")
    return lines


def render_cluster(suite: Suite, hosts: list[HostConfig], hosts_source: str, run_dir: Path | None = None,
                   why_not: Callable[[Case, list[HostConfig]], str | None] | None = None,
                   intro: tuple[str, ...] = ()) -> list[str]:
    """`kit cluster --dry-run`: the host groups, then every case with its exact command on every host of its
    group (harness and published programs), and each case that will not run with the reason. A scheduler
    gives its own `why_not` (default: kit.run.plan.unfit) and `intro` lines (how it starts the groups)."""
    why_not = why_not or (lambda case, group: unfit(case, group, suite.hardware, suite))
    groups, unplaced = cluster_plan(suite, [h.name for h in hosts])
    by_nodes = {nodes: hosts[:nodes] for _names, nodes in groups}
    lines = [f"kit cluster --dry-run: suite {suite.name} ({suite.hardware}), {len(suite.cases)} cases on "
             f"{len(hosts)} host(s) {hosts_source}; nothing is started.", *intro, "host groups:"]
    lines += [f"  {nodes}-node cases: {', '.join(f'{h.name} ({h.address}, {h.runtime}, {h.gpus} GPUs)' for h in group)}"
              for nodes, group in sorted(by_nodes.items())]
    lines += [f"  not run: {why}" for why in unplaced]
    if warning := parity_warning(cudnn_of(suite)):
        lines.append(f"warning: {warning}")
    if any(c.impl == "reference" for c in suite.cases):
        lines.append("reference cases: the publisher's command; the kit starts it through scripts/reference/launch.py "
                     "(staged to <work_dir>/kit-scripts), which records <log stem>.cmd.json. Ports are picked per run "
                     f"({PORT} shown).")
    skipped = 0
    for case in suite.cases:
        done = [r for r in range(1, case.repeats + 1)
                if run_dir is not None and records.is_done(run_dir, PlannedRun(case, r))]
        lines += _header(case, done)
        group = by_nodes.get(case.nodes)
        why = (f"needs {case.nodes} hosts; the inventory has {len(hosts)}" if group is None
               else why_not(case, group))
        if why:
            skipped += 1
            lines.append(f"  skipped: {why}")
            continue
        lines += _remote(case, group, suite.hardware)
        if case.impl == "reference":
            paths = sorted({reference.data_path(h.data_dir, case.ref_job()) or "" for h in group})
            data = ("the program's own synthetic mode" if case.data == "synthetic" else ", ".join(paths)
                    if paths != [""] else "the publisher's default path (the kit stages none for this program)")
            lines.append(f"  data: {data}")
    lines.append(f"{len(suite.cases) - skipped} case(s) would run, {skipped} skipped.")
    return lines


def totals(suite: Suite, runner: LocalRunner, run_dir: Path | None, runs_dir: Path, force: bool = False,
           host_refusal: str | None = None) -> list[str]:
    """The dry run's last lines: cases, runs (those a resume still has to do), the estimated time and what it came
    from (kit.run.estimate), and why this host could not run the suite, where it could not."""
    runs, skipped = plan(suite, runner.model_code, force)
    todo = [r for r in runs if run_dir is None or not records.is_done(run_dir, r)]
    done = f" ({len(runs) - len(todo)} done already)" if len(todo) < len(runs) else ""
    lines = [f"totals: {len(suite.cases)} case(s), {len(todo)} run(s) on this host{done}"
             + (f", {len(skipped)} case(s) not run here" if skipped else ""),
             estimate(todo, runs_dir).line(runs_dir)]
    if host_refusal:
        lines.append(f"this host: {host_refusal} (the real run refuses to start here)")
    return lines
