"""`kit` command line: bench, extract, report, crosscheck, formats, suites.

Exit status: 0 fine; 1 a cross-check mismatch (or a report with failed logs); 2 bad input
or usage (one line naming the file and the reason, no traceback); 3 a bug in the kit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from kit import __version__
from kit.cli import audit as cli_audit
from kit.cli import images as cli_images
from kit.results import compare

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_BUG = 0, 1, 2, 3


class UsageError(Exception):
    pass


def _steps(text: str) -> tuple[int, int]:
    try:
        first, last = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FROM:TO (e.g. 20:120), got {text!r}") from None
    return first, last


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _add_method_flags(p: argparse.ArgumentParser, scale_default: float | None) -> None:
    from kit.results.extract import REDUCE_CHOICES

    g = p.add_argument_group("method (the publishers' vocabulary)")
    g.add_argument("--format", default="auto", help="log format, or auto (see `kit formats`)")
    g.add_argument("--metric", help="metric to use where a log has several (e.g. compute_ips)")
    g.add_argument(
        "--kind",
        choices=("per-step", "per-card", "per-epoch", "summary"),
        help="record kind of the series (default: the format's)",
    )
    g.add_argument("--rank", type=int, help="mpirun rank whose lines to use (default: the lowest)")
    g.add_argument("--skip", type=int, default=0, help="drop the first N records (warm-up)")
    g.add_argument("--count", type=int, help="keep exactly M records after the skip (default: all)")
    g.add_argument("--reduce", choices=REDUCE_CHOICES, default="mean", help="how to reduce the window")
    g.add_argument(
        "--scale",
        type=_positive_float,
        default=scale_default,
        help="multiply by G (per-card -> total)"
        + (" [default: auto from the case folder]" if scale_default is None else ""),
    )
    rounding = g.add_mutually_exclusive_group()
    rounding.add_argument("--round", type=int, metavar="D", help="round to D decimals")
    rounding.add_argument("--sig", type=int, metavar="S", help="round to S significant digits")
    g.add_argument(
        "--steps", type=_steps, default=(20, 120), metavar="FROM:TO", help="wallclock: steps to time between [20:120]"
    )
    g.add_argument("--batch", type=_positive_float, help="wallclock: samples per step (global batch)")


def _method_from(args: argparse.Namespace):
    """The Method named by the flags (each Method field has a flag of the same name)."""
    from dataclasses import fields

    from kit.results.extract import Method, MethodError

    try:
        return Method.from_mapping({f.name: getattr(args, f.name) for f in fields(Method)})
    except MethodError as exc:
        raise UsageError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kit", description="Training Benchmark Reproducibility Kit")
    parser.add_argument("--version", action="version", version=f"kit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("extract", help="one throughput figure from one log (printed on the last line)")
    p.add_argument("log", type=Path)
    _add_method_flags(p, scale_default=1.0)
    p.add_argument("--json", action="store_true", help="print the figure and its provenance as JSON")
    p.add_argument("--records", action="store_true", help="also list every record found (JSON lines)")

    p = sub.add_parser("report", help="seed-style tables from a DLPerf-layout tree (+ JSON, CSV, PNG)")
    p.add_argument("dir", type=Path)
    _add_method_flags(p, scale_default=None)
    p.add_argument("--out", type=Path, help="where to write report.md, results.json, results.csv, scaling.png")

    p = sub.add_parser("crosscheck", help="re-derive published figures from their logs")
    p.add_argument("claims", type=Path)
    p.add_argument("--json", action="store_true")

    sub.add_parser("formats", help="list the log formats the kit reads")

    p = sub.add_parser("bench", help="run a suite's cases on this host (real training), then report")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help="built-in suite name (see `kit suites`) or a suite YAML path")
    which.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish only the missing or failed runs")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where new run directories go (default runs/)")
    p.add_argument("--dry-run", action="store_true", help="print the runs and their commands; start nothing")
    p.add_argument("--train-list", type=Path, help="ImageNet train_list.txt for `data: imagenet` cases "
                   "(CPU suites default to a small synthetic JPEG tree in the run directory)")
    p.add_argument("--runtime", choices=("native", "docker"), default="native",
                   help="native: this Python; docker: each run in the suite's pinned image (built if missing)")
    p.add_argument("--image", help="with --runtime docker: this image reference instead of the pinned one")
    p.add_argument("--hosts-file", type=Path, default=None, help="with --dry-run: the hosts of n-node cases "
                   "(default: $KIT_HOSTS_FILE or hosts.yaml when present, else placeholders node1..nodeN)")

    p = sub.add_parser("multinode", help="one job over several hosts at once (what `fab -H a,b run_multinode` calls)")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory; the first is rank 0")
    _add_hosts_file(p)
    _add_job_flags(p, "suite name or YAML; its harness cases with as many nodes as --hosts")

    p = sub.add_parser("cluster", help="a whole suite on hosts.yaml: 1-node cases on the first host, n-node on n hosts")
    _add_hosts_file(p)
    _add_job_flags(p, "suite name or YAML")

    p = sub.add_parser("gather-logs", help="fetch every host's raw logs of a run again; rank 0's into logs/")
    p.add_argument("--hosts", required=True, help="comma-separated host names (rank 0 first)")
    _add_hosts_file(p)
    p.add_argument("--run-dir", type=Path, required=True)

    p = sub.add_parser("stage-data", help="put train_list.txt (and --images) on every host; verify counts + sha256")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory")
    _add_hosts_file(p)
    p.add_argument("--train-list", type=Path, required=True, help="the local train_list.txt (beside its train/ tree)")
    p.add_argument("--images", action="store_true", help="also rsync the JPEG tree to each host's data_dir")

    p = sub.add_parser("check-env", help="capture every host's GPUs/topology/CPU/OS at once and compare them")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory")
    _add_hosts_file(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--require-gpu", action="store_true", help="a host without GPUs is a problem")
    p.add_argument("--allow-busy", action="store_true", help="do not refuse GPUs that run other processes")

    cli_images.add_parser(sub)
    compare.add_parser(sub)
    cli_audit.add_parser(sub)

    p = sub.add_parser("suites", help="list the built-in suites, or expand one (--show NAME)")
    p.add_argument("--show", metavar="SUITE", help="print every case of a suite (name or path)")
    return parser


def _add_hosts_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts-file", type=Path, default=None, help="inventory (default: $KIT_HOSTS_FILE or hosts.yaml)")


def _hosts_file(args: argparse.Namespace) -> Path:
    return args.hosts_file or Path(os.environ.get("KIT_HOSTS_FILE", "hosts.yaml"))


def _add_job_flags(p: argparse.ArgumentParser, suite_help: str) -> None:
    """The flags of a job on hosts: which suite (or resume), where, failure policy, force."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help=suite_help)
    which.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish only the missing or failed runs")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--on-failure", choices=("continue", "stop"), default="continue")
    p.add_argument("--force", action="store_true", help="run even if check_env finds busy GPUs or mismatched hosts")
    p.add_argument("--image", help="hosts with runtime docker run this image reference (default: the pinned "
                   "image of each framework, built here and streamed to them)")


def _progress_console():
    from rich.console import Console

    return Console(stderr=True)


def cmd_extract(args: argparse.Namespace) -> int:
    from kit.results.extract import compute_figure, format_number
    from kit.results.parsers import parse_log

    method = _method_from(args)
    parsed = parse_log(args.log, args.format)
    figure = compute_figure(parsed, method)
    for warning in figure.warnings:
        print(f"kit: warning: {args.log}: {warning}", file=sys.stderr)
    if args.records:
        for record in parsed.records:
            print(json.dumps(record.to_dict()))
    if args.json:
        print(json.dumps({"file": str(args.log), **figure.to_dict()}, indent=2))
        return EXIT_OK
    detected = " (auto)" if args.format == "auto" else ""
    print(f"format: {figure.format}{detected}  metric: {figure.metric}  kind: {figure.kind}  unit: {figure.unit}")
    print(f"records: {figure.used} used of {figure.available} (lines {figure.first_line}-{figure.last_line})")
    print(format_number(figure.value))
    return EXIT_OK


def _default_out(source: Path) -> Path:
    """A run directory (runs/<id>/ with logs/) gets its report beside the logs; any other
    tree is left untouched and the report goes to ./reports/<name>/."""
    if (source / "logs").is_dir():
        return source
    return Path.cwd() / "reports" / source.resolve().name


def cmd_report(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from kit.results import report as rep

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: not a directory")
    method = _method_from(args)
    console = _progress_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("parsing logs", total=None)

        def tick(i: int, n: int, path: Path) -> None:
            progress.update(task, total=n, completed=i, description=f"parsing {path.name}")

        result = rep.build_report(args.dir, method, args.format, scale_given=args.scale is not None, progress=tick)
    if not result.groups and not result.failures:
        raise UsageError(f"{args.dir}: no logs in the DLPerf layout (<N>n<G>g/<model>_b<B>_<precision>_<run>.log)")
    out = args.out or _default_out(args.dir)
    written = rep.write_outputs(result, out)
    print(rep.to_markdown(result), end="")
    print(f"\nwrote: {', '.join(str(p) for p in written)}", file=sys.stderr)
    for path, reason in result.failures:
        print(f"kit: {path}: {reason}", file=sys.stderr)
    return EXIT_BAD_INPUT if result.failures else EXIT_OK


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from kit.results.crosscheck import ERROR, MATCH, MISMATCH, check_claims
    from kit.results.extract import format_number

    verdicts = check_claims(args.claims)
    counts = {s: sum(v.status == s for v in verdicts) for s in (MATCH, MISMATCH, ERROR)}
    if args.json:
        print(
            json.dumps(
                {"claims_file": str(args.claims), "counts": counts, "verdicts": [v.to_dict() for v in verdicts]},
                indent=2,
            )
        )
    else:
        width = max(len(v.claim) for v in verdicts)
        print(f"{'claim':<{width}}  {'recomputed':>20}  {'published':>12}  {'rel diff':>10}  verdict")
        for v in verdicts:
            rec = "-" if v.recomputed is None else format_number(v.recomputed)
            diff = "-" if v.rel_diff is None else f"{v.rel_diff:+.2e}"
            note = f"  ({v.detail})" if v.status != MATCH and v.detail else ""
            print(f"{v.claim:<{width}}  {rec:>20}  {format_number(v.published):>12}  {diff:>10}  {v.status}{note}")
        declared = sum(v.status == MISMATCH and not v.declared_derives for v in verdicts)
        aside = f" ({declared} declared 'derives: false' by the claims file)" if declared else ""
        tally = f"{counts[MATCH]} match, {counts[MISMATCH]} mismatch{aside}, {counts[ERROR]} error"
        print(f"\n{tally} of {len(verdicts)} claims")
    for v in verdicts:
        if v.status == ERROR:
            print(f"kit: {v.detail}", file=sys.stderr)
    if counts[ERROR]:
        return EXIT_BAD_INPUT
    return EXIT_MISMATCH if counts[MISMATCH] else EXIT_OK


def cmd_formats(args: argparse.Namespace) -> int:
    from kit.results.parsers import FORMATS

    width = max(map(len, FORMATS))
    for name, fmt in FORMATS.items():
        print(f"{name:<{width}}  {fmt.series_kind:<9}  {fmt.description}")
    return EXIT_OK


def cmd_suites(args: argparse.Namespace) -> int:
    from kit.config import suites

    if args.show:
        suite = suites.load_suite(args.show)
        print(f"{suite.name}: {suite.description} ({len(suite.cases)} cases, {suite.path})")
        for c in suite.cases:
            ref = f"  ref {c.reference.value:g} {c.reference.unit}" if c.reference else ""
            print(f"  {c.key:<42} {c.runner:<8} img {c.image_size:<4} steps {c.warmup_steps}+{c.measure_steps:<4} "
                  f"x{c.repeats}{ref}")
        return EXIT_OK
    for name in suites.available():
        suite = suites.load_suite(name)
        print(f"{name:<8} {len(suite.cases):>3} cases  {suite.description}")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from kit.run import bench

    if args.resume:
        run_dir, suite = args.resume, bench.resume(args.resume)
    elif args.dry_run:
        run_dir, suite = None, bench.load_suite(args.suite)
    else:
        bench.check_host(bench.load_suite(args.suite))
        run_dir, suite = bench.start(args.suite, args.runs_dir)
    runs, skipped = bench.plan(suite)
    if args.dry_run:  # every case, harness and reference, on every host it would use (kit.dryrun)
        from kit.config.hosts import load_hosts
        from kit.run import dryrun

        train_list = str(args.train_list or "TRAIN_LIST") if any(c.data == "imagenet" for c in suite.cases) else None
        images = None
        if args.runtime == "docker":
            images = {c.framework: args.image or f"<the pinned {c.framework} image>" for c in suite.cases}
        runner = bench.LocalRunner(run_dir or args.runs_dir / "DRY-RUN", train_list=train_list, images=images)
        hosts_path = _hosts_file(args)
        hosts = load_hosts(hosts_path).hosts if args.hosts_file or hosts_path.is_file() else None
        for line in dryrun.render(suite, runner, hosts, f"from {hosts_path}", run_dir):
            print(line)
        return EXIT_OK
    console = _progress_console()
    console.print(f"kit bench: suite [bold]{suite.name}[/], {len(runs)} runs -> {run_dir}", soft_wrap=True)
    for case, reason in skipped:
        console.print(f"  [yellow]not run here[/] {case.key}: {reason}", soft_wrap=True)
    try:
        images = cli_images.images_for_bench(run_dir, suite, runs, args.image, console) \
            if args.runtime == "docker" else None
        result = _bench_with_progress(bench, run_dir, suite, console, args.train_list, images)
    except KeyboardInterrupt:
        console.print(f"kit bench: interrupted; finished runs are kept. Continue with: kit bench --resume {run_dir}",
                      soft_wrap=True, markup=False)
        return 130
    for path in result.report_files:
        print(path)
    if result.failed:
        console.print(f"kit bench: {len(result.failed)} run(s) gave no figure (see report.md); "
                      f"re-run them with: kit bench --resume {run_dir}", soft_wrap=True, markup=False)
        return EXIT_MISMATCH
    return EXIT_OK


def _inventory(args: argparse.Namespace):
    from kit.config.hosts import load_hosts

    inv = load_hosts(_hosts_file(args))
    names = [n.strip() for n in args.hosts.split(",") if n.strip()]
    return inv, [inv.get(name) for name in names]


def cmd_stage_data(args: argparse.Namespace) -> int:
    from kit.hosts import stage as datastage

    inv, hosts = _inventory(args)

    def progress(host: str, what: str, detail: str) -> None:
        print(f"  {host:<10} {what:<13} {detail}", file=sys.stderr)

    statuses = datastage.stage_data(inv, hosts, args.train_list, images=args.images, progress=progress)
    for st in statuses:
        print(f"{st.name}: {st.images} images, {st.classes} classes, list sha256 {st.list_sha256}, "
              f"{'ok' if st.ok else 'NOT OK'}{' (list copied)' if st.copied else ''}")
    problems = datastage.compare(statuses)
    for line in problems:
        print(f"  problem: {line}")
    return EXIT_MISMATCH if problems else EXIT_OK


def cmd_check_env(args: argparse.Namespace) -> int:
    import datetime as dt

    from kit.hosts import probe as envprobe
    from kit.run import multinode

    inv, hosts = _inventory(args)
    multinode.preflight(inv, hosts)
    run_dir = args.runs_dir / f"check-env-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    verdict = envprobe.check_env(inv, hosts, run_dir / "env", require_gpu=args.require_gpu)
    for line in verdict.lines():
        print(f"  {line}")
    busy_only = not verdict.problems and verdict.busy and args.allow_busy
    print(f"check-env: {'consistent' if verdict.ok or busy_only else 'REFUSED'} "
          f"({len(hosts)} host(s)); captures in {run_dir / 'env'}")
    return EXIT_OK if verdict.ok or busy_only else EXIT_MISMATCH


def _run_dir_for(args: argparse.Namespace, check) -> tuple[Path, object]:
    """A new run directory for --suite (after `check(suite)` passes), or the one given to --resume."""
    from kit.run import bench

    if args.resume:
        return args.resume, bench.resume(args.resume)
    check(bench.load_suite(args.suite))
    return bench.start(args.suite, args.runs_dir)


def _host_jobs(args, inv, groups: list[list[str]], run_dir: Path, suite, console, resume_hint: str) -> int:
    """run_job for each host group into one run directory; a per-host status table at the end."""
    from rich.table import Table

    from kit.run import multinode

    def progress(host: str, what: str, detail: str) -> None:
        console.print(f"  {host:<10} {what:<13} {detail}", soft_wrap=True, markup=False)

    outcomes, files, names = [], [], sorted({n for g in groups for n in g})
    try:
        for group in groups:
            console.print(f"kit: suite {suite.name}, {len(group)}-node cases on {', '.join(group)} -> {run_dir}",
                          soft_wrap=True, markup=False)
            done, files = multinode.run_job(inv, group, suite, run_dir, args.on_failure, progress, args.force,
                                             image=args.image)
            outcomes += done
    except KeyboardInterrupt:
        console.print(f"kit: interrupted; every host's processes were stopped. Continue with: {resume_hint} "
                      f"--resume {run_dir}", soft_wrap=True, markup=False)
        return 130
    table = Table(title="per host")
    for column in ("run", "status", *names):
        table.add_column(column)
    for o in outcomes:
        cells = {h.host: (h.error or "ok") + f" ({h.seconds:.0f} s)" for h in o.hosts}
        status = f"{o.value:.2f} samples/s" if o.status == "ok" else f"{o.status}: {o.reason}"
        table.add_row(o.run.label, status, *(cells.get(n, "") for n in names))
    console.print(table)
    for path in files:
        print(path)
    return EXIT_MISMATCH if any(o.status != "ok" for o in outcomes) else EXIT_OK


def cmd_multinode(args: argparse.Namespace) -> int:
    from kit.run import bench, multinode

    inv, hosts = _inventory(args)
    names = [h.name for h in hosts]
    multinode.preflight(inv, hosts)  # unknown or unreachable: nothing starts

    def check(suite) -> None:
        if not bench.plan_for_nodes(suite, len(names)):
            raise UsageError(f"suite {suite.name} has no harness case for {len(names)} node(s)")

    run_dir, suite = _run_dir_for(args, check)
    return _host_jobs(args, inv, [names], run_dir, suite, _progress_console(), f"kit multinode --hosts {args.hosts}")


def cmd_cluster(args: argparse.Namespace) -> int:
    from kit.config.hosts import load_hosts
    from kit.run import multinode

    inv = load_hosts(_hosts_file(args))
    multinode.preflight(inv, inv.hosts)
    plan: dict = {}

    def check(suite) -> None:
        plan["groups"], plan["skipped"] = multinode.cluster_plan(suite, inv.names)
        if not plan["groups"]:
            raise UsageError(f"suite {suite.name}: no harness case fits {len(inv.names)} host(s)")

    run_dir, suite = _run_dir_for(args, check)
    if "groups" not in plan:
        check(suite)
    console = _progress_console()
    for line in plan["skipped"]:
        console.print(f"kit cluster: not run: {line}", soft_wrap=True, markup=False)
    groups = [hosts for hosts, _nodes in plan["groups"]]
    return _host_jobs(args, inv, groups, run_dir, suite, console, "kit cluster")


def cmd_gather_logs(args: argparse.Namespace) -> int:
    from kit.run import bench, multinode

    inv, hosts = _inventory(args)
    restored = multinode.gather_all(inv, [h.name for h in hosts], args.run_dir)
    for path in restored:
        print(f"restored {path}")
    print(f"gathered {len(hosts)} host(s) into {args.run_dir / 'hosts'}")
    if (args.run_dir / "suite.yaml").is_file():
        for path in bench.write_report(args.run_dir, bench.resume(args.run_dir)):
            print(path)
    return EXIT_OK


def _bench_with_progress(bench, run_dir: Path, suite, console, train_list, images=None):
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("starting", total=None)

        def progress(phase, run, outcome, finished, total):
            bar.update(task, total=total, completed=finished, description=f"{run.label}" if phase == "start" else "")
            if phase == "end":
                if outcome.status == "ok":
                    bar.console.print(f"  [green]ok[/]     {run.label}: {outcome.value:.2f} samples/s "
                                      f"({outcome.seconds:.0f} s)", soft_wrap=True)
                else:
                    bar.console.print(f"  [red]{outcome.status:<6}[/] {run.label}: ", escape(outcome.reason),
                                      soft_wrap=True, sep="")

        return bench.run_bench(run_dir, suite, progress=progress, train_list=train_list, images=images)


COMMANDS = {
    "extract": cmd_extract,
    "report": cmd_report,
    "crosscheck": cmd_crosscheck,
    "formats": cmd_formats,
    "bench": cmd_bench,
    "suites": cmd_suites,
    "multinode": cmd_multinode,
    "check-env": cmd_check_env,
    "cluster": cmd_cluster,
    "gather-logs": cmd_gather_logs,
    "stage-data": cmd_stage_data,
    "images": cli_images.cmd_images,
    "compare": compare.cmd_compare,
    "bundle": cli_audit.cmd_bundle,
    "verify": cli_audit.cmd_verify,
}


def main(argv: list[str] | None = None) -> int:
    from kit.core.inputs import InputError, KitError
    from kit.results.extract import MethodError
    from kit.results.parsers import UnknownFormat
    from kit.results.stats import StatsError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(f"kit: {exc}", file=sys.stderr)
    except KitError as exc:
        print(f"kit: {exc}", file=sys.stderr)
    except (MethodError, StatsError) as exc:
        where = getattr(args, "log", None) or getattr(args, "dir", None) or getattr(args, "claims", "")
        print(f"kit: {where}: {exc}", file=sys.stderr)
    except (UsageError, UnknownFormat) as exc:
        print(f"kit: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("kit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: say so plainly, keep the traceback for KIT_DEBUG=1
        if os.environ.get("KIT_DEBUG"):
            traceback.print_exc()
        print(
            f"kit: internal error ({type(exc).__name__}: {exc}); rerun with KIT_DEBUG=1 and report it", file=sys.stderr
        )
        return EXIT_BUG
    return EXIT_BAD_INPUT
