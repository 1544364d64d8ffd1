#!/usr/bin/env python3
"""Write a PaddleClas-style train list for an ImageNet-shaped `train/` directory.

    make_train_list.py /data/ILSVRC2012/train --out /data/ILSVRC2012/train_list.txt

Each line is `<path> <label>`, e.g. `train/n01440764/n01440764_10026.JPEG 0`, where the path
is relative to the dataset root (the parent of TRAIN_DIR) and the label is the index of the
class directory (wnid) in the sorted list of class directories. Lines are sorted by class,
then by file name, so the same tree always gives the same bytes. Only image files (.jpeg,
.jpg, .png, any case) are listed. The list is written atomically (temporary file + rename).

Standard library only; no import of the kit. Exit 0 on success, 2 on bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}
PROG = "make_train_list.py"


class InputError(Exception):
    """Bad input: reported as one line on stderr, exit code 2."""


@dataclass
class Tree:
    """An ImageNet-shaped train/ directory as read: class directories (wnids) in sorted order, each with its
    image file names in sorted order. A class's label is its index in `classes`."""

    train_dir: Path
    classes: list[str]
    images: dict[str, list[str]]  # wnid -> sorted image file names
    skipped_files: int = 0  # non-image entries inside class directories
    stray_entries: int = 0  # non-directory entries directly in train_dir

    @property
    def empty_classes(self) -> list[str]:
        return [wnid for wnid in self.classes if not self.images[wnid]]

    def entries(self):
        """(label, wnid, file name) for every image, by class then name: the order of the list's lines."""
        for label, wnid in enumerate(self.classes):
            for name in self.images[wnid]:
                yield label, wnid, name


def scan_tree(train_dir: Path) -> Tree:
    """Read TRAIN_DIR's classes and images (hidden entries ignored; only .jpeg/.jpg/.png files, any case)."""
    if not train_dir.is_dir():
        raise InputError(f"{train_dir}: not a directory")
    class_dirs = []
    stray_entries = 0
    for entry in os.scandir(train_dir):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            class_dirs.append(entry.name)
        else:
            stray_entries += 1
    class_dirs.sort()
    if not class_dirs:
        raise InputError(f"{train_dir}: no class directories (expected train/<wnid>/<image>)")
    images: dict[str, list[str]] = {}
    skipped = 0
    for wnid in class_dirs:
        names = []
        for entry in os.scandir(train_dir / wnid):
            if entry.is_file() and Path(entry.name).suffix.lower() in IMAGE_SUFFIXES:
                names.append(entry.name)
            else:
                skipped += 1
        names.sort()
        images[wnid] = names
    return Tree(train_dir, class_dirs, images, skipped, stray_entries)


def list_lines(tree: Tree, prefix: str | None = None) -> list[str]:
    """The train list's lines for TREE: `<prefix>/<wnid>/<file> <label>`, sorted by class then name
    (prefix: the train directory's own name unless given)."""
    prefix = tree.train_dir.name if prefix is None else prefix
    lines: list[str] = []
    for label, wnid, name in tree.entries():
        rel = f"{prefix}/{wnid}/{name}"
        if any(ch.isspace() for ch in rel):
            raise InputError(
                f"{tree.train_dir / wnid / name}: path contains whitespace; a '<path> <label>' list cannot represent it"
            )
        lines.append(f"{rel} {label}")
    return lines


def build_lines(train_dir: Path) -> tuple[list[str], dict]:
    """Return the list lines and counts for TRAIN_DIR (pure apart from reading the tree)."""
    tree = scan_tree(train_dir)
    lines = list_lines(tree)
    counts = {
        "images": len(lines),
        "classes": len(tree.classes),
        "empty_classes": tree.empty_classes,
        "skipped_files": tree.skipped_files,
        "stray_entries": tree.stray_entries,
    }
    return lines, counts


def write_atomically(out: Path, data: bytes, fsync: bool = True) -> None:
    """Write DATA to OUT via a temporary file in the same directory and a rename (fsync: durable first)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("train_dir", type=Path, help="ImageNet-shaped train/ directory")
    parser.add_argument("--out", type=Path, required=True, help="list file to write")
    args = parser.parse_args(argv)

    try:
        lines, counts = build_lines(args.train_dir)
    except (InputError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    try:
        write_atomically(args.out, data)
    except OSError as exc:
        print(f"{PROG}: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2

    print(f"wrote {args.out}: {counts['images']} images, {counts['classes']} classes")
    print(f"sha256 {hashlib.sha256(data).hexdigest()}")
    if counts["skipped_files"]:
        print(f"skipped {counts['skipped_files']} non-image entries inside class directories")
    if counts["stray_entries"]:
        print(f"ignored {counts['stray_entries']} non-directory entries directly in {args.train_dir}")
    if counts["empty_classes"]:
        shown = ", ".join(counts["empty_classes"][:10])
        print(f"warning: {len(counts['empty_classes'])} class directories have no images: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
