"""The report's exporters: Markdown (the seed-style tables), CSV, JSON and the PNG plots, and write_outputs,
which writes them all beside each other (each file atomically).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from kit.core.files import write_text
from kit.core.rundir import RESULTS_JSON
from kit.results import stats
from kit.results.extract import Method, format_number
from kit.results.gpu_telemetry import TELEMETRY_COLUMNS, telemetry_cells, telemetry_markdown
from kit.results.parsers.kitlog import read_what_ran
from kit.results.report import CaseResult, Report, framework_rows, rel_path, row_unit


def describe_method(method: Method, scale_given: bool) -> str:
    parts = []
    if method.reduce == "wallclock":
        parts.append(f"wall-clock between steps {method.steps[0]} and {method.steps[1]} x batch {method.batch}")
    elif method.reduce == "last_summary":
        parts.append("last summary line")
    else:
        parts.append(f"skip {method.skip}")
        parts.append(f"count {method.count}" if method.count else "all records")
        parts.append(method.reduce.replace("_", " "))
    if scale_given:
        parts.append(f"scale {format_number(float(method.scale))}")
    if method.round is not None:
        parts.append(f"round {method.round}")
    if method.sig is not None:
        parts.append(f"{method.sig} significant digits")
    if method.metric:
        parts.append(f"metric {method.metric}")
    return ", ".join(parts)


def _shown(value: float, method: Method) -> str:
    if method.round is not None or method.sig is not None:
        return format_number(value)
    return f"{value:.2f}"


def to_markdown(report: Report) -> str:
    out = io.StringIO()
    out.write(f"# {report.title or 'Throughput report: ' + (report.source.name or str(report.source))}\n\n")
    for block in report.headline():
        out.write(block + "\n\n")
    if report.settings:
        out.write(report.settings.rstrip() + "\n\n")
    out.write(f"Method per run: {describe_method(report.method, report.scale_given)}; ")
    out.write("per case: median of the runs; speedup against the 1n1g median.\n")
    out.write(comparison_markdown(report))
    out.write(batch_node_markdown(report))
    for group in report.groups:
        runs = sorted({len(c.runs) for c in group.cases})
        out.write(f"\n## {group.key.label()}\n\n")
        own = {describe_method(r.figure.method, True) for c in group.cases for r in c.runs}
        if own != {describe_method(report.method, True)}:  # a published program's: its recipe's reduction
            out.write(f"Method per run: {'; '.join(sorted(own))}.\n")
        out.write(f"{group.unit}, median of {'/'.join(map(str, runs))} run(s) per case.\n\n")
        if report.layout > 1 and len(group.cases) == 1:  # one case: no scaling to show
            out.write(_one_case_markdown(group.cases[0], report.method))
        else:
            out.write(_scaling_markdown(group.cases, report.method, group.unit if report.layout > 2 else "samples/s"))
        for note in group.notes:
            out.write(f"\n- {note}")
        if group.notes:
            out.write("\n")
        out.write(telemetry_markdown(group.cases, lambda run: read_what_ran(run.log.path).get("input_rate")
                                     if run.figure.format == "kitlog" else None, report.layout))
    if report.failures:
        out.write("\n## Logs that gave no figure\n\n")
        for path, reason in report.failures:
            out.write(f"- `{rel_path(path, report.source)}`: {reason}\n")
    if report.strays:
        out.write("\n## Files ignored\n\n")
        for stray in report.strays:
            out.write(f"- `{rel_path(stray.path, report.source)}`: {stray.reason}\n")
    return out.getvalue()


def comparison_markdown(report: Report) -> str:
    """Frameworks side by side, with the ratio of Report.pair (layout 1: of the first two by name)."""
    frameworks, rows = framework_rows(report)
    if len(frameworks) < 2:
        return ""
    first, second = report.pair if report.layout > 1 and report.pair else frameworks[:2]
    out = io.StringIO()
    units = report.layout > 2  # each row's unit: the models' differ
    said = "Median throughput in each row's unit" if units else "Median samples/s"
    out.write(f"\n## Frameworks side by side\n\n{said} (CV of the runs); ratio = {first} / {second}.\n\n")
    out.write("| model | " + ("unit | " if units else "") + "batch | precision | case | " + " | ".join(frameworks)
              + f" | {first}/{second} |\n")
    out.write("| --- | " + ("--- | " if units else "") + "--- | --- | --- | " + " | ".join("---" for _ in frameworks)
              + " | --- |\n")
    doubts = []
    for (model, batch, precision, case_dir), row in rows:
        shown = [
            f"{_shown(row[fw].median, report.method)} ({stats.cv(row[fw].values):.1%})" if fw in row else ""
            for fw in frameworks
        ]
        ratio = ""
        if first in row and second in row:
            check = framework_ratio_check(row, first, second)
            mark = RATIO_MARKS.get(check.verdict, "") if check else ""
            ratio = f"{row[first].median / row[second].median:.3f}{mark}"
            if check is not None and check.conclusive is not True:
                why = check.why(second, first, advice=False)
                doubts.append(f"- {model} · batch {batch} · {precision} · {case_dir}: {why}")
        unit = f"{row_unit(row)} | " if units else ""
        out.write(f"| {model} | {unit}{batch} | {precision} | {case_dir} | " + " | ".join(shown) + f" | {ratio} |\n")
    if doubts:
        out.write(f"\nA ratio is inconclusive when either side's runs have a CV above {stats.NOISE_MAX_CV:.0%} or the "
                  f"{stats.NOISE_LEVEL:.0%} interval of the ratio includes 1 (the two cannot be told apart); do not "
                  f"quote it before a re-run with {stats.NOISE_ADVICE}:\n\n" + "\n".join(doubts) + "\n")
    return out.getvalue()


RATIO_MARKS = {stats.INCONCLUSIVE: " inconclusive", stats.UNTESTED: " (1 run)"}


def _scaling_markdown(cases: list[CaseResult], method: Method, unit: str) -> str:
    """A group's scaling table (median in `unit` and speedup per case), then its cases' spread."""
    out = io.StringIO()
    out.write(f"| node_num | gpu_num | {unit} | speedup |\n")
    out.write(f"| -------- | ------- | {'-' * len(unit)} | ------- |\n")
    for case in cases:
        speed = "" if case.speedup_rounded is None else str(case.speedup_rounded)
        out.write(f"| {case.nodes} | {case.gpus} | {_shown(case.median, method)} | {speed} |\n")
    out.write("\n| case | runs | min | max | CV | efficiency | peak memory |\n")
    out.write("| ---- | ---- | --- | --- | -- | ---------- | ----------- |\n")
    for case in cases:
        eff = "" if case.efficiency is None else f"{case.efficiency:.1%}"
        peak = "" if case.peak_memory_mb is None else f"{case.peak_memory_mb:.0f} MiB"
        out.write(f"| {case.name} | {len(case.runs)} | {_shown(min(case.values), method)} "
                  f"| {_shown(max(case.values), method)} | {stats.cv(case.values):.2%} | {eff} | {peak} |\n")
    return out.getvalue()

def _one_case_markdown(case: CaseResult, method: Method) -> str:
    """A group of one case (layout 2): its figures in one table, no speedup or scaling efficiency."""
    peak = "" if case.peak_memory_mb is None else f"{case.peak_memory_mb:.0f} MiB"
    return ("| case | runs | median | min | max | CV | peak memory |\n"
            "| ---- | ---- | ------ | --- | --- | -- | ----------- |\n"
            f"| {case.name} | {len(case.runs)} | {_shown(case.median, method)} | {_shown(min(case.values), method)} "
            f"| {_shown(max(case.values), method)} | {stats.cv(case.values):.2%} | {peak} |\n")


def framework_ratio_check(row: dict[str, CaseResult], first: str, second: str) -> stats.RatioCheck | None:
    """The noise rule (kit.results.stats.ratio_check) on one side-by-side row's ratio first / second; None when a
    figure is not positive (no ratio to judge)."""
    try:
        return stats.ratio_check(row[second].values, row[first].values)
    except stats.StatsError:
        return None


def batch_node_markdown(report: Report) -> str:
    """Seed 000's layout: per framework, model and precision run at two or more batch sizes, one row per batch
    and one column per shape ("nodes x GPUs per node"), the case medians."""
    tables: dict[tuple[str, str, str], dict[int, dict[tuple[int, int], CaseResult]]] = {}
    for group in report.groups:
        rows = tables.setdefault((group.key.framework, group.key.model, group.key.precision), {})
        for case in group.cases:
            rows.setdefault(group.key.batch, {})[(case.nodes, case.gpus_per_node)] = case
    out = io.StringIO()
    for (framework, model, precision), rows in sorted(tables.items()):
        if len(rows) < 2:
            continue
        shapes = sorted({shape for row in rows.values() for shape in row}, key=lambda s: (s[0] * s[1], s))
        out.write(f"\n## batch / node: {' · '.join(p for p in (framework, model, precision) if p)}\n\n")
        out.write("Median per case (seed 000's table layout).\n\n")
        out.write("| batch / node | " + " | ".join(f"{n} x {g}" for n, g in shapes) + " |\n")
        out.write("| --- | " + " | ".join("---" for _ in shapes) + " |\n")
        for batch, row in sorted(rows.items()):
            cells = [_shown(row[s].median, report.method) if s in row else "" for s in shapes]
            out.write(f"| {batch} | " + " | ".join(cells) + " |\n")
    return out.getvalue()


CSV_COLUMNS = (
    "framework",
    "model",
    "batch_per_device",
    "precision",
    "nodes",
    "gpus_per_node",
    "gpus",
    "runs",
    "median",
    "mean",
    "min",
    "max",
    "cv",
    "speedup",
    "efficiency",
    "unit",
    "peak_memory_mb",
)


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    sampled = any(r.telemetry for g in report.groups for c in g.cases for r in c.runs)  # GPU runs: their telemetry
    writer.writerow(CSV_COLUMNS + (TELEMETRY_COLUMNS if sampled else ()))
    for group in report.groups:
        for case in group.cases:
            v = case.values
            writer.writerow(
                [
                    group.key.framework,
                    group.key.model,
                    group.key.batch,
                    group.key.precision,
                    case.nodes,
                    case.gpus_per_node,
                    case.gpus,
                    len(v),
                    repr(case.median),
                    repr(stats.mean(v)),
                    repr(min(v)),
                    repr(max(v)),
                    repr(stats.cv(v)),
                    "" if case.speedup is None else repr(case.speedup),
                    "" if case.efficiency is None else repr(case.efficiency),
                    group.unit,
                    "" if case.peak_memory_mb is None else repr(case.peak_memory_mb),
                ] + (telemetry_cells(case) if sampled else [])
            )
    return out.getvalue()


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


OUTPUT_NAMES = {
    "markdown": "report.md",
    "json": RESULTS_JSON,
    "csv": "results.csv",
    "throughput_png": "throughput.png",
    "png": "scaling.png",
    "frameworks_png": "frameworks.png",
    "telemetry_png": "telemetry.png",
}


def write_outputs(report: Report, out_dir: Path, plots: bool = True) -> list[Path]:
    """The report's files into out_dir; plots=False: the text files alone (Markdown, JSON, CSV: milliseconds, where
    the plots take seconds on a large run)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, text in (("markdown", to_markdown(report)), ("json", to_json(report)), ("csv", to_csv(report))):
        written.append(write_text(out_dir / OUTPUT_NAMES[kind], text))
    if not plots:
        return written
    from kit.results.plotting import write_framework_plot, write_plot, write_throughput_plot
    from kit.results.telemetry_plot import write_telemetry_plot

    for name, plot in (("throughput_png", write_throughput_plot), ("png", write_plot),
                       ("frameworks_png", write_framework_plot), ("telemetry_png", write_telemetry_plot)):
        png = out_dir / OUTPUT_NAMES[name]
        if plot(report, png):
            written.append(png)
    return written
