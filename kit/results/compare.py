"""`kit compare RUN_A RUN_B`: per case, did run B get faster or slower than run A? (asv-style)

    kit compare runs/<A> runs/<B> [--factor 1.1] [--alpha 0.002] [--only-changed]
                [--out FILE] [--fail-on-slower]

RUN_A (the baseline) and RUN_B are run directories holding results.json (written by `kit
report`), or those files themselves. Cases match on framework, model, batch per device,
precision, nodes and GPUs per node. Per case: the A and B medians of the repeats, the
ratio B/A and one verdict:

    faster, slower          beyond the factor AND statistically significant AND conclusive
    inconclusive            beyond the factor and significant, but the runs spread too much to say so
    within factor           the ratio lies in [1/factor, factor]
    no significant change   beyond the factor, not significant (asv prints it as ~ratio)
    only in A, only in B    the case is in one run only
    failed in A, failed in B, failed in both   every log of the case failed to parse

"Significant" is airspeed velocity's rule (asv/_stats.py, formerly asv/statistics.py:
is_different, mann_whitney_u, quantile_ci, LaplacePosterior; asv/commands/compare.py:
_is_result_better):
  * one repeat on either side: no statistics, the factor alone decides;
  * if the two-sided Mann-Whitney U test can reach p < alpha with these repeat counts
    (smallest p = 2 / C(m+n, m), when the samples do not interleave): p < alpha; exact
    distribution up to 20 repeats a side, normal approximation beyond; ties broken the
    least significant way;
  * otherwise (3 vs 3 repeats: p >= 0.1 whatever the data): the 99% confidence intervals of
    the two medians must not overlap (order statistics; below 8 repeats asv's interval
    from a Laplace-noise posterior of the location).
alpha defaults to asv's p_threshold, 0.002.

"Conclusive" is the kit's one noise rule (kit.results.stats.ratio_check, the same as the
report's framework ratios use): each side's coefficient of variation <= 10% and the 95%
interval of the ratio of the medians excludes 1. A faster or slower case that fails it is
"inconclusive" (re-run with more repeats, on a quiet host); it never fails --fail-on-slower.
An unchanged case keeps its verdict, its reason naming a spread above 10%. Likewise a case
either side of which ran on a busy host (the report's rule, kit.results.noise, from the
host_load records in the run directory's run.json): never faster or slower, only
inconclusive, its reason saying which side was busy and how.

Rates (unit x/s) are better higher; a time (unit s) is better lower. Exit status: 0 compared;
1 with --fail-on-slower and a case slower; 2 bad input (missing or unreadable results.json,
other schema, units that differ).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kit.core.catalogue import quantity_unit
from kit.core.inputs import InputError
from kit.core.layout import GroupKey, RunLog, case_name, classify
from kit.core.rundir import RunRecord, has_run_meta, read_results, read_run, results_path
from kit.results import noise, stats

DEFAULT_FACTOR, DEFAULT_ALPHA = 1.1, 0.002  # asv compare --factor default; asv is_different p_threshold
FASTER, SLOWER, WITHIN, NOT_SIGNIFICANT = "faster", "slower", "within factor", "no significant change"
INCONCLUSIVE = "inconclusive"
BUSY_MARK = ": host busy during "  # in a row's reason: a side ran on a busy host (kit.results.noise.busy_runs)
ONLY_A, ONLY_B = "only in A", "only in B"
FAILED_A, FAILED_B, FAILED_BOTH = "failed in A", "failed in B", "failed in both"
UNCHANGED = (WITHIN, NOT_SIGNIFICANT)
MWU, CI, NO_TEST = "mann-whitney", "ci", "none"
Key = tuple  # (framework, model, batch_per_device, precision, nodes, gpus_per_node)


# ----- statistics (after asv's, written anew; no scipy) -----

@cache
def _orderings(m: int, n: int, u: int) -> int:
    """Orderings of m x's and n y's with exactly u pairs x > y (Mann & Whitney 1947)."""
    if u < 0:
        return 0
    if m == 0 or n == 0:
        return int(u == 0)
    return _orderings(m, n - 1, u) + _orderings(m - 1, n, u - n)


def mann_whitney_u(x, y) -> tuple[int, float]:
    """Two-sided Mann-Whitney U test: (U, p), U counting pairs x > y; ties count the least
    significant way; exact p up to 20 values a side, normal approximation beyond."""
    m, n = len(x), len(y)
    if not m or not n:
        raise stats.StatsError("Mann-Whitney U needs values on both sides")
    above = sum(a > b for a in x for b in y)
    ties = sum(a == b for a in x for b in y)
    u = min(max(above, m * n // 2), above + ties)  # the tie-breaking nearest the centre
    tail = min(u, m * n - u)
    if max(m, n) > 20:
        z = (tail - m * n / 2) / math.sqrt(m * n * (m + n + 1) / 12)
        p = math.erfc(-z / math.sqrt(2))
    else:
        p = 2 * sum(_orderings(m, n, k) for k in range(tail + 1)) / math.comb(m + n, m)
    return u, min(1.0, p)


def smallest_p(m: int, n: int) -> float:
    """The lowest two-sided exact Mann-Whitney p-value that m vs n values can give."""
    return 2 / math.comb(m + n, m)


def repeats_needed(alpha: float) -> int:
    """Fewest repeats per side (equal on both) with which the U test can reach p < alpha."""
    n = 2
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def median_ci99(values) -> tuple[float, float]:
    """asv's 99% confidence interval of the median (kit.results.stats.median_ci): order statistics where the
    binomial allows (8+ values), else widened to the Laplace posterior's 0.5% and 99.5% quantiles."""
    return stats.median_ci(values, 0.99)


def significance(a, b, alpha: float = DEFAULT_ALPHA) -> tuple[bool | None, str, float | None]:
    """(significant or None when untestable, the test used, its p-value if it has one)."""
    if len(a) < 2 or len(b) < 2:
        return None, NO_TEST, None
    if smallest_p(len(a), len(b)) < alpha:
        p = mann_whitney_u(a, b)[1]
        return p < alpha, MWU, p
    (lo_a, hi_a), (lo_b, hi_b) = median_ci99(a), median_ci99(b)
    return not (hi_a >= lo_b and lo_a <= hi_b), CI, None


# ----- results.json -----

@dataclass
class Results:
    path: Path
    cases: dict = field(default_factory=dict)  # Key -> (unit, values)
    failed: dict = field(default_factory=dict)  # Key -> count of logs that failed to parse
    host_load: dict = field(default_factory=dict)  # Key -> run.json's host_load entries of its runs
    energy: dict = field(default_factory=dict)  # Key -> its runs' J/image (results.json telemetry), where sampled

    @property
    def name(self) -> str:
        return self.path.parent.resolve().name


def load_results(path) -> Results:
    """A run directory's results.json (or the file itself); InputError naming the file."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such run directory or results.json")
    written = read_results(path)
    if path.is_dir():
        path = results_path(path)
    results = parse_results(written, path)
    if has_run_meta(path.parent):  # a run directory's: how loaded its host was
        results.host_load = host_loads(read_run(path.parent))
    return results


def _key_of(file: str) -> Key | None:
    log = classify(Path("/") / file, Path("/"))
    if not isinstance(log, RunLog):
        return None
    return (log.group.framework, log.group.model, log.group.batch, log.group.precision, log.nodes,
            log.gpus_per_node)


def host_loads(run: RunRecord) -> dict:
    """Key -> the host_load entries of run.json's runs of that case."""
    out: dict = {}
    for log, entry in run.runs.items():
        if entry.host_load is not None and (key := _key_of(log)):
            out.setdefault(key, []).append(entry.host_load)
    return out


def parse_results(data, path) -> Results:
    from kit.results.report import SCHEMA_VERSION

    path = Path(path)
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise InputError(path, f"schema_version {found!r}; this kit reads {SCHEMA_VERSION} (`kit report` results.json)")

    def get(obj, key, kind, where):
        value = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(path, f"{where}.{key}: missing or not {getattr(kind, '__name__', 'a number')}")
        return value

    out = Results(path)
    for gi, g in enumerate(get(data, "groups", list, "")):
        where = f"groups[{gi}]"
        group = [get(g, k, t, where) for k, t in
                 (("framework", str), ("model", str), ("batch_per_device", int), ("precision", str))]
        unit = quantity_unit(group[1], get(g, "unit", str, where))  # a results.json of layout 2 or 3 alike
        for ci, c in enumerate(get(g, "cases", list, where)):
            at = f"{where}.cases[{ci}]"
            key = (*group, get(c, "nodes", int, at), get(c, "gpus_per_node", int, at))
            runs = get(c, "runs", list, at)
            values = tuple(float(get(r, "value", (int, float), f"{at}.runs[{i}]")) for i, r in enumerate(runs))
            if not values or not all(math.isfinite(v) and v > 0 for v in values):
                raise InputError(path, f"{at}: runs need positive finite values, got {list(values)}")
            if key in out.cases:
                raise InputError(path, f"{at}: case {_label(key)} appears twice")
            out.cases[key] = (unit, values)
            joules = [j for r in runs if isinstance(r, dict) and isinstance(r.get("telemetry"), dict)
                      and isinstance(j := r["telemetry"].get("j_per_image"), (int, float)) and not isinstance(j, bool)
                      and math.isfinite(j) and j > 0]
            if joules:
                out.energy[key] = tuple(joules)
    for f in data.get("failures") or []:
        if isinstance(f, dict) and (key := _key_of(str(f.get("file", "")))):
            out.failed[key] = out.failed.get(key, 0) + 1
    return out


# ----- comparison -----

def _label(key: Key) -> str:
    return f"{GroupKey(*key[:4]).label()} · {case_name(*key[4:])}"


@dataclass(frozen=True)
class Row:
    key: Key
    unit: str
    a: tuple  # the repeats' values, () when absent
    b: tuple
    verdict: str
    reason: str
    test: str = ""
    p: float | None = None
    energy_a: tuple = ()  # the runs' J/image, where sampled
    energy_b: tuple = ()
    spread_doubt: bool = False  # inconclusive because the runs spread too much (not only a busy host)

    @property
    def label(self) -> str:
        return _label(self.key)

    @property
    def median_a(self) -> float | None:
        return stats.median(self.a) if self.a else None

    @property
    def median_b(self) -> float | None:
        return stats.median(self.b) if self.b else None

    @property
    def ratio(self) -> float | None:
        return self.median_b / self.median_a if self.a and self.b else None


def compare(results_a: Results, results_b: Results, factor: float = DEFAULT_FACTOR,
            alpha: float = DEFAULT_ALPHA) -> list[Row]:
    if not factor >= 1 or not 0 < alpha < 1:
        raise ValueError(f"need factor >= 1 and 0 < alpha < 1, got {factor}, {alpha}")
    A, B = results_a, results_b
    rows = []
    for key in sorted(set(A.cases) | set(B.cases) | set(A.failed) | set(B.failed)):
        (unit_a, a), (unit_b, b) = A.cases.get(key, ("", ())), B.cases.get(key, ("", ()))
        notes = [f"{A.failed[key]} log(s) failed in A"] if key in A.failed else []
        notes += [f"{B.failed[key]} log(s) failed in B"] if key in B.failed else []
        if a and b and unit_a != unit_b:
            raise InputError(B.path, f"{_label(key)}: unit {unit_b!r}, but {unit_a!r} in {A.path}; not comparable")
        if not a or not b:
            if not a and not b:  # known only from failures
                failed = (key in A.failed, key in B.failed)
                verdict = {(True, True): FAILED_BOTH, (True, False): FAILED_A, (False, True): FAILED_B}[failed]
            elif not a:
                verdict = FAILED_A if key in A.failed else ONLY_B
            else:
                verdict = FAILED_B if key in B.failed else ONLY_A
            absent = {ONLY_A: ["no such case in B"], ONLY_B: ["no such case in A"]}.get(verdict, [])
            rows.append(Row(key, unit_a or unit_b, a, b, verdict, "; ".join(absent + notes)))
            continue
        significant, test, p = significance(a, b, alpha)
        how = (f"Mann-Whitney p={p:.2g}" if test == MWU else "1 repeat: the factor alone decides"
               if test == NO_TEST else "99% CIs of the medians " + ("apart" if significant else "overlap"))
        ratio = stats.median(b) / stats.median(a)
        gain = ratio if unit_a.endswith("/s") else 1 / ratio  # > 1: B is faster
        if 1 / factor <= gain <= factor:
            verdict, how = WITHIN, f"within factor {factor:g}; {how}"
        elif significant is False:
            verdict, how = NOT_SIGNIFICANT, f"beyond factor {factor:g}, not significant: {how}"
        else:
            verdict = FASTER if gain > 1 else SLOWER
        spread = stats.ratio_check(a, b)
        busy = [f"{side}: {why}" for side, R in (("A", A), ("B", B))
                if (why := noise.busy_runs(R.host_load.get(key, [])))]
        doubt = verdict in (FASTER, SLOWER) and spread.conclusive is False
        if verdict in (FASTER, SLOWER) and (doubt or busy):
            why = "; ".join(([spread.why()] if doubt else []) + busy)
            verdict, how = INCONCLUSIVE, f"{verdict} beyond factor {factor:g}, but {why}; {how}"
        else:
            if verdict in UNCHANGED and spread.noisy:
                how += f"; spread: {', '.join(spread.spread())} ({stats.NOISE_ADVICE})"
            how = "; ".join([how, *busy])
        rows.append(Row(key, unit_a, a, b, verdict, "; ".join([how, *notes]), test, p, A.energy.get(key, ()),
                        B.energy.get(key, ()), doubt))
    return rows


def _cell(text: str) -> str:
    """Text from results.json made safe for one Markdown table cell or heading: '|' escaped, no line breaks."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029]+", " ", str(text)).replace("|", "\\|")


def _joules(values: tuple) -> str:
    """The median J/image of a case's sampled runs."""
    return _num(stats.median(values), ".4f") if values else "-"


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def to_markdown(rows: list[Row], a_name: str = "A", b_name: str = "B", factor: float = DEFAULT_FACTOR,
                alpha: float = DEFAULT_ALPHA, only_changed: bool = False, in_progress=()) -> str:
    """in_progress: a line per run still being written (a kit bench holds its lock), shown under the title."""
    a_name, b_name = _cell(a_name), _cell(b_name)
    lines = [
        f"# Throughput comparison: {a_name} → {b_name}", "",
        f"A (baseline) = {a_name}, B = {b_name}; ratio = B/A of the case medians. A case changed only when the "
        f"ratio is beyond the factor {factor:g} and the difference is significant (asv's rule): Mann-Whitney U "
        f"p < {alpha:g} where the repeat counts allow it, else non-overlapping 99% confidence intervals of the "
        f"medians; and only when the ratio is conclusive (the kit's noise rule: each side's CV <= "
        f"{stats.NOISE_MAX_CV:.0%} and the {stats.NOISE_LEVEL:.0%} interval of the ratio excludes 1) and neither "
        "side ran on a busy host (run.json's host load, the report's rule), else it is inconclusive.",
        "",
    ]
    lines += [line for w in in_progress for line in (f"**Run in progress**: {_cell(w)}.", "")]
    shown = [r for r in rows if not (only_changed and r.verdict in UNCHANGED)]
    energy = any(r.energy_a or r.energy_b for r in shown)  # sampled GPU runs: J/image beside the ratio
    if shown:
        head = "| case | unit | A | B | ratio |" + (" J/image A | J/image B |" if energy else "") + " verdict | why |"
        lines += [head, "|" + " --- |" * head.count(" |")]
        joules = {r: f" {_joules(r.energy_a)} | {_joules(r.energy_b)} |" if energy else "" for r in shown}
        lines += [f"| {_cell(r.label)} | {_cell(r.unit)} | {_num(r.median_a)} | {_num(r.median_b)} "
                  f"| {_num(r.ratio, '.3f')} |{joules[r]} {r.verdict} | {_cell(r.reason)} |" for r in shown]
    else:
        lines.append("No case changed.")
    for m, n in sorted({(len(r.a), len(r.b)) for r in rows if r.test == CI}):
        lines += ["", f"Note: {m} vs {n} repeats: the exact two-sided Mann-Whitney U test cannot go below "
                  f"p = {smallest_p(m, n):.3g}, so it can never reach p < {alpha:g}; as asv does, these cases fall "
                  "back to whether the 99% confidence intervals of the two medians overlap, a cruder test. The U "
                  f"test needs at least {repeats_needed(alpha)} repeats per case on each side."]
    if any(r.test == NO_TEST for r in rows):
        lines += ["", "Note: a single repeat on one side: no statistics, the factor alone decides (as asv does)."]
    inconclusive = sum(r.verdict == INCONCLUSIVE for r in rows)
    spread = sum(r.verdict == INCONCLUSIVE and r.spread_doubt for r in rows)  # a busy host alone: the note below
    if spread:
        lines += ["", f"Note: {spread} case(s) inconclusive: beyond the factor and significant by asv's test, "
                  "but the runs spread too much to say which is faster (see why). Re-run with "
                  f"{stats.NOISE_ADVICE} before quoting them."]
    busy = sum(BUSY_MARK in r.reason for r in rows)
    if busy:
        lines += ["", f"Note: {busy} case(s) ran on a busy host on one side or both ({noise.RULE}): never called "
                  f"faster or slower; {noise.ADVICE}."]
    count = {v: sum(r.verdict == v for r in rows) for v in (FASTER, SLOWER, WITHIN, NOT_SIGNIFICANT, ONLY_A, ONLY_B)}
    failed = sum(r.verdict in (FAILED_A, FAILED_B, FAILED_BOTH) for r in rows)
    hidden = len(rows) - len(shown)
    lines += ["", f"Summary: {count[FASTER]} faster, {count[SLOWER]} slower, {inconclusive} inconclusive, "
              f"{count[WITHIN] + count[NOT_SIGNIFICANT]} unchanged ({count[WITHIN]} within factor, "
              f"{count[NOT_SIGNIFICANT]} not significant), {count[ONLY_A]} only in A, {count[ONLY_B]} only in B, "
              f"{failed} failed" + (f"; {hidden} unchanged case(s) not shown." if hidden else ".")]
    return "\n".join(lines) + "\n"
