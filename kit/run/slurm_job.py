"""`kit cluster --scheduler slurm`: a suite's cases for n nodes through one allocation of the partition, each run
one job step (kit.run.slurm.SlurmRunner), recorded in run.json, then the report; and the dry run of the same.

As kit.run.multinode.run_job does over SSH hosts: the plan and what cannot run here (unfit), check_env over the
allocation's nodes (env_check), the nodes' data and model code (SlurmRunner.check), each run, the report.
"""

from __future__ import annotations

from pathlib import Path

from kit.config import expansion
from kit.config.cases import Suite
from kit.config.inventory import SlurmConfig
from kit.run import records
from kit.run.bench import run_each, write_report
from kit.run.frozen import Selection
from kit.run.multinode import cudnn_warning
from kit.run.plan import plan_for_nodes
from kit.run.runner import RunOutcome
from kit.run.slurm import Progress, SlurmError, SlurmRunner, partition_nodes


def run_slurm_job(cfg: SlurmConfig, nodes: int, suite: Suite, run_dir: Path, policy: str = "continue",
                  progress: Progress | None = None, force: bool = False, selection: Selection | None = None,
                  time_limits: dict[str, float] | None = None, nodelist: list[str] | None = None,
                  report: bool = True) -> tuple[list[RunOutcome], list[Path]]:
    """Every case of the suite (those `selection` keeps) for `nodes` nodes through one allocation
    (kit.run.multinode.run_job's loop, with Slurm's record of each run), then (report) the report. nodelist: the
    nodes the allocation is to hold (salloc -w; kit sweep's one node), else any of the partition's. The
    allocation is cancelled at the end, on error or Ctrl-C."""
    selection = selection or Selection()
    progress = progress or (lambda host, what, detail: None)
    run_dir = Path(run_dir)
    runner = SlurmRunner(cfg, run_dir, suite.hardware, progress, nodelist)
    planned = plan_for_nodes(selection.apply(suite), nodes)
    refused = {r.case.key: why for r in planned if (why := unfit(r.case, cfg, runner.mode, suite.hardware))}
    for key, why in refused.items():
        progress("plan", "not run", f"{key}: {why}")
    runs = [r for r in planned if r.case.key not in refused and not records.is_done(run_dir, r)]
    meta = records.open_run_meta(run_dir, suite, scheduler="slurm", partition=cfg.partition,
                                 **{expansion.FROZEN_KEY: expansion.freeze(suite)}, **selection.recorded_in(suite))
    records.note_planned(meta, [r for r in planned if r.case.key not in refused], add=True)
    records.note_skipped(run_dir, meta, refused)
    if runner.mode != "native":
        records.note_warning(run_dir, meta, cudnn_warning(suite, progress))
    if runs:
        runner.stage(runs)
    checked = False

    def on_nodes(run) -> None:  # once the allocation holds nodes: their environment, once; their names, each run
        nonlocal checked
        if not checked:
            env_check(runner.capture_env(run_dir / "env", suite.hardware == "gpu"), run_dir, force, progress)
            records.note_forced(run_dir, meta, runner.check(runs, force))
            checked = True
        meta["hosts"] = [n.name for n in runner.nodes]

    outcomes = run_each(run_dir, suite, runner, runs, meta, policy, before=on_nodes,  # releases the allocation
                        time_limits=time_limits)
    return outcomes, write_report(run_dir, suite) if report else []


def dry_run(cfg: SlurmConfig, suite: Suite, source: str, resume: Path | None = None) -> list[str]:
    """`kit cluster --scheduler slurm --dry-run`: the partition's nodes as the host groups, each rank's command as
    its step would run it, what is refused and why; asks sinfo/scontrol, starts nothing."""
    from kit.run import dryrun

    runner = SlurmRunner(cfg, Path(resume or "dry-run"), suite.hardware)
    nodes = [runner._node(n, runner._address(n)) for n in partition_nodes(cfg)]
    image = f", images {cfg.images}" if runner.mode != "native" else ""
    intro = (f"slurm: each group one allocation (salloc --no-shell -N n -p {cfg.partition}), each run one step "
             f"(srun --jobid J -N n --ntasks-per-node 1 bash step.sh, rank = $SLURM_NODEID); container: "
             f"{runner.mode}{image}; logs under {cfg.shared_dir}/runs/",)
    return dryrun.render_cluster(suite, nodes, source, resume, why_not=lambda case, group: unfit(
        case, cfg, runner.mode, suite.hardware), intro=intro)


def env_check(verdict, run_dir: Path, force: bool, progress: Progress) -> None:
    """check_env's verdict over the allocation's nodes: refused unless --force (as on SSH hosts)."""
    if verdict.ok:
        return
    if not force:
        raise SlurmError(f"check_env refuses these nodes ({'; '.join(verdict.lines()[:8])}); captures in "
                         f"{run_dir / 'env'}; fix them or pass --force")
    for line in verdict.lines():
        progress("check_env", "forced", line)


def unfit(case, cfg: SlurmConfig, mode: str, hardware: str) -> str | None:
    """Why the case cannot run through this Slurm as configured, or None."""
    if case.impl == "reference" and case.framework == "tensorflow" and case.nodes > 1:
        return ("one mpirun over the nodes starts TensorFlow's ranks itself; under Slurm each rank is a task of "
                "the kit's step (run it on SSH hosts, or as 1 node)")
    if mode != "native" and not cfg.image(case.framework):
        return f"no image for {case.framework} in slurm.images (container: {mode})"
    if hardware == "gpu" and cfg.gpus_per_node < case.gpus_per_node:
        return f"needs {case.gpus_per_node} GPU(s) per node; slurm.gpus_per_node is {cfg.gpus_per_node}"
    return None
