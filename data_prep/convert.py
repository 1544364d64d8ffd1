#!/usr/bin/env python3
"""Convert an ImageNet-shaped train tree into the format a published program reads, with a manifest.

    convert.py SRC OUT --to paddle|folder|fleetx|tfrecord|recordio [--shards N] [--synset-words FILE] [--json]

SRC: a train directory (`<wnid>/<image>`; a directory holding `train/` is taken as its parent), or a
PaddleClas train list (`train/<wnid>/<file> <label>` lines, as make_train_list.py writes) to convert just
the images it names with its labels. OUT is written whole or not at all:

    paddle    OUT/train_list.txt + OUT/train/<wnid>/<file>   PaddleClas (image_root OUT/, cls_label_path
              the list); labels 0..999
    folder    OUT/train/<wnid>/<file>                        DLE PyTorch (ImageFolder / DALI file reader
              on OUT/train): labels are the sorted folder index 0..999
    fleetx    OUT/train.txt + OUT/train/<wnid>/<file>        FleetX VGG16 (get_train_dataloader(OUT): the list
              OUT/train.txt, `<wnid>/<file> <label>` relative to OUT/train; every "JPEG" in a path written
              "jpeg", list and file alike, as FleetX rewrites the listed path before opening it); labels 0..999
    tfrecord  OUT/train-00000-of-NNNNN ...                   DLE TensorFlow (--data_dir OUT, `train-*`):
              tf.train.Example records, labels 1..1000 (DLE subtracts 1)
    recordio  OUT/train.rec + train.idx (+ train.lst)        DLE MXNet (--data-root OUT), im2rec
              + OUT/val.rec + val.idx (+ val.lst)            --pass-through layout: IRHeader + the JPEG bytes,
              labels 0..999; val from a val/<wnid>/ tree (--val): DLE MXNet's runner always passes
              --data-val OUT/val.rec, which train.py opens even with --mode train

plus OUT/manifest.json (manifest.py: files with size and sha256, images per class). Images are linked
(hard links: the tree costs no space; rsync sends them as files) where the file system allows, else copied.
Every image is checked before it is written (imagecheck.py): a corrupt or truncated JPEG, an empty class
folder or a listed file that is missing stops the run with an error naming the file. Everything is written
under a hidden temporary directory beside OUT (files to temporary names, then renamed) and moved into place
at the end; an error, Ctrl-C or SIGTERM removes it (one a run killed outright leaves, the next run removes).
An existing OUT is replaced only once the new one is complete, and only if it is a convert.py output or
empty. The same input gives byte-identical files (shuffles are seeded as the publishers' tools seed them;
generated files get the newest source image's mtime, so rsync sees a re-run as unchanged).

Needs the `protobuf` and `google-crc32c` packages for tfrecord; the rest is the standard library. No import
of the kit. Exit 0 on success, 2 on bad input (one line naming the file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_train_list  # noqa: E402  (sibling modules, found via this file's own directory)
import manifest as manifest_mod  # noqa: E402
import recordio  # noqa: E402
import source as source_mod  # noqa: E402
import tfrecord  # noqa: E402
from source import SourceError, find_val, read_source, read_synset_words, read_val  # noqa: E402
from writers import HashingFile, Written, fleetx_path, write_recordio, write_tfrecord, write_tree  # noqa: E402

PROG = "convert.py"
FORMATS = ("paddle", "folder", "fleetx", "tfrecord", "recordio")
READERS = {
    "paddle": "PaddleClas (DataLoader.Train.dataset: image_root <dir>/, cls_label_path <dir>/train_list.txt)",
    "folder": "NVIDIA DLE PyTorch ConvNets (<dir>/train/<wnid>/)",
    "fleetx": "FleetX VGG16 (get_train_dataloader(<dir>): <dir>/train.txt, images under <dir>/train, JPEG as jpeg)",
    "tfrecord": "NVIDIA DLE TensorFlow ConvNets (--data_dir <dir>, files train-*)",
    "recordio": "NVIDIA DLE MXNet RN50v1.5 (--data-root <dir>: train.rec, train.idx)",
}
LABEL_OFFSETS = {"paddle": 0, "folder": 0, "fleetx": 0, "tfrecord": tfrecord.LABEL_OFFSET,
                 "recordio": recordio.LABEL_OFFSET}
VAL_FORMATS = ("folder", "recordio")  # the formats with a validation split (--val)
TFRECORD_SHARDS = 1024  # build_imagenet_data.py's train shards (fewer when there are fewer images)


class InputError(Exception):
    """Bad input or output directory: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(2)


# --- the output directory -----------------------------------------------------------------------------

def check_out(out: Path, src: Path) -> None:
    """OUT must be new, empty, or an earlier convert.py output; never inside SRC or SRC inside it."""
    real_out, real_src = out.resolve(), src.resolve()
    if real_out == real_src or real_src in real_out.parents or real_out in real_src.parents:
        raise InputError(f"{out}: the output must not contain the source {src} or lie inside it")
    if not out.exists():
        if not out.parent.is_dir():
            raise InputError(f"{out.parent}: no such directory (the output's parent must exist)")
        return
    if not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory")
    if any(out.iterdir()):
        try:
            manifest_mod.load(out)
        except manifest_mod.ManifestError:
            raise InputError(f"{out}: not empty and not a {PROG} output (no manifest.json); use a new or empty "
                             "directory") from None


def check_fleetx_names(source: source_mod.Source) -> None:
    """Two images whose paths differ only in "JPEG" / "jpeg" would be one file for FleetX."""
    seen: dict[str, Path] = {}
    for im in source.images:
        path = fleetx_path(im.wnid, im.name)
        if path in seen:
            raise InputError(f"{im.path}: FleetX reads it as {path}, as it reads {seen[path]} (it writes every "
                             "'JPEG' in a path 'jpeg'); rename one")
        seen[path] = im.path


def convert(src: Path, out: Path, fmt: str, *, shards: int = TFRECORD_SHARDS, synset_words: Path | None = None,
            workers: int | None = None, fsync: bool = False, val: Path | str | None = "auto") -> dict:
    """Write OUT for FMT from SRC; return the manifest (raises InputError / OSError, leaving nothing behind).
    val (folder, recordio): a val/<wnid>/ tree to link as OUT/val, or write as OUT/val.rec; "auto": the val/
    beside SRC's train/, if any."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    source = read_source(src)
    if not source.images:
        raise InputError(f"{source.where}: no images")
    if val == "auto":
        val = find_val(src) if fmt in VAL_FORMATS else None
    elif val is not None and fmt not in VAL_FORMATS:
        raise InputError(f"--val is for the folder and recordio formats (DLE PyTorch reads <data>/val, DLE MXNet "
                         f"<data>/val.rec), not {fmt}")
    val_source = read_val(Path(val), source) if val is not None else None
    if fmt == "fleetx":
        check_fleetx_names(source)
    words = read_synset_words(synset_words)
    out = Path(os.path.abspath(out))
    check_out(out, Path(source.where))
    if val is not None:
        check_out(out, Path(val))
    workers = workers or min(4, os.cpu_count() or 1)
    remove_stale(out)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        if fmt in ("paddle", "folder", "fleetx"):
            written = write_tree(source, tmp, fmt, workers, fsync, val_source)
        elif fmt == "tfrecord":
            written = write_tfrecord(source, tmp, shards, words, workers, fsync)
        else:
            written = write_recordio(source, tmp, workers, fsync, val_source)
        offset = LABEL_OFFSETS[fmt]
        manifest = {
            "schema_version": manifest_mod.SCHEMA_VERSION, "tool": manifest_mod.TOOL, "format": fmt,
            "reader": READERS[fmt], "label_offset": offset, "images": len(source.images),
            "source": {"images": len(source.images), "bytes": written.source_bytes},
            "classes": [{"wnid": wnid, "index": index, "label": index + offset, "images": written.counts[wnid]}
                        for wnid, index in source.classes.items()],
            "files": sorted(written.files, key=lambda f: f["path"]),
        }
        if fmt in VAL_FORMATS:
            manifest["val"] = {"images": sum(written.val_counts.values()), "classes": len(written.val_counts)}
        mf = HashingFile(tmp / manifest_mod.NAME, fsync)
        mf.write(manifest_mod.dumps(manifest))
        mf.close(Written(), manifest_mod.NAME)
        for path in [*written.generated, tmp / manifest_mod.NAME]:  # reproducible mtimes: rsync skips a re-run
            os.utime(path, ns=(written.newest_ns, written.newest_ns))
        source_mod.check_stop()  # a signal after the last image: still nothing replaces OUT
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    manifest["linked"], manifest["copied"] = written.linked, written.copied
    return manifest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(out: Path) -> list[Path]:
    """Remove what a run killed outright (SIGKILL, power loss) left beside OUT: `.OUT.partial-<pid>` and
    `.OUT.old-<pid>` directories whose process is gone. Returns what was removed."""
    removed = []
    for kind in ("partial", "old"):
        for path in out.parent.glob(f".{out.name}.{kind}-*"):
            pid = path.name.rsplit("-", 1)[1]
            if path.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _swap(tmp: Path, out: Path) -> None:
    """Move the finished TMP to OUT; an existing OUT goes only after the new one is in place."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _terminated(signum, frame) -> None:
    source_mod.request_stop()


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="train directory (train/<wnid>/<image>) or a train list")
    parser.add_argument("out", type=Path, help="output directory (replaced whole)")
    parser.add_argument("--to", required=True, choices=FORMATS, help="the format to write")
    parser.add_argument("--shards", type=int, default=TFRECORD_SHARDS,
                        help=f"tfrecord: number of train-* files (default {TFRECORD_SHARDS}; fewer for few images)")
    parser.add_argument("--synset-words", type=Path,
                        help="tfrecord image/class/text: LOC_synset_mapping.txt or imagenet_metadata.txt "
                             "(default: the wnid)")
    parser.add_argument("--val", default="auto",
                        help="folder: a val/<wnid>/ tree to link as OUT/val (DLE PyTorch's main.py opens <data>/val "
                             "even with --training-only); recordio: to write as OUT/val.rec + val.idx (DLE MXNet "
                             "opens them even with --mode train); default: the val/ beside SRC's train/ if there is "
                             "one; 'none': no val")
    parser.add_argument("--workers", type=int, default=None, help="image reading threads (default: min(4, CPUs))")
    parser.add_argument("--fsync", action="store_true",
                        help="flush every written file to disk before it is renamed (durable against power loss; "
                             "costs the disk's write time; verify.py finds a file a crash damaged either way)")
    parser.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be >= 1")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be >= 1")
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop at the next image and clean up
        signal.signal(sig, _terminated)
    try:
        result = convert(args.src, args.out, args.to, shards=args.shards, synset_words=args.synset_words,
                         workers=args.workers, fsync=args.fsync,
                         val=None if args.val == "none" else args.val if args.val == "auto" else Path(args.val))
    except (InputError, SourceError, make_train_list.InputError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing written to {args.out}", file=sys.stderr)
        return 130
    manifest_sha = manifest_mod.sha256_file(args.out / manifest_mod.NAME)
    summary = {"format": args.to, "out": str(args.out), "images": result["images"], "classes": len(result["classes"]),
               "val": result.get("val"),
               "files": len(result["files"]), "bytes": sum(f["bytes"] for f in result["files"]),
               "label_offset": result["label_offset"], "linked": result["linked"], "copied": result["copied"],
               "manifest_sha256": manifest_sha}
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(f"wrote {args.out} ({args.to}): {summary['images']} images in {summary['classes']} classes, "
              f"{summary['files']} files, {summary['bytes']} bytes; labels {result['label_offset']}.."
              f"{result['label_offset'] + len(result['classes']) - 1}")
        if args.to in ("paddle", "folder", "fleetx"):
            print(f"images linked {result['linked']}, copied {result['copied']}")
        if args.to in VAL_FORMATS:
            if result["val"]["images"]:
                print(f"val: {result['val']['images']} images in {result['val']['classes']} classes")
            elif args.to == "folder":
                print("warning: no val/ tree (--val DIR): DLE PyTorch's main.py opens <data>/val even with "
                      "--training-only and stops without it")
            else:
                print("warning: no val/ tree (--val DIR), so no val.rec: DLE MXNet's runner passes --data-val "
                      "<data>/val.rec, which train.py opens even with --mode train")
        print(f"manifest sha256 {manifest_sha}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
