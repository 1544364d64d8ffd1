"""Re-derive published figures from their logs: one verdict per claim.

Claims file schema (the fixtures' expected.yaml is the reference):
  suites: [{name, dir?, format?, method, per_device_batch?, precision?,
            published_median: {<case>: v}, published_speedup?: {<case>: v}, rel_tol}]
  logs:   [{file | files, format?, gpus?, batch?, method, published, rel_tol?, derives?, recomputed?, note?}]
Paths are relative to the claims file. `files` (instead of `file`): several runs the publisher averaged (Lambda's
compile_results): the method's figure of each before its rounding, their mean, then the method's round/trunc/sig.
`gpus` and `batch` (the publisher's global batch) describe the figure; they bound the method's scale (below).

The method's scale is bounded by the ranks the log's figure leaves out (checked unless strict=False: rule sets v1, v2).
A figure of the whole job (the parser's record kind: every format but the per-card ones) already counts every rank,
so its scale is at most 1. A per-card figure's is at most the ranks the log shows: its mpirun rank tags, or the GPUs
its claim states (a suite's: its case folder's N x G), since many genuine per-card logs (one trainer's workerlog)
tag no ranks and print their world size in no common way. A steps/s figure's scale is the global batch: at most the
claim's `batch` (a suite's: per_device_batch x the case's GPUs). A wallclock method's batch (samples per step) is at
most what the log's own rates and clock show (rate x seconds between records over the steps between them, their
median, +10%), or with steps/s records its batch x scale at most the claim's `batch`. A claim's `files` name no log
twice.

Verdicts: match; flagged (the claims file says `derives: false`, and the log indeed gives another
figure, the one it declares as `recomputed` where it gives one): a finding about the publisher, not a
failure of the check; mismatch (the figure does not follow, or a `derives: false` claim that does, or
whose declared recomputed figure the log does not give); error (no figure could be computed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from kit.core.layout import CASE_DIR, find_logs
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require
from kit.results import stats
from kit.results.extract import (
    Figure,
    Method,
    MethodError,
    compute_figure,
    format_number,
    rounded,
    samples_per_step,
)
from kit.results.parsers import FORMATS, PER_CARD, ParsedLog, ParseError, parse_log
from kit.results.report import SPEEDUP_DECIMALS

# a wallclock method's batch is at most this much over what the log's rates x clock show (genuine: 0.989-1.008 of
# the global batch, kit/audit/rules/program_clock.py), judged over at least this many intervals
WALLCLOCK_BATCH_SLACK, WALLCLOCK_LEAST_INTERVALS = 0.1, 3

DEFAULT_REL_TOL = 1e-4
DECLARED_RECOMPUTED_REL_TOL = 1e-5
MATCH, FLAGGED, MISMATCH, ERROR = "match", "flagged", "mismatch", "error"


@dataclass
class Verdict:
    claim: str
    published: float
    recomputed: float | None
    rel_tol: float
    status: str
    detail: str = ""
    declared_derives: bool = True
    source_line: int = 0

    @property
    def rel_diff(self) -> float | None:
        if self.recomputed is None:
            return None
        return stats.relative_difference(self.recomputed, self.published)

    def to_dict(self) -> dict:
        return {
            "claim": self.claim,
            "published": self.published,
            "recomputed": self.recomputed,
            "rel_diff": self.rel_diff,
            "rel_tol": self.rel_tol,
            "status": self.status,
            "declared_derives": self.declared_derives,
            "detail": self.detail,
            "claims_line": self.source_line,
        }


def _method(entry: LineDict, path: Path) -> Method:
    raw = optional(entry, "method", dict, path, {})
    try:
        return Method.from_mapping(raw)
    except (MethodError, TypeError) as exc:
        raise ConfigError(path, str(exc), entry.line_of("method"), "method") from None


def _format(entry: LineDict, path: Path) -> str:
    fmt = optional(entry, "format", str, path, "auto")
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(
            path, f"unknown format {fmt!r}; known: auto, {', '.join(FORMATS)}", entry.line_of("format"), "format"
        )
    return fmt


def _number(entry: LineDict, key: str, path: Path) -> float:
    return float(require(entry, key, (int, float), path))


def _rel_tol(entry: LineDict, path: Path, ceiling: float | None) -> float:
    """The claim's tolerance, finite and >= 0; never above the verifier's ceiling (a bundle cannot loosen it)."""
    value = float(optional(entry, "rel_tol", (int, float), path, DEFAULT_REL_TOL))
    if not math.isfinite(value) or value < 0:
        raise ConfigError(path, f"must be a finite number >= 0, got {value}", entry.line_of("rel_tol"), "rel_tol")
    return value if ceiling is None else min(value, ceiling)


def _member(entry: LineDict, key: str, value: str, path: Path, confine: Path | None) -> Path:
    """A log file or folder a claim names, relative to the claims file; with confine, only inside that folder
    (a bundle's claims name bundle members, never the auditor's disk)."""
    target = path.parent / value
    if confine is None:
        return target
    if not value or Path(value).is_absolute() or ".." in Path(value).parts or "\\" in value:
        raise ConfigError(path, f"{value!r}: a claim inside a bundle names a relative path within it",
                          entry.line_of(key), key)
    if not target.resolve().is_relative_to(Path(confine).resolve()):
        raise ConfigError(path, f"{value!r} lies outside the bundle's claims", entry.line_of(key), key)
    return target


def load_claims(path: Path) -> tuple[LineDict, list[LineDict], list[LineDict]]:
    data = load_yaml(path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "top level must be a mapping with 'suites' and/or 'logs'", 1)
    unknown = set(data) - {"suites", "logs"}
    if unknown:
        key = sorted(unknown, key=str)[0]
        raise ConfigError(path, "unknown top-level key (expected suites, logs)", data.line_of(key), str(key))
    suites = optional(data, "suites", list, path, [])
    logs = optional(data, "logs", list, path, [])
    if not suites and not logs:
        raise ConfigError(path, "no claims: 'suites' and 'logs' are both empty or absent", data.line)
    for section, items in (("suites", suites), ("logs", logs)):
        for i, item in enumerate(items):
            if not isinstance(item, LineDict):
                raise ConfigError(path, f"entry {i + 1} must be a mapping", data.line_of(section), section)
    return data, suites, logs


def check_claims(path: Path, progress=None, *, confine: Path | None = None,
                 max_rel_tol: float | None = None, strict: bool = True) -> list[Verdict]:
    """Every claim re-derived. confine: the folder the claims' files must lie in (a bundle's); max_rel_tol: the
    verifier's tolerance, which a claim's own rel_tol can tighten but never loosen; strict: bound each method's
    scale by the ranks its log shows and refuse a log listed twice (False: rule sets v1 and v2, which did not)."""
    path = Path(path)
    _, suites, logs = load_claims(path)
    # validate every entry before doing any work, so a bad file fails fast and whole
    plans = ([("suite", s, _plan_suite(s, path, confine, max_rel_tol) | {"strict": strict}) for s in suites]
             + [("log", e, _plan_log(e, path, confine, max_rel_tol, strict)) for e in logs])
    verdicts: list[Verdict] = []
    for index, (kind, _entry, plan) in enumerate(plans):
        if progress:
            progress(index, len(plans), plan["label"])
        verdicts.extend(_check_suite(plan, path) if kind == "suite" else [_check_log(plan, path)])
    return verdicts


def _files(entry: LineDict, path: Path, confine: Path | None, strict: bool = True) -> tuple[str, list[Path]]:
    """A log claim's label and its log(s): `file`, or `files` (runs whose figures the publisher averaged), none
    twice (strict: after normalising, so x.log and ./x.log are one log)."""
    if "files" not in entry:
        file = require(entry, "file", str, path)
        return file, [_member(entry, "file", file, path, confine)]
    if "file" in entry:
        raise ConfigError(path, "give file or files, not both", entry.line_of("files"), "files")
    names = require(entry, "files", list, path)
    if not names or not all(isinstance(name, str) for name in names):
        raise ConfigError(path, "expected a non-empty list of file names", entry.line_of("files"), "files")
    label = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} runs)"
    files = [_member(entry, "files", name, path, confine) for name in names]
    seen: dict[Path, str] = {}
    for name, file in zip(names, files, strict=True):
        same = file.resolve()  # ./x.log, a/../x.log and a link to x.log are x.log
        if strict and same in seen:
            raise ConfigError(path, f"{name!r} is {seen[same]!r} again: a run counts once in the mean",
                              entry.line_of("files"), "files")
        seen.setdefault(same, name)
    return label, files


def _plan_log(entry: LineDict, path: Path, confine: Path | None = None, ceiling: float | None = None,
              strict: bool = True) -> dict:
    label, files = _files(entry, path, confine, strict)
    batch = optional(entry, "batch", int, path, None)
    gpus = optional(entry, "gpus", int, path, None)
    for key, value in (("batch", batch), ("gpus", gpus)):
        if value is not None and value < 1:
            raise ConfigError(path, f"must be an integer >= 1, got {value}", entry.line_of(key), key)
    return {
        "label": label,
        "files": files,
        "format": _format(entry, path),
        "method": _method(entry, path),
        "published": _number(entry, "published", path),
        "rel_tol": _rel_tol(entry, path, ceiling),
        "derives": optional(entry, "derives", bool, path, True),
        "declared": _number(entry, "recomputed", path) if "recomputed" in entry else None,
        "note": optional(entry, "note", str, path, ""),
        "line": entry.line,
        "method_line": entry.line_of("method") if "method" in entry else entry.line,
        "gpus": gpus,
        "batch": batch,
        "strict": strict,
    }


def _check_log(plan: dict, path: Path) -> Verdict:
    verdict = Verdict(
        plan["label"],
        plan["published"],
        None,
        plan["rel_tol"],
        ERROR,
        declared_derives=plan["derives"],
        source_line=plan["line"],
    )
    files, method = plan["files"], plan["method"]
    if len(files) > 1:  # each run's figure unrounded; the mean is rounded as the method says
        method = replace(method, round=None, trunc=None, sig=None)
    figures = []
    try:
        for file in files:
            parsed = parse_log(file, plan["format"])
            figures.append(compute_figure(parsed, method))
            too_large = plan["strict"] and _scale_beyond_ranks(parsed, figures[-1], plan["gpus"], plan["batch"])
            if too_large:
                verdict.detail, verdict.source_line = f"{file}: {too_large}", plan["method_line"]
                return verdict
    except ParseError as exc:
        verdict.detail = str(exc)
        return verdict
    except (MethodError, stats.StatsError) as exc:
        verdict.detail = f"{file}: {exc}"
        return verdict
    figure = figures[0]
    if len(figures) == 1:
        verdict.recomputed = figure.value
        verdict.detail = (
            f"{figure.format} {figure.metric}, {figure.used} record(s), lines {figure.first_line}-{figure.last_line}"
        )
    else:
        verdict.recomputed = rounded(stats.mean([f.value for f in figures]), plan["method"])
        verdict.detail = (f"{figure.format} {figure.metric}, the mean of {len(figures)} runs' figures "
                          f"({', '.join(format_number(f.value) for f in figures)})")
    verdict.status = MATCH if abs(verdict.rel_diff) <= plan["rel_tol"] else MISMATCH
    if not plan["derives"]:
        verdict.detail += "; claims file says it does not derive"
        declared = plan["declared"]
        same = True
        if declared is not None:
            same = abs(stats.relative_difference(figure.value, declared)) <= DECLARED_RECOMPUTED_REL_TOL
            verdict.detail += f" (declared recomputed {declared:g}: {'agrees' if same else 'DISAGREES'})"
        if verdict.status == MATCH:
            verdict.status = MISMATCH
            verdict.detail += ", yet it matches: correct the claims file"
        elif same:
            verdict.status = FLAGGED
    if plan["note"] and verdict.status != MATCH:
        verdict.detail += f"; note: {plan['note']}"
    return verdict


def _plan_suite(entry: LineDict, path: Path, confine: Path | None = None, ceiling: float | None = None) -> dict:
    name = require(entry, "name", str, path)
    folder = _member(entry, "dir" if "dir" in entry else "name", optional(entry, "dir", str, path, name), path,
                     confine)
    medians = require(entry, "published_median", dict, path)
    speedups = optional(entry, "published_speedup", dict, path, {})
    for key, table in (("published_median", medians), ("published_speedup", speedups)):
        for case, value in table.items():
            if not isinstance(case, str) or not CASE_DIR.match(case):
                raise ConfigError(path, f"case {case!r} is not of the form <N>n<G>g", table.line_of(case), key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(
                    path, f"{case}: expected a number, got {type(value).__name__}", table.line_of(case), key
                )
    return {
        "label": name,
        "dir": folder,
        "format": _format(entry, path),
        "method": _method(entry, path),
        "batch": optional(entry, "per_device_batch", int, path, None),
        "precision": optional(entry, "precision", str, path, None),
        "medians": medians,
        "speedups": speedups,
        "rel_tol": _rel_tol(entry, path, ceiling),
        "line": entry.line,
        "method_line": entry.line_of("method") if "method" in entry else entry.line,
    }


def _check_suite(plan: dict, path: Path) -> list[Verdict]:
    logs, _ = find_logs(plan["dir"]) if plan["dir"].is_dir() else ([], [])
    logs = [
        log
        for log in logs
        if (plan["batch"] is None or log.group.batch == plan["batch"])
        and (plan["precision"] is None or log.group.precision == plan["precision"])
    ]
    medians: dict[str, float] = {}
    errors: dict[str, str] = {}
    for case in set(plan["medians"]) | set(plan["speedups"]) | {"1n1g"}:
        values = []
        for log in (run for run in logs if run.case == case):
            try:
                parsed = parse_log(log.path, plan["format"])
                figure = compute_figure(parsed, plan["method"])
                batch = plan["batch"] * log.gpus if plan["batch"] is not None else None
                too_large = plan["strict"] and _scale_beyond_ranks(parsed, figure, log.gpus, batch)
                if too_large:
                    errors[case] = f"{log.path}: {too_large} (claims line {plan['method_line']})"
                    continue
                values.append(figure.value)
            except ParseError as exc:
                errors[case] = str(exc)
            except (MethodError, stats.StatsError) as exc:
                errors[case] = f"{log.path}: {exc}"
        if case in errors:
            continue
        if not values:
            errors[case] = f"no logs for case {case} under {plan['dir']}"
            continue
        medians[case] = stats.median(values)
    verdicts = []
    label, tol = plan["label"], plan["rel_tol"]
    for case, published in plan["medians"].items():
        verdicts.append(
            _verdict(f"{label} {case} median", published, medians.get(case), tol, errors.get(case), plan["line"])
        )
    for case, published in plan["speedups"].items():
        value = None
        reason = errors.get(case) or (errors.get("1n1g") and f"1n1g: {errors['1n1g']}")
        if case in medians and "1n1g" in medians:
            value = round(stats.speedup(medians[case], medians["1n1g"]), SPEEDUP_DECIMALS)
        verdicts.append(_verdict(f"{label} {case} speedup", published, value, tol, reason, plan["line"]))
    return verdicts


def _verdict(claim: str, published: float, value: float | None, tol: float, error: str | None, line: int) -> Verdict:
    if value is None:
        return Verdict(claim, float(published), None, tol, ERROR, error or "not computed", source_line=line)
    verdict = Verdict(claim, float(published), value, tol, MATCH, source_line=line)
    verdict.status = MATCH if abs(verdict.rel_diff) <= tol else MISMATCH
    return verdict


def _wallclock_batch_beyond(parsed: ParsedLog, figure: Figure, units: set[str], batch: int | None) -> str:
    """Why a wallclock method's samples per step exceed what the log shows (module docstring); empty if not."""
    method = figure.method
    if units == {"steps/s"}:  # the clock alone: samples per step x scale is the global batch
        samples, bound = method.batch * method.scale, batch or 1
        what = f"the global batch the claim states ({batch})" if batch else "1: the claim states no global batch"
        return "" if samples <= bound else f"wallclock batch x scale {samples:g} exceeds {what}"
    shown = samples_per_step(parsed.records, figure.metric, figure.kind)
    if len(shown) < WALLCLOCK_LEAST_INTERVALS:
        return (f"wallclock batch {method.batch:g}: {len(shown)} timed intervals between the log's {figure.metric} "
                f"records (at least {WALLCLOCK_LEAST_INTERVALS}) to show its samples per step")
    said = stats.median(shown)
    if method.batch <= said * (1 + WALLCLOCK_BATCH_SLACK):
        return ""
    return (f"wallclock batch {method.batch:g} exceeds the {said:.4g} samples per step the log's own rates and clock "
            f"show (rate x seconds between its records over the steps between them; at most "
            f"{1 + WALLCLOCK_BATCH_SLACK:g}x that)")


def _scale_beyond_ranks(parsed: ParsedLog, figure: Figure, gpus: int | None, batch: int | None) -> str:
    """Why the method's scale exceeds what the log's figure leaves out (module docstring); empty if it does not."""
    scale = figure.method.scale
    units = {r.unit for r in parsed.records if r.metric == figure.metric and r.kind == figure.kind}
    if figure.method.reduce == "wallclock" and (beyond := _wallclock_batch_beyond(parsed, figure, units, batch)):
        return beyond
    if scale <= 1:
        return ""
    if units == {"steps/s"}:  # the scale is the global batch
        bound = batch or 1
        what = f"the global batch the claim states ({batch})" if batch else "1: the claim states no global batch"
    elif figure.kind == PER_CARD:
        tags = len({r.rank for r in parsed.records if r.rank is not None})
        bound = max(tags, gpus or 1)
        what = f"the ranks the log shows ({tags} rank tag(s); GPUs stated by the claim: {gpus or 'none'})"
    else:
        bound, what = 1, f"1: a {figure.kind} figure of this format counts every rank already"
    return "" if scale <= bound else f"method scale {scale:g} exceeds {what}"
