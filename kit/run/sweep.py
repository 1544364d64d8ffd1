"""`kit sweep`: a suite's one-node cases on every host at once, each host its own runs (kit multinode's job of one
host, kit.run.multinode.run_job), all in one run directory; the fleet table comes from it (kit.results.fleet).

    runs/<id>/suite.yaml, sweep.json   the suite; the hosts and how each ended (kit.core.rundir.SWEEP_SHAPE)
    runs/<id>/env/<host>/              check-env's capture of every host, taken first, all at once
    runs/<id>/hosts/<host>/            each host's runs as `kit multinode --hosts <host>` leaves a run directory
    runs/<id>/report.md, results.json  the fleet table (kit.results.fleet)

A host that cannot be reached, that check-env refuses, or that is lost mid-sweep is a row saying why; the other
hosts go on. A resume redoes, host by host, only the runs without a figure (kit.run.records.is_done).
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.config.cases import Suite
from kit.config.inventory import HostConfig, Inventory
from kit.core import rundir
from kit.core.inputs import KitError
from kit.hosts import probe
from kit.hosts.connect import check_reachable
from kit.hosts.fanout import on_all
from kit.run import multinode, records
from kit.run.bench import write_report
from kit.run.plan import plan_for_nodes

Progress = Callable[[str, str, str], None]
OK, FAILED, LOST = "ok", "failed", "unreachable"  # a host's row: every run gave a figure | some did not | gone
_REPORTS = threading.Lock()  # the report's plots (matplotlib) are drawn one host at a time


@dataclass
class HostRow:
    host: str
    status: str  # OK | FAILED | LOST
    reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, "seconds": round(self.seconds, 3)}


def check_plan(suite: Suite) -> None:
    if not plan_for_nodes(suite, 1):
        raise multinode.MultinodeError(f"suite {suite.name} has no one-node case to sweep")


def run_sweep(inv: Inventory, hosts: list[HostConfig], suite: Suite, run_dir: Path, progress: Progress,
              policy: str = "continue", force: bool = False) -> dict[str, HostRow]:
    """Every host's capture, then every host's one-node runs at once; sweep.json written before and after."""
    run_dir = Path(run_dir).resolve()
    check_plan(suite)
    record = rundir.read_sweep(run_dir) if rundir.is_sweep(run_dir) else {
        "suite": suite.name, "hosts": [h.name for h in hosts],
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"), "rows": {}}
    record.pop("finished", None)
    rundir.save_sweep(run_dir, record)
    captured = capture_all(inv, hosts, run_dir, progress)

    def one(host: HostConfig) -> HostRow:
        if host.name in captured:
            return HostRow(host.name, LOST, captured[host.name])
        return run_host(inv, host, suite, run_dir, progress, policy, force)

    rows = {name: out.value if out.ok else HostRow(name, FAILED, f"{type(out.error).__name__}: {out.error}")
            for name, out in on_all(hosts, one).items()}
    record["rows"] = {**record.get("rows", {}), **{name: row.to_dict() for name, row in rows.items()}}
    record["finished"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    rundir.save_sweep(run_dir, record)
    return rows


def capture_all(inv: Inventory, hosts: list[HostConfig], run_dir: Path, progress: Progress) -> dict[str, str]:
    """check-env's capture of every host at once under <run_dir>/env/ (a host captured before is kept): {host: why
    not} for the hosts that could not be captured."""
    todo = [h for h in hosts if not rundir.capture_path(run_dir / "env", h.name).is_file()]
    failed = {}
    for name, out in on_all(todo, lambda h: probe.probe_host(h, inv, run_dir / "env" / h.name)).items():
        if out.ok:
            progress(name, "captured", "check-env")
        else:
            failed[name] = f"check-env could not capture it: {type(out.error).__name__}: {out.error}".strip()
            progress(name, "unreachable", failed[name])
    return failed


def run_host(inv: Inventory, host: HostConfig, suite: Suite, run_dir: Path, progress: Progress,
             policy: str, force: bool) -> HostRow:
    """One host's runs into <run_dir>/hosts/<host>/ (kit multinode's job of one host), then its report."""
    t0 = time.monotonic()
    part = rundir.sweep_host_dir(run_dir, host.name)
    part.mkdir(parents=True, exist_ok=True)
    if not (part / "suite.yaml").is_file():
        shutil.copyfile(run_dir / "suite.yaml", part / "suite.yaml")
    try:
        outcomes = multinode.run_job(inv, [host.name], suite, part, policy, progress, force, report=False)[0]
    except KitError as exc:  # refused before its runs: check-env, staging, an unreachable host
        return HostRow(host.name, FAILED, str(exc), time.monotonic() - t0)
    finally:
        if rundir.has_run_meta(part):
            records.finish_run_meta(part)
            with _REPORTS:
                write_report(part, suite)
    failed = [o for o in outcomes if o.status != "ok"]
    reason = "; ".join(f"{o.run.label}: {o.status}: {o.reason}" for o in failed[:3])
    if len(failed) > 3:
        reason += f"; and {len(failed) - 3} more"
    lost = check_reachable([host], inv) if failed else []
    if lost:  # it failed because it went away: say so first
        return HostRow(host.name, LOST, f"lost mid-sweep ({lost[0][1]}); {reason}", time.monotonic() - t0)
    return HostRow(host.name, FAILED if failed else OK, reason, time.monotonic() - t0)
