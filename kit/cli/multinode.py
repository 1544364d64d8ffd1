"""`kit multinode`, `kit cluster`, `kit gather-logs`: jobs over several hosts at once (kit.run.multinode)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK, UsageError, add_hosts_file, hosts_file, inventory, progress_console
from kit.core.rundir import has_run_meta


def add_parser(sub) -> None:
    p = sub.add_parser("multinode", help="one job over several hosts at once (what `fab -H a,b run_multinode` calls)")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory; the first is rank 0")
    add_hosts_file(p)
    _add_job_flags(p, "suite name or YAML; its harness cases with as many nodes as --hosts")

    p = sub.add_parser("cluster", help="a whole suite on hosts.yaml: 1-node cases on the first host, n-node on n hosts")
    add_hosts_file(p)
    _add_job_flags(p, "suite name or YAML")
    p.add_argument("--dry-run", action="store_true", help="print the host groups and every case's command on every "
                   "host (harness and published programs) and what is skipped and why; connect to nothing")
    p.add_argument("--scheduler", choices=("ssh", "slurm"), default="ssh", help="ssh: the inventory's hosts; slurm: "
                   "each group of cases one allocation of hosts.yaml's slurm: partition, each run one job step")

    p = sub.add_parser("gather-logs", help="fetch every host's raw logs of a run again; rank 0's into logs/")
    p.add_argument("--hosts", required=True, help="comma-separated host names (rank 0 first)")
    add_hosts_file(p)
    p.add_argument("--run-dir", type=Path, required=True)


def _add_job_flags(p: argparse.ArgumentParser, suite_help: str) -> None:
    """The flags of a job on hosts: which suite (or resume), where, failure policy, force."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help=suite_help)
    which.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish only the missing or failed runs")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--on-failure", choices=("continue", "stop"), default="continue")
    p.add_argument("--force", action="store_true", help="run even if check_env finds busy GPUs or mismatched "
                   "hosts, or a host's model code is not at the pinned commit or not clean there (run.json records "
                   "what was forced and why)")
    p.add_argument("--image", help="hosts with runtime docker run this image reference (default: the pinned "
                   "image of each framework, built here and streamed to them)")


def _run_dir_for(args: argparse.Namespace, check) -> tuple[Path, object]:
    """A new run directory for --suite (after `check(suite)` passes), or the one given to --resume."""
    from kit.config.suites import load_suite
    from kit.run import records

    if args.resume:
        return args.resume, records.resume(args.resume, write=True)
    check(load_suite(args.suite))
    return records.start(args.suite, args.runs_dir)


def _host_jobs(args, inv, groups: list[list[str]], run_dir: Path, suite, console, resume_hint: str,
               job=None, selection=None, time_limits=None) -> int:
    """run_job (or `job(group, progress)`) for each host group into one run directory; a per-host status table."""
    from rich.table import Table

    from kit.run import multinode

    def progress(host: str, what: str, detail: str) -> None:
        console.print(f"  {host:<10} {what:<13} {detail}", soft_wrap=True, markup=False)

    job = job or (lambda group, progress: multinode.run_job(inv, group, suite, run_dir, args.on_failure, progress,
                                                            args.force, image=args.image, selection=selection,
                                                            time_limits=time_limits))
    outcomes, files = [], []
    try:
        for group in groups:
            console.print(f"kit: suite {suite.name}, {len(group)}-node cases on {', '.join(group)} -> {run_dir}",
                          soft_wrap=True, markup=False)
            done, files = job(group, progress)
            outcomes += done
    except KeyboardInterrupt:
        console.print(f"kit: interrupted; every host's processes were stopped. Continue with: {resume_hint} "
                      f"--resume {run_dir}", soft_wrap=True, markup=False)
        return 130
    from kit.run import bench, records

    if has_run_meta(run_dir):  # every group ran: complete where every planned run left its log
        records.finish_run_meta(run_dir)
        files = bench.write_report(run_dir, suite)
    names = sorted({n for g in groups for n in g} | {h.host for o in outcomes for h in o.hosts})
    table = Table(title="per host")
    for column in ("run", "status", *names):
        table.add_column(column)
    for o in outcomes:
        cells = {h.host: (h.error or "ok") + f" ({h.seconds:.0f} s)" for h in o.hosts}
        status = f"{o.value:.2f} {o.unit}" if o.status == "ok" else f"{o.status}: {o.reason}"
        table.add_row(o.run.label, status, *(cells.get(n, "") for n in names))
    console.print(table)
    for path in files:
        print(path)
    return EXIT_MISMATCH if any(o.status != "ok" for o in outcomes) else EXIT_OK


def cmd_multinode(args: argparse.Namespace) -> int:
    from kit.run import multinode
    from kit.run.plan import plan_for_nodes

    inv, hosts = inventory(args)
    names = [h.name for h in hosts]
    multinode.preflight(inv, hosts)  # unknown or unreachable: nothing starts

    def check(suite) -> None:
        if not plan_for_nodes(suite, len(names)):
            raise UsageError(f"suite {suite.name} has no case for {len(names)} node(s)")

    run_dir, suite = _run_dir_for(args, check)
    return _host_jobs(args, inv, [names], run_dir, suite, progress_console(), f"kit multinode --hosts {args.hosts}")


def cmd_cluster(args: argparse.Namespace) -> int:
    from kit.config.hosts import load_hosts

    inv = load_hosts(hosts_file(args))
    if args.scheduler == "slurm":
        _slurm_config(inv)
    if args.dry_run:
        from kit.config.suites import load_suite
        from kit.run import dryrun, records, slurm_job

        suite = records.resume(args.resume) if args.resume else load_suite(args.suite)
        if args.scheduler == "slurm":
            lines = slurm_job.dry_run(inv.slurm, suite, f"of Slurm partition {inv.slurm.partition}", args.resume)
        else:
            lines = dryrun.render_cluster(suite, inv.hosts, f"from {hosts_file(args)}", args.resume)
        for line in lines:
            print(line)
        return EXIT_OK
    return cluster_run(args, inv)[0]


def cluster_run(args: argparse.Namespace, inv, selection=None, time_limits=None) -> tuple[int, Path]:
    """`kit cluster`'s run of args.suite (or args.resume) on the inventory's hosts (args.scheduler ssh) or its Slurm
    partition (slurm), only the cases `selection` keeps (kit.run.frozen.Selection; `kit reproduce --hosts` runs
    through here): (exit code, run directory). What cannot start is refused before the run directory is made."""
    from kit.run import multinode, slurm, slurm_job

    if args.scheduler == "slurm":
        cfg = _slurm_config(inv)
        nodes = slurm.partition_nodes(cfg)  # no Slurm, no controller, unknown partition: one line, nothing started
        run_dir, suite, groups, console = _cluster_groups(args, nodes, f"partition {cfg.partition} ({len(nodes)} "
                                                          "nodes)", selection)
        return _host_jobs(args, inv, groups, run_dir, suite, console, "kit cluster --scheduler slurm",
                          job=lambda group, progress: slurm_job.run_slurm_job(
                              cfg, len(group), suite, run_dir, args.on_failure, progress, args.force,
                              selection=selection, time_limits=time_limits)), run_dir
    multinode.preflight(inv, inv.hosts)
    run_dir, suite, groups, console = _cluster_groups(args, inv.names, f"{len(inv.names)} host(s)", selection)
    return _host_jobs(args, inv, groups, run_dir, suite, console, "kit cluster", selection=selection,
                      time_limits=time_limits), run_dir


def _cluster_groups(args: argparse.Namespace, names: list[str], fits: str, selection=None):
    """(run directory, suite, host groups, console) of `kit cluster` over `names` (kit.run.plan.cluster_plan) for
    the cases `selection` keeps; what cannot run is said; UsageError when no case fits."""
    from kit.run.frozen import Selection
    from kit.run.plan import cluster_plan

    plan: dict = {}

    def check(suite) -> None:
        plan["groups"], plan["skipped"] = cluster_plan((selection or Selection()).apply(suite), names)
        if not plan["groups"]:
            raise UsageError(f"suite {suite.name}: no case fits {fits}")

    run_dir, suite = _run_dir_for(args, check)
    if "groups" not in plan:
        check(suite)
    console = progress_console()
    for line in plan["skipped"]:
        console.print(f"kit cluster: not run: {line}", soft_wrap=True, markup=False)
    return run_dir, suite, [hosts for hosts, _nodes in plan["groups"]], console


def _slurm_config(inv):
    if inv.slurm is None:
        raise UsageError(f"{inv.path}: no slurm: section (partition, shared_dir, ...); --scheduler slurm needs it")
    return inv.slurm


def cmd_gather_logs(args: argparse.Namespace) -> int:
    from kit.run import bench, gather, records

    inv, hosts = inventory(args)
    restored = gather.gather_all(inv, [h.name for h in hosts], args.run_dir)
    for path in restored:
        print(f"restored {path}")
    print(f"gathered {len(hosts)} host(s) into {args.run_dir / 'hosts'}")
    if (args.run_dir / "suite.yaml").is_file():
        for path in bench.write_report(args.run_dir, records.resume(args.run_dir)):
            print(path)
    return EXIT_OK
