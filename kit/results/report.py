"""DLPerf-layout tree -> result model -> Markdown (seed-style), JSON, CSV and a PNG plot.

Each run log gives one figure by the stated method; a case's figure is the median of its
runs; speedup is against the group's 1n1g median. A log that cannot be read is listed as
a failure with its reason, never counted as 0 samples/s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from kit import __version__
from kit.core.catalogue import quantity_unit
from kit.core.files import SCHEMA_VERSIONS
from kit.core.inputs import InputError
from kit.core.layout import GroupKey, RunLog, Stray, case_name, find_logs
from kit.results import stats
from kit.results.extract import Figure, Method, MethodError, compute_figure
from kit.results.gpu_telemetry import run_telemetry
from kit.results.parsers import PER_CARD, ParseError, parse_log
from kit.results.parsers.kitlog import read_peak_memory

SCHEMA_VERSION = SCHEMA_VERSIONS["results.json"]
SPEEDUP_DECIMALS = 2

# How report.md and results.json present the figures (results.json "layout"; absent: 1). Verify recomputes a report
# in the layout it declares, under a rule set that knows it (kit.audit.rules.derived). Layout 2: frameworks side by
# side as the Paddle side over the PyTorch side (Report.pair); no scaling table for a group of one case; an outlier
# note names its case key, log and figures; a published program's GPU telemetry over its log's own timed window;
# a sampled GPU named as the run's nvidia-smi capture names it where its samples give only a UUID. Layout 3: one name
# per quantity (kit.core.catalogue.quantity_unit): a figure counting a model's samples is in the model's unit
# (images/s, sequences/s) whatever its log calls them, in every table, results.json and the plots' panels. Layout 4:
# a GPU run's standing as a ladder (kit.results.standing: like for like first, the record a ceiling, causes that
# point the way of the gap, what was not checked said).
LAYOUTS = (1, 2, 3, 4)
LAYOUT = LAYOUTS[-1]


@dataclass
class RunResult:
    log: RunLog
    figure: Figure
    peak_memory_mb: float | None = None  # the harness's run_stop figure (peak RSS on CPU, peak allocated on GPU)
    telemetry: dict | None = None  # what its GPUs did (kit.results.gpu_telemetry.run_telemetry); None: not sampled

    def to_dict(self, root: Path) -> dict:
        return {
            "run": self.log.run,
            "file": rel_path(self.log.path, root),
            "value": self.figure.value,
            "unit": self.figure.unit,
            "format": self.figure.format,
            "metric": self.figure.metric,
            "kind": self.figure.kind,
            "records_used": self.figure.used,
            "records_available": self.figure.available,
            "lines": [self.figure.first_line, self.figure.last_line],
            "scale": self.figure.method.scale,
            "warnings": list(self.figure.warnings),
            "peak_memory_mb": self.peak_memory_mb,
        } | ({"telemetry": self.telemetry} if self.telemetry is not None else {})


@dataclass
class CaseResult:
    nodes: int
    gpus_per_node: int
    runs: list[RunResult]
    speedup: float | None = None

    @property
    def name(self) -> str:
        return case_name(self.nodes, self.gpus_per_node)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def values(self) -> list[float]:
        return [r.figure.value for r in self.runs]

    @property
    def median(self) -> float:
        return stats.median(self.values)

    @property
    def speedup_rounded(self) -> float | None:
        return None if self.speedup is None else round(self.speedup, SPEEDUP_DECIMALS)

    @property
    def efficiency(self) -> float | None:
        return None if self.speedup is None else stats.scaling_efficiency(self.speedup, self.gpus)

    @property
    def peak_memory_mb(self) -> float | None:
        """The largest peak memory of the case's runs (MiB), None when no run logged one."""
        peaks = [r.peak_memory_mb for r in self.runs if r.peak_memory_mb is not None]
        return max(peaks) if peaks else None

    @property
    def outlier_runs(self) -> list[int]:
        return [self.runs[i].log.run for i in stats.mad_outliers(self.values)]

    def to_dict(self, root: Path) -> dict:
        values = self.values
        return {
            "case": self.name,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpus": self.gpus,
            "runs": [r.to_dict(root) for r in self.runs],
            "median": self.median,
            "mean": stats.mean(values),
            "min": min(values),
            "max": max(values),
            "cv": stats.cv(values),
            "speedup": self.speedup,
            "speedup_rounded": self.speedup_rounded,
            "efficiency": self.efficiency,
            "outlier_runs": self.outlier_runs,
            "peak_memory_mb": self.peak_memory_mb,
        }


@dataclass
class GroupResult:
    key: GroupKey
    cases: list[CaseResult]
    notes: list[str] = field(default_factory=list)

    @property
    def unit(self) -> str:
        return self.cases[0].runs[0].figure.unit  # one per group (build_report refuses mixed units)


@dataclass
class Completion:
    """Which of the runs `kit bench` planned ended (run.json planned_runs against its recorded runs), and whether the
    bench reached its normal end (run.json `finished`): until then a run directory is partial, kill -9 included."""
    planned: list[tuple[str, int]]  # (case key, repeat), in the order they run
    finished: list[tuple[str, int]]  # recorded as ended, with their log in the run directory
    complete: bool
    gone: list[tuple[str, int, str]] = field(default_factory=list)  # recorded as ended, their log not there: (.., log)

    MISSING_SHOWN = 20  # the report's line names this many; results.json lists every one

    @property
    def missing(self) -> list[tuple[str, int]]:
        done = set(self.finished)
        return [run for run in self.planned if run not in done]

    def line(self) -> str:
        if self.complete and not self.gone:
            return f"complete: all {len(self.planned)} planned runs finished."
        if self.gone:
            named = ", ".join(f"{case} #{repeat} ({log})" for case, repeat, log in self.gone[:self.MISSING_SHOWN])
            more = f" and {len(self.gone) - self.MISSING_SHOWN} more" if len(self.gone) > self.MISSING_SHOWN else ""
            return (f"incomplete: {len(self.finished)} of {len(self.planned)} planned runs have their log; run.json "
                    f"records {len(self.gone)} more as finished whose log is gone: {named}{more}.")
        missing = self.missing
        named = ", ".join(f"{case} #{repeat}" for case, repeat in missing[:self.MISSING_SHOWN])
        more = f" and {len(missing) - self.MISSING_SHOWN} more" if len(missing) > self.MISSING_SHOWN else ""
        return (f"partial: {len(self.finished)} of {len(self.planned)} runs finished; missing: {named or 'none'}{more} "
                "(kit bench did not reach its end; `kit bench --resume` finishes it).")

    def to_dict(self) -> dict:
        def runs(which):
            return [{"case": case, "repeat": repeat} for case, repeat in which]
        state = "incomplete" if self.gone else "complete" if self.complete else "partial"
        return {"state": state, "planned": len(self.planned), "finished": runs(self.finished),
                "missing": runs(self.missing)} | (
            {"gone": [{"case": c, "repeat": r, "log": log} for c, r, log in self.gone]} if self.gone else {})


@dataclass
class Report:
    source: Path
    method: Method
    scale_given: bool
    groups: list[GroupResult]
    failures: list[tuple[Path, str]]
    strays: list[Stray]
    title: str = ""
    settings: str = ""  # Markdown shown under the title (what was run, on what)
    devices: str = "GPUs"  # what <N>n<G>g counts: GPUs, or processes on a CPU run
    completion: Completion | None = None  # a kit bench run's: None where the run directory records no plan
    standing: str = ""  # Markdown first under the title: where a GPU run stands against published figures
    layout: int = LAYOUT
    pair: tuple[str, str] | None = None  # layout 2: the frameworks whose ratio the side-by-side table gives
    reproduction: str = ""  # layout 2: a `kit reproduce` run's reproduction.md, after the standing
    answer: list[str] = field(default_factory=list)  # the page's answer per case (Markdown lines; not in report.md)
    warnings: list[str] = field(default_factory=list)  # what the page says above the fold (not in report.md)
    marks: dict = field(default_factory=dict)  # case key -> [(label, the job's figure)]: published neighbours to plot

    def headline(self) -> list[str]:
        """What a report says first, Markdown blocks in order: a partial run's completion (its figures are of its
        finished runs only), where the run stands, a reproduction's verdicts."""
        blocks = [self.completion.line() if self.completion else "", self.standing, self.reproduction]
        return [block.rstrip() for block in blocks if block]

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "kit_version": __version__,
        } | ({"layout": self.layout} if self.layout > 1 else {}) | {
            "source": str(self.source),
            "method": self.method.to_dict() | {"scale": self.method.scale if self.scale_given else "auto"},
            "groups": [
                {
                    "framework": g.key.framework,
                    "model": g.key.model,
                    "batch_per_device": g.key.batch,
                    "precision": g.key.precision,
                    "unit": g.unit,
                    "cases": [c.to_dict(self.source) for c in g.cases],
                    "notes": g.notes,
                }
                for g in self.groups
            ],
            "failures": [{"file": rel_path(p, self.source), "reason": r} for p, r in self.failures],
            "ignored": [{"file": rel_path(s.path, self.source), "reason": s.reason} for s in self.strays],
        } | ({"completion": self.completion.to_dict()} if self.completion else {})


def rel_path(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _auto_scale(figure: Figure, log: RunLog) -> float:
    """Per-card figures times the case's cards; steps/s times the global batch."""
    if figure.kind == PER_CARD:
        return float(log.gpus)
    if figure.unit == "steps/s":
        return float(log.group.batch * log.gpus)
    return 1.0


def _refuse_mixed(what: str, runs: list[RunResult], root: Path, failures: list[tuple[Path, str]],
                  kind=lambda f: f"{f.format} in {f.unit}") -> bool:
    """Runs that differ in format or unit (`kind`) have no one median or speedup: each log becomes a failure."""
    kinds: dict[str, list[str]] = {}
    for r in runs:
        kinds.setdefault(kind(r.figure), []).append(rel_path(r.log.path, root))
    if len(kinds) < 2:
        return False
    detail = "; ".join(f"{k}: {', '.join(files)}" for k, files in sorted(kinds.items()))
    failures += [(r.log.path, f"{what} mixes log formats or units ({detail})") for r in runs]
    return True


def figure_for(log: RunLog, method: Method, fmt: str, scale_given: bool) -> Figure:
    parsed = parse_log(log.path, fmt)
    if scale_given:
        return compute_figure(parsed, method)
    probe = compute_figure(parsed, method)
    scale = _auto_scale(probe, log)
    return probe if scale == 1.0 else compute_figure(parsed, method.with_overrides(scale=scale))


def build_report(root: Path, method: Method, fmt: str = "auto", scale_given: bool = False, progress=None,
                 method_for=None, layout: int = LAYOUT) -> Report:
    """Every log below root reduced by `method` (format `fmt`), or by method_for(log) -> (method, format) where that
    gives one (a published program's log: its recipe's reduction, scale included); presented in LAYOUT."""
    root = Path(root)
    logs, strays = find_logs(root)
    by_group: dict[GroupKey, dict[tuple[int, int], list[RunResult]]] = {}
    failures: list[tuple[Path, str]] = []
    for index, log in enumerate(logs):
        if progress:
            progress(index, len(logs), log.path)
        try:
            own = method_for(log) if method_for else None
            figure = figure_for(log, *own, True) if own else figure_for(log, method, fmt, scale_given)
        except ParseError as exc:
            failures.append((log.path, exc.reason if exc.line is None else f"line {exc.line}: {exc.reason}"))
            continue
        except (MethodError, stats.StatsError) as exc:
            failures.append((log.path, str(exc)))
            continue
        if layout > 2:
            figure = dataclasses.replace(figure, unit=quantity_unit(log.group.model, figure.unit))
        peak = read_peak_memory(log.path) if figure.format == "kitlog" else None
        try:
            tele = run_telemetry(log.path, root, root.parent if root.name == "logs" else root, layout,
                                 figure if own else None)
        except InputError as exc:  # a samples file that cannot be read: the run has no figure the kit stands by
            failures.append((log.path, f"GPU samples: {exc}"))
            continue
        by_group.setdefault(log.group, {}).setdefault((log.nodes, log.gpus_per_node), []).append(
            RunResult(log, figure, peak, tele))
    groups = []
    for key in sorted(by_group):
        cases = [CaseResult(n, g, runs) for (n, g), runs in sorted(by_group[key].items())]
        cases = [c for c in cases if not _refuse_mixed(f"case {c.name}", c.runs, root, failures)]
        if not cases or _refuse_mixed(key.label(), [r for c in cases for r in c.runs], root, failures,
                                      lambda f: f.unit):
            continue
        group = GroupResult(key, cases)
        base = next((c for c in cases if c.nodes == 1 and c.gpus_per_node == 1), None)
        if base is None:
            group.notes.append("no 1n1g case: speedup and efficiency not computed")
        else:
            for case in cases:
                case.speedup = stats.speedup(case.median, base.median)
        for case in cases:
            if case.outlier_runs:
                group.notes.append(outlier_note(key, case, root) if layout > 1 else
                                   f"{case.name}: run(s) {', '.join(map(str, case.outlier_runs))} are MAD outliers "
                                   f"(|modified z| > {stats.DEFAULT_OUTLIER_Z})")
        groups.append(group)
    return Report(root, method, scale_given, groups, failures, strays, layout=layout)


def outlier_note(key: GroupKey, case: CaseResult, root: Path) -> str:
    """Layout 2's note on a case's MAD outliers: its case key, each outlying run's log and figure, the median."""
    runs = [r for r in case.runs if r.log.run in case.outlier_runs]
    named = "; ".join(f"run {r.log.run} ({rel_path(r.log.path, root)}): {r.figure.value:.2f}" for r in runs)
    return (f"{key.case_key(case.name)}: {named} against the case's median {case.median:.2f} {runs[0].figure.unit} "
            f"(MAD outlier{'s' if len(runs) > 1 else ''}: |modified z| > {stats.DEFAULT_OUTLIER_Z})")


def framework_rows(report: Report) -> tuple[list[str], list[tuple[tuple[str, int, str, str], dict[str, CaseResult]]]]:
    """Frameworks, and every (model, batch, precision, case) that two or more of them ran."""
    cells: dict[tuple[str, int, str, str], dict[str, CaseResult]] = {}
    for group in report.groups:
        for case in group.cases:
            key = (group.key.model, group.key.batch, group.key.precision, case.name)
            cells.setdefault(key, {})[group.key.framework] = case
    rows = [(k, v) for k, v in sorted(cells.items()) if len(v) > 1]
    frameworks = sorted({fw for _, row in rows for fw in row})
    return frameworks, rows


def row_unit(row: dict[str, CaseResult], sep: str = ", ") -> str:
    """The unit(s) of a side-by-side row's cases (Paddle's words/s beside PyTorch's tokens/s: both)."""
    return sep.join(sorted({case.runs[0].figure.unit for case in row.values()}))


def ratio_pair(frameworks: list[str], rows, family: dict[str, str]) -> tuple[str, str] | None:
    """The two frameworks whose ratio the side-by-side table gives: the Paddle side over the PyTorch side (FAMILY:
    a log folder's framework, e.g. ngc-pytorch -> torch) sharing the most rows; where no such two share a row, the
    two that share the most; None where no two share one. Ties: the frameworks' own (the harness's) before the
    published programs', then FRAMEWORKS' order."""
    def shared(pair: tuple[str, str]) -> int:
        return sum(1 for _, row in rows if pair[0] in row and pair[1] in row)

    def side(name: str) -> str:
        return family.get(name, name)

    paddle_torch = [(a, b) for a in frameworks for b in frameworks if side(a) == "paddle" and side(b) == "torch"]
    anyone = [(a, b) for i, a in enumerate(frameworks) for b in frameworks[i + 1:]]
    for pairs in (paddle_torch, anyone):
        best = max(pairs, key=lambda p: (shared(p), (side(p[0]) == p[0]) + (side(p[1]) == p[1])), default=None)
        if best is not None and shared(best):
            return best
    return None
