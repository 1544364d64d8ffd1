"""Gather: every host's files of a run back into the run directory, rank 0's stdout as the run's log.

    runs/<id>/hosts/<host>/<run folder>/...   each host's stdout.log, launcher logs, sidecar (as on the host)
    runs/<id>/logs/<DLPerf path>.log          rank 0's stdout.log (the figure)
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Callable
from pathlib import Path

from kit.config.inventory import HostConfig, Inventory
from kit.core.layout import log_of_run_folder, sidecar_name, telemetry_name
from kit.core.rundir import read_run_meta, remote_run_id
from kit.hosts.connect import connect
from kit.hosts.fanout import on_all, values
from kit.run.plan import PlannedRun


def get_tree(sftp, remote: str, local: Path) -> None:
    """Copy a remote folder (regular files and folders only; links are not followed)."""
    local.mkdir(parents=True, exist_ok=True)
    for entry in sftp.listdir_attr(remote):
        src = posixpath.join(remote, entry.filename)
        if stat.S_ISDIR(entry.st_mode):
            get_tree(sftp, src, local / entry.filename)
        elif stat.S_ISREG(entry.st_mode):
            sftp.get(src, str(local / entry.filename))


def _fetch(inv: Inventory, host: HostConfig, remote: str, local: Path) -> None:
    with connect(host, inv) as conn:
        get_tree(conn.sftp(), remote, local)


def gather_run(inv: Inventory, hosts: list[HostConfig], run_dir: Path, run: PlannedRun,
               progress: Callable[[str, str, str], None]) -> None:
    """After a run: each host's folder of it, then rank 0's stdout.log as the run's log. A host that cannot be
    reached is reported and skipped (its logs stay on it: `kit gather-logs` fetches them later)."""
    def fetch(host: HostConfig) -> None:
        remote = posixpath.join(host.work_dir, "runs", remote_run_id(run_dir), host.name, run.folder.as_posix())
        _fetch(inv, host, remote, run_dir / "hosts" / host.name / run.folder)

    for name, out in on_all(hosts, fetch).items():
        if not out.ok:
            progress(name, "gather-failed", str(out.error))
    place_rank0(run_dir / "hosts" / hosts[0].name / run.folder, run_dir / run.log_rel)


def place_rank0(folder: Path, log: Path) -> bool:
    """Rank 0's stdout.log as the run's log in the DLPerf layout, its command record (a published program's
    <log stem>.cmd.json) beside it. False when rank 0 left no stdout.log."""
    source = folder / "stdout.log"
    if not source.is_file():
        return False
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(source.read_bytes())
    for name in (sidecar_name(log.name), telemetry_name(log.name)):  # its command record, its GPU samples
        if (folder / name).is_file():
            log.with_name(name).write_bytes((folder / name).read_bytes())
    return True


def gather_all(inv: Inventory, host_names: list[str], run_dir: Path) -> list[Path]:
    """Fetch every host's raw logs of a run again (all of runs/<id>/<host>/ on each host); rank 0's into logs/."""
    run_dir = Path(run_dir).resolve()
    hosts = [inv.get(name) for name in host_names]
    run_id = remote_run_id(run_dir)
    values(on_all(hosts, lambda h: _fetch(inv, h, posixpath.join(h.work_dir, "runs", run_id, h.name),
                                          run_dir / "hosts" / h.name)))
    meta = read_run_meta(run_dir, missing_ok=True)
    rank0 = (meta.get("hosts") or host_names)[0]
    restored = []
    for stdout in sorted((run_dir / "hosts" / rank0).rglob("stdout.log")):
        try:
            target = run_dir / "logs" / log_of_run_folder(stdout.parent.relative_to(run_dir / "hosts" / rank0))
        except ValueError:  # not a run's folder: stays in hosts/ only
            continue
        if not target.exists() and place_rank0(stdout.parent, target):
            restored.append(target)
    return restored
