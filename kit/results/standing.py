"""PURE: where a run stands against the published figures the kit holds, and why, from the run's own evidence.

    answer = standing(run_dir, figures=published_figures(), references={case_key: [Reference, ...]})
    print(to_markdown(answer))

Per case of the run's results.json: its figure per GPU (median, and the spread of its runs), the nearest published
figures (kit.results.published.nearest: the same GPU model first), each with the ratio, a verdict, and every setting
that differs (GPU model and power limit, GPUs, per-GPU batch, precision, layout, data, framework); then the likely
causes, ranked, read from the run itself: throttling, clocks under their maximum, a power limit under the SKU's,
GPU busy share, a loader that delivers no more than the training took (input-bound), a busy host.

As a ladder (`ladder=True`: `kit standing`, and the report from layout 4): the neighbours like for like first --
(1) the published program at the same setting in the same run, (2) the same GPU model and framework published (and
the suite's own references), (3) the same GPU model, another framework, (4) the record for this GPU model (MLPerf) as
a ceiling, "x of the record", never "slower", (5) other GPUs, context only; the verdict from the closest rung there
is, which it names. A setting that differs is a cause only where its direction explains the gap (a faster setting
cannot explain "slower"), sized from the run's own cases where one differs in just that setting, and "unquantified"
otherwise; what could not be checked for want of evidence is said, never "none found". A CPU run has no GPU
neighbour; kit yardstick's judgement of the device (where one was kept beside the run) is shown, a suspect one the
first cause.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kit.core.layout import case_key, split_tag
from kit.core.rundir import host_captures, read_results, read_run
from kit.results import noise
from kit.results.gpu_telemetry import BUSY_SHARE, THROTTLED_SHARE
from kit.results.published import Gpu, Published, gpu_of, nearest
from kit.results.yardstick import Judgement
from kit.results.yardstick import to_dict as yardstick_dict

ON_PAR = 0.05  # a ratio within 1 +- this, every run's, is on par
CLOCK_SHARE = 0.9  # a median SM clock under this share of the card's maximum is named
POWER_SHARE = 0.95  # a power limit under this share of the SKU's, or a mean draw over it of the limit, is named
IMAGE_UNITS = ("images/s", "samples/s")  # an image model's samples are images


@dataclass
class Neighbour:
    published: Published | None  # None: a suite reference (a publisher's number the suite gives)
    label: str
    per_gpu: float
    ratio: float
    low: float
    high: float
    verdict: str
    differs: list[str]
    source: str
    rung: int = 0  # the ladder's (RUNGS); 0: not placed (the report of layouts 1-3)
    signed: list = field(default_factory=list)  # [Difference]: differs, each with the way it points


class Difference(NamedTuple):
    text: str
    sign: int  # +1: this run's setting makes it faster than theirs; -1: slower; 0: not known which
    key: str  # gpu, power, gpus, batch, precision, layout, data, framework
    theirs: object = None  # their value in the kit's terms (batch, precision, layout), to find the run's own case


RUNGS = {1: "the published program at the same setting, in this run", 2: "the same GPU and framework, published",
         3: "the same GPU, another framework, published", 4: "the record for this GPU, a ceiling",
         5: "another GPU, context only"}
GENERATIONS = ("Volta", "Ampere", "Hopper", "Blackwell")
HARDWARE_CAUSE = "the hardware itself"


@dataclass
class CaseStanding:
    key: str
    model: str
    gpus: int
    unit: str
    per_gpu: float
    runs: list[float]
    settings: dict
    neighbours: list[Neighbour] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    why_none: str = ""
    not_checked: list[str] = field(default_factory=list)  # checks the run has no evidence for (ladder)


@dataclass
class Standing:
    run_dir: Path
    gpu: Gpu | None
    power_limit_w: float | None
    driver: str | None
    cases: list[CaseStanding]
    hardware: Judgement | None = None  # kit yardstick on the run's GPU (or CPU), where one was kept beside it
    hardware_note: str = ""  # why there is none, or why the one given was not used
    ladder: bool = False


def _smi(run_dir: Path) -> dict:
    """The first host's nvidia-smi capture (env/<host>/capture.json 'smi'), or {}."""
    for capture in host_captures(run_dir).values():
        smi = capture.get("smi")
        if isinstance(smi, dict) and smi.get("gpus"):
            return smi
    return {}


def _verdict(low: float, high: float) -> str:
    if low >= 1 - ON_PAR and high <= 1 + ON_PAR:
        return "on par"
    if high < 1 - ON_PAR:
        return "slower"
    if low > 1 + ON_PAR:
        return "faster"
    return "inconclusive (its runs spread across the on-par band)"


def _signed(mine: dict, gpu: Gpu | None, limit: float | None, pub: Published) -> list[Difference]:
    out = []
    if gpu is None or not gpu.same_model(pub.gpu):
        out.append(Difference(f"GPU {gpu.name if gpu else 'none'} here, {pub.gpu.family or '?'} {pub.gpu.form} "
                              "published", _gpu_sign(gpu, pub.gpu), "gpu"))
    elif limit and pub.gpu.sku_power_w and limit < POWER_SHARE * pub.gpu.sku_power_w:
        out.append(Difference(f"power limit {limit:g} W here, the SKU's {pub.gpu.sku_power_w} W", -1, "power"))
    if mine["gpus"] != pub.gpus:  # compared per GPU: more GPUs lose some to communication
        out.append(Difference(f"{mine['gpus']} GPU(s) here, {pub.gpus} published (compared per GPU)",
                              1 if mine["gpus"] < pub.gpus else -1, "gpus"))
    if pub.batch_per_gpu and mine["batch"] != pub.batch_per_gpu:
        out.append(Difference(f"batch {mine['batch']}/GPU here, {pub.batch_per_gpu}/GPU published",
                              1 if (mine["batch"] or 0) > pub.batch_per_gpu else -1, "batch", pub.batch_per_gpu))
    published_precision = {"fp32": "FP32", "amp": "FP16/AMP"}[pub.precision]
    family = "amp" if mine["precision"] in ("amp", "bf16") else "fp32"
    if mine["precision"] == "tf32" and pub.precision == "fp32":
        out.append(Difference("TF32 here, 'FP32' published (PyTorch's cuDNN convolutions take TF32 by default on "
                              "Ampere and later: the published math is not read from its log)", 0, "precision"))
    elif family != pub.precision:
        out.append(Difference(f"{mine['precision']} here, {published_precision} published",
                              1 if family == "amp" else -1, "precision", pub.precision))
    fast = {"layout": "nhwc", "data": "synthetic"}  # channels-last tensor cores; no decoding
    for key, what in (("layout", "layout"), ("data", "data")):
        theirs = pub.settings.get(key)
        if theirs and mine.get(key) and mine[key] != theirs:
            out.append(Difference(f"{what} {mine[key]} here, {theirs} published", 1 if mine[key] == fast[key] else
                                  -1 if theirs == fast[key] else 0, key, theirs))
    if _family(mine["framework"]) != _family(pub.framework):
        out.append(Difference(f"{mine['framework']} here, {pub.framework} published", 0, "framework"))
    elif mine["framework"] in HARNESS_FRAMEWORKS:
        out.append(Difference(f"the kit's harness here, {pub.framework} published (another program of the same "
                              "framework)", 0, "framework"))
    return out


def _gpu_sign(mine: Gpu | None, theirs: Gpu) -> int:
    """+1 where this run's GPU is of a later generation (or SXM against PCIe in one), -1 an earlier; 0 unknown."""
    if mine is None or mine.generation not in GENERATIONS or theirs.generation not in GENERATIONS:
        return 0
    order = GENERATIONS.index(mine.generation) - GENERATIONS.index(theirs.generation)
    if order:
        return 1 if order > 0 else -1
    if mine.family == theirs.family and mine.form != theirs.form:
        return 1 if mine.form == "SXM" else -1
    return 0


HARNESS_FRAMEWORKS = ("torch", "paddle", "tensorflow", "mxnet")  # a log folder the harness writes, not a program's


def _family(framework: str) -> str:
    low = framework.lower()
    return next((f for f in ("paddle", "tensorflow", "mxnet") if f in low), "pytorch" if "torch" in low else low)


def _causes(entries: list[dict], figure: float, smi: dict, sized: bool = False) -> list[str]:
    """What the run's own records say may hold its figure down, most telling first; sized (the ladder): each with
    how much of the figure it can account for, where the records give it."""
    ranked: list[tuple[float, str]] = []
    tele = [e["telemetry"] for e in entries if isinstance(e.get("telemetry"), dict)]
    hosts = [h for t in tele for h in (t.get("hosts") or {}).values() if isinstance(h, dict)]
    clocked = [h["sm_mhz_median"] / h["max_sm_mhz"] for h in hosts if h.get("sm_mhz_median") and h.get("max_sm_mhz")]
    for name in sorted({n for t in tele for n in (t.get("throttled") or {})}):
        share = max((t.get("throttled") or {}).get(name, 0) for t in tele)
        if share > THROTTLED_SHARE:
            size = ""
            if sized:  # throttled time x the clock it lost: what slower clocks alone can cost the figure
                size = (f" (can account for up to {share * (1 - min(clocked)):.0%}: the throttled share x the SM "
                        "clock's shortfall)" if clocked else " (unquantified: no clock samples)")
            ranked.append((3 + share, f"throttled ({name}) {share:.0%} of the measured window{size}"))
    for h in hosts:
        if h.get("sm_mhz_median") and h.get("max_sm_mhz") and h["sm_mhz_median"] < CLOCK_SHARE * h["max_sm_mhz"]:
            share = h["sm_mhz_median"] / h["max_sm_mhz"]
            size = f" (can account for up to {1 - share:.0%})" if sized else ""
            ranked.append((2 + 1 - share, f"SM clock median {h['sm_mhz_median']:g} MHz, {share:.0%} of its "
                                          f"{h['max_sm_mhz']:g} MHz maximum{size}"))
            break
    for h in hosts:
        if h.get("power_mean_w") and h.get("limit_w") and h["power_mean_w"] >= POWER_SHARE * h["limit_w"]:
            ranked.append((2, f"at its power limit: {h['power_mean_w']:g} W drawn of {h['limit_w']:g} W"))
            break
    gpus = [g for g in smi.get("gpus") or [] if isinstance(g, dict)]
    for g in gpus:
        sku = gpu_of(g.get("product_name")).sku_power_w
        limit = g.get("power_limit_w")
        if sku and isinstance(limit, int | float) and limit < POWER_SHARE * sku:
            ranked.append((2.5, f"power limit {limit:g} W, under the SKU's {sku} W (nvidia-smi)"))
            break
    busy = [t["util_gpu_mean"] for t in tele if isinstance(t.get("util_gpu_mean"), int | float)]
    if busy and min(busy) < BUSY_SHARE:
        ranked.append((1.5, f"GPU busy {min(busy):.0f}% of the measured window: it waited (input, launches or "
                            "communication)"))
    rates = [e["ran"]["input_rate"] for e in entries if isinstance(e.get("ran"), dict)
             and isinstance(e["ran"].get("input_rate"), int | float)]
    share = noise.input_share(figure, statistics.median(rates)) if rates else None
    if share is not None and share >= noise.INPUT_BOUND_SHARE:
        ranked.append((2.8, f"input-bound: the training took {share:.0%} of what its loader delivers alone "
                            f"({statistics.median(rates):.0f} images/s)"))
    said = [w for e in entries if (w := noise.busy_warning(e.get("host_load")))]
    if said:
        ranked.append((2.2, f"{said[0]} ({len(said)} of {len(entries)} runs)"))
    return [text for _, text in sorted(ranked, key=lambda r: -r[0])]


def _case_settings(group: dict, case: dict, entries: list[dict]) -> dict:
    tag = str(group.get("precision") or "")
    first = next((e for e in entries if isinstance(e, dict)), {})
    ran = first.get("ran") if isinstance(first.get("ran"), dict) else {}
    loader = ran.get("loader")
    named = split_tag(tag)
    return {"framework": str(group.get("framework")), "model": str(group.get("model")),
            "batch": group.get("batch_per_device"), "gpus": int(case.get("gpus") or 1),
            "precision": first.get("precision") or named["precision"],
            "layout": first.get("layout") or ran.get("layout") or named.get("layout"),
            "data": None if loader is None else ("synthetic" if loader == "synthetic" else "real")}


def standing(run_dir: Path, figures: list[Published], references: dict | None = None,
             settings: dict | None = None, count: int = 3) -> Standing:
    """The answer for a run directory (results.json, run.json, env/); references: case key -> the suite's
    Reference objects for it (kit.config.cases.Reference); settings: case key -> what the caller knows that run.json
    does not record (a published program's layout and data, from its recipe)."""
    run_dir = Path(run_dir)
    results = read_results(run_dir)
    return stand(run_dir, results, figures, references, settings, count)


def stand(run_dir: Path, results: dict, figures: list[Published], references: dict | None = None,
          settings: dict | None = None, count: int = 3, hardware: Judgement | None = None,
          pairs: dict | None = None, ladder: bool = False) -> Standing:
    """standing() of results already in hand (results.json's dict: kit.results.report.Report.to_dict). As a ladder
    (module docstring): hardware, kit yardstick's judgement of the run's device (a suspect one is every case's first
    cause); pairs, harness case key -> the published programs' case keys of the same setting in the suite
    (kit.results.program_ratio.same_setting)."""
    run_dir = Path(run_dir)
    runs = read_run(run_dir, missing_ok=True).runs
    recorded = {log: e.fields for log, e in runs.items()}
    smi = _smi(run_dir)
    first_gpu = next(iter(smi.get("gpus") or []), {})
    names = [e.ran["device_name"] for e in runs.values() if e.ran and e.ran.get("device_name")]
    name = first_gpu.get("product_name") or (names[0] if names else None)
    gpu = gpu_of(name) if name else None
    if ladder and gpu is not None and gpu.family is None:  # a CPU's name (or a GPU the kit does not know)
        gpu = None if not first_gpu else gpu
    limit = first_gpu.get("power_limit_w")
    out = Standing(run_dir, gpu, limit, smi.get("driver_version"), [], ladder=ladder)
    if ladder:
        out.hardware, out.hardware_note = _hardware(hardware, gpu)
    for group in results.get("groups") or []:
        for case in group.get("cases") or []:
            runs = [r for r in case.get("runs") or [] if isinstance(r.get("value"), int | float)]
            if not runs:
                continue
            key = case_key(group["framework"], group["model"], group["batch_per_device"], case["case"],
                           group["precision"])
            # each run's run.json record, with the telemetry results.json carries (the report's window: a published
            # program's timed steps from layout 2, where run.json keeps its whole run)
            entries = [(recorded.get(f"logs/{r.get('file')}") or {}) | ({"telemetry": r["telemetry"]} if
                       r.get("telemetry") else {}) for r in runs]
            mine = _case_settings(group, case, entries)
            mine |= {k: v for k, v in (settings or {}).get(key, {}).items() if v is not None}
            values = [r["value"] for r in runs]
            cs = CaseStanding(key, mine["model"], mine["gpus"], str(group.get("unit")),
                              statistics.median(values) / mine["gpus"], [v / mine["gpus"] for v in values], mine)
            cs.causes = _causes(entries, statistics.median(values), smi, sized=ladder)
            if ladder:
                cs.not_checked = _not_checked(entries, smi, mine, gpu)
                if out.hardware and out.hardware.verdict == "suspect":
                    cs.causes.insert(0, f"{HARDWARE_CAUSE} (kit yardstick): {out.hardware.line}")
            _neighbours(cs, figures, (references or {}).get(key, ()), gpu, limit, count, ladder)
            out.cases.append(cs)
    if ladder:
        _climb(out, pairs or {})
    return out


def _not_checked(entries: list[dict], smi: dict, mine: dict, gpu: Gpu | None) -> list[str]:
    """The checks _causes could not make for want of their evidence."""
    out = []
    if gpu is not None and not any(isinstance(e.get("telemetry"), dict) for e in entries):
        out.append("no GPU telemetry (throttling, clocks, power draw, GPU busy)")
    if gpu is not None and not smi.get("gpus"):
        out.append("no nvidia-smi capture (power limit)")
    if not any(isinstance(e.get("host_load"), dict) for e in entries):
        out.append("no host-load record (a busy host)")
    if mine.get("data") == "real" and not any(isinstance(e.get("ran"), dict) and e["ran"].get("input_rate")
                                              for e in entries):
        out.append("no loader probe (input-bound)")
    return out


def _rung(cs: CaseStanding, gpu: Gpu | None, pub: Published) -> int:
    if gpu is None or not pub.gpu.same_model(gpu):
        return 5
    if pub.publisher.startswith("MLPerf"):
        return 4
    return 2 if _family(cs.settings["framework"]) == _family(pub.framework) else 3


def _climb(answer: Standing, pairs: dict) -> None:
    """Place each neighbour on the ladder, add the same run's program, and read the causes off the closest rung."""
    by_key = {cs.key: cs for cs in answer.cases}
    for cs in answer.cases:
        for n in cs.neighbours:
            n.rung = _rung(cs, answer.gpu, n.published) if n.published else 2
            if n.rung == 4:
                n.verdict = f"ceiling: {n.ratio:.2f} of the record"
            elif n.rung == 5:
                n.verdict = f"context only ({n.ratio:.2f})"
        for key in pairs.get(cs.key, ()):
            program = by_key.get(key)
            if program is None:
                continue
            ratios = [v / program.per_gpu for v in cs.runs]
            cs.neighbours.append(Neighbour(None, f"the published program {key}, this run", program.per_gpu,
                                           cs.per_gpu / program.per_gpu, min(ratios), max(ratios),
                                           _verdict(min(ratios), max(ratios)), [],
                                           "measured in this run at the same setting (the report's harness ÷ "
                                           "program table)", rung=1))
        cs.neighbours.sort(key=lambda n: n.rung)
        if cs.neighbours and cs.why_none:
            cs.why_none = ""
        cs.causes += _setting_causes(cs, answer.cases)


def closest(cs: CaseStanding) -> Neighbour | None:
    """The neighbour the verdict comes from: the closest rung of 1-3 (4 is a ceiling, 5 context)."""
    return next((n for n in cs.neighbours if 1 <= n.rung <= 3), None)


def _setting_causes(cs: CaseStanding, cases: list[CaseStanding]) -> list[str]:
    """The settings that differ from the closest rung's figure and point the way of the gap, each sized by the run's
    own case that differs in just that setting (how much faster or slower it ran), else unquantified; largest
    first, then those whose direction is not known."""
    n = closest(cs)
    if n is None or n.verdict not in ("slower", "faster"):
        return []
    toward = -1 if n.verdict == "slower" else 1
    sized, unsized, unknown = [], [], []
    for d in n.signed:
        if d.sign == 0:
            unknown.append(f"{d.text} (which way it points is not known)")
            continue
        if d.sign != toward:
            continue
        other = _own_case(cs, cases, d)
        if other is None:
            unsized.append(f"{d.text} (unquantified)")
        else:
            size = other.per_gpu / cs.per_gpu
            sized.append((abs(size - 1), f"{d.text}: this run's {other.key} gives {size:.2f}x this case's "
                                         f"figure ({n.ratio:.2f}x the neighbour here)"))
    return [t for _, t in sorted(sized, key=lambda x: -x[0])] + unsized + unknown


def _own_case(cs: CaseStanding, cases: list[CaseStanding], d: Difference) -> CaseStanding | None:
    """The run's case that is this one but for the setting D names, set to the published value."""
    if d.key not in ("batch", "precision", "layout") or d.theirs is None:
        return None
    for other in cases:
        if other is cs or other.model != cs.model or other.gpus != cs.gpus:
            continue
        a, b = dict(cs.settings), dict(other.settings)
        if d.key == "precision":
            b["precision"] = "amp" if b["precision"] in ("amp", "bf16") else "fp32"
        if b.get(d.key) == d.theirs and all(a.get(k) == b.get(k) for k in a if k != d.key):
            return other
    return None


def _hardware(hardware: Judgement | None, gpu: Gpu | None) -> tuple[Judgement | None, str]:
    """The yardstick if it measured this run's kind of device (the same GPU model, or a CPU for a CPU run)."""
    if hardware is None:
        return None, ("not measured: `kit yardstick` beside the run tells a slow GPU from slow software" if gpu
                      else "not measured: `kit yardstick` beside the run holds this CPU to its earlier runs")
    if (hardware.device == "gpu") != (gpu is not None) or gpu and not gpu.same_model(gpu_of(hardware.name)):
        return None, f"the yardstick given measured {hardware.name}, not this run's {gpu.name if gpu else 'CPU'}"
    return hardware, ""


def _neighbours(cs: CaseStanding, figures: list[Published], references, gpu: Gpu | None, limit: float | None,
                count: int, ladder: bool = False) -> None:
    if gpu is None:
        cs.why_none = "a CPU run: the published figures the kit holds are GPU figures"
    elif cs.unit not in IMAGE_UNITS:
        cs.why_none = f"no published {cs.unit} figure of {cs.model} is held"
    for pub in nearest(figures, cs.model, gpu, cs.settings["precision"], cs.gpus, count) if not cs.why_none else []:
        ratios = [v / pub.per_gpu for v in cs.runs]
        claims = Path(pub.claims) if pub.claims else None
        source = (f"re-derived from its raw log ({Path(pub.log).name}) by `kit crosscheck "
                  f"{claims.relative_to(claims.parents[2])}`") if pub.log and claims else "a number without a log"
        signed = _signed(cs.settings, gpu, limit, pub)
        cs.neighbours.append(Neighbour(pub, f"{pub.publisher} {pub.system}, {pub.gpus} GPU(s), {pub.precision}",
                                       pub.per_gpu, cs.per_gpu / pub.per_gpu, min(ratios), max(ratios),
                                       _verdict(min(ratios), max(ratios)), [d.text for d in signed], source,
                                       signed=signed))
    for ref in references:
        if ref.measures(cs.unit) or (cs.unit in IMAGE_UNITS and ref.unit in IMAGE_UNITS):
            value = ref.value / cs.gpus
            ratios = [v / value for v in cs.runs]
            cs.neighbours.append(Neighbour(None, "the suite's reference", value, cs.per_gpu / value, min(ratios),
                                           max(ratios), _verdict(min(ratios), max(ratios)), [],
                                           f"a publisher's number, no log re-derived here: {ref.described()}"))
    if not cs.neighbours and not cs.why_none:
        cs.why_none = f"no published figure of {cs.model} is held"
    first = cs.neighbours[0] if cs.neighbours else None
    if not ladder and first and first.verdict == "slower" and first.differs:
        cs.causes.append("settings unlike the nearest published figure's: " + "; ".join(first.differs))


def headline(cs: CaseStanding, ladder: bool = False) -> str:
    """One line: the case against its nearest published figure (as a ladder: its closest rung, and the record)."""
    if not cs.neighbours:
        return f"{cs.key}: {cs.per_gpu:.1f} {cs.unit} per GPU; {cs.why_none}"
    if ladder:
        n, record = closest(cs), next((x for x in cs.neighbours if x.rung == 4), None)
        ceiling = f"; {record.ratio:.2f} of the record ({record.label})" if record else ""
        if n is None:
            return f"{cs.key}: {cs.per_gpu:.1f} {cs.unit} per GPU; no like-for-like figure (rungs 1-3){ceiling}"
        return (f"{cs.key}: {cs.per_gpu:.1f} {cs.unit} per GPU, {n.ratio:.2f}x {n.label} ({n.per_gpu:.1f}): "
                f"{n.verdict} -- rung {n.rung}, {RUNGS[n.rung]}{ceiling}")
    n = cs.neighbours[0]
    alike = "like for like" if not n.differs else f"{len(n.differs)} setting(s) differ"
    return (f"{cs.key}: {cs.per_gpu:.1f} {cs.unit} per GPU, {n.ratio:.2f}x {n.label} ({n.per_gpu:.1f}): "
            f"{n.verdict}, {alike}")


def to_markdown(answer: Standing) -> str:
    if answer.ladder:
        return _ladder_markdown(answer)
    gpu = answer.gpu.name if answer.gpu else "no GPU"
    power = f", power limit {answer.power_limit_w:g} W" if answer.power_limit_w else ""
    driver = f", driver {answer.driver}" if answer.driver else ""
    lines = ["## Where this run stands against published figures", "",
             f"Run {answer.run_dir.name} on {gpu}{power}{driver}. Ratios are per GPU (this run's median over "
             f"theirs; the range spans its runs); on par: within ±{ON_PAR:.0%}.", "",
             "| case | yours per GPU | nearest published per GPU | ratio | verdict |",
             "| --- | --- | --- | --- | --- |"]
    for cs in answer.cases:
        n = cs.neighbours[0] if cs.neighbours else None
        lines.append(f"| {cs.key} | {cs.per_gpu:.1f} {cs.unit} | "
                     + (f"{n.per_gpu:.1f} ({n.label}) | {n.ratio:.2f} ({n.low:.2f}–{n.high:.2f}) | {n.verdict} |"
                        if n else f"— | — | {cs.why_none} |"))
    for cs in answer.cases:
        lines += ["", f"### {cs.key}", ""]
        for i, n in enumerate(cs.neighbours, 1):
            lines.append(f"{i}. {n.label}: {n.per_gpu:.1f} per GPU, ratio {n.ratio:.2f} — {n.verdict}; {n.source}")
            lines += [f"   - differs: {d}" for d in n.differs] or ["   - settings alike"]
        if not cs.neighbours:
            lines.append(f"- {cs.why_none}")
        lines.append("- likely causes, from this run's own records: "
                     + ("; ".join(f"({i}) {c}" for i, c in enumerate(cs.causes, 1)) if cs.causes
                        else "none found (no throttling, clocks, power, busy-GPU, loader or host-load finding)"))
    return "\n".join(lines) + "\n"


def _ladder_markdown(answer: Standing) -> str:
    gpu = answer.gpu.name if answer.gpu else "a CPU"
    power = f", power limit {answer.power_limit_w:g} W" if answer.power_limit_w else ""
    driver = f", driver {answer.driver}" if answer.driver else ""
    lines = ["## Where this run stands against published figures", "",
             f"Run {answer.run_dir.name} on {gpu}{power}{driver}. Ratios are per GPU (this run's median over "
             f"theirs; the range spans its runs); on par: within ±{ON_PAR:.0%}. Like for like first: the verdict "
             "comes from the closest rung (1 the published program beside it in this run, 2 the same GPU and "
             "framework published, 3 the same GPU, another framework); the record for this GPU is a ceiling.", "",
             f"Hardware: {answer.hardware.line if answer.hardware else answer.hardware_note}", "",
             "| case | yours per GPU | closest neighbour per GPU | rung | ratio | verdict | of the record |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for cs in answer.cases:
        n, record = closest(cs), next((x for x in cs.neighbours if x.rung == 4), None)
        ceiling = f"{record.ratio:.2f}" if record else "—"
        if n:
            lines.append(f"| {cs.key} | {cs.per_gpu:.1f} {cs.unit} | {n.per_gpu:.1f} ({n.label}) | {n.rung} | "
                         f"{n.ratio:.2f} ({n.low:.2f}–{n.high:.2f}) | {n.verdict} | {ceiling} |")
        else:
            why = cs.why_none or "no like-for-like figure (rungs 1-3)"
            lines.append(f"| {cs.key} | {cs.per_gpu:.1f} {cs.unit} | — | — | — | {why} | {ceiling} |")
    for cs in answer.cases:
        lines += ["", f"### {cs.key}", ""]
        for i, n in enumerate(cs.neighbours, 1):
            lines.append(f"{i}. rung {n.rung} ({RUNGS[n.rung]}): {n.label}: {n.per_gpu:.1f} per GPU, ratio "
                         f"{n.ratio:.2f} — {n.verdict}; {n.source}")
            lines += [f"   - differs: {d}" for d in n.differs] or ["   - settings alike"]
        if not cs.neighbours:
            lines.append(f"- {cs.why_none}")
        lines.append(f"- likely causes: {_causes_text(cs)}")
    return "\n".join(lines) + "\n"


def _causes_text(cs: CaseStanding) -> str:
    said = "; ".join(f"({i}) {c}" for i, c in enumerate(cs.causes, 1)) if cs.causes else ""
    if not cs.not_checked:
        return said or "none found (every check had its evidence)"
    missing = "not checked: " + "; ".join(cs.not_checked)
    return f"{said}; {missing}" if said else f"none found in what was checked; {missing}"


def answer_lines(answer: Standing) -> list[str]:
    """The page's answer, a Markdown line per case: the verdict and its rung, the ratio, the record as a ceiling, the
    top cause, the neighbour's source linked where it is published."""
    out = []
    if answer.hardware is not None:
        out.append(f"**Hardware**: {answer.hardware.line}")
    for cs in answer.cases:
        n, record = closest(cs), next((x for x in cs.neighbours if x.rung == 4), None)
        if n is not None:
            link = f" ([its log]({n.published.url}))" if n.published and n.published.url else ""
            said = (f"**{n.verdict}**: {n.ratio:.2f}x {n.label}{link} ({n.per_gpu:.1f} per GPU; rung {n.rung}, "
                    f"{RUNGS[n.rung]})")
        else:
            said = f"**no like-for-like figure** ({cs.why_none or 'rungs 1-3: none held'})"
        if record is not None:
            link = f" ([its log]({record.published.url}))" if record.published and record.published.url else ""
            said += f"; {record.ratio:.2f} of the record{link}"
        cause = cs.causes[0] if cs.causes else ("none found" + (f"; not checked: {'; '.join(cs.not_checked)}"
                                                                if cs.not_checked else ""))
        if answer.hardware is not None and cause.startswith(HARDWARE_CAUSE):
            cause = f"{HARDWARE_CAUSE} (kit yardstick, above)"
        out.append(f"**{cs.key}** ({cs.per_gpu:.1f} {cs.unit} per GPU): {said}. Top cause: {cause}")
    return out


def plot_marks(answer: Standing) -> dict[str, list[tuple[str, float]]]:
    """Case key -> the closest rung's figure and the record's, each for the case's whole job (as its bars are), with
    a short label: what throughput.png draws beside each case's bar."""
    out = {}
    for cs in answer.cases:
        n, record = closest(cs), next((x for x in cs.neighbours if x.rung == 4), None)
        marks = [(f"rung {n.rung}: {n.published.publisher if n.published else 'its program here'}",
                  n.per_gpu * cs.gpus)] if n else []
        if record:
            marks.append(("the record (MLPerf), per GPU x GPUs", record.per_gpu * cs.gpus))
        if marks:
            out[cs.key] = marks
    return out


def summary_markdown(answer: Standing) -> str:
    """The answer as the report starts with it: one row per case, and each case's likely causes in a line."""
    full = to_markdown(answer).split("\n### ", 1)[0].rstrip("\n").splitlines()
    if answer.ladder and answer.hardware is None:  # the report says what its run directory holds
        full = [line for i, line in enumerate(full) if not line.startswith("Hardware: ")
                and not (i and full[i - 1].startswith("Hardware: "))]
    causes = [f"- {cs.key}: " + (_causes_text(cs) if answer.ladder else "; ".join(cs.causes) if cs.causes
                                   else "no cause found in the run's records") for cs in answer.cases]
    head = "Likely causes, from the run's own records (the detail: `kit standing RUN`):"
    return "\n".join([*full, "", head, *causes]) + "\n"


def to_dict(answer: Standing) -> dict:
    return {"run": str(answer.run_dir), "gpu": answer.gpu.name if answer.gpu else None,
            "power_limit_w": answer.power_limit_w, "driver": answer.driver,
            "hardware": yardstick_dict(answer.hardware) if answer.hardware else None,
            "hardware_note": answer.hardware_note or None,
            "cases": [{"case": cs.key, "unit": cs.unit, "per_gpu": cs.per_gpu, "runs_per_gpu": cs.runs,
                       "settings": cs.settings, "causes": cs.causes, "why_none": cs.why_none or None,
                       "not_checked": cs.not_checked, "headline": headline(cs, answer.ladder),
                       "neighbours": [{"label": n.label, "per_gpu": n.per_gpu, "ratio": n.ratio, "low": n.low,
                                       "high": n.high, "verdict": n.verdict, "differs": n.differs,
                                       "source": n.source, "log": n.published.log if n.published else None,
                                       "rung": n.rung or None}
                                      for n in cs.neighbours]}
                      for cs in answer.cases]}
