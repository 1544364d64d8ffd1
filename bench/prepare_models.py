#!/usr/bin/env python3
"""Check out the published programs' code at the commits docker/pins.yaml pins, for hosts that run them natively.

    python3 bench/prepare_models.py [--dest .models] [--from KEY=SOURCE ...] [FRAMEWORK/MODEL ...]

Run it where git can reach the sources (a URL, or a local mirror or clone); the folder it makes then travels to a
host without network (bench/dle_native_check.sh reads .models/ beside the kit; elsewhere set KIT_MODEL_CODE to it).
For each program (default torch/resnet50: NVIDIA DeepLearningExamples' PyTorch ResNet50 v1.5) it makes
DEST/<its folder> (DeepLearningExamples, PaddleClas, ...) at the pinned commit, with only the program's folder in the
work tree (a sparse, blob-less checkout: DLE's whole tree is 123 MB, PyTorch/Classification/ConvNets 2 MB), and
DEST/<package> for each package it imports from a checkout of its own (DLE PyTorch: dllogger, at the commit of the
tag DLE's requirements.txt names). KEY=SOURCE fetches a model_code key (dle, paddleclas, ...) or package folder
(dllogger) from SOURCE instead of its repository URL, e.g.
    --from dle=/work/.mirror/NVIDIA+DeepLearningExamples/repo --from dllogger=/work/.mirror/NVIDIA+dllogger/repo
A checkout already at its pin is kept; one at another commit is an error (nothing is overwritten). A DEST inside
this repository that git does not ignore is added to .git/info/exclude.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kit.config import programs  # noqa: E402
from kit.images.spec import current_pins  # noqa: E402

# a local source (path or file://) serves a blob-less fetch and any commit only when its upload-pack allows it
UPLOAD_PACK = "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"prepare_models: git {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout.strip()


def head(where: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True)
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
    git("init", "-q", cwd=where)
    git("remote", "add", "origin", source, cwd=where)
    git("config", "remote.origin.uploadpack", UPLOAD_PACK, cwd=where)
    git("fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit, cwd=where)
    if folders:
        git("sparse-checkout", "set", *folders, cwd=where)
    git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=where)
    if head(where) != commit:
        raise SystemExit(f"prepare_models: {where} is at {head(where)} after the checkout, not {commit}")
    print(f"{where}: {source} at {commit}" + (f" ({', '.join(folders)})" if folders else ""))


def exclude(dest: Path) -> None:
    """Keep DEST out of git (and so out of commits) when it lies inside this repository."""
    try:
        rel = dest.resolve().relative_to(REPO)
    except ValueError:
        return
    if subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", str(rel)]).returncode != 0:
        with open(REPO / ".git" / "info" / "exclude", "a") as out:
            out.write(f"/{rel.as_posix()}/\n")
        print(f"added /{rel.as_posix()}/ to .git/info/exclude")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", default=["torch/resnet50"], metavar="FRAMEWORK/MODEL")
    parser.add_argument("--dest", type=Path, default=REPO / ".models")
    parser.add_argument("--from", dest="sources", action="append", default=[], metavar="KEY=SOURCE")
    args = parser.parse_args()
    sources = dict(s.split("=", 1) for s in args.sources)
    pins = current_pins().model_code
    code: dict[str, list[str]] = {}  # model_code key -> the programs' folders in it
    packages: dict[str, programs.Package] = {}
    for name in args.programs:
        try:
            impl = programs.implementation(*name.split("/", 1))
        except (TypeError, programs.ReferenceError) as exc:
            raise SystemExit(f"prepare_models: {name}: {exc}") from None
        if impl.code not in pins:
            raise SystemExit(f"prepare_models: {impl.title}: docker/pins.yaml pins no {impl.code} (model_code)")
        code.setdefault(impl.code, []).extend([impl.subdir] if impl.subdir else [])
        packages.update({p.folder: p for p in impl.packages})
    unknown = set(sources) - set(code) - set(packages)
    if unknown:
        raise SystemExit(f"prepare_models: --from {', '.join(sorted(unknown))}: not needed by "
                         f"{', '.join(args.programs)} (keys: {', '.join(sorted({*code, *packages}))})")
    exclude(args.dest)
    for key, folders in code.items():
        checkout(args.dest / programs.CODE_DIRS[key], sources.get(key, pins[key].repo), pins[key].commit, folders)
    for folder, package in packages.items():
        checkout(args.dest / folder, sources.get(folder, package.repo), package.commit, [])
    print(f"model code for {', '.join(args.programs)} under {args.dest.resolve()} (KIT_MODEL_CODE)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
