"""`kit bundle RUN_DIR` and `kit verify BUNDLE`: the auditor's side of the kit."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from kit.config import settings
from kit.core.inputs import InputError, KitError
from kit.core.text import printable

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2
VERIFY_EXIT = """\
Check a bundle: hashes, signature, rules; recompute every figure from the raw logs.

exit status:
  0  every file intact, every rule holds, the signature (if any) intact. With --allowed-signers the verdict
     is "OK": signed by a key you allow. Without it the verdict is "CONSISTENT, authenticity NOT checked":
     the bundle agrees with itself, but an unsigned or signature-stripped bundle proves nothing about who
     made it (anyone can rebuild a manifest)
  1  a violation (a changed file, a corrupt archive, a rule that fails, a bad or missing required
     signature), each listed
  2  bad input: no such bundle, an unreadable allowed-signers file, a bad flag (one line)
"""


def add_parser(sub) -> None:
    p = sub.add_parser("bundle", help="one tar.gz of a run (or a sweep) for auditors: logs, captures, system "
                                      "description, manifest (sha256), optional OpenSSH signature")
    p.add_argument("run_dir", type=Path, help="runs/<id>: a run's directory, or a sweep's (each host's run directory "
                                              "bundled and verified as a run's; the fleet table re-derived)")
    p.add_argument("-o", "--out", type=Path, help="bundle file (default: <run_dir>.bundle.tar.gz)")
    p.add_argument("--force", action="store_true", help="replace an existing bundle file")
    p.add_argument("--sign-key", type=Path, help="sign manifest.json with this OpenSSH key (ssh-keygen -Y sign)")
    p.add_argument("--submitter", help="organisation (default: hosts file's system.submitter, else $USER)")
    p.add_argument("--system-name", help="system name (default: hosts file's system.name, else the host name)")
    p.add_argument("--claims", type=Path, help="published claims (kit crosscheck format) to carry and verify")
    p.add_argument("--hosts-file", type=Path, help="read system: from this hosts file (default: hosts.yaml, "
                                                   "$KIT_HOSTS_FILE)")
    p.add_argument("--rules", help="judge the run's records by this rule set of the kit, e.g. v11 [the one run.json "
                   "records; for a run that records none, the set current when it started]")
    p = sub.add_parser("verify", help="check a bundle: hashes, signature, rules; recompute every figure",
                       description=VERIFY_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path, help="a .tar.gz from kit bundle (or its unpacked folder)")
    p.add_argument("--allowed-signers", type=Path, help="OpenSSH allowed-signers file; requires a valid signature")
    p.add_argument("--rules", help="rule set of this kit, e.g. v1 (default: the newest; a bundle never chooses it)")
    p.add_argument("--original", type=Path, metavar="ORIG",
                   help="for a reproduction's bundle: the bundle it reproduced, verified too, its digest and figures "
                        "held to what the reproduction says of it")
    p.add_argument("--json", action="store_true", help="print the compliance report as JSON")
    p.add_argument("--max-unpacked-bytes", type=int, metavar="N",
                   help="refuse a .tar.gz unpacking to more than N bytes (default 4 GiB), before extracting it")
    p.add_argument("--max-ratio", type=float, metavar="N",
                   help="refuse a .tar.gz unpacking to more than N times its size (default 250), before extracting it")
    p.add_argument("--claims-rel-tol", type=float, metavar="T",
                   help="relative tolerance for re-derived published claims (default 1e-3); a claim's own rel_tol "
                        "can only tighten it")


def _system_names(args: argparse.Namespace) -> tuple[str | None, str | None]:
    from kit.config.hosts import load_hosts

    path = settings.optional_hosts_file(args.hosts_file)
    submitter = system_name = None
    if path is not None:
        inv = load_hosts(path)
        submitter, system_name = inv.submitter, inv.system_name
    return args.submitter or submitter, args.system_name or system_name


DERIVED_RULES = ("results_recomputed", "report_recomputed", "derived_files_recomputed")  # what `kit report` rewrites
DERIVED_FILES = ("report.md", "report.html", "results.json", "results.csv")  # and every plot (*.png) beside them


def cmd_bundle(args: argparse.Namespace) -> int:
    from kit.audit.bundle import make_bundle
    from kit.audit.rules.engine import newest, rules_of_run, versions
    from kit.audit.verify import verify
    from kit.core.rundir import is_sweep, read_run_meta

    try:
        submitter, system_name = _system_names(args)
        swept = is_sweep(args.run_dir)
        if swept:  # each row's run directory judged by the rules its run.json names (the newest of them)
            from kit.audit.bundle import bundled_parts
            from kit.audit.sweep import rules_of_sweep

            meta = {}
            rules, why = rules_of_sweep({row: read_run_meta(part) for row, part in
                                         bundled_parts(args.run_dir.resolve()).items()})
        else:
            meta = read_run_meta(args.run_dir, missing_ok=True) or {}
            rules, why = rules_of_run(meta)
        if args.rules is not None:
            if args.rules not in versions():
                raise InputError("--rules", f"{args.rules!r} is no rule set of this kit ({', '.join(versions())})")
            rules, why = args.rules, f"named with --rules (run.json's own: {rules})"

        def bundle(run_dir: Path) -> Path:
            return make_bundle(run_dir, args.out, sign_key=args.sign_key, submitter=submitter,
                               system_name=system_name, claims=args.claims, force=args.force or run_dir != args.run_dir,
                               rules_version=rules)

        out = bundle(args.run_dir)
        result = verify(out, rules_version=rules)  # a bundle that would not verify is reported at once
        stale = sorted({v.where.split(":")[0] for v in result.violations if v.rule in DERIVED_RULES})
        if stale and not swept and not _made_by_this_kit(meta):  # what is derived is written again from the logs,
            # in a copy beside the bundle, which kit bundle writes anyway: on the run's file system its records link
            with tempfile.TemporaryDirectory(prefix=".kit-bundle-rebuilt-", dir=out.parent) as tmp:
                out = bundle(_rebuilt(args.run_dir, Path(tmp)))
            result = verify(out, rules_version=rules)
            print(printable(f"kit bundle: {', '.join(stale)} differed from what this kit writes from the run's logs "
                            "(an earlier kit's, or edited): the bundle holds them as this kit writes them (report, "
                            "results, plots); the run directory keeps its own"), file=sys.stderr)
    except (KitError, InputError, OSError) as exc:
        print(printable(f"kit bundle: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    if rules != newest() or args.rules is not None:
        print(printable(f"kit bundle: its records judged by rule set {rules}, {why}; an auditor judges it so with "
                        f"`kit verify --rules {rules} {out}`"), file=sys.stderr)
    size = out.stat().st_size
    print(printable(f"{out}  ({size / 2**20:.2f} MiB, {result.files} files, signature: {result.signature.state})"))
    if not result.ok:
        print("kit bundle: the bundle does NOT verify:", file=sys.stderr)
        for v in result.violations:
            print(printable(f"  [{v.rule}] {v.where}: {v.message}"), file=sys.stderr)
        if stale := sorted({v.where.split(":")[0] for v in result.violations if v.rule in DERIVED_RULES}):
            print(printable(f"kit bundle: {', '.join(stale)} differ from what this kit writes from the run's logs "
                            f"(written by an earlier kit, or edited): `kit report {args.run_dir}` writes them again "
                            "from the logs; then bundle it (--force to replace this bundle)"), file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def _made_by_this_kit(meta: dict) -> bool:
    """The run was made at this kit's commit: a derived file that differs was edited, and is not rebuilt."""
    from kit.core.revision import source_revision

    made = meta.get("kit_commit")
    return isinstance(made, dict) and made.get("commit") is not None and made.get("commit") == \
        source_revision().get("commit")


def _rebuilt(run_dir: Path, tmp: Path) -> Path:
    """A copy of RUN_DIR under TMP, its raw records linked (copied where links cannot be made), its report,
    results and plots written by this kit from the logs as `kit report` writes them; RUN_DIR is only read."""
    from kit.core import filecache
    from kit.core.runlock import LOCK_NAME
    from kit.results import html
    from kit.run.bench import compose_report
    from kit.run.frozen import run_suite

    top = Path(run_dir).resolve()

    def derived(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if Path(folder).resolve() == top and (
            n in DERIVED_FILES or n == LOCK_NAME or n.endswith(".png"))]

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    copy = tmp / top.name
    shutil.copytree(top, copy, symlinks=True, ignore=derived, copy_function=link)
    suite, _source = run_suite(copy)
    with filecache.cached():
        html.write_report_files(compose_report(copy, suite), copy)
    return copy


def cmd_verify(args: argparse.Namespace) -> int:
    from kit.audit.verify import verify

    try:
        limits = {"max_unpacked_bytes": args.max_unpacked_bytes, "max_ratio": args.max_ratio,
                  "claims_rel_tol": args.claims_rel_tol}
        limits = {k: v for k, v in limits.items() if v is not None}
        original = None
        if args.original is not None:
            from kit.audit.pair import Side

            checked = verify(args.original, args.allowed_signers, args.rules, **limits)
            original = checked.side or Side(str(args.original), None)
            original.ok, original.violations = checked.ok, len(checked.violations)
        result = verify(args.bundle, args.allowed_signers, args.rules, original=original, **limits)
    except (KitError, InputError, OSError) as exc:
        print(printable(f"kit verify: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        # json.dumps escapes every control character but DEL (ASCII, printed raw): escaped here too; the values
        # stay exact (a member's real name), only their spelling in the JSON text changes
        print(json.dumps(result.to_dict(), indent=2).replace("\x7f", "\\u007f"))
    else:
        print("\n".join(result.lines()))
    return EXIT_OK if result.ok else EXIT_MISMATCH
