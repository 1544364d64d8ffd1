"""`kit reproduce BUNDLE`: run a verified bundle's cases again on this host, from what the bundle records (its suite,
the harness it ran), and say per case whether the figure came out the same (kit.results.reproduction).

    kit reproduce bundle.tar.gz [--cases 'torch/resnet50/*'] [--sample 2 --seed 7] [--tolerance 0.05]

The bundle is verified first: one that does not verify is not reproduced. Refused (exit 2) where this kit's harness
files differ from those the bundle ran, unless --force (recorded in reproduction.json). Leaves a normal run
directory (report, results, bundle-able) with reproduction.json and reproduction.md beside its report, naming the
original bundle's sha256. Exit: 0 every case reproduced, 1 any not reproduced, 2 bad input, 3 inconclusive or not
comparable only. This host only: --hosts for SSH and Slurm are not built yet.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import random
import tempfile
from pathlib import Path

from kit.cli.common import progress_console
from kit.core.inputs import InputError, parse_json


def add_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="re-run a verified bundle's cases here and say per case whether its figure "
                       "came out the same", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path, metavar="BUNDLE", help="a bundle (.tar.gz of kit bundle) or its folder")
    p.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                   help="only the cases whose key matches (fnmatch: 'torch/resnet50/*'); repeatable; default all")
    p.add_argument("--sample", type=int, metavar="N", help="N of the chosen cases drawn at random (--seed)")
    p.add_argument("--seed", type=int, default=0, help="the draw's seed, recorded [0]")
    p.add_argument("--tolerance", type=float, default=None, help="reproduced within a factor 1 + this either way "
                   "[0.05], recorded")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the reproduction's run goes [runs/]")
    p.add_argument("--force", action="store_true", help="reproduce although this kit's harness files differ from "
                   "the bundle's (recorded)")
    p.add_argument("--allowed-signers", type=Path, help="verify the bundle's signature against these signers")


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


def _code_differences(meta: dict) -> list[str]:
    from kit.core.catalogue import harness_sha256
    ran = meta.get("harness_sha256") if isinstance(meta.get("harness_sha256"), dict) else {}
    here = harness_sha256()
    return [f"{name}: {str(ran.get(name))[:12]} in the bundle, {str(here.get(name))[:12]} here"
            for name in sorted(set(ran) | set(here)) if ran.get(name) != here.get(name)]


def cmd_reproduce(args: argparse.Namespace) -> int:
    from kit.audit import unpack
    from kit.audit.verify import verify
    from kit.results import reproduction as rp

    tolerance = rp.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 < tolerance <= 10:
        raise InputError("--tolerance", f"must lie in (0, 10], got {tolerance}")
    verdict = verify(args.bundle, args.allowed_signers)
    if not verdict.ok:
        print("\n".join(verdict.lines()[:12]))
        raise InputError(args.bundle, "does not verify, so it is not reproduced (kit verify says why above)")
    with tempfile.TemporaryDirectory(prefix="kit-reproduce-") as tmp:
        root = args.bundle if args.bundle.is_dir() else unpack.unpack(args.bundle, Path(tmp))
        (original,) = [p for p in (root / "run").iterdir() if p.is_dir()]
        return _reproduce(args, root, original, tolerance, rp)


def _reproduce(args: argparse.Namespace, root: Path, original: Path, tolerance: float, rp) -> int:
    from kit.audit.bundle import system_description
    from kit.config.suites import load_suite
    from kit.run import bench, records
    from kit.run.frozen import Selection

    meta = parse_json(original.joinpath("run.json").read_bytes())
    figures = rp.figures_by_case(parse_json(original.joinpath("results.json").read_bytes()))
    chosen = _choose(sorted(figures), args.cases, args.sample, args.seed)
    suite = load_suite(original / "suite.yaml")
    recorded = meta.get("runs") if isinstance(meta.get("runs"), dict) else {}
    estimate = sum(e.get("wall_seconds") or 0 for e in recorded.values()
                   if isinstance(e, dict) and e.get("case") in chosen)
    original_system = parse_json(root.joinpath("system.json").read_bytes()) if (root / "system.json").is_file() \
        else {}
    if why := bench.host_refusal(suite):  # a GPU bundle on a host without one: nothing to run, nothing comparable
        system = rp.system_differences(original_system, {"accelerators_per_node": "0", "number_of_nodes": "1"},
                                       False)
        verdicts = [rp.compare_case(key, figures[key], [], tolerance, system) for key in chosen]
        print(f"kit reproduce: not run here ({why})")
        print(rp.to_markdown(verdicts, args.bundle.name, tolerance), end="")
        return rp.exit_code(verdicts)
    differs = _code_differences(meta)
    if differs and not args.force:
        raise InputError(args.bundle, "this kit's harness files differ from the bundle's (" + "; ".join(differs[:3])
                         + "): reproduce with the kit that made it, or --force (recorded)")
    console = progress_console()
    console.print(f"kit reproduce: {len(chosen)} case(s) of {args.bundle}, about {estimate / 60:.1f} min of runs "
                  "(the bundle's own durations)", soft_wrap=True, markup=False)
    run_dir, _ = records.start(original / "suite.yaml", args.runs_dir)
    result = bench.run_bench(run_dir, suite, selection=Selection(select=tuple(chosen)))  # run.json records it
    here = rp.figures_by_case(parse_json((run_dir / "results.json").read_bytes()))
    this_system = system_description(run_dir, None, "reproduction", "this host")
    system = rp.system_differences(original_system, this_system, suite.hardware == "cpu")
    verdicts = [rp.compare_case(key, figures[key], here.get(key, []), tolerance, system) for key in chosen]
    digest = hashlib.sha256(args.bundle.read_bytes()).hexdigest() if args.bundle.is_file() else None
    record = {"schema_version": 1, "bundle": str(args.bundle), "bundle_sha256": digest, "tolerance": tolerance,
              "cases": chosen, "patterns": args.cases, "sample": args.sample, "seed": args.seed,
              "forced": differs if args.force else [], "system_differences": system,
              "failed_runs": [o.reason for o in result.failed], "verdicts": [v.to_dict() for v in verdicts]}
    (run_dir / "reproduction.json").write_text(json.dumps(record, indent=2) + "\n")
    text = rp.to_markdown(verdicts, args.bundle.name, tolerance)
    (run_dir / "reproduction.md").write_text(text)
    print(text, end="")
    print(f"{run_dir / 'reproduction.json'}")
    return rp.exit_code(verdicts)

