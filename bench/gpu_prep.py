#!/usr/bin/env python3
"""Make and check what a GPU machine without network needs beside the checkout: .whl/ (and .models/ for stage 3).

    python3 bench/gpu_prep.py [--root ROOT] [--wheels FILE] [--wheels-from DIR ...] [--with-program]
                              [--from KEY=SOURCE ...] [--pin KEY=COMMIT ...] [--check]

Run it where PyPI and GitHub (or mirrors of them) are reachable. It makes, under ROOT (default: this checkout):
  .whl/     every wheel bench/gpu_wheels.txt pins (the kit's dependencies, nvImageCodec and nvJPEG for CUDA 13),
            for CPython 3.12 on manylinux x86_64 (or pure Python), by
            `pip download --no-deps --only-binary=:all:`; only the wheels not there yet are downloaded
  .models/  with --with-program only (bench/gpu_proof.py's stage 3, which the default budget does not run: it runs
            as `bash bench/gpu_proof.sh --stages 3`): NVIDIA DeepLearningExamples and dllogger at their pins
            (bench/prepare_models.py, torch/resnet50)
then checks them: each pinned wheel there once, for that platform, a sound zip, and nothing else in .whl/; each
checkout at its commit, clean, with the files bench/dle_native_check.sh reads. It prints the whole size that
travels against the 64 MiB a GPU machine takes: the checkout's tracked files (`git ls-files`, each file's size as
checked out) plus each folder carried, and refuses (exit 1) past it; then the folders to carry and the commands to
run on the GPU machine. Exit status: 0 all good, 1 a download, checkout or check failed, or too much to travel,
2 bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from packaging import tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prepare_models  # noqa: E402

sys.path.insert(0, str(prepare_models.REPO))
from kit.core.inputs import InputError, read_input  # noqa: E402  (standard library only)

REPO = prepare_models.REPO
WHEEL_LIST = REPO / "bench" / "gpu_wheels.txt"
WHEELS, MODELS = ".whl", ".models"
CARRY_LIMIT_MIB = 64  # what may travel with the checkout's tracked files to a lent GPU machine
BIG_WHEEL = 2**20  # wheels of this size or more are listed one by one under .whl's size
GPU_COMMAND = "bash bench/gpu_proof.sh"
SECOND_COMMAND = "bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec"  # where nvimgcodec got no time
PROGRAM_COMMAND = "bash bench/gpu_proof.sh --stages 3"  # DLE beside the harness, from .models/
PROGRAMS = ["torch/resnet50"]  # NVIDIA DLE's PyTorch ResNet50 v1.5 (bench/dle_native_check.sh)
NEEDED_FILES = ("DeepLearningExamples/PyTorch/Classification/ConvNets/main.py", "dllogger/dllogger/__init__.py")
# the GPU machine runs CPython 3.12 (3.12.3 seen); pip is asked for manylinux_2_28 wheels and older
PYTHON = (3, 12)
PIP_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
TARGET_TAGS = {*tags.cpython_tags(PYTHON, abis=["cp312"], platforms=PLATFORMS),
               *tags.compatible_tags(PYTHON, "cp312", PLATFORMS)}
PIP_TIMEOUT_S = 60  # per connection (pip --timeout)
DOWNLOAD_TIMEOUT_S = 1800  # the whole pip download
WHEEL_LIST_BYTES = 2**20


class BadInput(Exception):
    """Exit 2: a wrong option or list line."""


def read_wheel_list(path: Path) -> dict[str, Version]:
    """NAME==VERSION lines (# comments, blank lines) -> {canonical name: version}."""
    pins: dict[str, Version] = {}
    try:
        data = read_input(path, "wheel list", max_bytes=WHEEL_LIST_BYTES)
    except InputError as exc:
        raise BadInput(str(exc)) from None
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = f"byte {raw[exc.start]:#04x} at column {exc.start + 1}"
            raise BadInput(f"{path}:{number}: not UTF-8 ({where})") from None
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", text)
        try:
            version = Version(match[2]) if match else None
        except InvalidVersion:
            version = None
        if version is None:
            raise BadInput(f"{path}:{number}: expected NAME==VERSION, got {text!r}")
        name = canonicalize_name(match[1])
        if name in pins:
            raise BadInput(f"{path}:{number}: {match[1]} is pinned twice")
        pins[name] = version
    if not pins:
        raise BadInput(f"{path}: pins no wheel")
    return pins


def wheel_of(path: Path) -> tuple[str, Version, frozenset] | None:
    """(canonical name, version, tags) from a wheel's file name; None when it is not a wheel's name."""
    try:
        name, version, _build, wheel_tags = parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return name, version, wheel_tags


def missing_wheels(folder: Path, pins: dict[str, Version]) -> list[str]:
    """NAME==VERSION of each pin with no wheel of that name and version in `folder` (whatever its state)."""
    there = {(w[0], w[1]) for f in folder.glob("*.whl") if (w := wheel_of(f))} if folder.is_dir() else set()
    return [f"{name}=={version}" for name, version in pins.items() if (name, version) not in there]


def download(folder: Path, wanted: list[str], mirrors: list[Path]) -> None:
    """`pip download` the NAME==VERSION wheels in `wanted` into `folder`: from PyPI, or only from `mirrors`."""
    folder.mkdir(parents=True, exist_ok=True)
    where = ", ".join(map(str, mirrors)) if mirrors else "the package index"
    command = [sys.executable, "-m", "pip", "download", "--dest", str(folder), "--no-deps", "--only-binary=:all:",
               "--python-version", ".".join(map(str, PYTHON)), "--implementation", "cp",
               *[arg for p in PIP_PLATFORMS for arg in ("--platform", p)],
               "--timeout", str(PIP_TIMEOUT_S), "--disable-pip-version-check", "--progress-bar", "off",
               *(["--no-index", *[arg for m in mirrors for arg in ("--find-links", str(m))]] if mirrors else []),
               *wanted]
    print(f"{WHEELS}: downloading {len(wanted)} wheels from {where}", flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"gpu_prep: pip download from {where} took over {DOWNLOAD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        lacking = re.search(r"No matching distribution found for (\S+)", done.stderr)
        if lacking:
            raise SystemExit(f"gpu_prep: {lacking[1]}: no CPython 3.12 manylinux x86_64 or pure-Python wheel in "
                             f"{where}")
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise SystemExit(f"gpu_prep: pip download from {where} failed: {said[-1] if said else done.returncode}")


def check_wheels(folder: Path, pins: dict[str, Version], list_name: str) -> list[str]:
    """What is wrong with `folder` as the wheels of `pins`: one line each (empty: nothing)."""
    if not folder.is_dir():
        return [f"no {folder}: run bench/gpu_prep.py where PyPI or a wheel mirror (--wheels-from) is reachable"]
    problems: list[str] = []
    found: dict[str, list[Path]] = {name: [] for name in pins}
    for path in sorted(folder.iterdir()):
        wheel = wheel_of(path) if path.suffix == ".whl" and path.is_file() else None
        if wheel is None or pins.get(wheel[0]) != wheel[1]:
            pinned = f" ({list_name} pins {wheel[0]}=={pins[wheel[0]]})" if wheel and wheel[0] in pins else ""
            problems.append(f"{path}: not a wheel {list_name} pins{pinned}: remove it "
                            "(bench/kit_deps.sh installs every .whl/*.whl)")
            continue
        name, _version, wheel_tags = wheel
        found[name].append(path)
        if not wheel_tags & TARGET_TAGS:
            problems.append(f"{path}: for {', '.join(sorted(map(str, wheel_tags)))}, not CPython 3.12 on manylinux "
                            "x86_64 (nor pure Python)")
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            if bad:
                problems.append(f"{path}: corrupt zip (member {bad} fails its CRC)")
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            problems.append(f"{path}: not a sound zip ({exc})")
        except (RuntimeError, NotImplementedError) as exc:  # an encrypted member, or a compression zipfile lacks
            problems.append(f"{path}: not a wheel pip can install ({exc})")
    for name, paths in found.items():
        if not paths:
            problems.append(f"{folder}: no wheel of {name}=={pins[name]} (pinned in {list_name})")
        elif len(paths) > 1:
            problems.append(f"{folder}: {len(paths)} wheels of {name}=={pins[name]}: "
                            f"{', '.join(p.name for p in paths)}: keep one")
    return problems


def check_models(folder: Path, checkouts: list[prepare_models.Checkout]) -> list[str]:
    """What is wrong with `folder` as the checkouts: one line each (empty: nothing)."""
    if not folder.is_dir():
        return [f"no {folder}: run bench/gpu_prep.py where the sources (or --from mirrors) are reachable"]
    problems = []
    for c in checkouts:
        where = folder / c.folder
        if not where.is_dir():
            problems.append(f"no {where} (a checkout of {c.repo} at {c.commit})")
            continue
        found = prepare_models.head(where)
        if found != c.commit:
            problems.append(f"{where}: at {found or 'no git commit'}, the pin is {c.commit}")
        status = subprocess.run(["git", "-C", str(where), "status", "--porcelain"], capture_output=True, text=True,
                                timeout=120)
        if status.returncode != 0:
            said = "; ".join(line.strip() for line in status.stderr.splitlines() if line.strip())
            problems.append(f"{where}: git status failed: {said}")
        elif status.stdout.strip():
            changed = [line[3:] for line in status.stdout.splitlines()]
            problems.append(f"{where}: changed or untracked files: {', '.join(changed[:5])}"
                            + (f" (+{len(changed) - 5} more)" if len(changed) > 5 else ""))
    problems += [f"no {folder / need} (bench/dle_native_check.sh needs it)" for need in NEEDED_FILES
                 if not (folder / need).is_file()]
    return problems


def size_of(folder: Path) -> int:
    """Bytes of the files under `folder` (links not followed), as they travel."""
    total = 0
    for top, _dirs, files in os.walk(folder):
        total += sum(os.lstat(os.path.join(top, f)).st_size for f in files)
    return total


def tracked_size(repo: Path) -> int:
    """Bytes of the checkout's tracked files (git ls-files), each as checked out (links not followed): what travels
    of the checkout itself."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"gpu_prep: cannot list the tracked files of {repo}: {exc}") from None
    if listed.returncode != 0:
        said = listed.stderr.decode(errors="replace").strip().splitlines()
        raise SystemExit(f"gpu_prep: cannot list the tracked files of {repo}: git ls-files: "
                         f"{said[-1] if said else listed.returncode}")
    total = 0
    for name in filter(None, listed.stdout.split(b"\0")):
        try:
            info = os.lstat(repo / os.fsdecode(name))
        except FileNotFoundError:  # deleted here, not yet committed: it does not travel
            continue
        total += 0 if stat.S_ISDIR(info.st_mode) else info.st_size  # a submodule's folder: not its files
    return total


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[5:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO,
                        help="make ROOT/.whl and ROOT/.models (default: this checkout)")
    parser.add_argument("--wheels", type=Path, default=WHEEL_LIST, metavar="FILE",
                        help="the NAME==VERSION list (default: bench/gpu_wheels.txt)")
    parser.add_argument("--wheels-from", dest="mirrors", action="append", default=[], type=Path, metavar="DIR",
                        help="take the wheels from DIR only, a folder of wheels (pip --no-index --find-links DIR); "
                             "repeatable")
    parser.add_argument("--from", dest="sources", action="append", default=[], type=prepare_models.source_value,
                        metavar="KEY=SOURCE", help="fetch KEY (dle, dllogger) from SOURCE, a URL or a local "
                        "mirror or clone, instead of GitHub (bench/prepare_models.py --from)")
    parser.add_argument("--pin", dest="pins", action="append", default=[], type=prepare_models.pin_value,
                        metavar="KEY=COMMIT", help="make and check KEY (dle, dllogger) at COMMIT instead of its pin "
                        "(bench/prepare_models.py --pin; kit bench then runs it only with --force)")
    parser.add_argument("--with-program", action="store_true",
                        help="also make, check and carry .models (gpu_proof's stage 3, run as "
                             f"`{PROGRAM_COMMAND}`); without it .models is neither made nor counted")
    parser.add_argument("--check", action="store_true", help="only check ROOT/.whl (and ROOT/.models); fetch nothing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        pins = read_wheel_list(args.wheels)
        for mirror in args.mirrors:
            if not mirror.is_dir():
                raise BadInput(f"--wheels-from {mirror}: no such folder")
        sources, commits = dict(args.sources), dict(args.pins)
        try:
            checkouts = prepare_models.planned(PROGRAMS, commits)
        except SystemExit as exc:
            raise BadInput(str(exc).removeprefix("prepare_models: ")) from None
        for option, given in (("--from", sources), ("--pin", commits)):
            if error := prepare_models.unknown_keys(option, given, checkouts, PROGRAMS):
                raise BadInput(error.removeprefix("prepare_models: "))
    except BadInput as exc:
        print(f"gpu_prep: {exc}", file=sys.stderr)
        return 2
    wheels, models = args.root / WHEELS, args.root / MODELS
    list_name = args.wheels.name

    carried = [WHEELS, MODELS] if args.with_program else [WHEELS]
    if not args.check:
        prepare_models.exclude(wheels)
        wanted = missing_wheels(wheels, pins)
        if wanted:
            download(wheels, wanted, args.mirrors)
        else:
            print(f"{WHEELS}: the {len(pins)} wheels of {list_name} are there already")
        if args.with_program:
            prepare_models.prepare(models, checkouts, sources)

    problems = check_wheels(wheels, pins, list_name) + (check_models(models, checkouts) if args.with_program else [])
    tracked = tracked_size(REPO)
    print(f"{'tracked':<8} {mib(tracked):>10}  the checkout's tracked files (git ls-files, as checked out)")
    sizes = {name: size_of(args.root / name) for name in carried if (args.root / name).is_dir()}
    for name, size in sizes.items():
        print(f"{name:<8} {mib(size):>10}")
        if name == WHEELS:  # the wheels that weigh (nvImageCodec's, cryptography's), each
            for path in sorted(wheels.glob("*.whl"), key=lambda p: -p.stat().st_size):
                if path.stat().st_size >= BIG_WHEEL:
                    print(f"  {mib(path.stat().st_size):>10}  {path.name}")
    total = tracked + sum(sizes.values())
    print(f"{'total':<8} {mib(total):>10} of the {CARRY_LIMIT_MIB} MiB that may travel with the checkout "
          f"({mib(max(CARRY_LIMIT_MIB * 2**20 - total, 0))} left)")
    if total > CARRY_LIMIT_MIB * 2**20:
        problems.append(f"the checkout's tracked files and {' and '.join(sizes) or 'no folder'} make {mib(total)}, "
                        f"over the {CARRY_LIMIT_MIB} MiB that may travel with the checkout (tracked files "
                        f"{mib(tracked)}, " + ", ".join(f"{n} {mib(v)}" for n, v in sizes.items()) + ")")
    if problems:
        for problem in problems:
            print(f"gpu_prep: {problem}", file=sys.stderr)
        return 1
    print(f"checked: {len(pins)} wheels ({list_name}) for CPython 3.12 manylinux x86_64"
          + "".join(f"; {c.folder} at {c.commit[:12]}" for c in checkouts if args.with_program))
    print(f"carry: {' '.join(carried)}")
    print(f"on the GPU machine, in the checkout: {GPU_COMMAND}")
    print(f"  then, where nvimgcodec got no time and the machine is still warm: {SECOND_COMMAND}")
    if args.with_program:
        print(f"  and for NVIDIA DLE's ResNet50 beside the harness: {PROGRAM_COMMAND}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
