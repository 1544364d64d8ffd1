#!/usr/bin/env python3
"""Verify a convert.py output directory against its manifest.json and the format's own structure.

    verify.py DIR --format paddle|folder|fleetx|tfrecord|recordio [--sizes-only] [--json]

Checks, verify_list.py-style:
  - the manifest: written by convert.py for this format; every file it lists is there with its size and
    sha256 (--sizes-only: sizes); files it does not list that the program would read are problems
    (a stale `train-*` shard, an image or class folder more under train/), others are reported as extra;
  - the format, read back: paddle: the list (verify_list.py: lines, files, one label per folder) and its
    labels; fleetx: the same for train.txt, its paths under train/ (and none with "JPEG", which FleetX would
    open as "jpeg"); folder: the class folders and images; tfrecord: every record's framing (and CRC-32C where the
    google-crc32c package is installed) and, where `protobuf` is installed, every Example's label; recordio:
    every record's framing and IRHeader, and train.idx's ids and offsets (val.rec / val.idx too); for both,
    each image's bytes are a whole JPEG/PNG (imagecheck.py). Images per class must equal the manifest's.
Prints the counts and the manifest's sha256 (compare it across hosts).

Exit codes: 0 all checks hold; 1 a check failed; 2 no usable manifest or directory (one-line error).
Standard library only (protobuf / google-crc32c used when present); no import of the kit.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import imagecheck  # noqa: E402  (sibling modules, found via this file's own directory)
import manifest as manifest_mod  # noqa: E402
import recordio  # noqa: E402
import tfrecord  # noqa: E402
import verify_list  # noqa: E402

PROG = "verify.py"
FORMATS = ("paddle", "folder", "fleetx", "tfrecord", "recordio")
SHOW = 10


class Unusable(Exception):
    """No usable manifest or directory: exit code 2."""


def _have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def _counts_problem(where: str, counts: collections.Counter, manifest: dict, key: str) -> list[str]:
    """Per-class counts read from the data (keyed by wnid or by label) against the manifest's."""
    want = collections.Counter({c[key]: c["images"] for c in manifest["classes"]})
    if counts == want:
        return []
    diffs = [f"{k}: {counts.get(k, 0)} read, manifest {want.get(k, 0)}" for k in sorted(set(counts) | set(want))
             if counts.get(k, 0) != want.get(k, 0)]
    return [f"{where}: images per class differ from the manifest ({len(diffs)} class(es); " + "; ".join(diffs[:3])
            + ")"]


def _check_image(name: str, data: bytes, problems: list[str]) -> None:
    try:
        imagecheck.inspect(name, data)
    except imagecheck.CorruptImage as exc:
        problems.append(str(exc))


def read_paddle(out: Path, manifest: dict, problems: list[str], notes: list[str],
                list_name: str = "train_list.txt", root: str = "") -> collections.Counter:
    """The list's lines, files (under OUT/ROOT) and labels; images per wnid."""
    list_path = out / list_name
    try:
        entries = verify_list.parse_list(list_path, list_path.read_bytes())
    except (OSError, verify_list.MalformedList) as exc:
        problems.append(f"{list_path}: {exc}")
        return collections.Counter()
    result = verify_list.verify(list_path, out / root, entries)
    if result["missing"]:
        problems.append(f"{list_path}: {result['missing']} listed file(s) missing (first: "
                        f"{', '.join(result['missing_first'][:3])})")
    problems += [f"{list_path}: duplicate {d}" for d in result["duplicates_first"]]
    problems += [f"{list_path}: label conflict: {c}" for c in result["label_conflicts"]]
    labels = {c["wnid"]: c["label"] for c in manifest["classes"]}
    for lineno, path, label in entries:
        wnid = path.split("/")[-2] if path.count("/") >= 1 else ""
        if labels.get(wnid) != label:
            problems.append(f"{list_path}:{lineno}: label {label} for {wnid}, the manifest says {labels.get(wnid)}")
            break
    return collections.Counter(path.split("/")[-2] for _, path, _ in entries if "/" in path)


def read_fleetx(out: Path, manifest: dict, problems: list[str], notes: list[str]) -> collections.Counter:
    """train.txt, paths relative to train/; FleetX opens each with "JPEG" replaced by "jpeg"."""
    counts = read_paddle(out, manifest, problems, notes, "train.txt", "train")
    text = (out / "train.txt").read_text(errors="replace") if (out / "train.txt").is_file() else ""
    renamed = [line for line in text.splitlines() if "JPEG" in line.split(" ")[0]]
    if renamed:
        problems.append(f"{out / 'train.txt'}: {len(renamed)} path(s) with 'JPEG', which FleetX opens as 'jpeg' "
                        f"(first: {renamed[0]})")
    return counts


def read_folder(out: Path, manifest: dict, problems: list[str], notes: list[str]) -> collections.Counter:
    train = out / "train"
    if not train.is_dir():
        problems.append(f"{train}: not a directory")
        return collections.Counter()
    counts = collections.Counter()
    folders = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith("."))
    wnids = [c["wnid"] for c in sorted(manifest["classes"], key=lambda c: c["label"])]
    if folders != sorted(wnids) or wnids != sorted(wnids):
        problems.append(f"{train}: class folders {folders[:3]}... do not give the manifest's labels "
                        "(sorted folder index)")
    for wnid in folders:
        counts[wnid] = sum(1 for p in (train / wnid).iterdir() if p.is_file() and not p.name.startswith("."))
    val = out / "val"
    want_val = (manifest.get("val") or {}).get("images", 0)
    if val.is_dir():
        val_folders = sorted(p.name for p in val.iterdir() if p.is_dir() and not p.name.startswith("."))
        if val_folders != folders:
            problems.append(f"{val}: class folders differ from train/'s: ImageFolder would label them otherwise")
        found = sum(1 for w in val_folders for p in (val / w).iterdir() if p.is_file() and not p.name.startswith("."))
        if found != want_val:
            problems.append(f"{val}: {found} images, the manifest says {want_val}")
    elif want_val:
        problems.append(f"{val}: missing (the manifest lists {want_val} val images)")
    else:
        notes.append("no val/: DLE PyTorch's main.py opens <data>/val even with --training-only")
    return counts


def read_tfrecord(out: Path, manifest: dict, problems: list[str], notes: list[str]) -> collections.Counter:
    check_crc, decode = _have("google_crc32c"), _have("google.protobuf")
    if not check_crc:
        notes.append("CRC-32C not checked (google-crc32c not installed; sha256 against the manifest still is)")
    if not decode:
        notes.append("Example labels not read (protobuf not installed): images per class not checked")
    counts = collections.Counter()
    for entry in manifest["files"]:
        path = out / entry["path"]
        records = 0
        try:
            with open(path, "rb") as fh:
                for offset, data in tfrecord.read_records(fh, str(path), check_crc=check_crc):
                    records += 1
                    if decode:
                        try:
                            fields = tfrecord.parse(data)
                            counts[fields["image/class/label"][0]] += 1
                            _check_image(f"{path}@{offset} ({fields['image/filename'][0].decode()})",
                                         fields["image/encoded"][0], problems)
                        except Exception as exc:  # a damaged message: name the record
                            problems.append(f"{path}: record at offset {offset} is not a usable Example ({exc})")
        except FileNotFoundError:
            continue  # reported by the manifest check
        except (OSError, tfrecord.TruncatedRecord) as exc:
            problems.append(str(exc))
            continue
        if records != entry.get("records"):
            problems.append(f"{path}: {records} records, the manifest says {entry.get('records')}")
    return counts if decode else None


def read_recordio(out: Path, manifest: dict, problems: list[str], notes: list[str]) -> collections.Counter:
    """train.rec/.idx (images per label), and val.rec/.idx: DLE MXNet's runner always passes --data-val val.rec."""
    want_val = (manifest.get("val") or {}).get("images", 0)
    if want_val or (out / "val.rec").exists():
        val = _read_rec(out, "val", problems)
        if sum(val.values()) != want_val:
            problems.append(f"{out / 'val.rec'}: {sum(val.values())} records, the manifest says {want_val} val images")
    else:
        notes.append("no val.rec: DLE MXNet's runner passes --data-val <data-root>/val.rec, which train.py opens "
                     "even with --mode train")
    return _read_rec(out, "train", problems)


def _read_rec(out: Path, split: str, problems: list[str]) -> collections.Counter:
    rec, idx = out / f"{split}.rec", out / f"{split}.idx"
    counts = collections.Counter()
    starts = []
    try:
        with open(rec, "rb") as fh:
            for offset, data in recordio.read_records(fh, str(rec)):
                try:
                    flag, label, image_id, _id2, image = recordio.unpack(data)
                except ValueError as exc:
                    problems.append(f"{rec}: record at offset {offset}: {exc}")
                    continue
                starts.append((image_id, offset))
                counts[int(label)] += 1
                if flag != 0:
                    problems.append(f"{rec}: record at offset {offset} has IRHeader flag {flag} (one label expected)")
                _check_image(f"{rec}@{offset} (id {image_id})", image, problems)
    except FileNotFoundError:
        return counts
    except (OSError, recordio.TruncatedRecord) as exc:
        problems.append(str(exc))
        return counts
    try:
        lines = idx.read_text().splitlines()
        pairs = [(int(a), int(b)) for a, b in (line.split("\t") for line in lines)]
    except FileNotFoundError:
        return counts
    except (OSError, ValueError) as exc:
        problems.append(f"{idx}: not `<id>\\t<offset>` lines ({exc})")
        return counts
    if pairs != starts:
        bad = next((i for i, (a, b) in enumerate(zip(pairs, starts, strict=False)) if a != b),
                   min(len(pairs), len(starts)))
        problems.append(f"{idx}:{bad + 1}: does not match {rec.name}'s records ({len(pairs)} lines, "
                        f"{len(starts)} records)")
    return counts


READERS = {"paddle": (read_paddle, "wnid"), "folder": (read_folder, "wnid"), "fleetx": (read_fleetx, "wnid"),
           "tfrecord": (read_tfrecord, "label"), "recordio": (read_recordio, "label")}
# files not in the manifest that the program would read too: a problem, not just an extra
READ_BY_PROGRAM = {"tfrecord": lambda p: p.startswith("train-"), "folder": lambda p: p.startswith(("train/", "val/")),
                   "paddle": lambda p: p == "train_list.txt",
                   "recordio": lambda p: p in ("train.rec", "train.idx", "val.rec", "val.idx"),
                   "fleetx": lambda p: p == "train.txt"}


def verify(out: Path, fmt: str, hashes: bool = True) -> dict:
    if not out.is_dir():
        raise Unusable(f"{out}: not a directory")
    try:
        manifest, manifest_sha = manifest_mod.load(out)
    except manifest_mod.ManifestError as exc:
        raise Unusable(str(exc)) from None
    if manifest.get("format") != fmt:
        raise Unusable(f"{out / manifest_mod.NAME}: a {manifest.get('format')} output, not {fmt}")
    files = manifest_mod.check_files(out, manifest, hashes=hashes)
    problems: list[str] = []
    notes: list[str] = []
    if files["missing"]:
        problems.append(f"{files['missing']} file(s) missing (first: {', '.join(files['missing_first'][:3])})")
    problems += files["mismatched_first"]
    if files["mismatched"] > len(files["mismatched_first"]):
        problems.append(f"... {files['mismatched']} file(s) differ from the manifest in all")
    read_too = [p for p in files["extra"] if READ_BY_PROGRAM[fmt](p)]
    if read_too:
        problems.append(f"{len(read_too)} file(s) not in the manifest that the program would read too "
                        f"(first: {', '.join(read_too[:3])}); remove them")
    reader, key = READERS[fmt]
    counts = reader(out, manifest, problems, notes)
    if counts is not None:
        problems += _counts_problem(str(out), counts, manifest, key)
    return {
        "dir": str(out), "format": fmt, "manifest_sha256": manifest_sha, "images": manifest["images"],
        "classes": len(manifest["classes"]), "label_offset": manifest.get("label_offset"),
        "files": files["files"], "missing": files["missing"], "missing_first": files["missing_first"],
        "mismatched": files["mismatched"], "extra": files["extra"][:SHOW], "extra_count": len(files["extra"]),
        "hashes_checked": hashes, "problems": problems, "notes": notes, "ok": not problems,
    }


def print_text(result: dict) -> None:
    print(f"dir       {result['dir']} ({result['format']})")
    print(f"manifest  sha256 {result['manifest_sha256']}")
    print(f"images    {result['images']} in {result['classes']} classes (labels from {result['label_offset']})")
    print(f"files     {result['files']} listed, {result['missing']} missing, {result['mismatched']} differ"
          + ("" if result["hashes_checked"] else " (sizes only)"))
    if result["extra_count"]:
        print(f"extra     {result['extra_count']} file(s) not in the manifest: {', '.join(result['extra'][:3])}")
    for note in result["notes"]:
        print(f"note: {note}")
    for problem in result["problems"]:
        print(f"problem: {problem}")
    print("OK" if result["ok"] else "FAILED")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a convert.py output directory")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--sizes-only", action="store_true", help="check file sizes, not sha256")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = verify(args.dir, args.format, hashes=not args.sizes_only)
    except Unusable as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print_text(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
