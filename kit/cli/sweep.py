"""`kit sweep`: a suite's one-node cases on every host at once (a GPU suite's 1-GPU cases once per GPU of a host
with several: kit.run.sweep), or with --scheduler slurm on every node of hosts.yaml's Slurm partition (or --nodes),
each node its own job pinned to it (kit.run.slurm_sweep); then the fleet table (kit.results.fleet) in report.md and
results.json. Exit 0: every host (node, GPU) ran every run and none differs from the fleet beyond noise; 1: one
failed, was lost or unavailable, or differs; 2: bad input or nothing could start; 130: Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK, UsageError, add_hosts_file, hosts_file, progress_console


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="a suite's one-node cases on every host at once (1-GPU cases on every GPU); "
                       "which host or GPU is slow, and why")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help="suite name or YAML; its one-node cases run on every host")
    which.add_argument("--resume", type=Path, metavar="RUN_DIR", help="redo only what a sweep is missing")
    p.add_argument("--hosts", help="comma-separated host names from the inventory (default: all of them)")
    p.add_argument("--scheduler", choices=("ssh", "slurm"), help="ssh (default): the inventory's hosts; slurm: each "
                   "node of hosts.yaml's slurm: partition (or --nodes) its own job pinned to it (salloc -w <node>)")
    p.add_argument("--nodes", help="with --scheduler slurm: comma-separated nodes of the partition (default: all)")
    add_hosts_file(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--on-failure", choices=("continue", "stop"), default="continue",
                   help="on a host whose run failed: go on with its other runs (default) or stop that host")
    p.add_argument("--force", action="store_true", help="run on a host even where check_env refuses it (busy GPUs), "
                   "or its model code is not at the pinned commit (run.json records what was forced and why)")


def _hosts(args: argparse.Namespace, inv, recorded: list[str] | None):
    if args.nodes:
        raise UsageError("--nodes names Slurm nodes: add --scheduler slurm (or name SSH hosts with --hosts)")
    if args.hosts:
        names = [n.strip() for n in args.hosts.split(",") if n.strip()]
    else:
        names = recorded or inv.names
    twice = sorted({n for n in names if names.count(n) > 1})
    if not names or twice:
        raise UsageError(f"--hosts {args.hosts!r}: name each host once (comma-separated names from the inventory)")
    if recorded and names != recorded:
        raise UsageError(f"{args.resume}: the sweep ran on {','.join(recorded)}; resume it on those hosts")
    return [inv.get(name) for name in names]


def _nodes(args: argparse.Namespace, inv, recorded: list[str] | None) -> list[str]:
    """The Slurm nodes to sweep: --nodes (each a node of the partition), the resumed sweep's, or the partition's."""
    from kit.run.slurm import partition_nodes

    if args.hosts:
        raise UsageError("--hosts names SSH hosts of the inventory; with --scheduler slurm name nodes with --nodes")
    if inv.slurm is None:
        raise UsageError(f"{inv.path}: no slurm: section (partition, shared_dir, ...); --scheduler slurm needs it")
    known = partition_nodes(inv.slurm)  # no Slurm, no controller, unknown partition: one line, nothing started
    names = [n.strip() for n in args.nodes.split(",") if n.strip()] if args.nodes else recorded or known
    twice = sorted({n for n in names if names.count(n) > 1})
    if not names or twice:
        raise UsageError(f"--nodes {args.nodes!r}: name each node once (comma-separated nodes of the partition)")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"--nodes {args.nodes or ','.join(names)}: {', '.join(unknown)} not a node of partition "
                         f"{inv.slurm.partition} (sinfo lists: {', '.join(known) or 'none'})")
    if recorded and names != recorded:
        raise UsageError(f"{args.resume}: the sweep ran on {','.join(recorded)}; resume it on those nodes")
    return names


def cmd_sweep(args: argparse.Namespace) -> int:
    from kit.config.hosts import load_hosts
    from kit.config.suites import load_suite
    from kit.core import rundir
    from kit.run import records, sweep

    inv = load_hosts(hosts_file(args))
    recorded = None
    if args.resume:
        if not rundir.is_sweep(args.resume):
            raise UsageError(f"{args.resume}: not a sweep's directory (no {rundir.SWEEP_JSON})")
        recorded, was = rundir.read_sweep(args.resume)["hosts"], sweep.scheduler_of(args.resume)
        if args.scheduler and args.scheduler != was:
            raise UsageError(f"{args.resume}: a sweep through {was}; resume it with --scheduler {was}")
        args.scheduler = was
    slurm = args.scheduler == "slurm"
    hosts = _nodes(args, inv, recorded) if slurm else _hosts(args, inv, recorded)
    if args.resume:
        run_dir = Path(args.resume)
        suite = records.resume(run_dir, write=True)
    else:
        sweep.check_plan(load_suite(args.suite))
        run_dir, suite = records.start(args.suite, args.runs_dir)
    console = progress_console()

    def progress(host: str, what: str, detail: str) -> None:
        console.print(f"  {host:<10} {what:<13} {detail}", soft_wrap=True, markup=False)

    if slurm:
        from kit.run import slurm_sweep

        names, where = hosts, f"node(s) of Slurm partition {inv.slurm.partition}, each its own job"
        run = lambda: slurm_sweep.run_slurm_sweep(inv.slurm, hosts, suite, run_dir, progress,  # noqa: E731
                                                  args.on_failure, args.force)
    else:
        names, where = [h.name for h in hosts], "host(s)"
        run = lambda: sweep.run_sweep(inv, hosts, suite, run_dir, progress, args.on_failure, args.force)  # noqa: E731
    console.print(f"kit sweep: suite {suite.name}, one-node cases on {len(names)} {where} at once: "
                  f"{', '.join(names)} -> {run_dir}", soft_wrap=True, markup=False)
    done: dict = {}
    worker = threading.Thread(target=lambda: done.update(rows=_caught(run)), name="kit-sweep", daemon=True)
    worker.start()
    try:
        while worker.is_alive():  # the main thread stays where Ctrl-C reaches it
            worker.join(0.2)
    except KeyboardInterrupt:
        # SSH: every host's run ends with its SSH connection (kit.run.ssh.wrapper_command's watcher), as when kit is
        # killed; Slurm: every node's job is scancelled (each runner's guard would also, at exit); run.json holds
        # every finished run, so a resume redoes only the rest
        if slurm:
            jobs = slurm_sweep.cancel_jobs(run_dir, hosts)
            said = f"scancel of {', '.join(jobs)}" if jobs else "no job of the sweep was left"
            console.print(f"kit sweep: interrupted; {said}. Continue with: kit sweep --resume {run_dir}",
                          soft_wrap=True, markup=False)
        else:
            console.print(f"kit sweep: interrupted; every host's runs stop as their connections close. Continue "
                          f"with: kit sweep --resume {run_dir}", soft_wrap=True, markup=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    rows = done["rows"]
    if isinstance(rows, BaseException):
        raise rows
    fleet = write_fleet(run_dir)
    print(fleet_text(fleet), end="")
    print(run_dir / "report.md")
    healthy = all(r.status == sweep.OK for r in rows.values()) and not any(h["differs"] for h in fleet["hosts"])
    return EXIT_OK if healthy else EXIT_MISMATCH


def _caught(fn):
    """fn(), or the exception it raised (re-raised by the main thread)."""
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 -- handed to the main thread as it is
        return exc


def write_fleet(run_dir: Path) -> dict:
    """The sweep's report.md (the fleet section, each host's and GPU's report named), report.html (the same page)
    and results.json (the fleet table)."""
    from kit.core import rundir
    from kit.core.files import write_json, write_text
    from kit.results.fleet import fleet_of, sweep_report
    from kit.results.html import HTML_NAME, markdown_page

    fleet = fleet_of(run_dir)
    text = sweep_report(run_dir, fleet)
    write_text(Path(run_dir) / "report.md", text)
    write_text(Path(run_dir) / HTML_NAME, markdown_page(text))
    write_json(rundir.results_path(run_dir), {"fleet": fleet}, rundir.RESULTS_JSON)
    return fleet


def fleet_text(fleet: dict) -> str:
    """The console's table: verdict, then host (or host/GPU), case, figure, ratio, noise, worst first."""
    lines = [fleet["verdict"]]
    for r in fleet["hosts"]:
        if not r["cases"]:
            lines.append(f"  {r['host']:<10} {r['status']}: {r['reason']}")
        for case, c in sorted(r["cases"].items()):
            lines.append(f"  {r['host']:<10} {case:<32} {c['median']:10.2f} {fleet['cases'][case]['unit']:<9} "
                         f"x{c['ratio']:.3f}  {c['noise']}" + (f"  [{r['status']}: {r['reason']}]" if r["reason"]
                                                               else ""))
        for e in r["evidence"]:
            lines.append(f"  {'':<10} evidence: {e['what']}: {e['host']} (peers: {', '.join(e['peers'])})")
    return "\n".join(lines) + "\n"
