"""`kit multinode` / `kit cluster`: the runs of a suite over several hosts, through the SSH runner.

Every host answers over SSH and passes check_env first, or nothing starts; hosts with runtime docker get the
pinned images delivered and verified; the harness is staged on native hosts; then each run (case x repeat)
starts on every host at once (kit.run.ssh), its logs are gathered (kit.run.gather) and recorded in run.json
(kit.run.records); last, the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.config import expansion
from kit.config.cases import Suite
from kit.config.inventory import HostConfig, Inventory
from kit.hosts import probe
from kit.hosts.connect import check_reachable
from kit.run import records
from kit.run.bench import run_each, write_report
from kit.run.frozen import Selection
from kit.run.plan import PlannedRun, plan_for_nodes, unfit
from kit.run.runner import RunError, RunOutcome
from kit.run.ssh import SshRunner


class MultinodeError(RunError):
    """The job cannot start or go on (one line for the user)."""


def preflight(inv: Inventory, hosts: list[HostConfig]) -> None:
    """Every host answers over SSH with a known host key, or nothing starts."""
    problems = check_reachable(hosts, inv)
    if problems:
        lines = "; ".join(f"{getattr(h, 'name', h)}: {e}" for h, e in problems)
        raise MultinodeError(f"not every host is reachable, nothing started: {lines}")


@dataclass(frozen=True)
class Job:
    """What run_prepared needs of a job that passed its checks (prepare_job)."""

    hosts: list[HostConfig]
    runs: list[PlannedRun]  # the cases that fit, their repeats interleaved
    refused: dict[str, str]  # case key -> why these hosts cannot run it
    forced: list[dict]  # checkouts off their pin, run anyway (--force)
    images: dict[str, str]  # framework -> image reference, for hosts with a container runtime


def run_job(inv: Inventory, host_names: list[str], suite: Suite, run_dir: Path, policy: str = "continue",
            progress: Callable[[str, str, str], None] | None = None,
            force: bool = False, image: str | None = None, selection: Selection | None = None,
            time_limits: dict[str, float] | None = None, report: bool = True) -> tuple[list[RunOutcome], list[Path]]:
    """Every case of the suite (those `selection` keeps, recorded in run.json) whose node count equals the hosts
    given, then (report) the report (of the whole suite, as kit bench's): prepare_job, then run_prepared.

    Hosts with runtime docker get the image (the pinned one of each framework, or `image`) delivered and
    verified first; its IDs go into <run_dir>/images.json."""
    job = prepare_job(inv, host_names, suite, run_dir, progress, force, image, selection)
    return run_prepared(inv, job, suite, run_dir, policy, progress, selection, time_limits, report)


def prepare_job(inv: Inventory, host_names: list[str], suite: Suite, run_dir: Path,
                progress: Callable[[str, str, str], None] | None = None, force: bool = False,
                image: str | None = None, selection: Selection | None = None) -> Job:
    """A job's checks and what its runs need on the hosts, once: the plan, every host reachable, check_env (its
    captures under <run_dir>/env/), the images delivered, the harness and scripts staged. MultinodeError where it
    cannot start."""
    selection = selection or Selection()
    hosts = [inv.get(name) for name in host_names]
    if len({h.name for h in hosts}) != len(hosts):
        raise MultinodeError(f"a host is named twice: {', '.join(host_names)}")
    progress = progress or (lambda host, what, detail: None)
    runner = SshRunner(inv, hosts, run_dir, suite.hardware, progress=progress)
    runs = plan_for_nodes(selection.apply(suite), len(hosts))
    if not runs:
        raise MultinodeError(f"suite {suite.name} has no case for {len(hosts)} node(s)")
    refused = {r.case.key: why for r in runs if (why := unfit(r.case, hosts, suite.hardware, suite))}
    for key, why in refused.items():
        progress("plan", "not run", f"{key}: {why}")
    runs = [r for r in runs if r.case.key not in refused]
    if not runs:
        raise MultinodeError(f"suite {suite.name}: no {len(hosts)}-node case fits these hosts: "
                             + "; ".join(f"{k}: {w}" for k, w in refused.items()))
    preflight(inv, hosts)
    verdict = probe.check_env(inv, hosts, Path(run_dir) / "env", require_gpu=suite.hardware == "gpu")
    if not verdict.ok:
        detail = "; ".join(verdict.lines()[:8])
        if not force:
            raise MultinodeError(f"check_env refuses these hosts ({detail}); captures in {Path(run_dir) / 'env'}; "
                                 "fix them or pass --force")
        for line in verdict.lines():
            progress("check_env", "forced", line)
    docker_hosts = [h for h in hosts if h.runtime == "docker"]
    if docker_hosts:
        runner.images = deliver_images(inv, docker_hosts, suite, runs, Path(run_dir), image, progress)
    forced = runner.stage(runs, force)
    return Job(hosts, runs, refused, forced, runner.images)


def run_prepared(inv: Inventory, job: Job, suite: Suite, run_dir: Path, policy: str = "continue",
                 progress: Callable[[str, str, str], None] | None = None, selection: Selection | None = None,
                 time_limits: dict[str, float] | None = None, report: bool = True,
                 gpus: tuple[int, ...] | None = None) -> tuple[list[RunOutcome], list[Path]]:
    """A prepared job's runs into run_dir (run.json opened or resumed, each run recorded as it ends), then (report)
    the report; gpus: the GPUs of each host every run is pinned to (kit.run.command.pinned_env), None: all."""
    selection = selection or Selection()
    progress = progress or (lambda host, what, detail: None)
    runner = SshRunner(inv, job.hosts, run_dir, suite.hardware, images=job.images, progress=progress, gpus=gpus)
    meta = records.open_run_meta(run_dir, suite, hosts=[h.name for h in job.hosts],
                                 **{expansion.FROZEN_KEY: expansion.freeze(suite)}, **selection.recorded_in(suite))
    records.note_planned(meta, job.runs, add=True)  # `kit cluster`'s host groups each add theirs; finished at the end
    records.note_skipped(run_dir, meta, job.refused)
    records.note_forced(run_dir, meta, job.forced)
    records.note_warning(run_dir, meta, cudnn_warning(suite, progress))
    outcomes = run_each(Path(run_dir), suite, runner, job.runs, meta, policy, time_limits=time_limits)
    return outcomes, write_report(Path(run_dir), suite) if report else []


def cudnn_warning(suite: Suite, progress: Callable[[str, str, str], None]) -> str | None:
    """check_env's cuDNN-parity line for the frameworks the suite compares (kit.images.parity), said and returned."""
    from kit.images.parity import cudnn_of, parity_warning

    warning = parity_warning(cudnn_of(suite))
    if warning:
        progress("check_env", "warning", warning)
    return warning


def deliver_images(inv: Inventory, hosts: list[HostConfig], suite: Suite, runs: list[PlannedRun],
                   run_dir: Path, explicit: str | None, progress: Callable[[str, str, str], None]) -> dict[str, str]:
    """framework -> image reference, present with the same ID on every docker host (streamed where missing)."""
    from kit.images import build, deliver

    client = build.docker_client()
    pinned = build.pinned_images(client, suite, sorted({r.case.framework for r in runs}), explicit,
                                  lambda who, line: progress("image", who, line), cases=[r.case for r in runs])
    for ref, spec in pinned.values():
        results = deliver.deliver_stream(client, inv, hosts, ref, lambda who, line: progress(who, "image", line))
        failed = [f"{r.host}: {r.error}" for r in results.values() if r.action == "failed"]
        if failed:
            raise MultinodeError(f"{ref} could not be delivered: " + "; ".join(failed))
        want = build.image_id(client, ref)
        host_ids = deliver.verify_hosts(inv, hosts, ref, want)
        deliver.record(run_dir, ref, want, spec_key=spec.key if spec else None,
                      pins_hash=spec.pins_hash() if spec else None, hosts=host_ids)
    return {fw: ref for fw, (ref, _spec) in pinned.items()}
