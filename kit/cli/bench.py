"""`kit bench`: run a suite's cases on this host (real training), then report; --dry-run prints them."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.cli import images as cli_images
from kit.cli.common import EXIT_MISMATCH, EXIT_OK, UsageError, progress_console
from kit.config import settings
from kit.config.runtimes import DOCKER, NATIVE

# `kit images` builds the pinned images in Docker's engine (kit.images.build): the runtime kit bench runs them in
RUNTIMES = (NATIVE, DOCKER.name)


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="run a suite's cases on this host (real training), then report")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help="built-in suite name (see `kit suites`) or a suite YAML path")
    which.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish only the missing or failed runs")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where new run directories go (default runs/)")
    p.add_argument("--dry-run", action="store_true", help="print the runs and their commands; start nothing")
    p.add_argument("--no-yardstick", action="store_true",
                   help="a GPU suite: skip kit yardstick before the runs (GEMM, memory and host-link figures of the "
                        "GPU, ~20 s, kept as env/<host>/yardstick.json for the report's answer)")
    p.add_argument("--force", action="store_true", help="run a published program whose checkout is not at the "
                   "commit docker/pins.yaml pins, or not clean there (run.json records it and why)")
    p.add_argument("--train-list", type=Path, help="ImageNet train_list.txt for `data: imagenet` cases "
                   "(CPU suites default to a small synthetic JPEG tree in the run directory)")
    p.add_argument("--runtime", choices=RUNTIMES, default=NATIVE,
                   help="native: this Python; docker: each run in the suite's pinned image (built if missing)")
    p.add_argument("--image", help="with --runtime docker: this image reference instead of the pinned one")
    p.add_argument("--hosts-file", type=Path, default=None, help="with --dry-run: the hosts of n-node cases "
                   "(default: $KIT_HOSTS_FILE or hosts.yaml when present, else placeholders node1..nodeN)")
    p.add_argument("--select", action="append", default=[], metavar="PATTERN",
                   help="run only the cases whose key matches (fnmatch, e.g. 'torch/resnet50/*'; repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="leave out the cases whose key matches (fnmatch; repeatable); run.json records both")


def cmd_bench(args: argparse.Namespace) -> int:
    from kit.core.inputs import KitError
    from kit.run import bench, records
    from kit.run.frozen import Selection, run_meta
    from kit.run.plan import model_code_root

    selection = Selection(tuple(args.select), tuple(args.exclude))
    if args.resume:
        if selection:
            raise UsageError("--select/--exclude choose a new run's cases; a resume runs those its run.json records")
        suite = records.resume(args.resume, write=not args.dry_run)
        selection = Selection.recorded(run_meta(args.resume))
    else:
        suite = records.new_suite(args.suite)
    chosen = selection.apply(suite)  # a pattern that matches no case: refused here, nothing made
    # every check of the real run, before its folder is made (the dry run reports this host's instead)
    runs, skipped = bench.preflight(chosen, args.train_list, model_code_root(), args.force, host=not args.dry_run)
    if args.dry_run:
        return _dry_run(args, args.resume, chosen, bench.host_refusal(chosen))
    fresh = not args.resume
    run_dir, suite = (args.resume, suite) if args.resume else records.start(args.suite, args.runs_dir)
    console = progress_console()
    console.print(f"kit bench: suite [bold]{suite.name}[/], {len(runs)} runs -> {run_dir}"
                  + (f" ({selection.shown()})" if selection else ""), soft_wrap=True)
    for case, reason in skipped:
        console.print(f"  [yellow]not run here[/] {case.key}: {reason}", soft_wrap=True)
    if suite.hardware == "gpu" and not args.no_yardstick:
        from kit.hosts.yardstick import gpu_present
        if gpu_present():
            console.print("kit bench: kit yardstick on this GPU first (~20 s; --no-yardstick skips it)")
    try:
        images = cli_images.images_for_bench(run_dir, chosen, runs, args.image, console) \
            if args.runtime != NATIVE else None
        result = _bench_with_progress(bench, run_dir, suite, console, args.train_list, images, args.force,
                                      selection, args.runs_dir if fresh else run_dir.parent,
                                      yardstick=not args.no_yardstick)
    except KeyboardInterrupt:
        console.print(f"kit bench: interrupted; finished runs are kept (results.json and report.md: partial). "
                      f"Continue with: kit bench --resume {run_dir}",
                      soft_wrap=True, markup=False)
        return 130
    except (KitError, OSError):
        if fresh:
            records.discard_unstarted(run_dir)  # refused before any run: no empty folder left behind
        raise
    for path in result.report_files:
        print(path)
    if result.failed:
        console.print(f"kit bench: {len(result.failed)} run(s) gave no figure (see report.md); "
                      f"re-run them with: kit bench --resume {run_dir}", soft_wrap=True, markup=False)
        return EXIT_MISMATCH
    return EXIT_OK


def _dry_run(args: argparse.Namespace, run_dir: Path | None, suite, host_refusal: str | None) -> int:
    """Every case, harness and reference, on every host it would use (kit.run.dryrun), then the totals."""
    from kit.config.hosts import load_hosts
    from kit.run import dryrun
    from kit.run.local import LocalRunner

    train_list = str(args.train_list or "TRAIN_LIST") if any(c.data == "imagenet" for c in suite.cases) else None
    images = None
    if args.runtime != NATIVE:
        images = {c.framework: args.image or f"<the pinned {c.framework} image>" for c in suite.cases}
    runner = LocalRunner(run_dir or args.runs_dir / "DRY-RUN", train_list=train_list, images=images)
    hosts_path = settings.optional_hosts_file(args.hosts_file)  # a missing $KIT_HOSTS_FILE is an error too
    hosts = load_hosts(hosts_path).hosts if hosts_path else None
    for line in dryrun.render(suite, runner, hosts, f"from {hosts_path}", run_dir):
        print(line)
    runs_dir = run_dir.parent if run_dir is not None else args.runs_dir
    for line in dryrun.totals(suite, runner, run_dir, runs_dir, args.force, host_refusal):
        print(line)
    return EXIT_OK


def _bench_with_progress(bench, run_dir: Path, suite, console, train_list, images=None, force=False,
                         selection=None, runs_dir: Path | None = None, past: dict[str, list[float]] | None = None,
                         yardstick: bool = True, time_limits: dict[str, float] | None = None):
    """run_bench under kit bench's progress bar (the ETA from `past` durations where given, else runs_dir's)."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kit.run.progress import EtaColumn

    eta = EtaColumn.for_bench(run_dir, suite, selection, force, runs_dir, past)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), eta)
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("starting", total=None)

        def progress(phase, run, outcome, finished, total):
            eta.update(phase, run, outcome)
            bar.update(task, total=total, completed=finished, description=f"{run.label}" if phase == "start" else "")
            if phase == "end":
                if outcome.status == "ok":
                    bar.console.print(f"  [green]ok[/]     {run.label}: {outcome.value:.2f} {outcome.unit} "
                                      f"({outcome.seconds:.0f} s)", soft_wrap=True)
                else:
                    bar.console.print(f"  [red]{outcome.status:<6}[/] {run.label}: ", escape(outcome.reason),
                                      soft_wrap=True, sep="")
                for warning in _run_warnings(run_dir, run, outcome):
                    bar.console.print("  [yellow]warning[/] ", escape(warning), soft_wrap=True, sep="")

        return bench.run_bench(run_dir, suite, progress=progress, train_list=train_list, images=images,
                               force=force, selection=selection, yardstick=yardstick, time_limits=time_limits)


def _run_warnings(run_dir: Path, run, outcome) -> list[str]:
    """kit.results.noise's warnings for the run as run_bench just recorded it in run.json: a busy host, a figure
    close to its loader's own rate."""
    from kit.core.inputs import InputError
    from kit.core.rundir import read_run
    from kit.results import noise

    try:
        entry = read_run(run_dir).runs.get(str(run.log_rel))
    except InputError:
        return []
    if entry is None:
        return []
    found = [noise.busy_warning(entry.host_load)]
    if outcome.status == "ok":
        found.append(noise.input_bound_warning(outcome.value, entry.ran))
    return [w for w in found if w]
