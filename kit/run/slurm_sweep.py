"""`kit sweep --scheduler slurm`: kit.run.sweep's sweep over Slurm nodes. Each node's one-node runs are one Slurm job
pinned to that node (salloc -N 1 -w <node>, each run one step: kit cluster --scheduler slurm's job of one node,
kit.run.slurm_job.run_slurm_job given the node as its node list, through the one bench loop), every node's job at
once, into the sweep's one run directory as the SSH sweep lays it out (so the fleet table, kit report and kit
standing read it unchanged):

    runs/<id>/sweep.json             the nodes and how each ended (scheduler: slurm)
    runs/<id>/env/<node>/            the node's check-env capture: the first step of its job (SlurmRunner.capture_env,
                                     as kit cluster --scheduler slurm takes it), kept from hosts/<node>/env/<node>/
    runs/<id>/hosts/<node>/          the node's run directory (run.json with each run's Slurm record, logs/, env/,
                                     slurm/, report.md)
    <shared_dir>/runs/<id>/<node>/   each run's folder on the shared directory; steps/<node>/ its step scripts

A node Slurm lists down, drained or not responding is a row saying so ('unavailable'), no job asked of it; one lost
mid-sweep (its step's node fails: the Slurm runner names it) is 'unreachable: lost mid-sweep (Slurm lists it down*:
...)', its failed runs after; the other nodes go on. A resume redoes only the runs without a figure. Ctrl-C:
cancel_jobs scancels every node's job, running or pending (each is named kit-<sweep id>-<node>).
"""

from __future__ import annotations

import getpass
import shutil
import time
from pathlib import Path

from kit.config.cases import Suite
from kit.config.inventory import SlurmConfig
from kit.core import rundir
from kit.hosts.fanout import on_all
from kit.run import records
from kit.run.plan import plan_for_nodes
from kit.run.slurm import POLL_S, STOP_WAIT_S
from kit.run.slurm_cli import node_states, slurm, unusable
from kit.run.slurm_job import run_slurm_job
from kit.run.sweep import UNAVAILABLE, HostRow, Progress, part_row, record_sweep, rows_of

NODE_WORDS = ("slurm", "check_env", "plan")  # the Slurm runner's progress not about one node: the sweep's node


def run_slurm_sweep(cfg: SlurmConfig, nodes: list[str], suite: Suite, run_dir: Path, progress: Progress,
                    policy: str = "continue", force: bool = False) -> dict[str, HostRow]:
    """Every node's one-node runs at once, each node one job pinned to it; sweep.json written before and after.
    {node: how it ended}."""
    run_dir = Path(run_dir).resolve()

    def rows() -> dict[str, HostRow]:
        states = node_states(nodes)

        def one(node: str) -> list[HostRow]:
            part = rundir.sweep_host_dir(run_dir, node)
            why = unusable(*states[node]) if node in states else "Slurm does not list it"
            if why and _left(part, suite):
                progress(node, "unavailable", why)
                return [HostRow(node, UNAVAILABLE, f"{why}; no job asked of it")]
            return [node_row(cfg, node, suite, run_dir, progress, policy, force)]

        return rows_of(on_all(nodes, one))

    return record_sweep(run_dir, suite, nodes, rows, "slurm")


def node_row(cfg: SlurmConfig, node: str, suite: Suite, run_dir: Path, progress: Progress, policy: str,
             force: bool) -> HostRow:
    """One node's runs: its job (salloc -w NODE) into <run_dir>/hosts/<node>/, its capture kept as the sweep's."""
    part = rundir.sweep_host_dir(run_dir, node)

    def said(who: str, what: str, detail: str) -> None:
        progress(node if who in NODE_WORDS else who, what, detail)

    try:
        return part_row(node, part, run_dir, suite, lambda: run_slurm_job(
            cfg, 1, suite, part, policy, said, force, nodelist=[node], report=False)[0], lambda: node_gone(node))
    finally:
        keep_capture(run_dir, part, node)


def _left(part: Path, suite: Suite) -> bool:
    """Whether a node's run directory lacks a figure of any of the suite's one-node runs (a fresh one: yes)."""
    return any(not records.is_done(part, r) for r in plan_for_nodes(suite, 1))


def node_gone(node: str) -> str | None:
    """Why Slurm no longer gives the node jobs (kit.run.slurm_cli.unusable), or None."""
    state = node_states([node]).get(node)
    return unusable(*state) if state else "Slurm no longer lists it"


def keep_capture(run_dir: Path, part: Path, node: str) -> None:
    """The node's capture its job took (<part>/env/<node>/) as the sweep's env/<node>/; one kept there before
    stays."""
    if rundir.capture_path(part / "env", node).is_file() and not rundir.capture_path(run_dir / "env", node).is_file():
        shutil.copytree(part / "env" / node, run_dir / "env" / node, dirs_exist_ok=True)


def job_name(run_dir: Path, node: str) -> str:
    """The name of a node's job of a sweep (kit.run.slurm.SlurmRunner.allocate: kit-<run id>-<part>)."""
    return f"kit-{Path(run_dir).name}-{node}"


def cancel_jobs(run_dir: Path, nodes: list[str], wait_s: float = STOP_WAIT_S) -> list[str]:
    """scancel every node's job of the sweep, running or pending (by its name: a job salloc has not named yet
    too), until squeue lists none of them (at most wait_s); 'job 12 (RUNNING) on h2' of each."""
    names = {job_name(run_dir, n): n for n in nodes}
    said: dict[str, str] = {}
    end = time.monotonic() + wait_s
    while True:
        listed = slurm(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i|%j|%T"]).stdout.splitlines()
        ours = [(job, names[name], state) for job, name, state in (
            (line.split("|") + ["", ""])[:3] for line in listed) if name in names]
        if not ours or time.monotonic() > end:
            return list(said.values())
        for job, node, state in ours:
            if job not in said:
                said[job] = f"job {job} ({state}) on {node}"
                slurm(["scancel", job])
        time.sleep(POLL_S)
