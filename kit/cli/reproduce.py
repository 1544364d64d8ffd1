"""`kit reproduce BUNDLE`: run a verified bundle's cases again, from what the bundle records (its suite, the harness
it ran), on this host, an inventory's SSH hosts or a Slurm partition (--hosts, through `kit cluster`'s run), and say
per case whether the figure came out the same (kit.results.reproduction).

    kit reproduce bundle.tar.gz [--cases 'torch/resnet50/*'] [--sample 2 [--seed S]] [--tolerance 0.05]
    kit reproduce bundle.tar.gz --hosts hosts.yaml [--scheduler slurm]
    kit reproduce bundle.tar.gz [--repeats N] [--until-decided [--max-repeats M]]

The bundle is verified first: one that does not verify is not reproduced. Refused (exit 2) where this kit's harness
files, a chosen case's program commit or an image's pins differ from those the bundle ran, unless --force (recorded
in reproduction.json). Says the time to expect (the bundle's own run durations), then shows kit bench's progress
(kit cluster's per-host lines with --hosts).
Leaves a normal run directory (report, results, bundle-able) with reproduction.json and reproduction.md beside its
report, naming the original bundle's digests; `kit bundle` of it carries them and `kit verify` checks its figures.
Each case's verdict follows the kit's noise rule (interleaved repeats): reproduced, not reproduced, inconclusive
(saying how many runs would resolve it) or not comparable. --repeats: the re-runs of each case, the auditor's
(declared in the reproduction's own suite before it runs). --until-decided: each inconclusive case again in a
reproduction of its own (a run directory, bundle-able, naming the earlier rounds), with as many re-runs as would
decide it, at most --max-repeats; a round is judged on its own runs, never pooled with an earlier one's (the exit
status: each case's last verdict).
This host busy (other processes over kit.results.noise's share of its CPU): before each round the kit waits for it
to be quiet (--quiet-wait-s), naming what keeps it busy; a re-run made while it was busy anyway (its run.json
host_load) is set aside, not judged, and --until-decided runs it again. --allow-busy judges them as any (recorded).
Exit: 0 every case reproduced, 1 any not reproduced (a re-run that gave no figure too), 2 bad input, 3 a named
system difference (or this host busy past --quiet-wait-s) stopped the comparison before anything ran, 4 a case left
inconclusive (the auditor stopped before it was decided).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import random
import secrets
import tempfile
import time
from pathlib import Path

from kit.cli.common import UsageError, progress_console
from kit.core.inputs import InputError, KitError, parse_json, read_json_object
from kit.core.rundir import RunRecord, host_captures, read_results, read_run

TIME_MARGIN = 3.0  # a re-run may take this many times the bundle's own longest run of its case ...
TIME_FLOOR_S = 60.0  # ... and never less than this
MAX_REPEATS = 10  # --until-decided asks for at most this many re-runs of a case (--max-repeats)
QUIET_WAIT_S = 300.0  # how long the kit waits for a busy host to be quiet before a round (--quiet-wait-s)
QUIET_SAID_S = 15.0  # a waiting line at most this often


def add_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="re-run a verified bundle's cases here and say per case whether its figure "
                       "came out the same", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path, metavar="BUNDLE", help="a bundle (.tar.gz of kit bundle) or its folder")
    p.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                   help="only the cases whose key matches (fnmatch: 'torch/resnet50/*'); repeatable; default all")
    p.add_argument("--sample", type=int, metavar="N", help="N of the chosen cases drawn at random (--seed)")
    p.add_argument("--seed", type=int, help="the draw's seed, to replay a draw [a fresh one from the system's "
                   "randomness, printed and recorded in reproduction.json: nobody knows the draw before it is made]")
    p.add_argument("--tolerance", type=float, default=None, help="reproduced within a factor 1 + this either way "
                   "[0.05], recorded")
    p.add_argument("--timeout-s", type=float, metavar="SECONDS", help="each re-run's time, the auditor's [the "
                   f"bundle's own longest run of the case x {TIME_MARGIN:g}, at least {TIME_FLOOR_S:g} s; never the "
                   "suite's timeout_s, which the operator wrote]")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the reproduction's run goes [runs/]")
    p.add_argument("--force", action="store_true", help="reproduce although this kit's harness files, program "
                   "commits or image pins differ from the bundle's (recorded)")
    p.add_argument("--allowed-signers", type=Path, help="verify the bundle's signature against these signers")
    p.add_argument("--hosts", type=Path, metavar="HOSTS_FILE", help="run on this inventory's hosts (as `kit cluster "
                   "--hosts-file`: 1-node cases on the first host, n-node on the first n) instead of this host")
    p.add_argument("--repeats", type=int, metavar="N", help="re-runs of each chosen case, the auditor's [the bundle's "
                   "suite's repeats]; recorded")
    p.add_argument("--until-decided", action="store_true", help="inconclusive cases again, each in a reproduction "
                   "of its own with as many re-runs as would decide it (at most --max-repeats), until every case is "
                   "decided or cannot be")
    p.add_argument("--max-repeats", type=int, default=MAX_REPEATS, metavar="N",
                   help=f"the most re-runs of a case --until-decided asks for [{MAX_REPEATS}]")
    p.add_argument("--quiet-wait-s", type=float, default=QUIET_WAIT_S, metavar="SECONDS",
                   help=f"how long to wait for this host to be quiet before each round [{QUIET_WAIT_S:g}]; still busy "
                   "then: nothing more runs (exit 3 before the first round)")
    p.add_argument("--allow-busy", action="store_true", help="run on this host however busy, and judge the re-runs "
                   "made while it was busy like any other (recorded) instead of setting them aside")
    p.add_argument("--scheduler", choices=("ssh", "slurm"), help="with --hosts: ssh, the inventory's hosts [ssh]; "
                   "slurm, its slurm: partition (each run one job step)")


def _choose(keys: list[str], patterns: list[str], sample: int | None, seed: int) -> list[str]:
    chosen = keys
    if patterns:
        for pattern in patterns:
            if not fnmatch.filter(keys, pattern):
                raise InputError("--cases", f"{pattern!r} matches no case of the bundle; its cases: {', '.join(keys)}")
        chosen = [k for k in keys if any(fnmatch.fnmatchcase(k, p) for p in patterns)]
    if sample is not None:
        if not 1 <= sample <= len(chosen):
            raise InputError("--sample", f"must be 1 to {len(chosen)} (the chosen cases), got {sample}")
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    return chosen


def _code_differences(run: RunRecord, root: Path, original: Path, cases) -> list[str]:
    """What this kit would run differently from what the bundle ran: its harness files (run.json harness_sha256),
    the commit pinned for each chosen case's published program (the bundle's pins.yaml against docker/pins.yaml) and
    the pins of each image the run used (its images.json pins_hash against this kit's). Empty when all are equal."""
    from kit.core.catalogue import harness_sha256
    from kit.images.spec import current_pins, load_pins

    ran = run.harness_sha256
    here = harness_sha256()
    differs = [f"{name}: {str(ran.get(name))[:12]} in the bundle, {str(here.get(name))[:12]} here"
               for name in sorted(set(ran) | set(here)) if ran.get(name) != here.get(name)]
    pins = current_pins()
    programs = sorted({_program_code(c) for c in cases if c.impl == "reference"})
    if programs:
        theirs = load_pins(root / "pins.yaml").model_code if (root / "pins.yaml").is_file() else {}
        for code in programs:
            bundle_pin = theirs[code].commit if code in theirs else "none"
            ours = pins.model_code[code].commit if code in pins.model_code else "none"
            if bundle_pin != ours:
                differs.append(f"program {code}: commit {bundle_pin[:12]} in the bundle, {ours[:12]} here")
    images = read_json_object(original / "images.json", "images.json").get("images") \
        if (original / "images.json").is_file() else {}
    for entry in (images.values() if isinstance(images, dict) else ()):
        key = entry.get("image") if isinstance(entry, dict) else None
        if not isinstance(key, str):
            continue
        try:
            ours = pins.get(key).pins_hash()
        except KeyError:
            ours = "none"
        if entry.get("pins_hash") != ours:
            differs.append(f"image {key}: pins {str(entry.get('pins_hash'))[:12]} in the bundle, {ours[:12]} here")
    return list(dict.fromkeys(differs))


def _program_code(case) -> str:
    from kit.config.reference import implementation

    return implementation(case.framework, case.model).code


def cmd_reproduce(args: argparse.Namespace) -> int:
    from kit.audit import unpack
    from kit.audit.verify import verify
    from kit.results import reproduction as rp

    tolerance = rp.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 < tolerance <= 10:
        raise InputError("--tolerance", f"must lie in (0, 10], got {tolerance}")
    if args.repeats is not None and not 1 <= args.repeats <= 1000:
        raise InputError("--repeats", f"must be 1 to 1000, got {args.repeats}")
    if not 2 <= args.max_repeats <= 1000:
        raise InputError("--max-repeats", f"must be 2 to 1000, got {args.max_repeats}")
    if not 0 <= args.quiet_wait_s <= 86400:
        raise InputError("--quiet-wait-s", f"must be 0 to 86400, got {args.quiet_wait_s:g}")
    inv = _inventory(args)  # before anything else: a hosts file that does not load, one line and nothing written
    verdict = verify(args.bundle, args.allowed_signers)
    if not verdict.ok:
        print("\n".join([line for line in verdict.lines() if not line.lstrip().startswith("OK ")][:20]))
        raise InputError(args.bundle, "does not verify, so it is not reproduced (kit verify says why above)")
    with tempfile.TemporaryDirectory(prefix="kit-reproduce-") as tmp:
        root = args.bundle if args.bundle.is_dir() else unpack.unpack(args.bundle, Path(tmp))
        (original,) = [p for p in (root / "run").iterdir() if p.is_dir()]
        if verdict.rows:  # a sweep's bundle: its rows are run directories, but not yet re-run from one bundle
            raise InputError(args.bundle, "a sweep's bundle; kit reproduce re-runs a run's bundle: bundle one host's "
                             "run directory of the sweep (kit bundle runs/<sweep id>/hosts/<host>) and reproduce that")
        return _reproduce(args, root, original, tolerance, rp, inv, verdict.signature, Path(tmp))


def _inventory(args: argparse.Namespace):
    """--hosts's inventory (kit.config.hosts), None for this host; --scheduler only with --hosts."""
    if args.hosts is None:
        if args.scheduler is not None:
            raise UsageError(f"--scheduler {args.scheduler} runs on a hosts file's hosts: give --hosts hosts.yaml")
        return None
    from kit.config.hosts import load_hosts

    args.scheduler = args.scheduler or "ssh"
    inv = load_hosts(args.hosts)
    if args.scheduler == "slurm" and inv.slurm is None:
        raise UsageError(f"{args.hosts}: no slurm: section (partition, shared_dir, ...); --scheduler slurm needs it")
    return inv


def bundle_identity(root: Path, bundle: Path, signature) -> dict:
    """What names the bundle reproduced: its manifest's own sha256 (kit.audit.bundle: the same in its .tar.gz and
    unpacked), the .tar.gz's sha256 where it is one, and what its signature check said."""
    from kit.audit.bundle import manifest_digest

    return {"bundle_sha256": hashlib.sha256(bundle.read_bytes()).hexdigest() if bundle.is_file() else None,
            "bundle_manifest_sha256": manifest_digest(root),
            "bundle_signature": signature.state if signature else None}


def _reproduce(args: argparse.Namespace, root: Path, original: Path, tolerance: float, rp, inv, signature,
               work: Path) -> int:
    from kit.audit.bundle import system_description
    from kit.config.suites import load_suite
    from kit.run import bench
    from kit.run.frozen import Selection, run_suite

    run = read_run(original)
    figures = rp.figures_by_case(read_results(original))
    if args.sample is not None and args.seed is None:
        args.seed = secrets.randbits(32)
        print(f"kit reproduce: --sample {args.sample} drawn with seed {args.seed} (--seed {args.seed} replays it)")
    chosen = _choose(sorted(figures), args.cases, args.sample, args.seed or 0)
    suite = load_suite(original / "suite.yaml")
    selection = Selection(select=tuple(chosen))
    original_system = parse_json(root.joinpath("system.json").read_bytes()) if (root / "system.json").is_file() \
        else {}
    cases = {c.key: c for c in selection.apply(suite).cases}
    if inv is None and (why := bench.host_refusal(suite)):  # a GPU bundle on a host without one: nothing to run
        nothing = {"accelerators_per_node": "0", "number_of_nodes": "1"}
        verdicts = [rp.judge_claim(key, figures[key], [], tolerance, rp.case_differences(
            original_system, nothing, False, cases[key].gpus_per_node, cases[key].nodes)) for key in chosen]
        print(f"kit reproduce: not run here ({why})")
        print(rp.to_markdown(verdicts, args.bundle.name, tolerance, rp.RECORD_VERSION), end="")
        return rp.exit_code(verdicts, rp.RECORD_VERSION)
    limits = _time_limits(args.timeout_s, run, list(cases.values()))
    differs = _code_differences(run, root, original, selection.apply(suite).cases)
    if differs and not args.force:
        raise InputError(args.bundle, "this kit's code differs from what the bundle ran (" + "; ".join(differs[:3])
                         + "): reproduce with the kit that made it, or --force (recorded)")
    identity = bundle_identity(root, args.bundle, signature)
    console = progress_console()
    where = f"the hosts of {args.hosts} ({args.scheduler})" if inv is not None else "this host"
    cpu = suite.hardware == "cpu"
    repeats, rounds, final, aside = args.repeats, [], {}, {}
    while True:
        busy = "" if inv is not None or args.allow_busy else wait_quiet(args.quiet_wait_s, console)
        if busy and not rounds:
            print(f"kit reproduce: nothing run: {busy}; figures made now would be low (quiet it, wait longer with "
                  "--quiet-wait-s, or --allow-busy)")
            return 3
        if busy:
            print(f"kit reproduce --until-decided: stopped: {busy}; left inconclusive: "
                  + ", ".join(sorted(chosen)))
            break
        suite_file = original / "suite.yaml" if repeats is None else with_repeats(original / "suite.yaml", repeats,
                                                                                  work / f"round-{len(rounds) + 1}")
        suite = load_suite(suite_file)
        selection = Selection(select=tuple(chosen))
        past = _estimate(selection.apply(suite), run)
        console.print(f"kit reproduce: {len(chosen)} case(s) of {args.bundle} on {where}"
                      f"{f', {repeats} re-run(s) each' if repeats else ''}; {past.line()}",
                      soft_wrap=True, markup=False)
        console.print(f"kit reproduce: each re-run may take {_limits_said(limits)} (--timeout-s: the auditor's)",
                      soft_wrap=True, markup=False)
        run_dir = _run(args, suite_file, suite, selection, inv, console, run, limits)
        here = rp.runs_by_case(read_results(run_dir))
        this_system = system_description(run_dir, None, "reproduction", where)
        power = [] if cpu else rp.power_limit_differences([*host_captures(original).values()],
                                                          [*host_captures(run_dir).values()])
        system = {key: rp.case_differences(original_system, this_system, cpu, cases[key].gpus_per_node,
                                           cases[key].nodes, power) for key in chosen}
        notes = rp.noted_differences(original_system, this_system, cpu)
        ran = read_run(run_dir).runs.values()
        failed = _failed_runs(ran)
        disturbed = rp.disturbed_runs(ran)
        judged = {} if args.allow_busy else disturbed
        if args.allow_busy and disturbed:
            notes.append(f"the auditor allowed a busy host (--allow-busy): {sum(map(len, disturbed.values()))} "
                         "re-run(s) made while it was busy judged like the others")
        verdicts = [rp.judge_runs(key, figures[key], here.get(key, []), tolerance, system[key], failed,
                                  judged.get(key, {})) for key in chosen]
        record = {"schema_version": rp.RECORD_VERSION, "bundle": str(args.bundle), **identity,
                  "tolerance": tolerance, "cases": chosen, "patterns": args.cases, "sample": args.sample,
                  "seed": args.seed, "repeats": repeats, "round": len(rounds) + 1,
                  "earlier_rounds": [str(r) for r in rounds],
                  "hosts": str(args.hosts) if inv is not None else None, "scheduler": args.scheduler,
                  "forced": differs if args.force else [], "time_limits": limits, "system_differences": system,
                  "noted_differences": notes, "failed_runs": failed, "disturbed_runs": disturbed,
                  "allow_busy": args.allow_busy, "counts": rp.counts(verdicts),
                  "verdicts": [v.to_dict() for v in verdicts]}
        (run_dir / rp.RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")
        text = rp.to_markdown(verdicts, args.bundle.name, tolerance, rp.RECORD_VERSION, notes)
        (run_dir / rp.TABLE_NAME).write_text(text)
        bench.write_report(run_dir, run_suite(run_dir)[0])  # the report (and its page) headed by the verdicts
        print(text, end="")
        print(run_dir / rp.RECORD_NAME)
        rounds.append(run_dir)
        final.update({v.case: v for v in verdicts})
        for v in verdicts:
            aside[v.case] = aside.get(v.case, 0) + len(v.set_aside)
        more, why = next_round(verdicts, tolerance, args.max_repeats, aside) if args.until_decided else (None, "")
        if why:
            print(f"kit reproduce --until-decided: {why}")
        if more is None:
            break
        chosen, repeats = sorted(more), max(more.values())
    return rp.exit_code(list(final.values()), rp.RECORD_VERSION)


def next_round(verdicts: list, tolerance: float, most: int,
               aside: dict[str, int] | None = None) -> tuple[dict[str, int] | None, str]:
    """({inconclusive case: the re-runs a new round gives it}, what was decided) after a round of --until-decided:
    each inconclusive case again, in a new reproduction of its own, with as many re-runs as would decide it
    (kit.results.reproduction.runs_to_resolve), at most MOST; a case whose every re-run but one at most was set aside
    (the host busy) as many as that round had, until ASIDE (re-runs set aside so far per case) reaches MOST; None
    where every case is decided, or none can be (on the band's edge, or its round already had MOST)."""
    from kit.results import reproduction as rp

    open_cases = [v for v in verdicts if v.verdict == rp.INCONCLUSIVE]
    if not open_cases:
        return None, "every case decided"
    more, stuck = {}, []
    for v in open_cases:
        if len(v.reproduced) < 2 and v.set_aside:  # every re-run set aside, or all but one: the round again
            if (aside or {}).get(v.case, len(v.set_aside)) >= most:
                stuck.append(f"{v.case} ({most} re-runs set aside, the cap: the host stays busy)")
            else:
                more[v.case] = min(max(len(v.set_aside) + len(v.reproduced), 2), most)
            continue
        needed = rp.runs_to_resolve(v.ratio, v.low, v.high, tolerance, len(v.reproduced)) \
            if v.low is not None and v.high is not None else None
        if needed is None or len(v.reproduced) + len(v.set_aside) >= most:  # the round had the cap
            why = "on the band's edge" if needed is None else f"{most} re-runs, the cap"
            stuck.append(f"{v.case} ({why})")
        else:
            more[v.case] = min(needed, most)
    said = (f"{len(more)} inconclusive case(s) again with {max(more.values())} re-runs each" if more else "") + \
        (("; " if more else "") + "left inconclusive: " + ", ".join(stuck) if stuck else "")
    return (more or None), said


def wait_quiet(limit_s: float, console) -> str:
    """'' once this host is quiet (kit.results.noise's rule over a window of kit.run.hostload.busy_now), else why it
    is not after LIMIT_S seconds of waiting; says every QUIET_SAID_S what it waits for."""
    from kit.results import noise
    from kit.run.hostload import busy_now

    t0, said = time.monotonic(), None
    while True:
        entry, top = busy_now()
        if not noise.is_busy(entry):
            return ""
        why = noise.busy_reason(entry) + (f" ({', '.join(top)})" if top else "")
        waited = time.monotonic() - t0
        if waited >= limit_s:
            return f"this host stayed busy for {waited:.0f} s: {why}"
        if said is None or waited - said >= QUIET_SAID_S:
            console.print(f"kit reproduce: waiting for this host to be quiet ({waited:.0f} of {limit_s:g} s): {why}",
                          soft_wrap=True, markup=False)
            said = waited


def with_repeats(suite_file: Path, repeats: int, folder: Path) -> Path:
    """The bundle's suite with every case's repeats set to REPEATS (the auditor's, declared before the run), written
    into FOLDER; named <name>-reproduction-x<R>, not a built-in suite's name, as its cases differ."""
    import yaml

    data = yaml.safe_load(suite_file.read_text())
    data["name"] = f"{data.get('name')}-reproduction-x{repeats}"
    data["defaults"] = {**(data.get("defaults") or {}), "repeats": repeats}
    data["cases"] = [{k: v for k, v in entry.items() if k != "repeats"} if isinstance(entry, dict) else entry
                     for entry in data.get("cases") or []]
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "suite.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _time_limits(given: float | None, run: RunRecord, cases: list) -> dict[str, float]:
    """Each case's re-run time: the auditor's --timeout-s, else the bundle's own longest run of the case (run.json
    wall_seconds) x TIME_MARGIN, at least TIME_FLOOR_S; a case the bundle records no time for needs --timeout-s."""
    from kit.run.estimate import durations

    if given is not None:
        if not given > 0:
            raise InputError("--timeout-s", f"must be > 0, got {given:g}")
        return {c.key: float(given) for c in cases}
    took = durations(run)
    missing = [c.key for c in cases if not took.get(c.key)]
    if missing:
        raise InputError("--timeout-s", f"the bundle records no run time of {', '.join(missing)}: give each re-run's "
                         "seconds (the suite's timeout_s is the operator's, not the auditor's)")
    return {c.key: max(TIME_FLOOR_S, round(TIME_MARGIN * max(took[c.key]), 1)) for c in cases}


def _limits_said(limits: dict[str, float]) -> str:
    values = sorted(set(limits.values()))
    return f"{values[0]:g} s" if len(values) == 1 else f"{values[0]:g} to {values[-1]:g} s"


def _estimate(chosen, run: RunRecord):
    """The time the chosen cases' runs (every repeat, on as many nodes as each case) took in the bundle's own run
    (kit.run.estimate: the median run.json wall_seconds of each case)."""
    from kit.run.estimate import durations, estimate
    from kit.run.plan import plan_for_nodes

    runs = [r for nodes in sorted({c.nodes for c in chosen.cases}) for r in plan_for_nodes(chosen, nodes)]
    return estimate(runs, past=durations(run), source="the bundle's own runs of these cases")


def _run(args: argparse.Namespace, suite_file: Path, suite, selection, inv, console, run: RunRecord,
         limits: dict[str, float] | None = None) -> Path:
    """The chosen cases run as kit bench runs them here (its progress bar, the ETA from the bundle's durations),
    or as kit cluster runs them on --hosts (its per-host lines): the run directory."""
    from kit.cli import bench as cli_bench
    from kit.run import bench, records
    from kit.run.estimate import durations

    if inv is not None:
        from kit.cli.multinode import cluster_run

        job = argparse.Namespace(suite=str(suite_file), resume=None, runs_dir=args.runs_dir,
                                 on_failure="continue", force=False, image=None, scheduler=args.scheduler)
        return cluster_run(job, inv, selection, limits)[1]
    run_dir, _ = records.start(suite_file, args.runs_dir)
    try:
        cli_bench._bench_with_progress(bench, run_dir, suite, console, None, selection=selection,
                                       runs_dir=args.runs_dir, past=durations(run),  # run.json records the selection
                                       time_limits=limits)
    except (KitError, OSError):
        records.discard_unstarted(run_dir)  # refused before any run: no empty folder left behind
        raise
    return run_dir


def _failed_runs(ran) -> list[str]:
    """'case repeat N: reason' of each run the reproduction's run.json records without a figure."""
    return [f"{e.case} repeat {e.repeat}: {e.status}: {e.reason}" for e in ran if not e.ok]
