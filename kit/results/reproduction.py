"""PURE: a bundle's figures against a re-run of its cases (`kit reproduce`): per case the ratio reproduction /
original with the kit's noise rule (kit.results.stats.ratio_check) and a verdict against a tolerance:

    reproduced       the ratio's interval lies within a factor 1 + tolerance either way: [1 / (1 + t), 1 + t]
    not reproduced   it lies wholly outside (faster or slower, by how much)
    not comparable   the two systems differ where it matters (GPU model or count, nodes, CPU model for a CPU run)
    inconclusive     the interval straddles the band's edge (noise): more repeats would resolve it

With one run on a side the noise rule cannot test the spread: the point ratio decides, and the verdict says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kit.core.layout import case_key
from kit.results import stats

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE, INCONCLUSIVE = ("reproduced", "not reproduced", "not comparable",
                                                            "inconclusive")
DEFAULT_TOLERANCE = 0.05
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

    def to_dict(self) -> dict:
        return asdict(self)


def figures_by_case(results: dict) -> dict[str, list[float]]:
    """results.json's run figures per case key (framework/model/bz<B>/<case>/<precision>)."""
    out: dict[str, list[float]] = {}
    for group in results.get("groups") or []:
        for case in group.get("cases") or []:
            key = case_key(group["framework"], group["model"], group["batch_per_device"], case["case"],
                           group["precision"])
            out[key] = [r["value"] for r in case.get("runs") or [] if isinstance(r.get("value"), int | float)]
    return out


def system_differences(original: dict, here: dict, cpu: bool) -> list[str]:
    """What differs between the bundle's system description and this one's (system.json fields)."""
    fields = SYSTEM_FIELDS + (CPU_FIELDS if cpu else ())
    return [f"{what}: {original.get(key) or 'none'!s} in the bundle, {here.get(key) or 'none'!s} here"
            for key, what in fields if str(original.get(key) or "") != str(here.get(key) or "")]


def repeats_to_resolve(check: stats.RatioCheck, tolerance: float, runs: int) -> int:
    """Runs a side that would narrow the interval enough to lie on one side of the band's nearer edge, if the
    spread stays as it is (an interval narrows as 1/sqrt(n))."""
    width = check.high - check.low
    room = min(abs(check.ratio - 1 / (1 + tolerance)), abs(check.ratio - (1 + tolerance)))
    if not math.isfinite(width) or room <= 0:
        return max(2 * runs, 3)
    return max(runs + 1, math.ceil(runs * (width / (2 * room)) ** 2))


def compare_case(case: str, original: list[float], reproduced: list[float], tolerance: float,
                 differs: list[str]) -> CaseVerdict:
    if not original or not reproduced:
        why = "; ".join(differs) if differs else f"no figure in {'the bundle' if not original else 'the reproduction'}"
        return CaseVerdict(case, original, reproduced, None, None, None, NOT_COMPARABLE, why)
    check = stats.ratio_check(original, reproduced)
    band = (1 / (1 + tolerance), 1 + tolerance)
    if differs:
        return CaseVerdict(case, original, reproduced, check.ratio, check.low, check.high, NOT_COMPARABLE,
                           "; ".join(differs))
    if check.verdict == stats.UNTESTED:
        inside = band[0] <= check.ratio <= band[1]
        return CaseVerdict(case, original, reproduced, check.ratio, None, None,
                           REPRODUCED if inside else NOT_REPRODUCED,
                           f"one run on a side: the ratio {check.ratio:.3f} alone decides, its spread unknown")
    if band[0] <= check.low and check.high <= band[1]:
        verdict, why = REPRODUCED, f"interval [{check.low:.3f}, {check.high:.3f}] within {band[0]:.2f}..{band[1]:.2f}"
    elif check.high < band[0] or check.low > band[1]:
        way = "slower" if check.high < band[0] else "faster"
        verdict, why = NOT_REPRODUCED, f"{way}: ratio {check.ratio:.3f}, interval [{check.low:.3f}, {check.high:.3f}]"
    else:
        runs = min(len(original), len(reproduced))
        verdict = INCONCLUSIVE
        why = (f"interval [{check.low:.3f}, {check.high:.3f}] straddles the band {band[0]:.2f}..{band[1]:.2f}; about "
               f"{repeats_to_resolve(check, tolerance, runs)} runs a side would resolve it")
    return CaseVerdict(case, original, reproduced, check.ratio, check.low, check.high, verdict, why)


def exit_code(verdicts: list[CaseVerdict]) -> int:
    """0 all reproduced, 1 any not reproduced, 3 inconclusive or not comparable only."""
    if any(v.verdict == NOT_REPRODUCED for v in verdicts):
        return 1
    return 0 if all(v.verdict == REPRODUCED for v in verdicts) else 3


def to_markdown(verdicts: list[CaseVerdict], bundle: str, tolerance: float) -> str:
    lines = [f"## Reproduction of {bundle}", "",
             f"Ratio = reproduction / bundle, medians of the runs; reproduced within a factor {1 + tolerance:g} either "
             "way (the noise rule's interval where both sides have 2+ runs).", "",
             "| case | bundle | reproduction | ratio | interval | verdict | why |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in verdicts:
        med = [f"{stats.median(x):.2f}" if x else "—" for x in (v.original, v.reproduced)]
        ratio = f"{v.ratio:.3f}" if v.ratio is not None else "—"
        interval = f"{v.low:.3f}..{v.high:.3f}" if v.low is not None and math.isfinite(v.high or math.inf) else "—"
        lines.append(f"| {v.case} | {med[0]} | {med[1]} | {ratio} | {interval} | {v.verdict} | {v.why} |")
    return "\n".join(lines) + "\n"
