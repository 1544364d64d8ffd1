"""A batch's crops as numpy plans, made where the batch's files are read (a reader process of file_readers.py, in
its own interpreter, or the trainer with workers=0): each image's crop box and flip (data.augmentations) and, for
each axis, the window the resize filter reads and where its output pixels fall (Pillow's resize(box=...)): a few
numbers an image, so that a reader's answer stays small (per-pixel centres, 461 KiB at batch 256 and 224 px, did
not fit a socket's buffer). The decode process gets them with the batch's files and computes the centres where it
makes the filter's weights (loader_gpu.resample_weights). Standard library + numpy; never imports the kit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from data import augmentations


class Plan(NamedTuple):
    """The resampling of one axis of N images onto `size` output pixels: output pixel i's centre, in window
    coordinates, is start + (i + 0.5) * scale (counted from the other end where flipped)."""

    offset: np.ndarray  # [N] first input pixel of the window the filter reads, int64
    length: np.ndarray  # [N] window pixels, int64
    start: np.ndarray  # [N] the crop's first input pixel in window coordinates, float64
    scale: np.ndarray  # [N] input pixels per output pixel, float64
    support: np.ndarray  # [N] the filter's half-width in input pixels (>= 1), float64
    flip: np.ndarray  # [N] bool: the output pixels run backwards (a horizontal flip)
    size: int  # output pixels

    def part(self, lo: int, hi: int) -> Plan:
        """Images [LO, HI) only."""
        return Plan(*(field[lo:hi] for field in self[:-1]), self.size)


def joined(*plans: Plan) -> Plan:
    """PLANS' images one after another (plans of one output size)."""
    assert len({p.size for p in plans}) == 1, [p.size for p in plans]
    return Plan(*(np.concatenate(fields) for fields in zip(*(p[:-1] for p in plans), strict=True)), plans[0].size)


def axis_plans(starts, stops, extents, size: int, flips=None) -> Plan:
    """Input pixels [start, stop) of axes of EXTENT pixels resampled onto SIZE, as Pillow's resize(box=...)."""
    starts, stops, extents = (np.asarray(a, np.int64) for a in (starts, stops, extents))
    scale = (stops - starts) / size
    support = np.maximum(scale, 1.0)
    margin = np.ceil(support).astype(np.int64) + 1
    offset = np.maximum(0, starts - margin)
    end = np.minimum(extents, stops + margin)
    flip = np.zeros(len(starts), bool) if flips is None else np.asarray(flips, bool)
    return Plan(offset, end - offset, (starts - offset).astype(np.float64), scale, support, flip, int(size))


class BatchPlan(NamedTuple):
    """A batch's crops: rows and columns resampled onto the output size, the flips in the columns'."""

    rows: Plan
    cols: Plan


def batch_plan(seed: int, epoch: int, indices: np.ndarray, widths: np.ndarray, heights: np.ndarray,
               size: int) -> BatchPlan:
    """The crops of entries INDICES (images of WIDTHS x HEIGHTS) in EPOCH, resampled onto SIZE x SIZE."""
    boxes, flips = augmentations(seed, epoch, indices, widths, heights)
    return BatchPlan(axis_plans(boxes[:, 1], boxes[:, 3], heights, size),
                     axis_plans(boxes[:, 0], boxes[:, 2], widths, size, flips))
