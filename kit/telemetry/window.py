"""summarize(): what the GPUs did during one measured window, from a Telemetry's samples.

Samples inside [start_s, end_s] give the clocks, power, temperature, utilisation and reasons. Energy also reads
the nearest sample outside each edge (within GAP_INTERVALS), so that the window's ends are interpolated, not cut to
the first and last sample: 'counter' is NVML's energy counter at the end minus at the start; 'integrated' (no
counter, as from nvidia-smi, or a counter that went back) is the power integrated by the trapezoid rule:
power_instant_w where every sample has it (nvidia-smi's power.draw.instant), else power_w. power_w (NVML's power
usage, nvidia-smi's power.draw) is an average over about a second on recent GPUs: on the H200, integrating it over
a window that starts on the ramp into training read 10% below the counter, the instant power within 2%. A reason's
share counts the samples (evenly spaced) whose bitmask has its bit, among those that state one.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from kit.telemetry.records import REASONS, Sample, Telemetry

MIN_SAMPLES = 3  # fewer samples of a GPU in the window: no figures
GAP_INTERVALS = 3  # samples further apart than this many intervals leave the time between them uncovered
COUNTER, INTEGRATED = "counter", "integrated"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


@dataclass(frozen=True)
class WindowSummary:
    """The chosen GPUs over one window. Clocks, temperature, utilisation and reasons pool every GPU's samples;
    power_mean_w, power_peak_w, limit_w and energy_j are sums over the GPUs (each GPU's mean, peak, limit, energy).
    images_per_s_per_w is images / energy_j (images/s over the window's average power). Figures are None where the
    samples do not give them (energy: no sample within GAP_INTERVALS of an edge, which the coverage shows); all are
    None, and `why` says why, when a GPU has fewer than MIN_SAMPLES samples."""

    start_s: float
    end_s: float
    images: int
    gpus: tuple[int, ...]
    samples: int
    coverage: float  # share of the window between samples at most GAP_INTERVALS apart (edges included)
    why: str | None = None
    sm_mhz_median: float | None = None
    sm_mhz_min: float | None = None
    max_sm_mhz: float | None = None
    sm_ratio_median: float | None = None  # to the GPU's max SM clock
    sm_ratio_min: float | None = None
    power_mean_w: float | None = None
    power_peak_w: float | None = None
    limit_w: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None  # COUNTER | INTEGRATED
    j_per_image: float | None = None
    images_per_s_per_w: float | None = None
    temp_peak_c: float | None = None
    util_gpu_mean: float | None = None
    util_jpeg_mean: float | None = None  # the JPEG engines' (None where no sample has it)
    reasons: dict[str, float] = field(default_factory=dict)  # REASONS name -> share of the window
    per_gpu: tuple[WindowSummary, ...] = ()  # each GPU's own figures when several (no per-image figures)

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


def _at(points: Sequence[Sample], t: float, key: str) -> float:
    """KEY at time T, linear between the samples around it, the nearest one's beyond them."""
    times = [p.t for p in points]
    i = bisect_right(times, t)
    if i == 0:
        return getattr(points[0], key)
    if i == len(points):
        return getattr(points[-1], key)
    a, b = points[i - 1], points[i]
    va, vb = getattr(a, key), getattr(b, key)
    return va if b.t == a.t else va + (vb - va) * (t - a.t) / (b.t - a.t)


def _coverage(times: Iterable[float], start: float, end: float, gap: float) -> float:
    edges = [start, *times, end]
    return sum(b - a for a, b in zip(edges, edges[1:], strict=False) if b - a <= gap) / (end - start)


def _energy(series: list[Sample], start: float, end: float, gap: float) -> tuple[float | None, str | None]:
    """(joules, COUNTER | INTEGRATED) of one GPU, or (None, None) where the samples do not reach both edges."""
    near = [s for s in series if start - gap <= s.t <= end + gap]
    if not near or near[0].t > start + gap or near[-1].t < end - gap:
        return None, None
    if all(s.energy_mj is not None for s in near) and all(
            b.energy_mj >= a.energy_mj for a, b in zip(near, near[1:], strict=False)):
        return (_at(near, end, "energy_mj") - _at(near, start, "energy_mj")) / 1000, COUNTER
    key = "power_instant_w" if all(s.power_instant_w is not None for s in near) else "power_w"
    powered = [s for s in near if getattr(s, key) is not None]
    if len(powered) < 2:
        return None, None
    points = [(start, _at(powered, start, key)), *((s.t, getattr(s, key)) for s in powered if start < s.t < end),
              (end, _at(powered, end, key))]
    return sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in zip(points, points[1:], strict=False)), INTEGRATED


def _known(samples: Iterable[Sample], key: str) -> list[float]:
    return [v for s in samples if (v := getattr(s, key)) is not None]


def _figures(telemetry: Telemetry, indices: list[int], start: float, end: float, images: int) -> WindowSummary:
    gap = GAP_INTERVALS * (telemetry.interval_s or 0.0)
    series = {g: sorted((s for s in telemetry.samples if s.gpu == g), key=lambda s: s.t) for g in indices}
    inside = {g: [s for s in series[g] if start <= s.t <= end] for g in indices}
    count = sum(map(len, inside.values()))
    coverage = min((_coverage((s.t for s in inside[g]), start, end, gap) for g in indices), default=0.0)
    base = dict(start_s=start, end_s=end, images=images, gpus=tuple(indices), samples=count, coverage=coverage)
    few = [f"GPU {g}: {len(inside[g])} sample(s)" for g in indices if len(inside[g]) < MIN_SAMPLES]
    if few or not indices:
        what = "; ".join(few) or "no GPU chosen"
        return WindowSummary(**base, why=f"{what} in the {end - start:.3g} s window ({MIN_SAMPLES} needed)")
    pooled = [s for g in indices for s in inside[g]]
    max_sm = {g: gpu.max_sm_mhz for g in indices if (gpu := telemetry.gpu(g)) is not None and gpu.max_sm_mhz}
    clocks = _known(pooled, "sm_mhz")
    ratios = [s.sm_mhz / max_sm[s.gpu] for s in pooled if s.sm_mhz is not None and s.gpu in max_sm]
    powers = {g: _known(inside[g], "power_w") for g in indices}
    limits = [(_known(inside[g], "limit_w") or [getattr(telemetry.gpu(g), "limit_w", None)])[-1] for g in indices]
    energies = [_energy(series[g], start, end, gap) for g in indices]
    energy = sum(e for e, _ in energies) if all(e is not None for e, _ in energies) else None
    masks = [s.reasons for s in pooled if s.reasons is not None]
    return WindowSummary(
        **base,
        sm_mhz_median=median(clocks) if clocks else None,
        sm_mhz_min=min(clocks, default=None),
        max_sm_mhz=max(max_sm.values(), default=None),
        sm_ratio_median=median(ratios) if ratios else None,
        sm_ratio_min=min(ratios, default=None),
        power_mean_w=sum(mean(p) for p in powers.values()) if all(powers.values()) else None,
        power_peak_w=sum(max(p) for p in powers.values()) if all(powers.values()) else None,
        limit_w=sum(limits) if None not in limits else None,
        energy_j=energy,
        energy_source=None if energy is None else (
            COUNTER if all(source == COUNTER for _, source in energies) else INTEGRATED),
        j_per_image=energy / images if energy is not None and images else None,
        images_per_s_per_w=images / energy if energy and images else None,
        temp_peak_c=max(_known(pooled, "temp_c"), default=None),
        util_gpu_mean=mean(u) if (u := _known(pooled, "util_gpu")) else None,
        util_jpeg_mean=mean(j) if (j := _known(pooled, "util_jpeg")) else None,
        reasons={name: sum(1 for m in masks if m & bit) / len(masks) for name, bit in REASONS.items()} if masks else {},
    )


def summarize(telemetry: Telemetry, start_s: float, end_s: float, images: int,
              gpus: Sequence[int] | None = None) -> WindowSummary:
    """The figures of GPUS (every sampled GPU when None) over [start_s, end_s] (epoch seconds), for IMAGES images
    trained in that window. A file with no telemetry, or too few samples, gives a summary whose `why` says so."""
    if not end_s > start_s:
        raise ValueError(f"a window ends after it starts: {start_s} .. {end_s}")
    if images < 0:
        raise ValueError(f"images must be >= 0, got {images}")
    known = sorted({g.index for g in telemetry.gpus} | {s.gpu for s in telemetry.samples})
    indices = known if gpus is None else list(gpus)
    if telemetry.source is None:
        return WindowSummary(start_s, end_s, images, tuple(indices), 0, 0.0, why=f"no GPU telemetry: {telemetry.why}")
    if unknown := [g for g in indices if g not in known]:
        raise ValueError(f"{telemetry.path} has no GPU {unknown[0]} (it has {', '.join(map(str, known)) or 'none'})")
    summary = _figures(telemetry, indices, start_s, end_s, images)
    if len(indices) > 1 and summary.why is None:
        parts = tuple(_figures(telemetry, [g], start_s, end_s, 0) for g in indices)
        summary = replace(summary, per_gpu=parts)
    return summary
