"""The report's plots (scaling, frameworks side by side), drawn with matplotlib's pyplot, imported only when a
figure is drawn."""

from __future__ import annotations

from pathlib import Path

from kit.results.report import Report, framework_rows


def pyplot():
    """matplotlib's pyplot on the file-only backend (no display needed), imported only when plotting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(plt, fig, ax, path: Path, title: str, legend_size: int, **grid) -> None:
    """The plot's title, grid and legend, then the figure written to path and closed."""
    ax.set_title(title)
    ax.grid(True, **grid)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_plot(report: Report, path: Path) -> bool:
    """Measured vs ideal linear scaling per group of 2+ cases; False when there is nothing to plot."""
    plottable = [g for g in report.groups if len(g.cases) > 1 and any(c.speedup is not None for c in g.cases)]
    if not plottable:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for group in plottable:
        cases = sorted(group.cases, key=lambda c: c.gpus)
        gpus = [c.gpus for c in cases]
        base = next(c.median for c in cases if c.nodes == 1 and c.gpus_per_node == 1)
        (line,) = ax.plot(gpus, [c.median for c in cases], marker="o", label=f"{group.key.label()} (measured)")
        ax.plot(
            gpus,
            [base * g for g in gpus],
            linestyle="--",
            color=line.get_color(),
            alpha=0.6,
            label=f"{group.key.label()} (ideal linear)",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted({c.gpus for g in plottable for c in g.cases})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel(f"{report.devices} (total)")
    ax.set_ylabel(f"throughput ({plottable[0].unit})")
    _finish(plt, fig, ax, path, "Scaling: measured vs ideal linear (log-log)", 7, which="both", alpha=0.3)
    return True


def write_framework_plot(report: Report, path: Path) -> bool:
    """Grouped bars: median per framework for each shared case, whiskers from the slowest to the fastest run."""
    frameworks, rows = framework_rows(report)
    if len(frameworks) < 2:
        return False
    plt = pyplot()
    width = 0.8 / len(frameworks)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(rows) + 2), 4.5), dpi=120)
    for i, fw in enumerate(frameworks):
        xs = [n + (i - (len(frameworks) - 1) / 2) * width for n, (_, row) in enumerate(rows) if fw in row]
        cases = [row[fw] for _, row in rows if fw in row]
        medians = [c.median for c in cases]
        spread = [[m - min(c.values) for m, c in zip(medians, cases, strict=True)],
                  [max(c.values) - m for m, c in zip(medians, cases, strict=True)]]
        ax.bar(xs, medians, width, yerr=spread, capsize=3, label=fw)
    labels = [f"{model}\nbz{batch} {precision}\n{case}" for (model, batch, precision, case), _ in rows]
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel("throughput (samples/s, median of runs)")
    _finish(plt, fig, ax, path, "Frameworks side by side (whiskers: slowest to fastest run)", 8, axis="y", alpha=0.3)
    return True
