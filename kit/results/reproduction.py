"""PURE: a bundle's figures against a re-run of its cases (`kit reproduce`): per case the ratio reproduction /
original under the kit's noise rule (kit.results.stats: ratio_check's interval, ratio_target against a threshold,
the same rule as the report's frameworks side by side) and a verdict against a tolerance t:

    reproduced       the ratio's interval lies within a factor 1 + t either way: [1 / (1 + t), 1 + t]
    not reproduced   it lies wholly beyond an edge (faster or slower, by how much), however wide a side's runs
                     spread (the interval holds the spread: the CV rule only keeps a nearer interval from deciding)
    not comparable   the two systems differ where a figure's meaning does (case_differences)
    inconclusive     noise: the interval straddles an edge, or a side's runs spread beyond the rule's CV; the
                     verdict says about how many runs a side would resolve it

Each edge is one ratio_target: slower beyond the band is reproduction / original below 1 / (1 + t), faster beyond
it is original / reproduction below 1 / (1 + t) (ratio_check of the sides swapped: the reciprocal interval).
With one run on a side the noise rule cannot test the spread: the point ratio decides, and the verdict says so.
A re-run made while this host was busy (kit.results.noise's rule, from its run.json host_load) is set aside, not
judged (record version 3): the auditor's own host slowed it, not the bundle's claim; unless the auditor allowed a
busy host (--allow-busy, recorded). Nor does setting runs aside leave one re-run to decide what several were asked to
(record version 4): one re-run judged beside others set aside is inconclusive, and --until-decided runs the round again.
check_record: a reproduction.json's figures, ratios and verdicts against its run's own results.json (kit verify).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from kit.core.layout import case_key
from kit.results import noise, stats

VERDICTS = REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE, INCONCLUSIVE = ("reproduced", "not reproduced",
                                                                       "not comparable", "inconclusive")
DEFAULT_TOLERANCE = 0.05
# reproduction.json's schema_version: 1 both sides samples (compare_case), 2 the claim (judge_claim), 3 the claim with
# the re-runs of a busy host set aside (disturbed_runs, allow_busy), 4 one re-run left beside those set aside decides
# nothing (inconclusive)
RECORD_VERSION = 4
KNOWN_VERSIONS = (1, 2, 3, 4)
RECORD_NAME, TABLE_NAME = "reproduction.json", "reproduction.md"  # what `kit reproduce` leaves in its run directory
# system.json fields that make two runs different work, and those that only matter for a CPU run
SYSTEM_FIELDS = (("accelerator_model_name", "GPU model"), ("accelerators_per_node", "GPUs per node"),
                 ("number_of_nodes", "nodes"))
CPU_FIELDS = (("host_processor_model_name", "CPU model"), ("host_processor_vcpu_count", "logical CPUs"))


@dataclass
class CaseVerdict:
    case: str
    original: list[float]
    reproduced: list[float]
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str
    why: str
    set_aside: list[float] = field(default_factory=list)  # re-runs' figures not judged: made while the host was busy

    def to_dict(self) -> dict:
        out = asdict(self)
        if not self.set_aside:  # as records before version 3 have it
            del out["set_aside"]
        return out


def runs_by_case(results: dict) -> dict[str, list[tuple[object, float]]]:
    """results.json's (repeat, figure) of each run per case key (framework/model/bz<B>/<case>/<precision>)."""
    out: dict[str, list[tuple[object, float]]] = {}
    for group in results.get("groups") or []:
        for case in group.get("cases") or []:
            key = case_key(group["framework"], group["model"], group["batch_per_device"], case["case"],
                           group["precision"])
            out[key] = [(r.get("run"), r["value"]) for r in case.get("runs") or []
                        if isinstance(r.get("value"), int | float)]
    return out


def figures_by_case(results: dict) -> dict[str, list[float]]:
    """results.json's run figures per case key."""
    return {key: [value for _, value in runs] for key, runs in runs_by_case(results).items()}


def disturbed_runs(entries) -> dict[str, dict[str, str]]:
    """{case: {repeat: why}} of the runs (run.json's entries: case, repeat, host_load) whose host was busy by
    kit.results.noise's rule while they ran: 'other processes used 48% of the CPU'."""
    out: dict[str, dict[str, str]] = {}
    for entry in entries:
        if noise.is_busy(entry.host_load):
            out.setdefault(str(entry.case), {})[str(entry.repeat)] = noise.busy_reason(entry.host_load)
    return out


def split_disturbed(runs: list[tuple[object, float]], disturbed: dict[str, str]) -> tuple[list[float], list[float]]:
    """(the figures judged, those set aside) of a case's (repeat, figure) runs, by its disturbed repeats."""
    judged = [value for repeat, value in runs if str(repeat) not in disturbed]
    return judged, [value for repeat, value in runs if str(repeat) in disturbed]


# other_software_stack entries whose major version changes what runs on a GPU (kit.audit.sysdesc)
MAJOR_FIELDS = (("driver", "driver major version"), ("cuda_driver_api", "CUDA (driver) major version"))


POWER_APART = 0.01  # GPU power limits further apart than this share make the work different


def power_limit_differences(original: list[dict], here: list[dict]) -> list[str]:
    """The GPUs' enforced power limits of the bundle's hosts against this run's (each host's capture.json: its
    smi.gpus[].power_limit_w), where both name some and any two differ by more than POWER_APART."""
    def limits(captures: list[dict]) -> list[float]:
        found = {float(g["power_limit_w"]) for c in captures if isinstance(c, dict) and isinstance(c.get("smi"), dict)
                 for g in c["smi"].get("gpus") or [] if isinstance(g, dict)
                 and isinstance(g.get("power_limit_w"), int | float) and not isinstance(g["power_limit_w"], bool)}
        return sorted(found)

    theirs, ours = limits(original), limits(here)
    if not theirs or not ours or max(theirs + ours) <= (1 + POWER_APART) * min(theirs + ours):
        return []

    def shown(values: list[float]) -> str:
        return "/".join(f"{v:g} W" for v in values)
    return [f"GPU power limit: {shown(theirs)} in the bundle, {shown(ours)} here"]


def major_differences(original: dict, here: dict) -> list[str]:
    """The driver's and its CUDA's major versions, where the two system descriptions name both and they differ."""
    stacks = [d.get("other_software_stack") if isinstance(d.get("other_software_stack"), dict) else {}
              for d in (original, here)]
    out = []
    for key, what in MAJOR_FIELDS:
        versions = [str(stack.get(key) or "") for stack in stacks]
        if all(versions) and len({v.split(".")[0] for v in versions}) > 1:
            out.append(f"{what}: {versions[0]} in the bundle, {versions[1]} here")
    return out


def _count(value) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def case_differences(original: dict, here: dict, cpu: bool, gpus_per_node: int, nodes: int,
                     power: list[str] = ()) -> list[str]:
    """Record version 2: what makes a case's figure here mean something else than the bundle's, compared as parsed
    values -- the GPU model (kit.results.published.gpu_of) and driver/CUDA major version, the GPUs and nodes THE
    CASE uses against what this system has, the power limit (power: power_limit_differences), the CPU model of a
    CPU case. Anything else that differs is noted (noted_differences), not a reason."""
    from kit.results.published import gpu_of

    out = []
    if cpu:
        theirs, ours = (str(d.get("host_processor_model_name") or "") for d in (original, here))
        if theirs != ours:
            out.append(f"CPU model: {theirs or 'none'} in the bundle, {ours or 'none'} here")
    else:
        theirs, ours = (d.get("accelerator_model_name") for d in (original, here))
        if not gpu_of(theirs).same_model(gpu_of(ours)):
            out.append(f"GPU model: {theirs or 'none'} in the bundle, {ours or 'none'} here")
        have = _count(here.get("accelerators_per_node"))
        if have is not None and have < gpus_per_node:
            out.append(f"GPUs: the case uses {gpus_per_node} per node, this system has {have}")
        out += major_differences(original, here) + list(power)
    have = _count(here.get("number_of_nodes"))
    if have is not None and have < nodes:
        out.append(f"nodes: the case uses {nodes}, this system has {have}")
    return out


def noted_differences(original: dict, here: dict, cpu: bool) -> list[str]:
    """The system description's other fields that differ: noted beside the verdicts, never a reason for one."""
    fields = SYSTEM_FIELDS + CPU_FIELDS
    return [f"{what}: {original.get(key) or 'none'!s} in the bundle, {here.get(key) or 'none'!s} here"
            for key, what in fields if str(original.get(key) or "") != str(here.get(key) or "")
            and not (what == "CPU model" and cpu) and what != "GPU model"]


def repeats_to_resolve(check: stats.RatioCheck, tolerance: float, runs: int) -> int | None:
    """Runs a side that would narrow the interval enough to lie on one side of the band's nearer edge, if the
    spread stays as it is (an interval narrows as 1/sqrt(n)); None where the ratio lies on that edge (no number
    of runs is sure to resolve it)."""
    return runs_to_resolve(check.ratio, check.low, check.high, tolerance, runs)


def runs_to_resolve(ratio: float, low: float, high: float, tolerance: float, runs: int) -> int | None:
    width = high - low
    room = min(abs(ratio - 1 / (1 + tolerance)), abs(ratio - (1 + tolerance)))
    if room <= 1e-9 * ratio:
        return None
    if not math.isfinite(width):
        return max(2 * runs, 3)
    return max(runs + 1, math.ceil(runs * (width / (2 * room)) ** 2))


def compare_case(case: str, original: list[float], reproduced: list[float], tolerance: float,
                 differs: list[str]) -> CaseVerdict:
    if not original or not reproduced:
        why = "; ".join(differs) if differs else f"no figure in {'the bundle' if not original else 'the reproduction'}"
        return CaseVerdict(case, original, reproduced, None, None, None, NOT_COMPARABLE, why)
    check = stats.ratio_check(original, reproduced)  # reproduction / original
    band = (1 / (1 + tolerance), 1 + tolerance)
    if differs:
        return CaseVerdict(case, original, reproduced, check.ratio, check.low, check.high, NOT_COMPARABLE,
                           "; ".join(differs))
    if check.verdict == stats.UNTESTED:
        inside = band[0] <= check.ratio <= band[1]
        return CaseVerdict(case, original, reproduced, check.ratio, None, None,
                           REPRODUCED if inside else NOT_REPRODUCED,
                           f"one run on a side: the ratio {check.ratio:.3f} alone decides, its spread unknown")
    slower = stats.ratio_target(check, band[0])  # MISSED: slower beyond the band
    faster = stats.ratio_target(stats.ratio_check(reproduced, original), band[0])  # MISSED: faster beyond it
    interval = f"interval [{check.low:.3f}, {check.high:.3f}]"
    beyond = check.high < band[0] or check.low > band[1]  # the whole interval, however wide the runs spread
    if stats.MISSED in (slower, faster) or beyond:
        way = "slower" if check.high < band[0] else "faster"
        noisy = "; ".join(check.spread("the bundle", "the reproduction"))
        why = f"{way}: ratio {check.ratio:.3f}, {interval} beyond {band[0]:.2f}..{band[1]:.2f}"
        verdict, why = NOT_REPRODUCED, why + (f" ({noisy}: the interval holds that spread)" if noisy else "")
    elif slower == faster == stats.MET:
        verdict, why = REPRODUCED, f"{interval} within {band[0]:.2f}..{band[1]:.2f}"
    else:
        runs = min(len(original), len(reproduced))
        doubt = check.spread("the bundle", "the reproduction") or [
            f"{interval} straddles the band {band[0]:.2f}..{band[1]:.2f}"]
        verdict, needed = INCONCLUSIVE, repeats_to_resolve(check, tolerance, runs)
        resolve = "the ratio lies on the band's edge: no number of runs is sure to resolve it" if needed is None \
            else f"about {needed} runs a side would resolve it"
        why = f"{'; '.join(doubt)}: {resolve} ({stats.NOISE_ADVICE})"
    return CaseVerdict(case, original, reproduced, check.ratio, check.low, check.high, verdict, why)


def judge_claim(case: str, original: list[float], reproduced: list[float], tolerance: float, differs: list[str],
                no_figure: str = "", set_aside: list[float] = (), busy: str = "",
                version: int = RECORD_VERSION) -> CaseVerdict:
    """Record version 2: the bundle's claim -- its figure, the median of its runs, a point -- against the interval of
    the auditor's re-runs (the median's, kit.results.stats.median_ci at NOISE_LEVEL), divided by the claim. Only
    the re-runs are a sample: the bundle's own spread is reported beside the verdict (a spread beyond the noise
    rule's is a finding), never used to widen the interval. Every road ends in a verdict: re-runs that gave no
    figure (failed, timed out) are NOT reproduced, saying why; NOT comparable only for the differences passed in
    (those that change what a figure means); INCONCLUSIVE says how many re-runs would decide. SET_ASIDE: figures of
    re-runs made while the host was busy (BUSY: why), not judged: every re-run set aside is INCONCLUSIVE, and from
    record VERSION 4 so is one re-run left beside those set aside (its spread unknown, it would decide alone what the
    auditor asked several re-runs to)."""
    verdict = _judge_claim(case, original, reproduced, tolerance, differs, no_figure)
    if not busy:
        return verdict
    aside = f"re-runs set aside, made while this host was busy: {busy}"
    if not reproduced and not no_figure and not differs and original:
        return CaseVerdict(case, original, [], None, None, None, INCONCLUSIVE,
                           f"every re-run set aside, made while this host was busy: {busy}; kit reproduce "
                           "--until-decided runs them again once it is quiet", list(set_aside))
    if version >= 4 and len(reproduced) == 1 and not differs and original:
        return CaseVerdict(case, original, list(reproduced), verdict.ratio, None, None, INCONCLUSIVE,
                           f"one re-run left, {len(set_aside)} set aside, made while this host was busy: {busy}; one "
                           f"re-run cannot decide what {len(set_aside) + 1} were asked to (its spread unknown): kit "
                           "reproduce --until-decided runs them again once it is quiet" + bundle_spread(original),
                           list(set_aside))
    verdict.set_aside, verdict.why = list(set_aside), f"{verdict.why}; {aside}"
    return verdict


def bundle_spread(original: list[float]) -> str:
    """'; the bundle's own runs spread CV ...: a finding about the bundle' where they spread beyond the noise rule's
    CV, else ''."""
    if len(original) > 1 and stats.cv(original) > stats.NOISE_MAX_CV:
        return (f"; the bundle's own runs spread CV {stats.cv(original):.0%}, beyond the "
                f"{stats.NOISE_MAX_CV:.0%} the kit's noise rule accepts: a finding about the bundle")
    return ""


def _judge_claim(case: str, original: list[float], reproduced: list[float], tolerance: float, differs: list[str],
                 no_figure: str) -> CaseVerdict:
    if differs:
        return CaseVerdict(case, original, reproduced, None, None, None, NOT_COMPARABLE, "; ".join(differs))
    if not original:
        return CaseVerdict(case, original, reproduced, None, None, None, NOT_COMPARABLE,
                           "the bundle claims no figure for it")
    spread = bundle_spread(original)
    if not reproduced:
        return CaseVerdict(case, original, reproduced, None, None, None, NOT_REPRODUCED,
                           f"no figure: {no_figure or 'the re-runs gave none'}{spread}")
    claim = stats.median(original)
    band = (1 / (1 + tolerance), 1 + tolerance)
    ratio = stats.median(reproduced) / claim
    edges = f"{band[0]:.2f}..{band[1]:.2f}"
    if len(reproduced) < 2:
        inside = band[0] <= ratio <= band[1]
        return CaseVerdict(case, original, reproduced, ratio, None, None, REPRODUCED if inside else NOT_REPRODUCED,
                           f"one re-run: the ratio {ratio:.3f} alone decides, its spread unknown{spread}")
    lo, hi = stats.median_ci(reproduced, stats.NOISE_LEVEL)
    low, high = max(lo, 0.0) / claim, hi / claim
    interval = f"the re-runs' interval [{low:.3f}, {high:.3f}]"
    noisy = stats.cv(reproduced) > stats.NOISE_MAX_CV
    if high < band[0] or low > band[1]:
        way = "slower" if high < band[0] else "faster"
        return CaseVerdict(case, original, reproduced, ratio, low, high, NOT_REPRODUCED,
                           f"{way}: ratio {ratio:.3f}, {interval} beyond {edges}{spread}")
    if band[0] <= low and high <= band[1] and not noisy:
        return CaseVerdict(case, original, reproduced, ratio, low, high, REPRODUCED,
                           f"{interval} within {edges}{spread}")
    doubt = (f"CV of the re-runs {stats.cv(reproduced):.0%} > {stats.NOISE_MAX_CV:.0%}" if noisy
             else f"{interval} straddles the band {edges}")
    needed = runs_to_resolve(ratio, low, high, tolerance, len(reproduced))
    resolve = ("the ratio lies on the band's edge: no number of re-runs is sure to decide it" if needed is None
               else f"about {needed} re-runs would decide it (kit reproduce --until-decided)")
    return CaseVerdict(case, original, reproduced, ratio, low, high, INCONCLUSIVE,
                       f"{doubt}: {resolve}{spread}")


def judge_runs(case: str, original: list[float], runs: list[tuple[object, float]], tolerance: float,
               differs: list[str], failed_runs: list[str], disturbed: dict[str, str],
               version: int = RECORD_VERSION) -> CaseVerdict:
    """judge_claim of a case's re-runs as a reproduction records them (record VERSION): its (repeat, figure) runs and
    failed-run lines, the repeats made while the host was busy ({repeat: why}) set aside."""
    judged, aside = split_disturbed(runs, disturbed)
    return judge_claim(case, original, judged, tolerance, differs, no_figure_of(case, failed_runs, disturbed), aside,
                       busy_of(disturbed), version)


def counts(verdicts: list[CaseVerdict]) -> dict[str, int]:
    """{verdict: how many cases}, every verdict named (0 where none)."""
    return {name: sum(v.verdict == name for v in verdicts) for name in VERDICTS}


def exit_code(verdicts: list[CaseVerdict], version: int = 1) -> int:
    """0 all reproduced, 1 any not reproduced; version 1: 3 inconclusive or not comparable only; version 2: 3 where
    a named system difference stopped a comparison, 4 where the auditor stopped before a case was decided."""
    if any(v.verdict == NOT_REPRODUCED for v in verdicts):
        return 1
    if all(v.verdict == REPRODUCED for v in verdicts):
        return 0
    return 3 if version < 2 or any(v.verdict == NOT_COMPARABLE for v in verdicts) else 4


def to_markdown(verdicts: list[CaseVerdict], bundle: str, tolerance: float, version: int = 1,
                notes: list[str] = ()) -> str:
    said = (f"Ratio = reproduction / bundle, medians of the runs; reproduced within a factor {1 + tolerance:g} either "
            "way (the noise rule's interval where both sides have 2+ runs).") if version < 2 else (
            "Ratio = the re-runs' median / the bundle's claim (the median of its runs, a point: only the re-runs are "
            f"a sample, their median's interval the one judged); reproduced within a factor {1 + tolerance:g} "
            "either way. A re-run that gave no figure is not reproduced; not comparable only where the systems differ "
            "in what a figure means.")
    lines = [f"## Reproduction of {bundle}", "", said, "",
             "| case | bundle | reproduction | ratio | interval | verdict | why |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in verdicts:
        med = [f"{stats.median(x):.2f}" if x else "—" for x in (v.original, v.reproduced)]
        ratio = f"{v.ratio:.3f}" if v.ratio is not None else "—"
        interval = f"{v.low:.3f}..{v.high:.3f}" if v.low is not None and math.isfinite(v.high or math.inf) else "—"
        lines.append(f"| {v.case} | {med[0]} | {med[1]} | {ratio} | {interval} | {v.verdict} | {v.why} |")
    if notes:
        lines += ["", "Noted, not a reason for any verdict: " + "; ".join(notes) + "."]
    return "\n".join(lines) + "\n"


def check_record(record: dict, results: dict) -> tuple[list[tuple[str, str]], list[CaseVerdict]]:
    """(key, what does not hold) for each figure, ratio, interval, verdict and count of a reproduction.json that
    its own run's results.json does not give: each case's runs must be results.json's, and every field of its
    verdict what compare_case makes of them with the recorded original figures, tolerance and system differences;
    and the verdicts so made."""
    verdicts, tolerance = record.get("verdicts"), record.get("tolerance")
    differs, version = record.get("system_differences"), record.get("schema_version")
    if not isinstance(verdicts, list) or not verdicts:
        return [("verdicts", "missing, empty or not a list")], []
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance <= 10:
        return [("tolerance", f"{tolerance!r} is not a tolerance in (0, 10]")], []
    if version not in KNOWN_VERSIONS:
        return [("schema_version", f"{version!r} is no reproduction record this kit knows "
                 f"({', '.join(map(str, KNOWN_VERSIONS))})")], []
    if version == 1 and (not isinstance(differs, list) or not all(isinstance(d, str) for d in differs)):
        return [("system_differences", "missing or not a list of lines")], []
    failed = record.get("failed_runs")
    if version >= 2 and (not isinstance(differs, dict) or not all(
            isinstance(v, list) and all(isinstance(d, str) for d in v) for v in differs.values())
            or not isinstance(failed, list) or not all(isinstance(f, str) for f in failed)):
        return [("system_differences", "not an object of case -> lines, or failed_runs not a list of lines")], []
    disturbed, allowed = record.get("disturbed_runs", {}), record.get("allow_busy", False)
    if version >= 3 and (not isinstance(allowed, bool) or not isinstance(disturbed, dict) or not all(
            isinstance(d, dict) and all(isinstance(w, str) for w in d.values()) for d in disturbed.values())):
        return [("disturbed_runs", "not an object of case -> {repeat: why}, or allow_busy not true/false")], []
    if version < 3 or allowed:
        disturbed = {}
    here, problems, again = runs_by_case(results), [], []
    for i, v in enumerate(verdicts):
        key = f"verdicts[{i}]"
        if not isinstance(v, dict) or not isinstance(v.get("case"), str) or not isinstance(v.get("original"), list) \
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v["original"]):
            problems.append((key, "not a verdict (case, original, reproduced, ratio, verdict)"))
            continue
        want, _ = split_disturbed(here.get(v["case"], []), disturbed.get(v["case"], {}))
        if v.get("reproduced") != want:
            problems.append((f"{key}.reproduced", f"{v.get('reproduced')} are not results.json's runs of "
                             f"{v['case']}: {want}"))
            continue
        try:
            original = [float(x) for x in v["original"]]
            made = compare_case(v["case"], original, want, float(tolerance), differs) if version == 1 else \
                judge_runs(v["case"], original, here.get(v["case"], []), float(tolerance),
                           differs.get(v["case"], []), failed, disturbed.get(v["case"], {}), version)
        except stats.StatsError as exc:
            problems.append((key, f"cannot be recomputed: {exc}"))
            continue
        again.append(made)
        problems += [(f"{key}.{name}", f"{v.get(name)!r}, but results.json's runs give {value!r}")
                     for name, value in made.to_dict().items() if not _same(v.get(name), value)]
        problems += [(f"{key}.{name}", "is no field of a verdict") for name in sorted(set(v) - set(made.to_dict()))]
    if not problems and record.get("counts") != counts(again):
        problems.append(("counts", f"{record.get('counts')!r}, but the verdicts count {counts(again)}"))
    return problems, again


def no_figure_of(case: str, failed_runs: list[str], disturbed: dict[str, str] | None = None) -> str:
    """Why a case's re-runs gave no figure, from reproduction.json's failed_runs lines ('<case> repeat N: ...'),
    but those of its DISTURBED repeats (set aside: the host was busy)."""
    lead = f"{case} repeat "
    return "; ".join(line[len(case) + 1:] for line in failed_runs
                     if line.startswith(lead) and line[len(lead):].split(":", 1)[0] not in (disturbed or {}))


def busy_of(disturbed: dict[str, str]) -> str:
    """'repeat 2: other processes used 48% of the CPU; ...' of a case's disturbed repeats ('' where none)."""
    ordered = sorted(disturbed.items(), key=lambda kv: (len(kv[0]), kv[0]))  # 2 before 10
    return "; ".join(f"repeat {repeat}: {why}" for repeat, why in ordered)


def _same(recorded, made) -> bool:
    if isinstance(made, float) and isinstance(recorded, int | float) and not isinstance(recorded, bool):
        return math.isclose(recorded, made, rel_tol=1e-12) or recorded == made
    return recorded == made
