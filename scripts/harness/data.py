"""ImageNet `train_list.txt` reader for the harness: JPEG decode, random crop + flip, per-rank shard, prefetch.

Framework-agnostic: batches come out as numpy arrays and train.py turns them into tensors.

    entries = load_list("/data/ILSVRC2012/train_list.txt")        # [(abs path, label), ...]
    with ImageListLoader(entries, batch_size=64, image_size=224, rank=r, world_size=n) as loader:
        for step, (images, labels) in zip(range(steps), loader):  # infinite: epoch after epoch
            ...   # images float32 [B,3,S,S] (or [B,S,S,3] with channels_last), labels int64 [B]

List format (as data_prep/make_train_list.py writes it): one `<relative path> <label>` per line,
paths resolved against the list file's directory unless `root` is given; blank lines are errors,
so list line N is entry N-1.

Epochs: every rank shuffles all entries with the same generator seeded by (seed, epoch) and takes
`order[rank::world_size]`, so shards are disjoint; every shard is cut to `len(entries) // world_size`
entries and the last partial batch is dropped, so all ranks run the same number of steps per epoch.
Per image (as PaddleClas/torchvision train transforms): PIL decode -> RGB -> random resized crop
(area 0.08-1, aspect 3/4-4/3, 10 tries, then a centre crop) resized bilinearly to SxS -> horizontal
flip with p=0.5 -> /255 -> normalise with the ImageNet mean/std. The augmentation of an image
depends only on (seed, epoch, entry index), so results do not depend on thread timing, rank or
world size. Decoding runs in a thread pool (Pillow releases the GIL while decoding and resizing)
with at most `prefetch` batches in flight; an unreadable image raises DataError naming the file
and its list line when its batch is consumed (never skipped).

Standard library + numpy + Pillow (imported when a loader is built); never imports the kit.
"""

from __future__ import annotations

import math
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
SHOW_MISSING = 3

__all__ = [
    "DataError",
    "ImageList",
    "ImageListLoader",
    "dali_available",
    "load_list",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]


class DataError(Exception):
    """Unusable input data; the message names the file (and the list line where there is one)."""


class ImageList(list):
    """The entries of one list file: a plain list of (path, label) that also remembers `source`.

    Entry i is line i + 1 of `source`; ImageListLoader uses that to name the line of a bad image.
    Slices and copies are plain lists (their indices no longer match the file's lines).
    """

    source: str | None = None


def load_list(list_path: str | os.PathLike, root: str | os.PathLike | None = None) -> ImageList:
    """Read a `<relative path> <label>` list; return [(absolute image path, label), ...].

    Raises DataError for an unreadable or empty list, a malformed line (`file:line: ...`) and a
    listed image that does not exist (`file:line: image not found: path`). Existence is checked for
    every entry up front, one directory listing per class directory (cheap even for 1.28M images).
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
        entries.append((os.path.join(base, rel), int(label)))
    _check_files_exist(list_path, entries)
    return entries


def _check_files_exist(list_path: str, entries: list[tuple[str, int]]) -> None:
    listings: dict[str, set[str]] = {}
    missing: list[tuple[int, str]] = []
    for index, (path, _) in enumerate(entries):
        directory, name = os.path.split(path)
        names = listings.get(directory)
        if names is None:
            try:
                with os.scandir(directory) as it:
                    names = {e.name for e in it if e.is_file()}
            except OSError:
                names = set()
            listings[directory] = names
        if name not in names:
            missing.append((index + 1, path))
    if missing:
        lineno, path = missing[0]
        more = f" (and {len(missing) - 1} more missing images)" if len(missing) > 1 else ""
        raise DataError(f"{list_path}:{lineno}: image not found: {path}{more}")


def dali_available() -> bool:
    """True only if NVIDIA DALI (`nvidia.dali`) can be imported."""
    try:
        import nvidia.dali  # noqa: F401
    except Exception:  # ImportError, or a broken install failing to load its libraries
        return False
    return True


def random_resized_crop_box(width: int, height: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of a RandomResizedCrop box, torchvision's algorithm."""
    area = width * height
    log_ratio = (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]))
    for _ in range(10):
        target_area = area * rng.uniform(CROP_SCALE[0], CROP_SCALE[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = round(math.sqrt(target_area * aspect))
        h = round(math.sqrt(target_area / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < CROP_RATIO[0]:
        w, h = width, round(width / CROP_RATIO[0])
    elif in_ratio > CROP_RATIO[1]:
        w, h = round(height * CROP_RATIO[1]), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


class ImageListLoader:
    """Infinite iterator of (images, labels) numpy batches over this rank's shard of ENTRIES.

    ENTRIES: [(image path, label), ...] as load_list returns them. `workers` decode threads
    (0: decode in the consuming thread), at most `prefetch` batches decoded ahead. Bad parameters
    raise ValueError; a shard smaller than one batch raises DataError. Use as a context manager or
    call close().
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
        channels_last: bool = False,
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
        try:
            from PIL import Image
        except ImportError as exc:
            raise ImportError(f"Pillow is required to read JPEG training data: {exc}") from exc
        self._Image = Image

        self._source = getattr(entries, "source", None)
        self._paths = [path for path, _ in entries]
        self._labels = np.fromiter((label for _, label in entries), dtype=np.int64, count=len(entries))
        self.batch_size = batch_size
        self.image_size = image_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.channels_last = bool(channels_last)
        self.prefetch = prefetch
        self.shard_size = len(entries) // world_size
        if self.shard_size < batch_size:
            where = f"{self._source}: " if self._source else ""
            raise DataError(
                f"{where}{len(entries)} images over {world_size} rank(s) give {self.shard_size} per rank, "
                f"fewer than the batch size {batch_size}"
            )
        self.steps_per_epoch = self.shard_size // batch_size
        self.num_classes = int(self._labels.max()) + 1 if len(entries) else 0

        mean = np.asarray(IMAGENET_MEAN, dtype=np.float32) * 255.0
        inv_std = 1.0 / (np.asarray(IMAGENET_STD, dtype=np.float32) * 255.0)
        self._mean, self._inv_std = mean, inv_std.astype(np.float32)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kit-data") if workers else None
        # (images, labels, futures or None when workers=0, entry indices, epoch) per batch in flight
        self._pending: deque[tuple[np.ndarray, np.ndarray, list[Future] | None, np.ndarray, int]] = deque()
        self._orders: dict[int, np.ndarray] = {}
        self._next_submit = 0  # global batch number of the next batch to submit
        self._closed = False

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

    # -- decoding --------------------------------------------------------------------------------
    def _where(self, index: int) -> str:
        path = self._paths[index]
        if self._source is not None:
            return f"{path} (list {self._source}:{index + 1})"
        return f"{path} (entry {index})"

    def _load_into(self, out: np.ndarray, slot: int, index: int, epoch: int) -> None:
        Image = self._Image
        path = self._paths[index]
        rng = np.random.default_rng((self.seed, epoch, index))
        try:
            with Image.open(path) as img:
                img = img.convert("RGB")  # forces the full decode: truncated/corrupt files fail here
        except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
            raise DataError(f"cannot read image {self._where(index)}: {exc}") from exc
        size = self.image_size
        box = random_resized_crop_box(img.width, img.height, rng)
        img = img.resize((size, size), Image.Resampling.BILINEAR, box=box)
        if rng.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = np.asarray(img, dtype=np.float32)  # [S, S, 3]
        pixels -= self._mean
        pixels *= self._inv_std
        if self.channels_last:
            out[slot] = pixels
        else:
            out[slot] = pixels.transpose(2, 0, 1)

    def _submit(self) -> None:
        number = self._next_submit
        self._next_submit += 1
        epoch, step = divmod(number, self.steps_per_epoch)
        indices = self.epoch_indices(epoch)[step * self.batch_size : (step + 1) * self.batch_size]
        s = self.image_size
        shape = (len(indices), s, s, 3) if self.channels_last else (len(indices), 3, s, s)
        images = np.empty(shape, dtype=np.float32)
        labels = self._labels[indices].copy()
        futures = None
        if self._executor is not None:
            futures = [
                self._executor.submit(self._load_into, images, slot, int(index), epoch)
                for slot, index in enumerate(indices)
            ]
        self._pending.append((images, labels, futures, indices, epoch))

    # -- iteration -------------------------------------------------------------------------------
    def __iter__(self) -> ImageListLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        if self._closed:
            raise RuntimeError("ImageListLoader is closed")
        while len(self._pending) < self.prefetch:
            self._submit()
        images, labels, futures, indices, epoch = self._pending.popleft()
        if futures is None:
            for slot, index in enumerate(indices):
                self._load_into(images, slot, int(index), epoch)
        else:
            for future in futures:
                future.result()  # re-raises a worker's DataError here, in the training loop
        self._submit()  # keep `prefetch` batches in flight
        return images, labels

    def close(self) -> None:
        """Stop the decode threads and drop batches in flight (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ImageListLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None and not getattr(self, "_closed", True):
            executor.shutdown(wait=False, cancel_futures=True)
