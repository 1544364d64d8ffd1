"""The images to convert: an ImageNet-shaped train tree or a PaddleClas list, read and checked by threads.

    source = read_source(SRC)             # Source(images, classes): labels = sorted wnid index, or the list's
    for item in loaded(source.images, want_sha, workers):   # in order; bytes, ImageInfo, mtime (and sha256)

A class folder without images, a list naming a missing file, a corrupt image: SourceError naming the file.
Standard library only; no import of the kit.
"""

from __future__ import annotations

import collections
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import imagecheck
import make_train_list
import verify_list

WINDOW = 64  # images read ahead by the worker threads
_stop = [False]  # set by request_stop() (a signal handler): loaded() raises KeyboardInterrupt at its next image


def request_stop() -> None:
    """Ask the conversion to stop at the next image: from a signal handler, where raising could leave a thread
    pool's lock held (the pool would then never shut down)."""
    _stop[0] = True


def check_stop() -> None:
    """KeyboardInterrupt if a stop was requested."""
    if _stop[0]:
        raise KeyboardInterrupt


class SourceError(Exception):
    """Unusable input: one line naming the file."""


@dataclass(frozen=True)
class Image:
    label: int  # class index (0-based): sorted wnid order, or the given list's label
    wnid: str
    name: str  # file name inside its class folder
    path: Path  # the source file


@dataclass
class Source:
    images: list[Image]
    classes: dict[str, int]  # wnid -> class index
    where: str  # what SRC was, for messages


def read_tree(train_dir: Path) -> Source:
    tree = make_train_list.scan_tree(train_dir)
    if tree.empty_classes:
        first = tree.empty_classes[0]
        more = f" (and {len(tree.empty_classes) - 1} more)" if len(tree.empty_classes) > 1 else ""
        raise SourceError(f"{train_dir / first}: class folder without images{more}; remove it or add its images "
                         "(labels are the sorted folder index, so a folder cannot be skipped silently)")
    make_train_list.list_lines(tree)  # refuses whitespace in paths, as the list would
    images = [Image(label, wnid, name, train_dir / wnid / name) for label, wnid, name in tree.entries()]
    return Source(images, {w: i for i, w in enumerate(tree.classes)}, str(train_dir))


def read_list(list_path: Path) -> Source:
    try:
        entries = verify_list.parse_list(list_path, list_path.read_bytes())
    except verify_list.MalformedList as exc:
        raise SourceError(str(exc)) from None
    root = list_path.parent
    result = verify_list.verify(list_path, root, entries)
    if result["missing"]:
        lineno, path = next((n, p) for n, p, _ in entries if p == result["missing_first"][0])
        raise SourceError(f"{list_path}:{lineno}: names {root / path}, which does not exist "
                         f"({result['missing']} listed file(s) missing)")
    if result["duplicates"] or result["label_conflicts"]:
        raise SourceError(f"{list_path}: " + "; ".join(result["duplicates_first"][:1] + result["label_conflicts"][:1]))
    images, classes = [], {}
    for _lineno, path, label in entries:
        parts = path.split("/")
        if len(parts) < 2:
            raise SourceError(f"{list_path}: {path}: expected <dir>/<wnid>/<file> paths")
        wnid, name = parts[-2], parts[-1]
        classes[wnid] = label
        images.append(Image(label, wnid, name, root / path))
    images.sort(key=lambda im: (im.label, im.name))
    return Source(images, dict(sorted(classes.items(), key=lambda kv: kv[1])), str(list_path))


def read_source(src: Path) -> Source:
    if src.is_file():
        return read_list(src)
    if not src.is_dir():
        raise SourceError(f"{src}: no such directory or list")
    if (src / "train").is_dir():
        src = src / "train"
    return read_tree(src)


def read_val(val_dir: Path, train: Source) -> Source:
    """An ImageNet-shaped val/<wnid>/ tree whose class folders are exactly train's (ImageFolder numbers each
    tree's sorted folders itself, so any other set would give the same wnid another label)."""
    val = read_tree(val_dir)
    if val.classes != train.classes:
        extra = sorted(set(val.classes) - set(train.classes))
        lacking = sorted(set(train.classes) - set(val.classes))
        raise SourceError(f"{val_dir}: its class folders are not the train tree's ("
                          + "; ".join(x for x in (f"not in train: {', '.join(extra[:3])}" if extra else "",
                                                  f"missing: {', '.join(lacking[:3])}" if lacking else "") if x)
                          + "): the labels would differ")
    return val


def find_val(src: Path) -> Path | None:
    """The val/ beside SRC's train tree (ImageNet's layout: <root>/train, <root>/val), if there is one."""
    if src.is_file():
        return None
    train = src / "train" if (src / "train").is_dir() else src
    val = train.parent / "val"
    return val if val.is_dir() else None


def read_synset_words(path: Path | None) -> dict[str, str]:
    """wnid -> text from LOC_synset_mapping.txt / synset_words.txt (`wnid text`) or imagenet_metadata.txt (tab)."""
    if path is None:
        return {}
    words = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read ({exc})") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split(None, 1)
        if len(parts) != 2:
            raise SourceError(f"{path}:{lineno}: expected '<wnid> <text>', got {line!r}")
        words[parts[0]] = parts[1].strip()
    return words


# --- reading and checking the images (worker threads) ---------------------------------------------------

@dataclass
class Loaded:
    image: Image
    data: bytes
    info: imagecheck.ImageInfo
    mtime_ns: int
    sha256: str = ""


def _load(image: Image, want_sha: bool) -> Loaded:
    try:
        with open(image.path, "rb") as fh:
            mtime = os.fstat(fh.fileno()).st_mtime_ns
            data = fh.read()
    except OSError as exc:
        raise SourceError(f"{image.path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = imagecheck.inspect(image.path, data)
    except imagecheck.CorruptImage as exc:
        raise SourceError(str(exc)) from None
    return Loaded(image, data, info, mtime, hashlib.sha256(data).hexdigest() if want_sha else "")


def loaded(images: list[Image], want_sha: bool, workers: int):
    """Each image read, checked (and hashed), in the given order; up to WINDOW read ahead by WORKERS threads."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="convert") as pool:
        pending = collections.deque()
        feed = iter(images)
        for image in feed:
            pending.append(pool.submit(_load, image, want_sha))
            if len(pending) >= WINDOW:
                break
        try:
            while pending:
                item = pending.popleft().result()
                check_stop()
                nxt = next(feed, None)
                if nxt is not None:
                    pending.append(pool.submit(_load, nxt, want_sha))
                yield item
        finally:
            for fut in pending:
                fut.cancel()
