"""The named predicates the rules files refer to, registered by versioned identity (name@N) in PREDICATES. Pure.

Each predicate judges an Evidence (files read back, figures recomputed from the raw logs) and records on its
Finding how many things it checked and every violation, naming a file and, where one exists, a line.

A predicate's meaning is frozen per version: a change to what it checks registers name@N+1 (the same function,
the difference in its version's fixed arguments), and a rule set keeps naming the version it was written for.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from kit.audit.evidence import Evidence, finite
from kit.audit.rules.findings import MAX_MESSAGE, Finding
from kit.config.case_keys import NLP_MODELS
from kit.core.catalogue import contract, harness
from kit.core.layout import RunLog, classify
from kit.core.yamlio import LineDict
from kit.hosts.capture.model import of_vintage
from kit.hosts.consistency import consistency
from kit.results.parsers.kitlog import events as kit_events
from kit.results.parsers.records import NON_FINITE

Predicate = Callable[..., None]


@dataclass(frozen=True)
class Registered:
    fn: Predicate
    defaults: dict  # the arguments a rule may set, with their defaults
    fixed: dict  # this version's own arguments, which no rules file can set


PREDICATES: dict[str, Registered] = {}  # "name@N" -> its function and arguments


def predicate(versions: dict[int, dict] | None = None, **defaults):
    """Register a function as name@1, or as name@N for each N in VERSIONS ({N: that version's fixed arguments})."""
    def register(fn: Predicate) -> Predicate:
        for version, fixed in (versions or {1: {}}).items():
            PREDICATES[f"{fn.__name__}@{version}"] = Registered(fn, defaults, dict(fixed))
        return fn
    return register


@predicate()
def suite_recorded_at_start(ev: Evidence, out: Finding) -> None:
    """suite.yaml is the file whose sha256 run.json recorded when the run started (declared before the run)."""
    out.checked = 1
    recorded = ev.meta.get("suite_sha256")
    path = ev.root / "suite.yaml"
    if not path.is_file():
        out.fail("the suite file is missing", "suite.yaml")
    elif not recorded:
        out.fail("run.json records no suite_sha256", "run.json")
    elif hashlib.sha256(path.read_bytes()).hexdigest() != recorded:
        out.fail("suite.yaml is not the suite run.json recorded at the start of the run", "suite.yaml")


def _case_line(ev: Evidence, key: str) -> int | None:
    case = ev.cases.get(key)
    return case.line if case else None


@predicate(versions={1: {"failed_named": False}, 2: {"failed_named": True}}, minimum=1)
def repeats_at_least(ev: Evidence, out: Finding, minimum: int, failed_named: bool) -> None:
    """Every case that ran has at least max(declared repeats, minimum) runs yielding a figure; v2: or a declared
    repeat whose log is in the run, recorded in run.json as failed when it ran (its status and reason) or showing
    in its own lines that it trained on a non-finite loss, each named in the note."""
    ran: dict[str, set[int]] = {}
    for entry in ev.meta.get("runs", {}).values():
        ran.setdefault(entry.get("case", ""), set())
    for key, log, _figure in ev.runs():
        ran.setdefault(key, set()).add(log.run)
    named = _failed_repeats(ev) if failed_named else {}
    for key, runs in named.items():
        ran.setdefault(key, set()).update(runs)
    if named:
        said = [f"{key} repeat {run}: {why}" for key, runs in sorted(named.items())
                for run, why in sorted(runs.items())]
        out.note = (f"{len(said)} declared repeat(s) ran and gave no figure, each named (the case's figure is its "
                    "other repeats'): " + "; ".join(said[:3])
                    + (f"; and {len(said) - 3} more" if len(said) > 3 else ""))[:MAX_MESSAGE]
    for key, good in sorted(ran.items()):
        case = ev.cases.get(key)
        if case is None:
            out.fail(f"case {key} ran but the suite does not declare it", "suite.yaml")
            continue
        out.checked += 1
        want = max(case.repeats, minimum)
        if len(good) < want:
            out.fail(f"case {key}: {len(good)} run(s) with a figure, the suite declares {want} repeats",
                     "suite.yaml", case.line)
    undeclared_runs = [c for c in ev.cases if c not in ran]
    if undeclared_runs:
        out.note = "; ".join(filter(None, [out.note, f"{len(undeclared_runs)} declared case(s) not run here (other "
                                                      "hosts or runners)"]))


def _failed_repeats(ev: Evidence) -> dict[str, dict[int, str]]:
    """{case key: {repeat: why}} of the logs the recomputed report gives no figure for, each a declared repeat
    (1..repeats) that run.json records as failed, or whose own lines show it trained on a non-finite loss."""
    recorded = ev.meta.get("runs") if isinstance(ev.meta.get("runs"), dict) else {}
    out: dict[str, dict[int, str]] = {}
    for path, why in ev.report.failures if ev.report else []:
        entry = recorded.get(ev.rel(path))
        failed = isinstance(entry, dict) and entry.get("status") not in (None, "ok")
        if not failed and NON_FINITE not in why:
            continue
        log = classify(path, ev.root / "logs")
        case = ev.cases.get(log.group.case_key(log.case)) if isinstance(log, RunLog) else None
        if case is not None and 1 <= log.run <= case.repeats and entry is not None:
            said = f"run.json: {entry.get('status')}: {entry.get('reason', '')}" if failed else why
            out.setdefault(case.key, {})[log.run] = f"{ev.rel(path)}: {said}"[:200]
    return out


@predicate(versions={1: {"programs_too": False}, 2: {"programs_too": True}})
def repeats_exactly_declared(ev: Evidence, out: Finding, programs_too: bool) -> None:
    """A case's logs are its declared repeats and no others: numbered 1..repeats, each recorded in run.json, and no
    two harness logs (v2: and no two logs of a published program) byte-identical (a copy of the best run cannot
    enter the median)."""
    recorded = ev.meta.get("runs")
    by_digest: dict[str, str] = {}
    for key, log, _figure in ev.runs():
        case = ev.cases.get(key)
        if case is None:
            continue
        out.checked += 1
        rel = ev.rel(log.path)
        if not 1 <= log.run <= case.repeats:
            out.fail(f"{key}: run {log.run} is not one of the suite's {case.repeats} declared repeat(s)", rel)
        if isinstance(recorded, dict) and rel not in recorded:
            out.fail(f"{key} run {log.run}: run.json records no such run (a log added after the run)", rel)
        if case.impl != "harness" and not programs_too:  # v1: a program's log is judged by its command record
            continue
        digest = hashlib.sha256(log.path.read_bytes()).hexdigest()  # the harness's lines carry their times
        if digest in by_digest:
            out.fail(f"{key} run {log.run}: byte-identical to {by_digest[digest]} (one run counted twice)", rel)
        by_digest.setdefault(digest, rel)


@predicate(minimum=0)
def warmup_skipped_at_least(ev: Evidence, out: Finding, minimum: int) -> None:
    """Each harness run skipped at least max(declared warm-up steps, minimum) steps before its measured window (a
    published program's run is judged by its recipe's method: the program_* rules)."""
    for key, log, figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness":
            continue
        out.checked += 1
        want = max(case.warmup_steps, minimum)
        events = ev.events(log.path)
        warm = next((e for e in events if e.data.get("event") == "warmup_end"), None)
        skipped = (int(warm.data.get("steps", 0)) if warm else 0) + (figure.method.skip or 0)
        if skipped < want:
            out.fail(f"{key} run {log.run}: {skipped} warm-up step(s) skipped, the suite declares {want}",
                     ev.rel(log.path), warm.line if warm else figure.first_line)


@predicate(minimum=1)
def measured_steps_at_least(ev: Evidence, out: Finding, minimum: int) -> None:
    """Each harness run's figure averages at least max(declared measured steps, minimum) records (the suite's step
    counts shape harness cases only); an NLP model's (timed over whole epochs, seed 003) one record per declared
    epoch."""
    for key, log, figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness":
            continue
        out.checked += 1
        if case.model in NLP_MODELS:
            want, what = case.measure_epochs, "epoch"
        else:
            want, what = (max(case.measure_steps, minimum) if figure.kind != "summary" else 1), "step"
        if figure.used < want:
            out.fail(f"{key} run {log.run}: {figure.used} measured {what}(s), the suite declares {want}",
                     ev.rel(log.path), figure.first_line)


@predicate()
def every_rank_logged(ev: Evidence, out: Finding) -> None:
    """Every rank of every harness run left its own 'rank_stop' success line (main log, launcher or host logs)."""
    for key, log, _figure in ev.runs():
        events = ev.events(log.path)
        start = next((e.data for e in events if e.data.get("event") == "run_start"), None)
        if start is None:
            continue  # not a harness log: its publisher's program has no rank lines
        out.checked += 1
        ranks = start.get("ranks", 1)
        case = ev.cases.get(key)
        most = case.processes if case is not None else 1
        if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= most:
            shown = repr(ranks)[:40]
            out.fail(f"{key} run {log.run}: run_start says ranks {shown}; the case runs 1..{most} processes",
                     ev.rel(log.path))
            continue
        seen = {e.data.get("rank") for e in events if e.data.get("event") == "rank_stop"
                and e.data.get("status") == "success"}
        looked = [ev.rel(log.path)]
        for side in ev.side_files(log):
            looked.append(ev.rel(side))
            seen |= {e.data.get("rank") for e in kit_events(side) if e.data.get("event") == "rank_stop"
                     and e.data.get("status") == "success"}
        missing = sorted(set(range(ranks)) - seen)
        if missing:
            listed = ", ".join(map(str, missing[:16])) + (f" and {len(missing) - 16} more" if len(missing) > 16 else "")
            out.fail(f"{key} run {log.run}: no log of rank(s) {listed} of {ranks} "
                     f"(looked in {len(looked)} file(s))", ev.rel(log.path))


def case_keys(version: int) -> tuple[str, ...]:
    """The case keys version VERSION of verify's case check compares: those the contract (scripts/harness/
    contract.py) marks checked from that version or before (v1: before the loader was one, 61ae5b2; v2: the loader)."""
    return tuple(st.key for st in contract.SETTINGS if 0 < st.checked <= version)


def declared(case, st):
    """The value a case gives a contract key: its own, else (None) the model's default in the catalogue (seq_len,
    corpus_size), else None."""
    value = getattr(case, st.key)
    return getattr(harness.MODELS[case.model], st.key, None) or None if value is None else value


def _checked(case, keys: tuple[str, ...] | None = None) -> list:
    """The contract's settings verify compares for this case's model: those of KEYS (a predicate version's own),
    else every key the contract marks checked; a key given only when set, where the case has no value, is not."""
    model = harness.MODELS[case.model]
    return [st for st in contract.SETTINGS if (st.key in keys if keys is not None else st.checked)
            and st.applies(model) and (st.given != contract.SET or declared(case, st))]


def _declared_start(case, keys: tuple[str, ...] | None = None) -> dict:
    """What a harness log's run_start must say for the case it is filed under: the compared settings' fields
    (_checked), and its ranks."""
    return {st.start: declared(case, st) for st in _checked(case, keys)} | {"ranks": case.processes}


@predicate(versions={n: {"keys": case_keys(n)} for n in contract.CHECK_VERSIONS})
def harness_log_states_its_case(ev: Evidence, out: Finding, keys: tuple[str, ...]) -> None:
    """A harness log's run_start names the case it is filed under: framework, model, precision, per-process batch,
    ranks, image size, layout, mode and (ImageNet) loader (a log of another configuration cannot stand in for it);
    the same for the flags of its command in run.json. KEYS: the case keys compared, fixed per version."""
    for key, log, _figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness":
            continue
        out.checked += 1
        start = next((e for e in ev.events(log.path) if e.data.get("event") == "run_start"), None)
        if start is None:
            out.fail(f"{key} run {log.run}: no run_start line", ev.rel(log.path))
            continue
        said = dict(start.data)
        if "layout" not in said and isinstance(said.get("channels_last"), bool):  # logs before layout
            said["layout"] = "nhwc" if said["channels_last"] else "nchw"
        said.setdefault("mode", "eager")
        wrong = [f"{k} {said.get(k)!r} (the case: {v!r})" for k, v in _declared_start(case, keys).items()
                 if said.get(k) != v]
        if wrong:
            out.fail(f"{key} run {log.run}: run_start says " + "; ".join(wrong), ev.rel(log.path), start.line)
        entry = (ev.meta.get("runs") or {}).get(ev.rel(log.path))
        argv = entry.get("argv") if isinstance(entry, dict) else None
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            ran = _harness_flags(argv)
            wrong = [f"{flag} {ran.get(flag)!r} (the case: {v!r})"
                     for flag, v in _declared_flags(case, keys).items()
                     if ran.get(flag) != v]
            if wrong:
                out.fail(f"{key} run {log.run}: run.json's command ran " + "; ".join(wrong), "run.json")


def _harness_flags(argv: list[str]) -> dict[str, str]:
    """train.py's flags in a recorded command (alone or behind its launcher); the last of a flag given twice."""
    flags = {}
    for i, arg in enumerate(argv[:-1]):
        if arg.startswith("--") and not argv[i + 1].startswith("--"):
            flags[arg] = argv[i + 1]
    flags.setdefault("--layout", "nhwc" if "--channels-last" in argv else "nchw")
    model = harness.MODELS.get(flags.get("--model"))
    for st in contract.SETTINGS:  # a flag the kit leaves out has train.py's default (from v3: the model's too)
        if st.checked and st.given == contract.CHANGED:
            flags.setdefault(st.flag, str(st.default))
        elif st.checked >= 3 and st.flag not in flags:
            default = st.default if st.default is not None else getattr(model, st.key, None) or None
            if default is not None:
                flags[st.flag] = str(default)
    return flags


def _declared_flags(case, keys: tuple[str, ...] | None = None) -> dict[str, str]:
    """The flags a harness run's recorded command must carry for its case (the compared settings, _checked)."""
    return {st.flag: str(declared(case, st)) for st in _checked(case, keys)}


STEP_CLOCK_SLACK_S = 0.002  # time_ms is whole milliseconds
# the share of the wall clock between their lines the timed steps fill at least, per version of the rule: v1 0.7;
# v2 0.95, from every genuine log the kit holds (0.996-1.000: tests/fixtures/fuzz, the golden bundles' run and the
# recorded H100 run in ../shared/fixtures/gpu-runs, ResNet50/VGG16/ArcFace, fp32 and amp)
# @3 (rule set v9): measured on every genuine harness log the kit holds (20: the H200 visits' GPU runs, the CPU
# fixtures), the steps fill 0.9961-1.0000 of their clock; @2's 95% less 2 ms a step let a GPU run's every step be
# made 9% faster (45 ms steps: 4.4% of slack). From @3 the clock's rounding is counted once for the window: its
# span is the distance between two whole-millisecond stamps
STEP_CLOCK_SHARE = {1: 0.7, 2: 0.95, 3: 0.97}
RUN_WINDOW_SLACK_S = 120.0


def _epoch_seconds(text) -> float | None:
    try:
        return dt.datetime.fromisoformat(text).timestamp() if isinstance(text, str) else None
    except ValueError:
        return None


@predicate(versions={1: {"share": STEP_CLOCK_SHARE[1], "untimed_fail": False, "slack_once": False},
                     2: {"share": STEP_CLOCK_SHARE[2], "untimed_fail": True, "slack_once": False},
                     3: {"share": STEP_CLOCK_SHARE[3], "untimed_fail": True, "slack_once": True}})
def steps_agree_with_their_clock(ev: Evidence, out: Finding, share: float, untimed_fail: bool,
                                 slack_once: bool) -> None:
    """A harness run's measured steps are numbered one after another, no step lasts longer than the wall clock
    between its line and the line before it (time_ms, with 2 ms for its whole milliseconds), the steps fill at
    least SHARE of the wall clock of the window (halved seconds fill half), and every line's time lies inside the
    run's window in run.json (started .. finished, 2 min either side). UNTIMED_FAIL (v2): a step of the window
    without its time_ms fails (v1 left it out of the measure). SLACK_ONCE (v3): the fill's slack for whole
    milliseconds is that of the window's two ends, not 2 ms a step."""
    started = _epoch_seconds(ev.meta.get("started"))
    finished = _epoch_seconds(ev.meta.get("finished"))
    for key, log, figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness":
            continue
        out.checked += 1
        rel, first, last = ev.rel(log.path), figure.first_line or 0, figure.last_line or 0
        timed = [e for e in ev.events(log.path) if finite(e.data.get("time_ms"))]
        untimed = [e for e in ev.events(log.path) if e.data.get("event") == "step" and first <= e.line <= last
                   and not finite(e.data.get("time_ms"))] if untimed_fail else []
        if untimed:
            out.fail(f"{key} run {log.run}: step {untimed[0].data.get('step')} of the window has no time_ms (each "
                     f"step's own clock)", rel, untimed[0].line)
        for e in timed:
            t = e.data["time_ms"] / 1000
            if (started is not None and t < started - RUN_WINDOW_SLACK_S) or \
                    (finished is not None and t > finished + RUN_WINDOW_SLACK_S):
                out.fail(f"{key} run {log.run}: time_ms {e.data['time_ms']:.0f} lies outside the run's window in "
                         "run.json (started .. finished)", rel, e.line)
                break
        before = None
        steps, waits = [], []
        for e in timed:
            if e.data.get("event") == "step" and first <= e.line <= last and finite(e.data.get("seconds")):
                if before is None:
                    break  # no line before the window: nothing to measure it against
                steps.append(e)
                waits.append(e.data["time_ms"] / 1000 - before)
            before = e.data["time_ms"] / 1000
        for a, b in zip(steps, steps[1:], strict=False):
            number = a.data.get("step")
            if not isinstance(number, int) or isinstance(number, bool) or b.data.get("step") != number + 1:
                out.fail(f"{key} run {log.run}: step {b.data.get('step')} follows step {a.data.get('step')} (steps "
                         "are numbered one after another)", rel, b.line)
                break
        for e, wait in zip(steps, waits, strict=True):
            if e.data["seconds"] > wait + STEP_CLOCK_SLACK_S:
                out.fail(f"{key} run {log.run}: step {e.data.get('step')} says {e.data['seconds']:g} s, but only "
                         f"{wait:.3f} s passed since the line before it (time_ms)", rel, e.line)
                break
        span = sum(waits)
        slack = STEP_CLOCK_SLACK_S * (2 if slack_once else len(steps))
        if steps and sum(e.data["seconds"] for e in steps) < share * span - slack:
            total = sum(e.data["seconds"] for e in steps)
            out.fail(f"{key} run {log.run}: its {len(steps)} measured steps say {total:.3f} s in all, but "
                     f"{span:.3f} s passed on the clock (time_ms) between their lines: less than "
                     f"{share:.0%}", rel, steps[0].line)


@predicate()
def window_clean(ev: Evidence, out: Finding) -> None:
    """No NaN/infinite loss or throughput and no failed step inside the measured window."""
    for key, log, figure in ev.runs():
        out.checked += 1
        first, last = figure.first_line or 0, figure.last_line or 0
        for e in ev.events(log.path):
            if not first <= e.line <= last or e.data.get("event") != "step":
                continue
            bad = [k for k in ("loss", "seconds", "samples_per_sec") if k in e.data and not finite(e.data[k])]
            if bad or e.data.get("status") == "failed":
                out.fail(f"{key} run {log.run}: step {e.data.get('step')} has "
                         f"{'non-finite ' + ', '.join(bad) if bad else 'a failed status'} inside the window",
                         ev.rel(log.path), e.line)


@predicate()
def same_global_batch_across_frameworks(ev: Evidence, out: Finding) -> None:
    """Rows that put frameworks side by side compare the same global batch (as each log's run_start says)."""
    from kit.results.report import framework_rows

    if ev.report is None:
        return
    _names, rows = framework_rows(ev.report)
    for row_key, by_framework in rows:
        if len(by_framework) < 2:
            continue
        out.checked += 1
        batches: dict[str, set] = {}
        for framework, case in by_framework.items():
            for run in case.runs:
                start = next((e.data for e in ev.events(run.log.path) if e.data.get("event") == "run_start"),
                             None) or {}  # kit.results.parsers.kitlog.read_run_start, from the events read once
                batches.setdefault(framework, set()).add(start.get("global_batch", run.log.group.batch * case.gpus))
        if len({b for s in batches.values() for b in s}) > 1:
            detail = ", ".join(f"{fw} {sorted(b)}" for fw, b in sorted(batches.items()))
            first = next(iter(by_framework.values())).runs[0].log.path
            out.fail(f"row {row_key}: global batch differs between frameworks: {detail}", ev.rel(first))


def reparsed_captures(ev: Evidence) -> tuple[dict[str, tuple], list[tuple[str, str]]]:
    """{host: (its capture re-parsed from its raw probe outputs, that capture as a dict in its capture.json's
    vintage)} of the run's env/, and (message, file) of each capture whose raw outputs cannot be parsed, that has no
    capture.json, or whose capture.json differs from them."""
    reparsed, problems = {}, []
    for host, (parsed, stored, problem) in ev.captures.items():
        where = f"env/{host}/capture.json"
        if parsed is None:
            problems.append((f"host {host}: raw probe outputs cannot be parsed: {problem}", f"env/{host}/probes.json"))
            continue
        again = of_vintage(parsed.to_dict(), stored) if stored is not None else parsed.to_dict()
        if stored is None:
            problems.append((f"host {host}: no capture.json", where))
        elif stored != again:
            diff = sorted(k for k in set(stored) | set(again) if stored.get(k) != again.get(k))
            problems.append((f"host {host}: capture.json differs from its raw outputs in {', '.join(diff)}", where))
        reparsed[host] = (parsed, again)
    return reparsed, problems


@predicate(versions={1: {"gpu_settings": False}, 2: {"gpu_settings": True}})
def environment_consistent(ev: Evidence, out: Finding, gpu_settings: bool) -> None:
    """Each host's capture re-parsed from its raw probe outputs equals capture.json; hosts agree (check_env);
    from @2 the hosts' GPU settings that change a figure (power limit, application clocks, persistence, ECC) too."""
    out.checked += len(ev.captures)
    reparsed, problems = reparsed_captures(ev)
    for message, file in problems:
        out.fail(message, file)
    captures = [parsed for parsed, _again in reparsed.values()]
    if not captures:
        out.note = "no environment captures in this run"
        return
    verdict = consistency(captures, require_gpu=bool(ev.suite and ev.suite.hardware == "gpu"),
                          gpu_settings=gpu_settings)
    for problem in verdict.problems:
        out.fail(problem, "env/")


@predicate()
def same_image_everywhere(ev: Evidence, out: Finding) -> None:
    """Every host ran each image with the ID recorded for it (images.json)."""
    if ev.images is None:
        out.note = "no images.json: the run used no container image"
        return
    lines = ev.lines_of("images.json")
    for ref, entry in sorted((ev.images.get("images") or {}).items()):
        out.checked += 1
        want = entry.get("id")
        hosts = entry.get("hosts") or {}
        line = None
        if lines is not None and isinstance(lines.get("images"), LineDict):
            line = lines["images"].line_of(ref)
        odd = {h: i for h, i in hosts.items() if i != want}
        if odd:
            detail = ", ".join(f"{h} {str(i)[:19] if i else 'missing'}" for h, i in sorted(odd.items()))
            out.fail(f"{ref}: hosts ran another image than {str(want)[:19]}: {detail}", "images.json", line)


@predicate()
def references_hold(ev: Evidence, out: Finding) -> None:
    """Measured medians lie inside the (value, lower, upper, unit) references the suite declares."""
    if ev.report is None:
        return
    for group in ev.report.groups:
        for case in group.cases:
            declared = ev.cases.get(group.key.case_key(case.name))
            if declared is None or declared.reference is None:
                continue
            ref = declared.reference
            if not ref.bounded:
                continue  # shown beside the median only (seed 003's figures from another program)
            out.checked += 1
            if not ref.measures(group.unit):
                out.fail(f"{declared.key}: reference in {ref.unit}, measured in {group.unit}", "suite.yaml",
                         declared.line)
            elif not ref.holds(case.median):
                low, high = ref.bounds()
                out.fail(f"{declared.key}: median {case.median:.6g} outside [{low}, {high}] "
                         f"(reference {ref.value:g} {ref.unit})", "suite.yaml", declared.line)
