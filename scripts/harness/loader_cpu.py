"""The CPU input pipeline: Pillow decodes, crops, resizes and flips each JPEG in `workers` threads; batches are numpy.

    with ImageListLoader(entries, batch_size=64, image_size=224, rank=r, world_size=n) as loader:
        images, labels = next(loader)   # float32 [B,3,S,S] (or [B,S,S,3] with channels_last), int64 [B]

Per image: PIL decode (data.fit_decode) -> RGB -> the crop box of data.augmentation resized bilinearly to SxS (Pillow's
antialiased triangle filter, 8-bit) -> flip -> /255 -> ImageNet mean/std. Pillow releases the GIL while decoding
and resizing, so the threads decode in parallel; each writes its image straight into the batch array. Shard,
order, prefetch and errors: data.BatchLoader. Standard library + numpy + Pillow; never imports the kit.
"""

from __future__ import annotations

import numpy as np
from data import IMAGENET_MEAN, IMAGENET_STD, BatchLoader, augmentation, fit_decode, pillow


class ImageListLoader(BatchLoader):
    """data.BatchLoader of (images, labels) numpy batches decoded with Pillow; `channels_last`: [B,S,S,3]."""

    decode_device = "cpu"
    decoder = "pillow"

    def __init__(self, entries, batch_size: int, image_size: int, rank: int = 0, world_size: int = 1,
                 seed: int = 0, workers: int = 2, channels_last: bool = False, prefetch: int = 4) -> None:
        self._Image = pillow()
        super().__init__(entries, batch_size, image_size, rank, world_size, seed, workers, prefetch)
        self.channels_last = bool(channels_last)
        self._mean = np.asarray(IMAGENET_MEAN, dtype=np.float32) * 255.0
        self._inv_std = (1.0 / (np.asarray(IMAGENET_STD, dtype=np.float32) * 255.0)).astype(np.float32)

    def _new_batch(self, size: int) -> np.ndarray:
        s = self.image_size
        return np.empty((size, s, s, 3) if self.channels_last else (size, 3, s, s), dtype=np.float32)

    def _load(self, images: np.ndarray, slot: int, index: int, epoch: int) -> None:
        Image = self._Image
        try:
            with Image.open(self._paths[index]) as img:
                img = fit_decode(img).convert("RGB")  # the full decode (bounded): truncated/corrupt files fail here
        except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
            raise self.unreadable(index, exc) from exc
        box, flip = augmentation(self.seed, epoch, index, img.width, img.height)
        size = self.image_size
        img = img.resize((size, size), Image.Resampling.BILINEAR, box=box)
        if flip:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = np.asarray(img, dtype=np.float32)  # [S, S, 3]
        pixels -= self._mean
        pixels *= self._inv_std
        images[slot] = pixels if self.channels_last else pixels.transpose(2, 0, 1)

    def _collate(self, images: np.ndarray, items: list, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return images, labels
