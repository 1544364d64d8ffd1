"""`kit sweep`: a suite's one-node cases on every host at once, each host its own runs (kit multinode's job of one
host, kit.run.multinode.run_job), all in one run directory; the fleet table comes from it (kit.results.fleet).

    runs/<id>/suite.yaml, sweep.json   the suite; the hosts and how each (and each GPU) ended (rundir.SWEEP_SHAPE)
    runs/<id>/env/<host>/              check-env's capture of every host, taken first, all at once
    runs/<id>/hosts/<host>/            each host's runs as `kit multinode --hosts <host>` leaves a run directory
    runs/<id>/hosts/<host>/gpu<i>/     on a GPU host, the runs of its 1-GPU cases pinned to GPU i (gpu_slices)
    runs/<id>/report.md, results.json  the fleet table (kit.results.fleet)

One process per GPU: a GPU suite's 1-GPU one-node cases on a host whose capture lists N > 1 GPUs run N times at
once, each copy pinned to its GPU (CUDA_VISIBLE_DEVICES: kit.run.command.pinned_env), so a slow GPU is a row of its
own ('h1/gpu3') rather than one eighth of a host's figure. Each GPU's copy is a whole run directory of its own,
hosts/<host>/gpu<i>/ (run.json, logs/, env/, report.md), not a gpu field on the runs of one: every reader of a run
directory (kit report, compare, verify, standing) reads it unchanged, its logs keep the DLPerf layout (one log per
case and repeat), its runs resume and stop on their own (on the host: <work_dir>/runs/<sweep id>-gpu<i>/), and the
GPU it ran on is its place, not a flag it carries. The host's checks (reachable, check_env, images, staging) are
made once, before any copy starts: check_env refuses busy GPUs, and each GPU's copy would be another's busy GPU.
The host's other one-node cases (several GPUs) run after, in hosts/<host>/ as on any host. CPU suites and hosts
with one GPU run as one, in hosts/<host>/.

A host that cannot be reached, that check-env refuses, or that is lost mid-sweep is a row saying why; the other
hosts go on. A resume redoes, host by host and GPU by GPU, only the runs without a figure (kit.run.records.is_done).

The same sweep through Slurm, each node its own job pinned to it (`kit sweep --scheduler slurm`), is
kit.run.slurm_sweep: it keeps this record (record_sweep) and these rows (part_row), so the fleet table, kit report
and kit standing read both alike.
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.config.cases import Case, Suite
from kit.config.inventory import HostConfig, Inventory
from kit.core import rundir
from kit.core.inputs import KitError
from kit.hosts import probe
from kit.hosts.connect import check_reachable
from kit.hosts.fanout import on_all
from kit.run import multinode, records
from kit.run.bench import write_report
from kit.run.frozen import Selection
from kit.run.plan import plan_for_nodes
from kit.run.runner import RunOutcome

Progress = Callable[[str, str, str], None]
OK, FAILED, LOST = "ok", "failed", "unreachable"  # a host's row: every run gave a figure | some did not | gone
UNAVAILABLE = "unavailable"  # a Slurm node that takes no job (down, drained, not responding): not asked for
_REPORTS = threading.Lock()  # the report's plots (matplotlib) are drawn one run directory at a time


@dataclass
class HostRow:
    host: str  # the row: a host, or one of its GPUs ('h1/gpu3': kit.core.rundir.slice_name)
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
    """Every host's capture, then every host's one-node runs at once; sweep.json written before and after. {row:
    how it ended}: a host's, or each of its GPUs' ('h1/gpu3')."""
    run_dir = Path(run_dir).resolve()

    def rows() -> dict[str, HostRow]:
        captured = capture_all(inv, hosts, run_dir, progress)

        def one(host: HostConfig) -> list[HostRow]:
            if host.name in captured:
                return [HostRow(host.name, LOST, captured[host.name])]
            return run_host(inv, host, suite, run_dir, progress, policy, force)

        return rows_of(on_all(hosts, one))

    return record_sweep(run_dir, suite, [h.name for h in hosts], rows, "ssh")


def record_sweep(run_dir: Path, suite: Suite, hosts: list[str], rows: Callable[[], dict[str, HostRow]],
                 scheduler: str) -> dict[str, HostRow]:
    """sweep.json (a resumed sweep's as it was) marked unfinished, rows() (every row's runs), then sweep.json with
    their rows and finished; the rows returned."""
    check_plan(suite)
    record = rundir.read_sweep(run_dir) if rundir.is_sweep(run_dir) else {
        "suite": suite.name, "hosts": hosts, "scheduler": scheduler,
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"), "rows": {}}
    record.pop("finished", None)
    rundir.save_sweep(run_dir, record)
    done = rows()
    ran = set(hosts)  # a host's rows of an earlier attempt give way to this one's
    kept = {name: row for name, row in record.get("rows", {}).items() if name.split("/")[0] not in ran}
    record["rows"] = {**kept, **{name: row.to_dict() for name, row in done.items()}}
    record["finished"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    rundir.save_sweep(run_dir, record)
    return done


def rows_of(outcomes: dict) -> dict[str, HostRow]:
    """{row: HostRow} of on_all's outcomes of each host's rows; a host whose function raised is one failed row."""
    return {row.host: row for name, out in outcomes.items()
            for row in (out.value if out.ok else [HostRow(name, FAILED, f"{type(out.error).__name__}: {out.error}")])}


def scheduler_of(run_dir: Path) -> str:
    """ssh or slurm: how a sweep's directory was swept (sweep.json; one of before the Slurm sweep: ssh)."""
    return rundir.read_sweep(run_dir).get("scheduler") or "ssh"


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


def per_gpu(case: Case) -> bool:
    """A case a sweep runs once per GPU of a host: one node, one GPU."""
    return case.nodes == 1 and case.gpus_per_node == 1


def gpu_slices(suite: Suite, capture: dict | None) -> list[int]:
    """PURE: the GPUs (nvidia-smi's indices) of a host whose capture is CAPTURE, each of which runs the suite's
    1-GPU cases on its own; [] where the host runs them as one: a CPU suite, no 1-GPU one-node case, fewer than
    two GPUs in the capture (or none: a host check-env could not capture)."""
    if suite.hardware != "gpu" or not any(per_gpu(c) for c in suite.cases):
        return []
    gpus = rundir.capture_gpus(capture)
    return list(range(len(gpus))) if len(gpus) > 1 else []


def run_host(inv: Inventory, host: HostConfig, suite: Suite, run_dir: Path, progress: Progress,
             policy: str, force: bool) -> list[HostRow]:
    """One host's runs: as one into <run_dir>/hosts/<host>/ (kit multinode's job of one host), or on a host with
    several GPUs (gpu_slices) its 1-GPU cases once per GPU at once, then its other one-node cases as one. A row
    for the host, or one for each of its GPUs (and one for the host where it has other cases)."""
    whole = rundir.sweep_host_dir(run_dir, host.name)
    gpus = gpu_slices(suite, rundir.host_captures(run_dir).get(host.name))
    gone = _unreachable(inv, host)
    if not gpus:
        return [part_row(host.name, whole, run_dir, suite, lambda: multinode.run_job(
            inv, [host.name], suite, whole, policy, progress, force, report=False)[0], gone)]
    sliced = Selection(tuple(c.key for c in suite.cases if per_gpu(c)))
    rest = tuple(c.key for c in suite.cases if c.nodes == 1 and not per_gpu(c))
    t0 = time.monotonic()
    try:  # once for all the host's GPUs: check_env would take each GPU's copy for another's busy GPU
        job = multinode.prepare_job(inv, [host.name], suite, whole, progress, force, selection=sliced)
    except KitError as exc:
        return [HostRow(host.name, FAILED, str(exc), time.monotonic() - t0)]
    names = {rundir.slice_name(host.name, gpu): gpu for gpu in gpus}

    def one(name: str) -> HostRow:
        gpu, part = names[name], rundir.sweep_slice_dir(run_dir, host.name, names[name])
        shutil.copytree(whole / "env", part / "env", dirs_exist_ok=True)  # the host's capture, in its own record

        def said(who: str, what: str, detail: str) -> None:
            progress(name if who == host.name else who, what, detail)

        return part_row(name, part, run_dir, suite, lambda: multinode.run_prepared(
            inv, job, suite, part, policy, said, sliced, report=False, gpus=(gpu,))[0], gone)

    rows = [out.value if out.ok else HostRow(name, FAILED, f"{type(out.error).__name__}: {out.error}")
            for name, out in on_all(list(names), one).items()]
    if rest:  # several GPUs a case: the whole host, after its GPUs' copies
        rows.append(part_row(host.name, whole, run_dir, suite, lambda: multinode.run_job(
            inv, [host.name], suite, whole, policy, progress, force, selection=Selection(rest), report=False)[0],
            gone))
    return rows


def _unreachable(inv: Inventory, host: HostConfig) -> Callable[[], str | None]:
    """Why the host no longer answers over SSH (kit.hosts.connect.check_reachable), or None."""
    def gone() -> str | None:
        lost = check_reachable([host], inv)
        return lost[0][1] if lost else None
    return gone


def part_row(name: str, part: Path, run_dir: Path, suite: Suite, runs: Callable[[], list[RunOutcome]],
             gone: Callable[[], str | None]) -> HostRow:
    """One row's runs (runs()) into its run directory PART of the sweep's RUN_DIR, then its report; the row says
    how they ended: LOST where some failed and gone() says why its host went away."""
    t0 = time.monotonic()
    part.mkdir(parents=True, exist_ok=True)
    if not (part / "suite.yaml").is_file():
        shutil.copyfile(run_dir / "suite.yaml", part / "suite.yaml")
    try:
        outcomes = runs()
    except KitError as exc:  # refused before or between its runs: check-env, staging, a host gone since
        lost = gone()
        return HostRow(name, LOST, f"lost mid-sweep ({lost}); {exc}", time.monotonic() - t0) if lost else \
            HostRow(name, FAILED, str(exc), time.monotonic() - t0)
    finally:
        if rundir.has_run_meta(part):
            records.finish_run_meta(part)
            with _REPORTS:
                write_report(part, suite)
    failed = [o for o in outcomes if o.status != "ok"]
    reason = "; ".join(f"{o.run.label}: {o.status}: {o.reason}" for o in failed[:3])
    if len(failed) > 3:
        reason += f"; and {len(failed) - 3} more"
    lost = gone() if failed else None
    if lost:  # it failed because it went away: say so first
        return HostRow(name, LOST, f"lost mid-sweep ({lost}); {reason}", time.monotonic() - t0)
    return HostRow(name, FAILED if failed else OK, reason, time.monotonic() - t0)
