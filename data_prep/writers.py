"""Writing each format into a (temporary) output directory from the loaded images.

    write_tree(source, dir, "paddle" | "folder", workers, fsync)     train/<wnid>/<file> links (+ train_list.txt)
    write_tree(source, dir, "fleetx", workers, fsync)                train/<wnid>/<file, JPEG as jpeg> + train.txt
    write_tfrecord(source, dir, shards, words, workers, fsync)      train-NNNNN-of-NNNNN
    write_recordio(source, dir, workers, fsync, val)                 train.rec, .idx, .lst (+ val.rec, .idx, .lst)

Each returns Written: the files (path, bytes, sha256, records), images per class, the newest source mtime.
Files are written under a temporary name and renamed when complete; their sha256 is computed as they are
written. Standard library + tfrecord.py's protobuf / google-crc32c; no import of the kit.
"""

from __future__ import annotations

import collections
import errno
import hashlib
import os
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import make_train_list
import recordio
import tfrecord
from source import Loaded, Source, loaded

TFRECORD_SEED = 12345  # build_imagenet_data.py: random.seed(12345) before shuffling the files
RECORDIO_SEED = 100  # im2rec.py --list: random.seed(100) before shuffling the list
LIST_NAME = "train_list.txt"  # paddle: PaddleClas cls_label_path
FLEETX_LIST = "train.txt"  # fleetx: VGG16.get_train_dataloader reads <dir>/train.txt, images under <dir>/train


def fleetx_path(wnid: str, name: str) -> str:
    """An image's path in FleetX's train.txt and under OUT/train: relative to train/, with every "JPEG" as "jpeg"
    (FleetX's reader_creator rewrites the listed path so before it opens it; DALI's file reader opens it as listed)."""
    return f"{wnid}/{name}".replace("JPEG", "jpeg")


@dataclass
class Written:
    files: list[dict] = field(default_factory=list)
    counts: collections.Counter = field(default_factory=collections.Counter)  # wnid -> images
    val_counts: collections.Counter = field(default_factory=collections.Counter)  # wnid -> val images (folder)
    source_bytes: int = 0
    newest_ns: int = 0
    linked: int = 0
    copied: int = 0
    generated: list[Path] = field(default_factory=list)  # files this run made (their mtime is set at the end)

    def saw(self, item: Loaded) -> None:
        self.counts[item.image.wnid] += 1
        self.source_bytes += len(item.data)
        self.newest_ns = max(self.newest_ns, item.mtime_ns)


class HashingFile:
    """A file written under a temporary name and renamed when closed; its size, and its sha256 computed by a
    background thread as it is written (hashlib releases the GIL: the hashing runs beside the conversion)."""

    _hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")  # FIFO: updates stay in order
    MAX_PENDING = 64

    def __init__(self, path: Path, fsync: bool = False):
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp")
        self.fh = open(self.tmp, "wb")
        self.sha = hashlib.sha256()
        self.size = 0
        self.fsync = fsync
        self.pending: collections.deque = collections.deque()

    def write(self, data: bytes) -> int:
        """Append DATA; return the offset it was written at."""
        offset = self.size
        self.fh.write(data)
        self.pending.append(self._hasher.submit(self.sha.update, data))
        if len(self.pending) > self.MAX_PENDING:
            self.pending.popleft().result()
        self.size += len(data)
        return offset

    def close(self, written: Written, rel: str, **extra) -> None:
        while self.pending:
            self.pending.popleft().result()
        self.fh.flush()
        if self.fsync:
            os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)
        written.files.append({"path": rel, "bytes": self.size, "sha256": self.sha.hexdigest(), **extra})
        written.generated.append(self.path)


def _place(item: Loaded, dest: Path, written: Written) -> None:
    """Hard-link the source image at DEST (a copy via a temporary name where links are not possible)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(item.image.path, dest)
        written.linked += 1
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES):
            raise
        make_train_list.write_atomically(dest, item.data, fsync=False)
        os.utime(dest, ns=(item.mtime_ns, item.mtime_ns))
        written.copied += 1


def write_tree(source: Source, tmp: Path, fmt: str, workers: int, fsync: bool, val: Source | None = None) -> Written:
    """paddle / folder / fleetx: OUT/train/<wnid>/<file> (+ OUT/train_list.txt for paddle; + OUT/train.txt for
    fleetx, whose files are named as fleetx_path gives; + OUT/val/<wnid>/<file> for folder with a VAL tree: DLE
    PyTorch's main.py builds its validation loader from <data>/val even with --training-only)."""
    written = Written()
    for item in loaded(source.images, True, workers):
        im = item.image
        rel = "train/" + (fleetx_path(im.wnid, im.name) if fmt == "fleetx" else f"{im.wnid}/{im.name}")
        _place(item, tmp / rel, written)
        written.files.append({"path": rel, "bytes": len(item.data), "sha256": item.sha256})
        written.saw(item)
    for item in loaded(val.images if val else [], True, workers):
        rel = f"val/{item.image.wnid}/{item.image.name}"
        _place(item, tmp / rel, written)
        written.files.append({"path": rel, "bytes": len(item.data), "sha256": item.sha256})
        written.val_counts[item.image.wnid] += 1
        written.newest_ns = max(written.newest_ns, item.mtime_ns)
    if fmt == "paddle":
        lines = [f"train/{im.wnid}/{im.name} {im.label}\n" for im in source.images]
        out = HashingFile(tmp / LIST_NAME, fsync)
        out.write("".join(lines).encode("utf-8"))
        out.close(written, LIST_NAME, lines=len(lines))
    elif fmt == "fleetx":
        lines = [f"{fleetx_path(im.wnid, im.name)} {im.label}\n" for im in source.images]
        out = HashingFile(tmp / FLEETX_LIST, fsync)
        out.write("".join(lines).encode("utf-8"))
        out.close(written, FLEETX_LIST, lines=len(lines))
    return written


def write_tfrecord(source: Source, tmp: Path, shards: int, words: dict[str, str], workers: int,
                   fsync: bool) -> Written:
    written = Written()
    order = list(range(len(source.images)))
    random.Random(TFRECORD_SEED).shuffle(order)
    images = [source.images[i] for i in order]
    sizes = tfrecord.shard_sizes(len(images), shards)
    stream = loaded(images, False, workers)
    for index, size in enumerate(sizes):
        name = tfrecord.shard_name(index, len(sizes))
        out = HashingFile(tmp / name, fsync)
        for _ in range(size):
            item = next(stream)
            im, info = item.image, item.info
            record = tfrecord.example(item.data, label=im.label + tfrecord.LABEL_OFFSET, synset=im.wnid,
                                      text=words.get(im.wnid, im.wnid), filename=im.name, fmt=info.format,
                                      width=info.width, height=info.height, channels=info.channels,
                                      colorspace=info.colorspace)
            out.write(tfrecord.frame(record))
            written.saw(item)
        out.close(written, name, records=size)
    return written


def write_recordio(source: Source, tmp: Path, workers: int, fsync: bool, val: Source | None = None) -> Written:
    """train.rec/.idx/.lst (+ val.rec/.idx/.lst from a VAL tree: DLE MXNet's runner always passes train.py
    --data-val <data-root>/val.rec, and train.py opens it even with --mode train), each as im2rec makes them."""
    written = Written()
    _write_rec(source, tmp, "train", workers, fsync, written, written.counts)
    if val is not None:
        _write_rec(val, tmp, "val", workers, fsync, written, written.val_counts)
    return written


def _write_rec(source: Source, tmp: Path, split: str, workers: int, fsync: bool, written: Written,
               counts: collections.Counter) -> None:
    ids = list(enumerate(source.images))  # im2rec --list: ids in sorted order, then the list is shuffled
    random.Random(RECORDIO_SEED).shuffle(ids)
    rec = HashingFile(tmp / f"{split}.rec", fsync)
    idx, lst = [], []  # small lines: written in one piece after the records (25 MB each for full ImageNet)
    stream = loaded([im for _, im in ids], False, workers)
    for (image_id, im), item in zip(ids, stream, strict=True):
        offset = rec.write(recordio.frame(recordio.pack(im.label + recordio.LABEL_OFFSET, image_id, item.data)))
        idx.append(recordio.idx_line(image_id, offset))
        lst.append(recordio.lst_line(image_id, im.label + recordio.LABEL_OFFSET, f"{im.wnid}/{im.name}"))
        counts[im.wnid] += 1
        if split == "train":
            written.source_bytes += len(item.data)
        written.newest_ns = max(written.newest_ns, item.mtime_ns)
    rec.close(written, f"{split}.rec", records=len(ids))
    for name, lines in ((f"{split}.idx", idx), (f"{split}.lst", lst)):
        out = HashingFile(tmp / name, fsync)
        out.write("".join(lines).encode("utf-8"))
        out.close(written, name, lines=len(lines))
