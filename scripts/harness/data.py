"""What every input pipeline of the harness shares: the `train_list.txt` reader, the per-rank shard and epoch
order, each image's crop box and flip, and the threads that run up to `prefetch` batches ahead.

    entries = load_list("/data/ILSVRC2012/train_list.txt")        # [(abs path, label), ...]
    with loader_cpu.ImageListLoader(entries, batch_size=64, image_size=224, rank=r, world_size=n) as loader:
        for step, (images, labels) in zip(range(steps), loader):  # infinite: epoch after epoch

The pipelines, one module each: loader_cpu.py (Pillow in CPU threads, numpy batches), loader_gpu.py (nvJPEG
and tensor ops on the device, or its CPU twin), loader_dali.py (NVIDIA DALI).

List format (as data_prep/make_train_list.py writes it): one `<relative path> <label>` per line,
paths resolved against the list file's directory unless `root` is given; blank lines are errors,
so list line N is entry N-1.

Epochs: every rank shuffles all entries with the same generator seeded by (seed, epoch) and takes
`order[rank::world_size]`, so shards are disjoint; every shard is cut to `len(entries) // world_size`
entries and the last partial batch is dropped, so all ranks run the same number of steps per epoch.
Augmentation (as PaddleClas/torchvision train transforms): random resized crop (area 0.08-1, aspect
3/4-4/3, 10 tries, then a centre crop) resized bilinearly to SxS, horizontal flip with p=0.5, /255,
ImageNet mean/std. The box and the flip of an image depend only on (seed, epoch, entry index) and its
size (`augmentation`), so loader_cpu and loader_gpu crop an image alike, whatever the thread timing,
rank or world size (DALI draws its own). Decoded pixels are bounded (`fit_decode`, MAX_DECODED_PIXELS), so
a loader's memory depends on its batch size, image size, workers and prefetch depth, not on what the files hold.
An unreadable image raises DataError naming the file and its
list line when its batch is consumed (never skipped).

Standard library + numpy (+ Pillow, imported by `pillow()` when a loader is built); never imports the kit.
"""

from __future__ import annotations

import math
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
CROP_TRIES = 10
CROP_DRAWS = CROP_TRIES * 4  # uniforms a crop box takes: area, aspect, left, top per try
SHOW_MISSING = 3
# decoded pixels an image may take (33.5 Mpx, ~100 MiB as RGB): a larger JPEG decodes at 1/2, 1/4 or 1/8 scale
# (Pillow's draft), anything still larger is refused; ImageNet's photos average ~0.2 Mpx (~400 x 350), far below
MAX_DECODED_PIXELS = 1 << 25
INT64_MAX = (1 << 63) - 1  # the labels' dtype in every loader and framework

__all__ = [
    "BatchLoader",
    "DataError",
    "ImageList",
    "LoaderUnavailable",
    "augmentation",
    "augmentations",
    "crop_boxes",
    "load_list",
    "fit_decode",
    "pillow",
    "shard_size",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MAX_DECODED_PIXELS",
]


class DataError(Exception):
    """Unusable input data; the message names the file (and the list line where there is one)."""


class LoaderUnavailable(Exception):
    """A loader that cannot run here (a library or a device missing); the message says what to install or use."""


class ImageList(list):
    """The entries of one list file: a plain list of (path, label) that also remembers `source`.

    Entry i is line i + 1 of `source`; the loaders use that to name the line of a bad image.
    Slices and copies are plain lists (their indices no longer match the file's lines).
    """

    source: str | None = None
    outside: int = 0  # entries read from outside the data root (load_list's allow_outside_root)


def load_list(list_path: str | os.PathLike, root: str | os.PathLike | None = None, num_classes: int | None = None,
              allow_outside_root: bool = False) -> ImageList:
    """Read a `<relative path> <label>` list; return [(absolute image path, label), ...].

    Raises DataError (`file:line: ...`) for an unreadable or empty list, a malformed line, a label that is not
    in [0, NUM_CLASSES) (or beyond int64 when NUM_CLASSES is None), a path whose real location is outside the
    data root (absolute, `..`, or a symlink leading out; `outside_root` below) unless ALLOW_OUTSIDE_ROOT, and a
    listed image that does not exist. Existence and links are checked for every entry up front, one directory
    listing per class directory (cheap even for 1.28M images). The result's `outside` counts the entries
    outside the root (0 unless allowed).
    """
    list_path = os.fspath(list_path)
    base = os.path.abspath(os.fspath(root) if root is not None else os.path.dirname(os.path.abspath(list_path)))
    try:
        with open(list_path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise DataError(f"{list_path}: cannot read the image list: {exc.strerror or exc}") from None
    if root is not None and not os.path.isdir(base):
        raise DataError(f"{list_path}: dataset root {base} is not a directory")

    body = data[:-1] if data.endswith(b"\n") else data
    if not body:
        raise DataError(f"{list_path}: empty list")
    entries = ImageList()
    entries.source = list_path
    for lineno, raw in enumerate(body.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{list_path}:{lineno}: not valid UTF-8") from None
        fields = line.split()
        if len(fields) != 2:
            raise DataError(f"{list_path}:{lineno}: expected '<path> <label>', got {line!r}")
        rel, label = fields
        if not (label.isascii() and label.isdigit()):
            raise DataError(f"{list_path}:{lineno}: label must be a non-negative integer, got {label!r}")
        why = label_out_of_range(label, num_classes)
        if why:
            raise DataError(f"{list_path}:{lineno}: {why}")
        entries.append((os.path.join(base, rel), int(label)))
    entries.outside = _check_files(list_path, base, entries, allow_outside_root)
    return entries


def label_out_of_range(label: str, num_classes: int | None) -> str | None:
    """Why LABEL (a string of digits) cannot be a class of a run with NUM_CLASSES classes (None: any int64), or
    None. Never converts more than 19 digits (Python refuses to convert over 4300)."""
    if len(label) > 18 and (len(label.lstrip("0")) > 19 or int(label) > INT64_MAX):
        shown = label if len(label) <= 24 else f"{label[:20]}... ({len(label)} digits)"
        return f"label {shown} does not fit in int64"
    if num_classes is not None and int(label) >= num_classes:
        return f"label {label} is out of range: the run has {num_classes} classes (labels 0 to {num_classes - 1})"
    return None


# held equal to data_prep/verify_list.py's copy by tests/test_data_prep.py (the two travel separately)
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


def _check_files(list_path: str, base: str, entries: list[tuple[str, int]], allow_outside_root: bool) -> int:
    """DataError naming the first entry outside BASE (unless allowed) or missing; returns the count outside."""
    listings: dict[str, tuple[set[str], set[str]]] = {}  # directory: (file names, symlink names)
    real_root, real_dirs = os.path.realpath(base), {}
    missing: list[tuple[int, str]] = []
    outside: list[tuple[int, str, str]] = []
    for index, (path, _) in enumerate(entries):
        directory, name = os.path.split(path)
        listing = listings.get(directory)
        if listing is None:
            try:
                with os.scandir(directory) as it:
                    found = [(e.name, e.is_file(), e.is_symlink()) for e in it]
            except OSError:
                found = []
            listing = listings[directory] = ({n for n, f, _ in found if f}, {n for n, _, s in found if s})
        real = outside_root(real_root, path, real_dirs, name in listing[1])
        if real is not None:
            outside.append((index + 1, path, real))
        if name not in listing[0]:
            missing.append((index + 1, path))
    if outside and not allow_outside_root:
        lineno, path, real = outside[0]
        rel = path[len(base) + 1:] if path.startswith(base + os.sep) else path
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        raise DataError(f"{list_path}:{lineno}: {rel} resolves to {real}, outside the data root {real_root}{more}; "
                        f"--allow-outside-root reads such paths")
    if missing:
        lineno, path = missing[0]
        more = f" (and {len(missing) - 1} more missing images)" if len(missing) > 1 else ""
        raise DataError(f"{list_path}:{lineno}: image not found: {path}{more}")
    return len(outside)


def pillow():
    """PIL.Image, or an ImportError that says what needs it."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise ImportError(f"Pillow is required to read JPEG training data: {exc}") from exc
    return Image


def fit_decode(img):
    """IMG (opened with Pillow, not yet decoded) set to decode to at most MAX_DECODED_PIXELS: a larger JPEG at the
    least reduced scale of 1/2, 1/4, 1/8 that fits (its size is then the reduced one, which every loader crops
    alike); ValueError for an image that cannot fit. Returns IMG."""
    width, height = img.size
    if width * height > MAX_DECODED_PIXELS:
        scale = next((s for s in (2, 4, 8) if -(-width // s) * -(-height // s) <= MAX_DECODED_PIXELS), 8)
        if img.format == "JPEG":
            img.draft(img.mode, (width // scale, height // scale))
        if img.width * img.height > MAX_DECODED_PIXELS:
            raise ValueError(f"{width} x {height} pixels, more than the {MAX_DECODED_PIXELS} an image may decode to "
                             f"(a JPEG decodes at down to 1/8 scale to fit)")
    return img


def crop_boxes(widths: np.ndarray, heights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """[N, 4] int64 RandomResizedCrop boxes (left, top, right, bottom) of N images, torchvision's algorithm: of 10
    tries (area 0.08-1, log-uniform aspect 3/4-4/3) the first that fits, else a centre crop at the nearest ratio.
    UNIFORMS: [N, CROP_DRAWS] in [0, 1): each try's area, aspect, left and top."""
    widths, heights = np.asarray(widths, np.int64)[:, None], np.asarray(heights, np.int64)[:, None]
    u = uniforms[:, :CROP_TRIES * 4].reshape(len(uniforms), CROP_TRIES, 4)
    area = (widths * heights).astype(np.float64)
    target = area * (CROP_SCALE[0] + (CROP_SCALE[1] - CROP_SCALE[0]) * u[..., 0])
    low, high = math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])
    aspect = np.exp(low + (high - low) * u[..., 1])
    w = np.rint(np.sqrt(target * aspect)).astype(np.int64)
    h = np.rint(np.sqrt(target / aspect)).astype(np.int64)
    fits = (w > 0) & (w <= widths) & (h > 0) & (h <= heights)
    first = fits.argmax(1)
    rows = np.arange(len(u))
    w, h, fit = w[rows, first], h[rows, first], fits[rows, first]
    left = np.floor(u[rows, first, 2] * (widths[:, 0] - w + 1)).astype(np.int64)
    top = np.floor(u[rows, first, 3] * (heights[:, 0] - h + 1)).astype(np.int64)
    # no try fits: a centre crop of the whole image at the nearest allowed ratio
    cw, ch = widths[:, 0].copy(), heights[:, 0].copy()
    ratio = cw / ch
    narrow, wide = ratio < CROP_RATIO[0], ratio > CROP_RATIO[1]
    ch[narrow] = np.rint(cw[narrow] / CROP_RATIO[0]).astype(np.int64)
    cw[wide] = np.rint(ch[wide] * CROP_RATIO[1]).astype(np.int64)
    w, h = np.where(fit, w, cw), np.where(fit, h, ch)
    left = np.where(fit, left, (widths[:, 0] - cw) // 2)
    top = np.where(fit, top, (heights[:, 0] - ch) // 2)
    return np.stack([left, top, left + w, top + h], axis=1)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def augmentation_uniforms(seed: int, epoch: int, indices: np.ndarray) -> np.ndarray:
    """[N, CROP_DRAWS + 1] uniforms in [0, 1) for entries INDICES in EPOCH: a counter-based hash of (seed, epoch,
    entry index, draw), so every loader draws an image's augmentation alike, whatever batch or order it is in, in
    one vectorised call per batch."""
    key = int(_mix64(np.array([(seed * 0x9E3779B97F4A7C15 + epoch) & (2**64 - 1)], np.uint64))[0])
    draws = CROP_DRAWS + 1
    counter = np.asarray(indices, np.uint64)[:, None] * np.uint64(draws) + np.arange(draws, dtype=np.uint64)
    with np.errstate(over="ignore"):
        bits = _mix64(np.uint64(key) + counter * np.uint64(0x9E3779B97F4A7C15))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def augmentations(seed: int, epoch: int, indices, widths, heights) -> tuple[np.ndarray, np.ndarray]:
    """The crop boxes ([N, 4]: left, top, right, bottom) and horizontal flips ([N] bool) of entries INDICES in
    EPOCH, for images of WIDTHS x HEIGHTS: a function of (seed, epoch, index, size) alone, so every loader agrees."""
    u = augmentation_uniforms(seed, epoch, np.atleast_1d(indices))
    return crop_boxes(np.atleast_1d(widths), np.atleast_1d(heights), u[:, :CROP_DRAWS]), u[:, CROP_DRAWS] < 0.5


def augmentation(seed: int, epoch: int, index: int, width: int, height: int) -> tuple[tuple[int, int, int, int], bool]:
    """The crop box (left, top, right, bottom) and the horizontal flip of entry INDEX in EPOCH (augmentations of
    one image)."""
    boxes, flips = augmentations(seed, epoch, index, width, height)
    return tuple(int(v) for v in boxes[0]), bool(flips[0])


def shard_size(entries: list, batch_size: int, world_size: int) -> int:
    """Images per rank and epoch (every rank the same); DataError when that is less than one batch."""
    size = len(entries) // world_size
    if size < batch_size:
        source = getattr(entries, "source", None)
        where = f"{source}: " if source else ""
        raise DataError(f"{where}{len(entries)} images over {world_size} rank(s) give {size} per rank, "
                        f"fewer than the batch size {batch_size}")
    return size


class BatchLoader:
    """Infinite iterator over this rank's shard of ENTRIES, one batch of `batch_size` images after another.

    ENTRIES: [(image path, label), ...] as load_list returns them. A subclass says what a batch is: `_new_batch`
    (in the consumer, when the batch is queued), `_load` (one image, in one of `workers` threads; 0: in the
    consumer) and `_collate` (in the consumer, when the batch is taken). At most `prefetch` batches are queued.
    (loader_gpu's DeviceImageLoader takes its batches in a decode process, which is then "the consumer" here.)
    Bad parameters raise ValueError; a shard smaller than one batch raises DataError. Use as a context manager
    or call close().
    """

    def __init__(
        self,
        entries: list[tuple[str, int]],
        batch_size: int,
        image_size: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        workers: int = 2,
        prefetch: int = 4,
    ) -> None:
        for name, value, low in (
            ("batch_size", batch_size, 1),
            ("image_size", image_size, 1),
            ("world_size", world_size, 1),
            ("workers", workers, 0),
            ("prefetch", prefetch, 1),
            ("seed", seed, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank!r}")
        self._source = getattr(entries, "source", None)
        self._paths = [path for path, _ in entries]
        self._labels = np.fromiter((label for _, label in entries), dtype=np.int64, count=len(entries))
        self.batch_size = batch_size
        self.image_size = image_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.prefetch = prefetch
        self.shard_size = shard_size(entries, batch_size, world_size)
        self.steps_per_epoch = self.shard_size // batch_size
        self.num_classes = int(self._labels.max()) + 1 if len(entries) else 0
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kit-data") if workers else None
        # (batch state, entry indices, epoch, futures or None when workers=0) per batch in flight
        self._pending: deque[tuple[Any, np.ndarray, int, list[Future] | None]] = deque()
        self._orders: dict[int, np.ndarray] = {}
        self._next_submit = 0  # global batch number of the next batch to submit
        self._closed = False

    # -- what a subclass defines ------------------------------------------------------------------
    def _new_batch(self, size: int) -> Any:
        """The state of a batch of SIZE images, made when it is queued (e.g. the array the images go into)."""
        return None

    def _load(self, state: Any, slot: int, index: int, epoch: int) -> Any:
        """Read image INDEX (augmented for EPOCH) as item SLOT of the batch; runs in a worker thread."""
        raise NotImplementedError

    def _collate(self, state: Any, items: list, labels: np.ndarray) -> tuple:
        """The batch handed to the caller, from its state, its images' `_load` results and their labels."""
        raise NotImplementedError

    # -- order -----------------------------------------------------------------------------------
    def epoch_indices(self, epoch: int) -> np.ndarray:
        """Entry indices of this rank's shard in EPOCH, in the order its batches use them."""
        order = self._orders.get(epoch)
        if order is None:
            perm = np.random.default_rng((self.seed, epoch)).permutation(len(self._paths))
            order = perm[self.rank :: self.world_size][: self.shard_size]
            self._orders = {e: o for e, o in self._orders.items() if e >= epoch - 1}
            self._orders[epoch] = order
        return order

    def where(self, index: int) -> str:
        """Entry INDEX as an error names it: its path and its list line."""
        path = self._paths[index]
        if self._source is not None:
            return f"{path} (list {self._source}:{index + 1})"
        return f"{path} (entry {index})"

    def unreadable(self, index: int, exc: BaseException) -> DataError:
        """The error for an image that cannot be read or decoded, in every loader's words."""
        return DataError(f"cannot read image {self.where(index)}: {exc}")

    # -- queueing --------------------------------------------------------------------------------
    def _submit(self) -> None:
        number = self._next_submit
        self._next_submit += 1
        epoch, step = divmod(number, self.steps_per_epoch)
        indices = self.epoch_indices(epoch)[step * self.batch_size : (step + 1) * self.batch_size]
        state = self._new_batch(len(indices))
        futures = None
        if self._executor is not None:
            futures = [
                self._executor.submit(self._load, state, slot, int(index), epoch) for slot, index in enumerate(indices)
            ]
        self._pending.append((state, indices, epoch, futures))

    # -- iteration -------------------------------------------------------------------------------
    def __iter__(self) -> BatchLoader:
        return self

    def __next__(self) -> tuple:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        while len(self._pending) < self.prefetch:
            self._submit()
        state, indices, epoch, futures = self._pending.popleft()
        if futures is None:
            items = [self._load(state, slot, int(index), epoch) for slot, index in enumerate(indices)]
        else:
            items = [future.result() for future in futures]  # re-raises a worker's DataError here, in the consumer
        self._submit()  # keep `prefetch` batches in flight
        return self._collate(state, items, self._labels[indices].copy())

    def close(self) -> None:
        """Stop the worker threads and drop batches in flight (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BatchLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None and not getattr(self, "_closed", True):
            executor.shutdown(wait=False, cancel_futures=True)
