#!/usr/bin/env python3
"""Verify a PaddleClas-style train list (`<path> <label>` per line) against the files on disk.

    verify_list.py /data/ILSVRC2012/train_list.txt [--root DIR] [--expect-full] [--json] [--num-classes N]
                   [--allow-outside-root]

Checks: every line is well-formed (errors name file:line; a label must fit in int64, and be
below --num-classes when given), every listed file exists under the dataset root (default: the
list file's directory) and resolves inside it (no absolute path, no `..` past it, no symlink
leading out; --allow-outside-root permits them, as the harness's flag of that name does), no
path is listed twice, and each class directory carries exactly one label (and each label one
directory). Reports the image and class counts, whether they match full ImageNet-1k training (1,281,167 images / 1000
classes), and the sha256 of the list file.

Exit codes: 0 all checks hold; 1 a check failed (missing files, paths outside the root,
duplicates, label conflicts, or a count mismatch with --expect-full); 2 unreadable or malformed
list (one-line error).
Standard library only; no import of the kit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

FULL_IMAGENET_IMAGES = 1_281_167
FULL_IMAGENET_CLASSES = 1000
SHOW_MISSING = 10
INT64_MAX = (1 << 63) - 1  # the labels' dtype in the harness's loaders and the frameworks
PROG = "verify_list.py"


class MalformedList(Exception):
    """The list cannot be read as `<path> <label>` lines: one-line error, exit code 2."""


def parse_list(list_path: Path, data: bytes, num_classes: int | None = None) -> list[tuple[int, str, int]]:
    """Return (line number, path, label) for each line; raise MalformedList naming file:line."""
    entries = []
    bad: list[str] = []
    body = data[:-1] if data.endswith(b"\n") else data
    for lineno, raw in enumerate(body.split(b"\n") if body else [], start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(f"{list_path}:{lineno}: not valid UTF-8")
            continue
        fields = line.split()
        if len(fields) != 2 or line != f"{fields[0]} {fields[1]}":
            bad.append(f"{list_path}:{lineno}: expected '<path> <label>', got {line!r}")
            continue
        path, label = fields
        if not label.isdigit() or not label.isascii():
            bad.append(f"{list_path}:{lineno}: label must be a non-negative integer, got {label!r}")
            continue
        why = label_out_of_range(label, num_classes)
        if why:
            bad.append(f"{list_path}:{lineno}: {why}")
            continue
        entries.append((lineno, path, int(label)))
    if bad:
        more = f" (and {len(bad) - 1} more malformed lines)" if len(bad) > 1 else ""
        raise MalformedList(bad[0] + more)
    if not entries:
        raise MalformedList(f"{list_path}: empty list")
    return entries


# the harness's list reader's rules (scripts/harness/data.py), the same text: tests/test_data_prep.py holds the
# copies equal (verify_list.py travels alone to hosts, the harness into containers)
def label_out_of_range(label: str, num_classes: int | None) -> str | None:
    """Why LABEL (a string of digits) cannot be a class of a run with NUM_CLASSES classes (None: any int64), or
    None. Never converts more than 19 digits (Python refuses to convert over 4300)."""
    if len(label) > 18 and (len(label.lstrip("0")) > 19 or int(label) > INT64_MAX):
        shown = label if len(label) <= 24 else f"{label[:20]}... ({len(label)} digits)"
        return f"label {shown} does not fit in int64"
    if num_classes is not None and int(label) >= num_classes:
        return f"label {label} is out of range: the run has {num_classes} classes (labels 0 to {num_classes - 1})"
    return None


def outside_root(real_root: str, path: str, real_dirs: dict[str, tuple[str, bool]], link: bool) -> str | None:
    """The real location of PATH (a list entry joined to the data root) when it is outside REAL_ROOT (the root's
    realpath), else None: an absolute path, `..` past the root, a symlinked directory or (LINK) file leading
    out all count. REAL_DIRS caches each directory's realpath and whether it is inside."""
    prefix = real_root.rstrip(os.sep) + os.sep
    directory, name = os.path.split(path)
    cached = real_dirs.get(directory)
    if cached is None:
        real_dir = os.path.realpath(directory)
        cached = real_dirs[directory] = (real_dir, real_dir == real_root or real_dir.startswith(prefix))
    if link or name in ("", ".", ".."):
        real = os.path.realpath(path)
        return None if real == real_root or real.startswith(prefix) else real
    return None if cached[1] else os.path.join(cached[0], name)


def verify(list_path: Path, root: Path, entries: list[tuple[int, str, int]], allow_outside_root: bool = False) -> dict:
    """Check the entries against the tree under ROOT; return a JSON-ready result."""
    base = os.path.abspath(root)
    real_root, real_dirs = os.path.realpath(base), {}
    outside: list[str] = []
    missing: list[str] = []
    seen: dict[str, int] = {}
    duplicates: list[str] = []
    dir_labels: dict[str, set[int]] = {}
    label_dirs: dict[int, set[str]] = {}
    for lineno, path, label in entries:
        if path in seen:
            duplicates.append(f"{list_path}:{lineno}: {path} (first at line {seen[path]})")
        else:
            seen[path] = lineno
        full = os.path.join(base, path)
        real = outside_root(real_root, full, real_dirs, os.path.islink(full))
        if real is not None:
            outside.append(f"{list_path}:{lineno}: {path} resolves to {real}, outside the data root {real_root}")
        if not os.path.isfile(full):
            missing.append(path)
        class_dir = path.rsplit("/", 1)[0] if "/" in path else ""
        dir_labels.setdefault(class_dir, set()).add(label)
        label_dirs.setdefault(label, set()).add(class_dir)
    conflicts = [
        f"directory {d or '.'!r} has labels {sorted(labels)}"
        for d, labels in sorted(dir_labels.items())
        if len(labels) > 1
    ] + [
        f"label {label} is used by directories {sorted(dirs)}"
        for label, dirs in sorted(label_dirs.items())
        if len(dirs) > 1
    ]
    images = len(entries)
    classes = len(label_dirs)
    return {
        "list": str(list_path),
        "root": str(root),
        "images": images,
        "classes": classes,
        "missing": len(missing),
        "missing_first": missing[:SHOW_MISSING],
        "outside_root": len(outside),
        "outside_root_first": outside[:SHOW_MISSING],
        "allow_outside_root": allow_outside_root,
        "duplicates": len(duplicates),
        "duplicates_first": duplicates[:SHOW_MISSING],
        "label_conflicts": conflicts,
        "full_imagenet": images == FULL_IMAGENET_IMAGES and classes == FULL_IMAGENET_CLASSES,
    }


def print_text(result: dict) -> None:
    print(f"list    {result['list']}")
    print(f"sha256  {result['sha256']}")
    print(f"root    {result['root']}")
    print(f"images  {result['images']}")
    print(f"classes {result['classes']}")
    verdict = "yes" if result["full_imagenet"] else "no"
    print(f"full ImageNet-1k train ({FULL_IMAGENET_IMAGES} images / {FULL_IMAGENET_CLASSES} classes): {verdict}")
    if result["missing"]:
        print(f"missing files: {result['missing']} (first {len(result['missing_first'])}):")
        for path in result["missing_first"]:
            print(f"  {path}")
    else:
        print("missing files: 0")
    if result["outside_root"]:
        allowed = " (allowed: --allow-outside-root)" if result["allow_outside_root"] else ""
        print(f"paths outside the data root: {result['outside_root']}{allowed}:")
        for line in result["outside_root_first"]:
            print(f"  {line}")
    if result["duplicates"]:
        print(f"duplicate paths: {result['duplicates']}:")
        for dup in result["duplicates_first"]:
            print(f"  {dup}")
    for conflict in result["label_conflicts"]:
        print(f"label conflict: {conflict}")
    print("OK" if result["ok"] else "FAILED")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("list_file", type=Path, help="train list to verify")
    parser.add_argument("--root", type=Path, help="dataset root (default: the list's directory)")
    parser.add_argument("--expect-full", action="store_true", help="fail unless the counts are full ImageNet-1k")
    parser.add_argument("--num-classes", type=int, help="fail on a label >= this (as the harness's --num-classes)")
    parser.add_argument("--allow-outside-root", action="store_true",
                        help="accept paths that resolve outside the root (as the harness's flag of that name)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    list_path: Path = args.list_file
    root: Path = args.root if args.root is not None else list_path.parent
    try:
        data = list_path.read_bytes()
        entries = parse_list(list_path, data, args.num_classes)
    except OSError as exc:
        print(f"{PROG}: error: cannot read {list_path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except MalformedList as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"{PROG}: error: dataset root {root} is not a directory", file=sys.stderr)
        return 2

    result = verify(list_path, root, entries, args.allow_outside_root)
    result["sha256"] = hashlib.sha256(data).hexdigest()
    result["expect_full"] = args.expect_full
    result["ok"] = (
        result["missing"] == 0
        and (result["outside_root"] == 0 or args.allow_outside_root)
        and result["duplicates"] == 0
        and not result["label_conflicts"]
        and (result["full_imagenet"] or not args.expect_full)
    )
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print_text(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
