"""telemetry.png: SM clock, power and step throughput over each sampled case's slowest and fastest run, in time
from the start of its measured window (a published program's whole run: no steps of the kit's to draw)."""

from __future__ import annotations

from pathlib import Path

from kit.results.parsers.kitlog import events
from kit.results.plotting import pyplot
from kit.telemetry import read

MAX_CASES = 6  # rows of the figure
MARGIN_S = 2.0  # seconds drawn either side of the window


def _sampled(report) -> list[tuple[str, list]]:
    """(label, [slowest run, fastest run]) of each case with sampled runs, at most MAX_CASES."""
    out = []
    for group in report.groups:
        for case in group.cases:
            runs = sorted((r for r in case.runs if r.telemetry), key=lambda r: r.figure.value)
            if runs:
                out.append((f"{group.key.label()} {case.name}", [runs[0], runs[-1]] if len(runs) > 1 else runs))
    return out[:MAX_CASES]


def _series(run, root: Path) -> tuple[float, list, list, list]:
    """(window start, [(t, MHz)], [(t, W)], [(t, samples/s)]) of one run, times from the window's start."""
    tele = run.telemetry
    steps = [e.data for e in events(run.log.path) if e.data.get("event") == "step" and "time_ms" in e.data]
    samples = [s for h in tele["hosts"].values() for s in read(root / h["file"]).samples]
    if tele["window"] == "measured steps" and steps:
        start = steps[0]["time_ms"] / 1000 - steps[0].get("seconds", 0)
        end = steps[-1]["time_ms"] / 1000
    else:
        start = min((s.t for s in samples), default=0.0)
        end = max((s.t for s in samples), default=start)
    near = [s for s in samples if start - MARGIN_S <= s.t <= end + MARGIN_S]
    clock = [(s.t - start, s.sm_mhz) for s in near if s.sm_mhz is not None]
    power = [(s.t - start, s.power_w) for s in near if s.power_w is not None]
    speed = [(e["time_ms"] / 1000 - start, e["samples_per_sec"]) for e in steps if "samples_per_sec" in e]
    return start, clock, power, speed


def write_telemetry_plot(report, path: Path) -> bool:
    """The figure, or False when no run was sampled."""
    cases = _sampled(report)
    if not cases:
        return False
    root = report.source.parent if report.source.name == "logs" else report.source
    plt = pyplot()
    fig, axes = plt.subplots(len(cases), 3, figsize=(13, 3 * len(cases)), dpi=100, squeeze=False)
    for row, (label, runs) in zip(axes, cases, strict=True):
        for run, style in zip(runs, ("-", "--"), strict=False):
            _, clock, power, speed = _series(run, root)
            name = f"run {run.log.run} ({run.figure.value:.0f})"
            for ax, points in zip(row, (clock, power, speed), strict=True):
                if points:
                    ax.plot(*zip(*points, strict=True), style, label=name)
        for ax, what in zip(row, ("SM clock (MHz)", "power (W)", f"step throughput ({runs[0].figure.unit})"),
                            strict=True):
            ax.set_title(f"{label}: {what}", fontsize=8)
            ax.set_xlabel("s from the window's start", fontsize=8)
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
            else:  # a published program's run: its steps are not the kit's to time
                ax.text(0.5, 0.5, "no step records of the kit's\n(a published program: its whole run)",
                        transform=ax.transAxes, ha="center", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
