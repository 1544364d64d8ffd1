#!/usr/bin/env python3
"""Check out the published programs' code at the commits docker/pins.yaml pins, for hosts that run them natively.

    python3 bench/prepare_models.py [--dest .models] [--from KEY=SOURCE ...] [--pin KEY=COMMIT ...]
                                    [FRAMEWORK/MODEL ...]

Run it where git can reach the sources (a URL, or a local mirror or clone); the folder it makes then travels to a
host without network (bench/dle_native_check.sh reads .models/ beside the kit; elsewhere set KIT_MODEL_CODE to it).
For each program (default torch/resnet50: NVIDIA DeepLearningExamples' PyTorch ResNet50 v1.5) it makes
DEST/<its folder> (DeepLearningExamples, PaddleClas, ...) at the pinned commit, with only the program's folder in the
work tree (a sparse, blob-less checkout: DLE's whole tree is 123 MB, PyTorch/Classification/ConvNets 2 MB), and
DEST/<package> for each package it imports from a checkout of its own (DLE PyTorch: dllogger, at the commit of the
tag DLE's requirements.txt names). KEY=SOURCE fetches a model_code key (dle, paddleclas, ...) or package folder
(dllogger) from SOURCE instead of its repository URL, e.g.
    --from dle=/work/.mirror/NVIDIA+DeepLearningExamples/repo --from dllogger=/work/.mirror/NVIDIA+dllogger/repo
KEY=COMMIT checks out that full commit instead of the pin (another commit of a program, or a mirror whose history
lacks the pin); the kit then runs it only with `kit bench --force`, which records it.
SOURCE may also be an archive of the program's paths at the pin (../shared/programs/*.tar.gz: one top folder holding
them): it is unpacked, and kept only if its files are the pinned tree's (scripts/reference/trees/<key>.txt), which is
how the kit then judges that copy too (no git history needed).
A checkout already at its pin is kept; one at another commit is an error (nothing is overwritten). A DEST inside
this repository that git does not ignore is added to .git/info/exclude.
NAME=ARCHIVE stages a saved program a program would download at run time (FleetX VGG16: vgg16_nchw, from the URL
docker/pins.yaml names) into DEST/saved-programs/, when the archive's sha256 is the one pins.yaml records; where it
records none yet, the operator states it with --sha256 NAME=HEX (recorded as theirs). Each file is hashed into a
record beside it, which the program's driver checks before it runs.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kit.config import programs  # noqa: E402
from kit.core.catalogue import load  # noqa: E402
from kit.images.spec import current_pins  # noqa: E402
from kit.run import plan  # noqa: E402

saved_programs = load("saved_programs", "reference")

# a local source (path or file://) serves a blob-less fetch and any commit only when its upload-pack allows it
UPLOAD_PACK = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
DEFAULT_PROGRAMS = ["torch/resnet50"]
GIT_TIMEOUT_S = 1800  # a whole fetch of a sparse, blob-less checkout


@dataclass(frozen=True)
class Checkout:
    key: str  # what --from and --pin name: a model_code key (dle) or a package folder (dllogger)
    folder: str  # under DEST
    repo: str
    commit: str
    subdirs: tuple[str, ...]  # only these in the work tree (sparse); empty: all of it


def _pair(text: str, expected: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not (key and sep and value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
    return key, value


def source_value(text: str) -> tuple[str, str]:
    """argparse type of --from KEY=SOURCE."""
    return _pair(text, "KEY=SOURCE, e.g. dle=/path/to/a/mirror")


def sha256_value(text: str) -> tuple[str, str]:
    """argparse type of --sha256 NAME=HEX."""
    name, digest = _pair(text, "NAME=SHA256, e.g. vgg16_nchw=<64 lowercase hex digits>")
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise argparse.ArgumentTypeError(f"{text!r}: a sha256 is 64 lowercase hex digits")
    return name, digest


def pin_value(text: str) -> tuple[str, str]:
    """argparse type of --pin KEY=COMMIT."""
    key, commit = _pair(text, "KEY=COMMIT, e.g. dle=<a commit's 40 hex digits>")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise argparse.ArgumentTypeError(f"{text!r}: the commit must be 40 lowercase hex digits")
    return key, commit


def git(*args: str, cwd: Path | None = None, doing: str | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        what = doing or "git " + " ".join(args)
        raise SystemExit(f"prepare_models: {what}: no answer in {GIT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = "; ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise SystemExit(f"prepare_models: {doing or 'git ' + ' '.join(args)}: {said or f'exit {done.returncode}'}")
    return done.stdout.strip()


def head(where: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def checkout(where: Path, source: str, commit: str, folders: list[str]) -> None:
    """`where` at `commit` from `source`; with `folders`, only those in the work tree."""
    if where.exists():
        found = head(where)
        if found != commit:
            raise SystemExit(f"prepare_models: {where} exists at {found or 'no git commit'}, the pin is {commit}: "
                             "remove it or check the pin out there")
        if folders:
            git("sparse-checkout", "add", *folders, cwd=where)
        print(f"{where}: at {commit} already")
        return
    where.mkdir(parents=True)
    try:
        git("init", "-q", cwd=where)
        git("remote", "add", "origin", source, cwd=where)
        git("config", "remote.origin.uploadpack", UPLOAD_PACK, cwd=where)
        git("fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit, cwd=where,
            doing=f"{where}: fetching {commit} from {source}")
        if folders:
            git("sparse-checkout", "set", *folders, cwd=where)
        git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=where)
    except SystemExit:
        shutil.rmtree(where)  # a half-made checkout would block the next try
        raise
    if head(where) != commit:
        raise SystemExit(f"prepare_models: {where} is at {head(where)} after the checkout, not {commit}")
    print(f"{where}: {source} at {commit}" + (f" ({', '.join(folders)})" if folders else ""))


def is_archive(source: str) -> bool:
    return source.endswith((".tar.gz", ".tgz")) and Path(source).is_file()


def unpack(where: Path, archive: str, commit: str, key: str) -> None:
    """`where` as the archive's one top folder, kept only if its files are the pinned tree's; a `where` already there
    is judged the same way and kept or refused."""
    listing = plan.pinned_listing(key)
    if listing is None or listing.commit != commit:
        raise SystemExit(f"prepare_models: {archive}: the kit lists no tree of {key} at {commit} to check an "
                         f"archive against (scripts/reference/trees/{key}.txt); use a git source")
    if where.exists():
        if differs := plan.code_state.differences(plan.code_state.files_state(str(where), listing), commit):
            raise SystemExit(f"prepare_models: {where} exists and is not {key} at {commit}: {'; '.join(differs)}")
        print(f"{where}: at {commit} already (its files)")
        return
    part = where.with_name(f".{where.name}.part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            tops = {PurePosixPath(m.name).parts[0] for m in tar.getmembers()}
            if len(tops) != 1:
                raise SystemExit(f"prepare_models: {archive}: expected one top folder, found {sorted(tops)[:5]}")
            tar.extractall(part, filter="data")
        (top,) = tops
        if differs := plan.code_state.differences(plan.code_state.files_state(str(part / top), listing), commit):
            raise SystemExit(f"prepare_models: {archive} is not {key} at {commit}: {'; '.join(differs)}")
        (part / top).rename(where)
    except (OSError, tarfile.TarError) as exc:
        raise SystemExit(f"prepare_models: {archive}: {exc}") from None
    finally:
        shutil.rmtree(part, ignore_errors=True)
    print(f"{where}: {archive} at {commit} ({', '.join(listing.paths)}: {len(listing)} files, each the pinned one)")


def exclude(dest: Path) -> None:
    """Keep DEST out of git (and so out of commits) when it lies inside this repository."""
    try:
        rel = dest.resolve().relative_to(REPO)
    except ValueError:
        return
    # the trailing slash: a folder not made yet still matches a folder pattern (/.models/)
    if subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"{rel.as_posix()}/"], timeout=60).returncode:
        info = REPO / git("-C", str(REPO), "rev-parse", "--git-path", "info/exclude")
        info.parent.mkdir(parents=True, exist_ok=True)
        with open(info, "a") as out:
            out.write(f"/{rel.as_posix()}/\n")
        print(f"added /{rel.as_posix()}/ to {info.relative_to(REPO) if info.is_relative_to(REPO) else info}")


def planned(names: list[str], pins: dict[str, str] | None = None) -> list[Checkout]:
    """The checkouts the programs `names` (FRAMEWORK/MODEL) need, at their pins; `pins` (KEY: COMMIT) overrides."""
    pins = pins or {}
    code_pins = current_pins().model_code
    code: dict[str, list[str]] = {}  # model_code key -> the programs' folders in it
    packages: dict[str, programs.Package] = {}
    for name in names:
        try:
            impl = programs.implementation(*name.split("/", 1))
        except (TypeError, programs.ReferenceError) as exc:
            raise SystemExit(f"prepare_models: {name}: {exc}") from None
        if impl.code not in code_pins:
            raise SystemExit(f"prepare_models: {impl.title}: docker/pins.yaml pins no {impl.code} (model_code)")
        code.setdefault(impl.code, []).extend([impl.subdir] if impl.subdir else [])
        packages.update({p.folder: p for p in impl.packages})
    return ([Checkout(key, programs.CODE_DIRS[key], code_pins[key].repo, pins.get(key, code_pins[key].commit),
                      tuple(folders)) for key, folders in code.items()]
            + [Checkout(folder, folder, p.repo, pins.get(folder, p.commit), ()) for folder, p in packages.items()])


def unknown_keys(option: str, given: dict[str, str], checkouts: list[Checkout], names: list[str]) -> str | None:
    """The error for `option` keys (--from, --pin) that name none of `checkouts`, or None."""
    unknown = set(given) - {c.key for c in checkouts}
    if not unknown:
        return None
    return (f"prepare_models: {option} {', '.join(sorted(unknown))}: not needed by {', '.join(names)} "
            f"(keys: {', '.join(sorted(c.key for c in checkouts))})")


def prepare(dest: Path, checkouts: list[Checkout], sources: dict[str, str]) -> None:
    """Each checkout under `dest`, fetched from its repository or `sources[key]`."""
    exclude(dest)
    for c in checkouts:
        source = sources.get(c.key, c.repo)
        if is_archive(source):
            unpack(dest / c.folder, source, c.commit, c.key)
        else:
            checkout(dest / c.folder, source, c.commit, list(c.subdirs))


def saved_wanted(names: list[str], given: set[str]) -> dict:
    """NAME: (program, SavedProgram, its pin) of each saved program the programs `names` load; SystemExit where
    `given` names one they do not."""
    code_pins = current_pins().model_code
    wanted = {}
    for name in names:
        impl = programs.implementation(*name.split("/", 1))
        pins = {p.name: p for p in code_pins[impl.code].saved_programs}
        for saved in impl.saved_programs:
            wanted[saved.name] = (impl, saved, pins.get(saved.name))
    if unknown := given - set(wanted):
        raise SystemExit(f"prepare_models: --saved-program/--sha256 {', '.join(sorted(unknown))}: not loaded by "
                         f"{', '.join(names)} (saved programs: {', '.join(sorted(wanted)) or 'none'})")
    return wanted


def stage_saved_programs(dest: Path, wanted: dict, archives: dict[str, str], stated: dict[str, str]) -> None:
    """Each saved program `wanted`, staged from `archives` (NAME: file) where given and checked by sha256 (pins.yaml's,
    else the one `stated`); one not given is checked if staged, else named with its URL."""
    root = dest / programs.SAVED_PROGRAMS_DIR
    for name, (impl, saved, pin) in wanted.items():
        if pin is None:
            raise SystemExit(f"prepare_models: {impl.title} loads {name}, which docker/pins.yaml does not list "
                             f"(model_code.{impl.code}.saved_programs)")
        try:
            if name not in archives:
                record = saved_programs.check(root, saved.into, name)
            elif pin.sha256 and name in stated and stated[name] != pin.sha256:
                raise SystemExit(f"prepare_models: --sha256 {name}={stated[name]} is not the {pin.sha256} "
                                 f"docker/pins.yaml records")
            elif pin.sha256 or name in stated:
                record = saved_programs.stage(
                    Path(archives[name]), root, saved.into, name, saved.reads, pin.sha256 or stated[name],
                    "docker/pins.yaml" if pin.sha256 else "the operator (--sha256; docker/pins.yaml records none)")
            else:
                found = saved_programs.sha256_of(Path(archives[name]))
                raise SystemExit(f"prepare_models: docker/pins.yaml records no sha256 for {name} ({pin.url}): "
                                 f"check where {archives[name]} came from, then state its sha256 ({found}) with "
                                 f"--sha256 {name}=SHA256")
        except saved_programs.SavedProgramError as exc:
            if name in archives:
                raise SystemExit(f"prepare_models: {exc}") from None
            print(f"{impl.title} loads its saved program {name}, which is not staged ({exc}): download {pin.url}, "
                  f"then --saved-program {name}=THE_FILE")
            continue
        except OSError as exc:
            raise SystemExit(f"prepare_models: {archives[name]}: {exc.strerror}") from None
        print(f"{root / saved.into / name}: {record['archive']} (sha256 {record['archive_sha256']} from "
              f"{record['sha256_from']}; {len(record['files'])} files)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", default=DEFAULT_PROGRAMS, metavar="FRAMEWORK/MODEL")
    parser.add_argument("--dest", type=Path, default=REPO / ".models")
    parser.add_argument("--from", dest="sources", action="append", default=[], type=source_value, metavar="KEY=SOURCE",
                        help="fetch KEY (dle, dllogger, ...) from SOURCE (a URL, a local mirror or clone, an archive)")
    parser.add_argument("--pin", dest="pins", action="append", default=[], type=pin_value, metavar="KEY=COMMIT",
                        help="check out COMMIT for KEY instead of its pin (kit bench then needs --force)")
    parser.add_argument("--saved-program", dest="archives", action="append", default=[], type=source_value,
                        metavar="NAME=ARCHIVE", help="stage a program's saved program (vgg16_nchw) from ARCHIVE")
    parser.add_argument("--sha256", dest="stated", action="append", default=[], type=sha256_value,
                        metavar="NAME=SHA256", help="the archive's sha256, where docker/pins.yaml records none")
    args = parser.parse_args()
    sources, pins, archives, stated = dict(args.sources), dict(args.pins), dict(args.archives), dict(args.stated)
    checkouts = planned(args.programs, pins)
    for option, given in (("--from", sources), ("--pin", pins)):
        if error := unknown_keys(option, given, checkouts, args.programs):
            raise SystemExit(error)
    wanted = saved_wanted(args.programs, set(archives) | set(stated))
    prepare(args.dest, checkouts, sources)
    stage_saved_programs(args.dest, wanted, archives, stated)
    print(f"model code for {', '.join(args.programs)} under {args.dest.resolve()} (KIT_MODEL_CODE)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
