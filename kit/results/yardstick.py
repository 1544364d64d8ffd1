"""PURE: a hardware yardstick's figures (scripts/yardstick/hardware.py) judged against what the device should give.

    sheets = load_datasheets()                         # kit/claims/gpu-datasheets.yaml
    result = read_yardstick(path)                      # one hardware.py JSON, checked
    answer = judge(result, sheets, earlier=[Earlier("this host's run of 20261201T100000Z", old), ...])
    print(to_markdown(answer)); answer.verdict, answer.line

A GPU's figures are held to its model's datasheet peak (the fraction, against the `healthy` floor of each measure)
and to the kit's recordings of the same GPU model; a CPU's only to the same host's earlier runs and its peers (same
CPU model), never to a GPU. A figure is held to an earlier one only at the same size (matrix n, MiB, ranks), and is
below it only when even its best window is under EARLIER_FLOOR of the earlier median: one noisy window is not a
finding. The verdict: "healthy" (every measure judged, none below), "suspect" (a measure below its floor: named), or
"not judged" (nothing to hold the figures to).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.inputs import InputError, read_json_object
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require

DATASHEETS = Path(__file__).resolve().parents[1] / "claims" / "gpu-datasheets.yaml"
MEASURES = ("gemm", "memory", "host", "allreduce")
EARLIER_FLOOR = 0.90  # the best window under this share of an earlier run's median: the device gives less than it did
SIZE_KEYS = ("n", "mib", "ranks")
TITLES = {"gemm": "GEMM", "memory": "memory", "host": "host link", "allreduce": "all-reduce bus"}


@dataclass(frozen=True)
class Sheet:
    name: str
    match: re.Pattern
    source: str
    peaks: dict[str, float]


@dataclass(frozen=True)
class Datasheets:
    path: Path
    gpus: tuple[Sheet, ...]
    healthy: dict[str, float]
    recorded: tuple[Path, ...]

    def sheet_for(self, gpu_name: str | None) -> Sheet | None:
        return next((s for s in self.gpus if gpu_name and s.match.search(gpu_name)), None)


@dataclass(frozen=True)
class Earlier:
    label: str  # "this host, 2026-12-01T10:00Z", "peer node2", "the kit's H200 recording"
    result: dict


@dataclass
class Row:
    key: str  # measure/mode
    measure: str
    mode: str
    unit: str
    median: float
    low: float
    high: float
    size: str
    peak: float | None = None
    fraction: float | None = None
    floor: float | None = None
    against: list[tuple[str, float]] = field(default_factory=list)  # (earlier's label, median / its median)
    findings: list[str] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.fraction is not None or bool(self.against)


@dataclass
class Judgement:
    device: str  # gpu | cpu
    name: str  # the GPU's or the CPU's
    host: str
    sheet: Sheet | None
    rows: list[Row]
    verdict: str  # healthy | suspect | not judged
    line: str  # the one-line answer

    @property
    def findings(self) -> list[str]:
        return [f for row in self.rows for f in row.findings]


def load_datasheets(path: Path = DATASHEETS) -> Datasheets:
    data = load_yaml(path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "expected a mapping with `gpus:`")
    healthy = require(data, "healthy", dict, path)
    for measure, floor in healthy.items():
        if measure not in MEASURES or not _number(floor) or not 0 < floor <= 1:
            raise ConfigError(path, f"a floor per measure ({', '.join(MEASURES)}), each a fraction in (0, 1]",
                              healthy.line_of(measure), f"healthy.{measure}")
    sheets = []
    for entry in require(data, "gpus", list, path):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, "each GPU is a mapping", data.line_of("gpus"), "gpus")
        name = require(entry, "name", str, path)
        try:
            match = re.compile(require(entry, "match", str, path), re.IGNORECASE)
        except re.error as exc:
            raise ConfigError(path, f"not a regular expression ({exc})", entry.line_of("match"), "match") from None
        peaks = require(entry, "peaks", dict, path)
        for key, value in peaks.items():
            measure = str(key).split("/")[0]
            if measure not in MEASURES or "/" not in str(key) or not _number(value) or value <= 0:
                raise ConfigError(path, "a peak is measure/mode: a positive number", peaks.line_of(key),
                                  f"{name}: {key}")
        sheets.append(Sheet(name, match, require(entry, "source", str, path), {str(k): float(v)
                                                                               for k, v in peaks.items()}))
    recorded = []
    for entry in optional(data, "recorded", list, path, []):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, "each recording is a mapping with `file:`", data.line_of("recorded"), "recorded")
        recorded.append((path.parent / require(entry, "file", str, path)).resolve())
    return Datasheets(path, tuple(sheets), {str(k): float(v) for k, v in healthy.items()}, tuple(recorded))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_yardstick(path: str | Path) -> dict:
    """One hardware.py JSON, every field the judgement reads checked: an InputError naming the file and key."""
    data = read_json_object(path, "yardstick result")
    check_yardstick(data, path)
    return data


def check_yardstick(data: dict, path: str | Path) -> None:
    if data.get("device") not in ("gpu", "cpu"):
        raise InputError(path, "expected 'gpu' or 'cpu'", key="device")
    if data["device"] == "gpu" and not isinstance(data.get("gpu"), str):
        raise InputError(path, "a GPU result names its GPU", key="gpu")
    measures = data.get("measures")
    if not isinstance(measures, list) or not measures:
        raise InputError(path, "expected a non-empty list of measures", key="measures")
    for i, row in enumerate(measures):
        where = f"measures[{i}]"
        if not isinstance(row, dict):
            raise InputError(path, "expected an object", key=where)
        if row.get("measure") not in MEASURES:
            raise InputError(path, f"expected one of {', '.join(MEASURES)}", key=f"{where}.measure")
        for key in ("mode", "unit"):
            if not isinstance(row.get(key), str):
                raise InputError(path, "expected a string", key=f"{where}.{key}")
        windows = row.get("windows")
        if not isinstance(windows, list) or not windows or not all(_number(w) and w > 0 for w in windows):
            raise InputError(path, "expected a list of positive figures, one per window", key=f"{where}.windows")
        if not _number(row.get("median")) or abs(row["median"] - statistics.median(windows)) > 1e-3 * row["median"]:
            raise InputError(path, f"not the median of its windows ({statistics.median(windows):g})",
                             key=f"{where}.median")


def _size(row: dict) -> str:
    return ", ".join(f"{k} {row[k]}" for k in SIZE_KEYS if k in row)


def same_model(mine: dict, other: dict) -> bool:
    """The same device kind and model: the GPU's name, or the CPU's."""
    if mine["device"] != other.get("device"):
        return False
    return mine.get("gpu") == other.get("gpu") if mine["device"] == "gpu" else mine.get("cpu") == other.get("cpu")


def judge(result: dict, sheets: Datasheets, earlier: list[Earlier] = ()) -> Judgement:
    gpu = result["device"] == "gpu"
    sheet = sheets.sheet_for(result.get("gpu")) if gpu else None
    comparable = [e for e in earlier if e.result.get("device") == result["device"]]  # the caller picks the peers
    rows = []
    for m in result["measures"]:
        key = f"{m['measure']}/{m['mode']}"
        row = Row(key, m["measure"], m["mode"], m["unit"], float(m["median"]), min(m["windows"]), max(m["windows"]),
                  _size(m))
        below = []
        if sheet and key in sheet.peaks:
            row.peak = sheet.peaks[key]
            row.fraction = row.median / row.peak
            row.floor = sheets.healthy.get(row.measure)
            if row.floor is not None and row.high / row.peak < row.floor:
                below.append(f"{row.fraction:.0%} of the datasheet's {row.peak:g} (a healthy {sheet.name} reaches "
                             f"{row.floor:.0%})")
        for e in comparable:
            theirs = next((t for t in e.result.get("measures", []) if f"{t.get('measure')}/{t.get('mode')}" == key
                           and _size(t) == row.size and _number(t.get("median")) and t["median"] > 0), None)
            if theirs is None:
                continue
            row.against.append((e.label, row.median / theirs["median"]))
            if row.high < EARLIER_FLOOR * theirs["median"]:
                below.append(f"{row.median / theirs['median']:.2f} of {e.label} ({theirs['median']:g})")
        if below:
            row.findings.append(f"{TITLES[row.measure]} {row.mode} {row.median:g} {row.unit} (best window "
                                f"{row.high:g}): {', '.join(below)}")
        rows.append(row)
    verdict = "suspect" if any(r.findings for r in rows) else "healthy" if rows and all(r.judged for r in rows) \
        else "not judged"
    name = result.get("gpu") if gpu else result.get("cpu") or "this CPU"
    answer = Judgement(result["device"], str(name), str(result.get("host") or ""), sheet, rows, verdict, "")
    answer.line = _line(answer)
    return answer


def _line(answer: Judgement) -> str:
    what = "GPU" if answer.device == "gpu" else "CPU"
    if answer.verdict == "suspect":
        bad = [r for r in answer.rows if r.findings]
        names = []
        for measure in MEASURES:
            modes = [r.mode for r in bad if r.measure == measure]
            if modes:
                names.append(f"{TITLES[measure]} {'/'.join(modes)}" if measure != "memory" else TITLES[measure])
        spans = []
        fractions = [r.fraction for r in bad if r.fraction is not None]
        if fractions:
            spans.append(f"{_span(fractions, '.0%')} of datasheet")
        for label in dict.fromkeys(label for r in bad for label, _ in r.against):
            spans.append(f"{_span([x for r in bad for lb, x in r.against if lb == label], '.2f')} of {label}")
        return (f"{what} {answer.name}: hardware suspect -- {', '.join(names)} under what a healthy one gives "
                f"({'; '.join(spans)}): look at the {what} before the software")
    parts = []
    for measure in MEASURES:
        group = [r for r in answer.rows if r.fraction is not None and r.measure == measure]
        if group:
            figures = f"{group[0].fraction:.0%}" if len(group) == 1 else " / ".join(f"{r.fraction:.0%} {r.mode}"
                                                                                    for r in group)
            parts.append(f"{TITLES[measure]} {figures}")
    if parts:
        parts = [f"{', '.join(parts)} of datasheet"]
    held = sorted({label for r in answer.rows for label, _ in r.against})
    if held:
        ratios = [ratio for r in answer.rows for _, ratio in r.against]
        parts.append(f"{min(ratios):.2f}..{max(ratios):.2f} of {', '.join(held)}")
    if answer.verdict == "healthy":
        return (f"{what} {answer.name}: {'; '.join(parts)}: hardware healthy -- a gap in training throughput is "
                "software or settings")
    unjudged = [r.key for r in answer.rows if not r.judged]
    why = ("no datasheet for this GPU" if answer.device == "gpu" and answer.sheet is None
           else "no earlier run of this host or a peer with the same CPU" if answer.device == "cpu"
           else f"no datasheet figure or recording for {', '.join(unjudged)}")
    return f"{what} {answer.name}: {'; '.join(parts) + '; ' if parts else ''}not judged ({why})"


def _span(values: list[float], spec: str) -> str:
    low, high = min(values), max(values)
    return format(low, spec) if format(low, spec) == format(high, spec) else f"{low:{spec}}..{high:{spec}}"


def to_markdown(answer: Judgement) -> str:
    lines = [f"## Hardware yardstick: {answer.name}" + (f" on {answer.host}" if answer.host else ""), "",
             answer.line, ""]
    if answer.sheet:
        lines += [f"Datasheet: {answer.sheet.name} ({answer.sheet.source}); peaks dense, one way.", ""]
    lines += ["| measure | mode | size | median | windows | of datasheet | against earlier | finding |",
              "| --- | --- | --- | ---: | --- | ---: | --- | --- |"]
    for r in answer.rows:
        sheet = f"{r.fraction:.0%} of {r.peak:g}" if r.fraction is not None else "—"
        held = "; ".join(f"{ratio:.2f} of {label}" for label, ratio in r.against) or "—"
        lines.append(f"| {TITLES[r.measure]} | {r.mode} | {r.size} | {r.median:g} {r.unit} | {r.low:g}..{r.high:g} "
                     f"| {sheet} | {held} | {('suspect' if r.findings else 'ok') if r.judged else 'not judged'} |")
    if answer.findings:
        lines += ["", *(f"- {finding}" for finding in answer.findings)]
    return "\n".join(lines) + "\n"


def to_dict(answer: Judgement) -> dict:
    return {"device": answer.device, "name": answer.name, "host": answer.host, "verdict": answer.verdict,
            "line": answer.line, "datasheet": {"name": answer.sheet.name, "source": answer.sheet.source}
            if answer.sheet else None,
            "rows": [{"key": r.key, "unit": r.unit, "size": r.size, "median": r.median, "low": r.low,
                      "high": r.high, "peak": r.peak, "fraction": None if r.fraction is None else round(r.fraction, 4),
                      "floor": r.floor, "against": [{"label": label, "ratio": round(ratio, 4)}
                                                    for label, ratio in r.against], "findings": r.findings}
                     for r in answer.rows]}
