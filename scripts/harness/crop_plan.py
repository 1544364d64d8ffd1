"""A batch's crops as numpy plans, made where the batch's files are read (a reader process of file_readers.py, in
its own interpreter, or the trainer with workers=0): each image's crop box and flip (data.augmentations) and, for
each axis, the window the resize filter reads and its output pixels' centres (Pillow's resize(box=...)). The
decode process gets them with the batch's files: numpy work kept out of its interpreter.
Standard library + numpy; never imports the kit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from data import augmentations


class Plan(NamedTuple):
    """The resampling of one axis of N images onto `size` output pixels."""

    offset: np.ndarray  # [N] first input pixel of the window the filter reads
    length: np.ndarray  # [N] window pixels
    centers: np.ndarray  # [N, size] output pixel centres in window coordinates (reversed for a flip), float32
    support: np.ndarray  # [N] the filter's half-width in input pixels (>= 1)


def axis_plans(starts, stops, extents, size: int, flips=None) -> Plan:
    """Input pixels [start, stop) of axes of EXTENT pixels resampled onto SIZE, as Pillow's resize(box=...)."""
    starts, stops, extents = (np.asarray(a, np.int64) for a in (starts, stops, extents))
    scale = (stops - starts) / size
    support = np.maximum(scale, 1.0)
    margin = np.ceil(support).astype(np.int64) + 1
    offset = np.maximum(0, starts - margin)
    end = np.minimum(extents, stops + margin)
    centers = ((starts - offset)[:, None] + (np.arange(size) + 0.5)[None, :] * scale[:, None]).astype(np.float32)
    if flips is not None:
        centers[flips] = centers[flips, ::-1]
    return Plan(offset, end - offset, np.ascontiguousarray(centers), support)


class BatchPlan(NamedTuple):
    """A batch's crops: rows and columns resampled onto the output size, the flips in the columns' centres."""

    rows: Plan
    cols: Plan


def batch_plan(seed: int, epoch: int, indices: np.ndarray, widths: np.ndarray, heights: np.ndarray,
               size: int) -> BatchPlan:
    """The crops of entries INDICES (images of WIDTHS x HEIGHTS) in EPOCH, resampled onto SIZE x SIZE."""
    boxes, flips = augmentations(seed, epoch, indices, widths, heights)
    return BatchPlan(axis_plans(boxes[:, 1], boxes[:, 3], heights, size),
                     axis_plans(boxes[:, 0], boxes[:, 2], widths, size, flips))
