"""The report's plots (throughput of every case, scaling, frameworks side by side), drawn with matplotlib's pyplot,
imported only when a figure is drawn.

Figures in different units never share an axis: each plot draws one panel (subplot) per unit, with its own y label.
What goes in which panel is decided by the pure *_panels functions below, which the tests read; each write_* draws
exactly those panels and returns how many axes the figure it wrote has (0: nothing to plot, no file written).
"""

from __future__ import annotations

from pathlib import Path

from kit.results.report import CaseResult, GroupResult, Report, framework_rows, row_unit

FrameworkRow = tuple[tuple[str, int, str, str], dict[str, CaseResult]]  # (model, batch, precision, case), {fw: case}

THROUGHPUT_WIDTH_IN, THROUGHPUT_DPI = 12.0, 100  # throughput.png: 1200 px wide
SCALING_PANEL_IN, SCALING_DPI = (7.5, 3.8), 120
FRAMEWORKS_PANEL_H_IN, FRAMEWORKS_DPI = 4.2, 120


def pyplot():
    """matplotlib's pyplot on the file-only backend (no display needed), imported only when plotting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def case_unit(case: CaseResult) -> str:
    return case.runs[0].figure.unit  # one per case (build_report refuses mixed units)


def _by_unit(items, unit_of) -> list[tuple[str, list]]:
    """items grouped by unit_of(item), units in the order first seen, items in their order."""
    out: dict[str, list] = {}
    for item in items:
        out.setdefault(unit_of(item), []).append(item)
    return list(out.items())


def throughput_panels(report: Report) -> list[tuple[str, list[tuple[str, str, CaseResult]]]]:
    """throughput.png's panels: (unit, [(label 'framework · model · batch B · precision · NnGg', framework, case)]),
    every case of every group, in results.json's order."""
    cases = [(f"{g.key.label()} · {c.name}", g.key.framework, c) for g in report.groups for c in g.cases]
    return _by_unit(cases, lambda item: case_unit(item[2]))


def scaling_panels(report: Report) -> list[tuple[str, list[GroupResult]]]:
    """scaling.png's panels: (unit, its groups of two or more cases with a speedup)."""
    plottable = [g for g in report.groups if len(g.cases) > 1 and any(c.speedup is not None for c in g.cases)]
    return _by_unit(plottable, lambda g: g.unit)


def framework_panels(report: Report) -> list[tuple[str, list[str], list[FrameworkRow]]]:
    """frameworks.png's panels: (unit, its frameworks, its side-by-side rows). A row stays whole (its bars are the
    comparison): one whose frameworks report different units (Paddle's words/s beside PyTorch's tokens/s) goes to
    a panel of those units together, 'tokens/s | words/s'."""
    frameworks, rows = framework_rows(report)
    if len(frameworks) < 2:
        return []
    panels = _by_unit(rows, lambda row: row_unit(row[1], " | "))
    return [(unit, [fw for fw in frameworks if any(fw in row for _, row in these)], these) for unit, these in panels]


def _save(plt, fig, path: Path) -> int:
    """The figure written to path and closed; how many axes it has."""
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return len(fig.axes)


def _colours(report: Report) -> dict[str, str]:
    """One colour per framework of the report, the same in every plot."""
    return {fw: f"C{i % 10}" for i, fw in enumerate(sorted({g.key.framework for g in report.groups}))}


def _whiskers(cases: list[CaseResult]) -> list[list[float]]:
    """Error-bar extents from each case's median down to its slowest run and up to its fastest."""
    return [[c.median - min(c.values) for c in cases], [max(c.values) - c.median for c in cases]]


MARK_COLOURS = ("#222222", "#c92a2a")  # the closest rung's figure, the record's
MARK_LEGEND = ("closest like-for-like figure (kit standing's rung 1-3)", "the record for this GPU (MLPerf), a ceiling")


def _case_keys(report: Report, cases: list) -> list[str]:
    """The case key (framework/model/bzB/NnGg/precision) of each panel entry, as kit.results.standing names them."""
    keys = {id(c): g.key.case_key(c.name).strip("/") for g in report.groups for c in g.cases}
    return [keys.get(id(case), "") for _, _, case in cases]


def throughput_size(report: Report) -> tuple[float, float]:
    """throughput.png's size in inches: fixed width; per panel a header and a row per case."""
    return THROUGHPUT_WIDTH_IN, sum(1.3 + 0.42 * len(cases) for _, cases in throughput_panels(report)) + 0.5


def write_throughput_plot(report: Report, path: Path) -> int:
    """Each case's median as a horizontal bar, whiskers from its slowest to its fastest run, one panel per unit,
    bars coloured by framework; 0 when no case gave a figure."""
    panels = throughput_panels(report)
    if not panels:
        return 0
    plt = pyplot()
    colours = _colours(report)
    fig, axes = plt.subplots(len(panels), 1, figsize=throughput_size(report), dpi=THROUGHPUT_DPI, squeeze=False,
                             gridspec_kw={"height_ratios": [len(cases) + 2 for _, cases in panels]})
    for ax, (unit, cases) in zip(axes[:, 0], panels, strict=True):
        for fw in sorted({fw for _, fw, _ in cases}):
            mine = [(y, case) for y, (_, f, case) in enumerate(cases) if f == fw]
            ys, these = [y for y, _ in mine], [case for _, case in mine]
            ax.barh(ys, [c.median for c in these], 0.6, xerr=_whiskers(these), capsize=3, color=colours[fw])
        marks = {y: report.marks.get(key, []) for y, key in enumerate(_case_keys(report, cases))}
        top = max([max(c.values) for _, _, c in cases] + [v for ms in marks.values() for _, v in ms])
        for y, (_, _, case) in enumerate(cases):
            runs = f"{len(case.runs)} run{'s' if len(case.runs) > 1 else ''}"
            ax.text(max(case.values) + top * 0.01, y, f"{case.median:,.1f} ({runs})", va="center", fontsize=8)
            for label, value in marks[y]:  # a published neighbour: a tick across the bar's row
                record = label.startswith("the record")
                ax.plot([value, value], [y - 0.42, y + 0.42], color=MARK_COLOURS[record], linewidth=2,
                        linestyle=":" if record else "-", label=MARK_LEGEND[record])
        handles = {h.get_label(): h for h in ax.get_lines() if h.get_label() in MARK_LEGEND}
        if handles:
            ax.legend(handles.values(), handles.keys(), fontsize=7, loc="lower right")
        ax.set_xlim(0, top * 1.22)
        ax.set_yticks(range(len(cases)), [label for label, _, _ in cases], fontsize=8)
        ax.set_ylim(len(cases) - 0.2, -0.8)  # results.json's order, top down
        ax.set_xlabel(f"throughput ({unit}, median of runs)")
        ax.set_title(f"Throughput per case in {unit} (whiskers: slowest to fastest run)", fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)  # each label starts with its framework; the legend names the ticks
    return _save(plt, fig, path)


def write_plot(report: Report, path: Path) -> int:
    """Measured vs ideal linear scaling per group of 2+ cases, one log-log panel per unit; 0 when there is nothing
    to plot."""
    panels = scaling_panels(report)
    if not panels:
        return 0
    plt = pyplot()
    width, height = SCALING_PANEL_IN
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, height * len(panels)), dpi=SCALING_DPI, squeeze=False)
    for ax, (unit, groups) in zip(axes[:, 0], panels, strict=True):
        for group in groups:
            cases = sorted(group.cases, key=lambda c: c.gpus)
            gpus = [c.gpus for c in cases]
            base = next(c.median for c in cases if c.nodes == 1 and c.gpus_per_node == 1)
            (line,) = ax.plot(gpus, [c.median for c in cases], marker="o", label=f"{group.key.label()} (measured)")
            ax.plot(gpus, [base * g for g in gpus], linestyle="--", color=line.get_color(), alpha=0.6,
                    label=f"{group.key.label()} (ideal linear)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({c.gpus for g in groups for c in g.cases})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel(f"{report.devices} (total)")
        ax.set_ylabel(f"throughput ({unit})")
        ax.set_title(f"Scaling in {unit}: measured vs ideal linear (log-log)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def frameworks_size(report: Report) -> tuple[float, float]:
    """frameworks.png's size in inches: wide enough for the panel with the most rows; a fixed height per panel."""
    panels = framework_panels(report)
    most = max((len(rows) for _, _, rows in panels), default=0)
    return max(6.0, 1.3 * most + 2), FRAMEWORKS_PANEL_H_IN * len(panels)


def write_framework_plot(report: Report, path: Path) -> int:
    """Grouped bars: median per framework for each shared case, whiskers from the slowest to the fastest run, one
    panel per unit; 0 when fewer than two frameworks share a case."""
    panels = framework_panels(report)
    if not panels:
        return 0
    plt = pyplot()
    colours = _colours(report)
    fig, axes = plt.subplots(len(panels), 1, figsize=frameworks_size(report), dpi=FRAMEWORKS_DPI, squeeze=False)
    for ax, (unit, frameworks, rows) in zip(axes[:, 0], panels, strict=True):
        width = 0.8 / len(frameworks)
        for i, fw in enumerate(frameworks):
            xs = [n + (i - (len(frameworks) - 1) / 2) * width for n, (_, row) in enumerate(rows) if fw in row]
            cases = [row[fw] for _, row in rows if fw in row]
            ax.bar(xs, [c.median for c in cases], width, yerr=_whiskers(cases), capsize=3, color=colours[fw],
                   label=fw)
        labels = [f"{model}\nbz{batch} {precision}\n{case}" for (model, batch, precision, case), _ in rows]
        ax.set_xticks(range(len(rows)), labels, fontsize=8)
        ax.set_ylabel(f"throughput ({unit}, median of runs)")
        ax.set_title(f"Frameworks side by side in {unit}\n(whiskers: slowest to fastest run)", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(plt, fig, path)
