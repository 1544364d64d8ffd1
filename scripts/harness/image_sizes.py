"""The size table of an image list: each entry's decoded width and height, its file's bytes, and whether the host
decodes it; read once from the files' headers (no decode) and cached beside the list, so that a loader plans a
batch's crop boxes and file buffer with numpy, not per image.

    table = image_sizes(entries, workers=8)        # SizeTable of numpy arrays, entry i at [i]

Cached in `<list>.kit-sizes.npz` (the list's directory must be writable; otherwise kept in memory and said once),
keyed by the entries' paths and the decode limit: a changed list makes a new table. A file changed after its
row was read is caught when it is read (its byte count) or decoded (its shape), naming the cache to delete.
Width and height are those the image decodes to (data.fit_decode: a JPEG over MAX_DECODED_PIXELS at reduced scale).
`host`: Pillow decodes it on the host (CMYK, not a JPEG, a JPEG over the limit, or a header Pillow cannot read:
that image's decode then says why, naming its list line). Standard library + numpy + Pillow; never imports the kit.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass

import data
import numpy as np

CACHE_SUFFIX = ".kit-sizes.npz"
FORMAT = 1  # the cache's layout; a cache of another is read again
DEVICE_MODES = ("RGB", "L")  # JPEG colour modes nvJPEG decodes to RGB (YCbCr and greyscale)
POOL_FROM = 4096  # entries from which the headers are read in worker processes
CHUNK = 2048  # entries a worker reads per task
PROGRESS_S = 5.0  # seconds between progress lines on a long scan


@dataclass(frozen=True)
class SizeTable:
    width: np.ndarray  # int64, decoded width
    height: np.ndarray  # int64
    nbytes: np.ndarray  # int64, the file's size
    host: np.ndarray  # bool: decoded by Pillow on the host
    cache: str | None  # where the table is cached, if it is

    def __len__(self) -> int:
        return len(self.width)


def header(path: str) -> tuple[int, int, int, bool]:
    """(width, height, bytes, host) of one image from its header; an unreadable one: (0, 0, bytes, True)."""
    Image = data.pillow()
    try:
        nbytes = os.stat(path).st_size
    except OSError:
        return 0, 0, 0, True
    try:
        with Image.open(path) as img:
            width, height = img.size
            device = img.format == "JPEG" and img.mode in DEVICE_MODES and width * height <= data.MAX_DECODED_PIXELS
            width, height = data.fit_decode(img).size
    except Exception:  # PIL raises OSError, SyntaxError, ValueError...: the decode names it at its batch
        return 0, 0, nbytes, True
    return width, height, nbytes, not device


def headers(paths: list[str]) -> list[tuple[int, int, int, bool]]:
    return [header(p) for p in paths]


def table_key(paths: list[str]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(f"max_decoded_pixels={data.MAX_DECODED_PIXELS};format={FORMAT}".encode())
    return digest.hexdigest()


def image_sizes(entries, workers: int = 0) -> SizeTable:
    """The size table of ENTRIES (load_list's), from the cache beside their list when it matches, else read from
    the headers (in WORKERS processes for a long list, with progress on stderr) and cached."""
    paths = [path for path, _ in entries]
    source = getattr(entries, "source", None)
    cache = source + CACHE_SUFFIX if source else None
    key = table_key(paths)
    if cache:
        table = _load(cache, key, len(paths))
        if table is not None:
            return table
    rows = _scan(paths, workers)
    arrays = {"width": np.array([r[0] for r in rows], np.int64), "height": np.array([r[1] for r in rows], np.int64),
              "nbytes": np.array([r[2] for r in rows], np.int64), "host": np.array([r[3] for r in rows], bool)}
    if cache and not _save(cache, key, arrays):
        cache = None
    return SizeTable(**arrays, cache=cache)


def _load(cache: str, key: str, count: int) -> SizeTable | None:
    try:
        with np.load(cache, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("key") != key or len(f["width"]) != count:
                return None
            return SizeTable(f["width"].astype(np.int64), f["height"].astype(np.int64),
                             f["nbytes"].astype(np.int64), f["host"].astype(bool), cache)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged cache is read again from the headers
        print(f"loader: the size table {cache} is unreadable ({type(exc).__name__}: {exc}); reading the headers "
              "again", file=sys.stderr, flush=True)
        return None


def _save(cache: str, key: str, arrays: dict) -> bool:
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps({"key": key, "format": FORMAT})), **arrays)
        os.replace(tmp, cache)
        return True
    except OSError as exc:
        print(f"loader: cannot cache the size table beside the list ({exc.strerror or exc}: {cache}); it is kept in "
              "memory for this run", file=sys.stderr, flush=True)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _scan(paths: list[str], workers: int) -> list[tuple[int, int, int, bool]]:
    if len(paths) < POOL_FROM or workers < 1:
        return headers(paths)
    import multiprocessing

    data.pillow().init()  # Pillow's plugins imported here, not in each child
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
    rows: list = []
    started = last = time.monotonic()
    # forked: a spawned child would import the trainer's main module (and its framework) again; the children only
    # read headers (as PyTorch's DataLoader forks workers of a process that holds a CUDA context)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for part in pool.imap(headers, chunks):
            rows.extend(part)
            now = time.monotonic()
            if now - last >= PROGRESS_S:
                last = now
                left = (now - started) / len(rows) * (len(paths) - len(rows))
                print(f"loader: reading image headers {len(rows)}/{len(paths)} ({100 * len(rows) // len(paths)}%), "
                      f"~{left:.0f} s left; cached beside the list for later runs", file=sys.stderr, flush=True)
    return rows
