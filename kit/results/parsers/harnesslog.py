"""The one reader of a harness log (scripts/harness/train.py): the text read once into its records, each with its
true line number (a line ends at '\\n' and nowhere else), and every byte, record or order the harness does not write
named by its line. The figure (kit.results.parsers.kitlog), the report, results, compare and every verify rule read a
harness log through here, so no two of them can see different records.

A log is a harness log when a line holds ':::KITLOG'. Its grammar, per model family (scripts/harness/train.py):
    images, timed by steps:  run_start [input_rate probe] [compile] [warmup_end] step x measure_steps
                             [input_rate, loader-only] run_stop rank_stop x 1..ranks
    nlp, timed by epochs:    run_start corpus [warmup_end] (step x batches_per_epoch, epoch) x measure_epochs
                             run_stop rank_stop x 1..ranks
the input probe iff it read real data and trained (the kit never turns the probe off), compile iff the mode is
compiled, warmup_end iff warm-up steps were asked. A failed run (a run_stop or rank_stop not
'success') yields no figure and is judged no further. Lines that are not records (the command, the framework's
warnings) feed nothing, and hold no character another reader ends a line at (\\r, \\v, \\f, \\x1c-\\x1e, \\x85,
U+2028/9) or NUL. A record is one ':::KITLOG {...}' of printable ASCII at its line's start (no mpirun fragment or
other prefix), ended by a newline, and carries kit 1 and its clock (time_ms, never before the record above it; the
ranks' rank_stop lines excepted). A step states its number in turn, the run's batch, seconds > 0, the rate its batch
over its seconds gives and a finite loss; an epoch its number, its steps and the sums of their sequences, tokens and
seconds; run_stop the count, seconds and rate of the steps it stopped; each record the run_start fields it repeats.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.catalogue import harness
from kit.core.filecache import once
from kit.core.inputs import open_regular, parse_json

KITLOG = ":::KITLOG "
MLLOG = ":::MLLOG "
LOG_VERSION = 1  # scripts/harness/train.py's LOG_VERSION
LINE_ENDS = re.compile("[\x00\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")  # ends a line in str.splitlines() or a terminal
NOT_PRINTABLE = re.compile("[^\x20-\x7e]")  # a record is json.dumps()'s ASCII: no control character, no other byte
STEP_FIELDS = ("framework", "model", "precision", "ranks", "layout", "mode")  # what a record repeats of run_start
RATE_TOLERANCE = 1e-3  # a rate against its count over its seconds (both rounded as written)
SECONDS_ROUNDING = 1e-6  # train.py rounds seconds to 6 decimals
MAX_PROBLEMS = 20


@dataclass
class LogEvent:
    line: int
    data: dict

    @property
    def event(self):
        return self.data.get("event")


@dataclass
class HarnessLog:
    events: list[LogEvent] = field(default_factory=list)  # every record that parsed, in order
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what the harness never writes there)
    failure: tuple[int, str] | None = None  # (line, why) of a run that failed: no figure

    @property
    def harness(self) -> bool:
        return bool(self.events or self.problems)

    def first(self, event: str) -> LogEvent | None:
        return next((e for e in self.events if e.event == event), None)

    def of(self, *kinds: str) -> list[LogEvent]:
        return [e for e in self.events if e.event in kinds]


def read(path: str | Path) -> HarnessLog:
    """The harness records of a file (none for a file that is not a harness log, a FIFO or one that cannot be read);
    read once per file within cached()."""
    return once("harness", path, lambda: _read(path))


def _read(path: str | Path) -> HarnessLog:
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace", newline="") as f:
            text = f.read()
    except OSError:
        return HarnessLog()
    return read_text(text)


def read_text(text: str) -> HarnessLog:
    log = HarnessLog()
    if ":::KITLOG" not in text:
        return log
    lines = text.split("\n")
    cut = lines.pop() if lines else ""  # the text after the last newline ('' when the log ends with one)
    for number, line in enumerate([*lines, cut] if cut else lines, 1):
        _read_line(log, number, line, cut=bool(cut) and number == len(lines) + 1)
    if log.failure is None:
        _judge(log)
    log.problems.sort(key=lambda p: p[0])
    return log


def _read_line(log: HarnessLog, number: int, line: str, cut: bool) -> None:
    at = line.find(":::KITLOG")
    if at < 0:
        if MLLOG.strip() in line:
            log.problems.append((number, "an MLLOG record in a harness log (the harness writes none)"))
        elif (bad := LINE_ENDS.search(line)) is not None:
            log.problems.append((number, f"a stray control character {bad.group()!r} (a line ends at a newline "
                                         "only; another reader would number the lines differently)"))
        return
    if at > 0 or not line.startswith(KITLOG):
        where = f"behind {line[:at][-40:]!r}" if at > 0 else "without its space"
        log.problems.append((number, f"a :::KITLOG record {where} (the harness writes each record at a line's start, "
                                     "never as an mpirun fragment or after other text)"))
        return
    if (bad := NOT_PRINTABLE.search(line)) is not None:
        log.problems.append((number, f"a :::KITLOG record holding {bad.group()!r} (the harness writes printable "
                                     "ASCII only)"))
        return
    try:
        data = parse_json(line[len(KITLOG):])
    except json.JSONDecodeError as exc:
        log.problems.append((number, f":::KITLOG line is not valid JSON ({exc.msg} at column {exc.colno})"))
        return
    except ValueError as exc:  # an integer of thousands of digits, nesting too deep, a key given twice
        log.problems.append((number, f":::KITLOG line is not valid JSON ({str(exc).split(';')[0]})"))
        return
    if not isinstance(data, dict):
        log.problems.append((number, f":::KITLOG line holds a {type(data).__name__}, not a JSON object"))
        return
    if cut:
        log.problems.append((number, "log cut mid-line: the last record has no newline"))
        return
    event = LogEvent(number, data)
    log.events.append(event)
    if log.failure is None and event.event in ("run_stop", "rank_stop") and data.get("status") != "success":
        who = "the harness" if event.event == "run_stop" else f"rank {data.get('rank')!r}"
        reason, message = data.get("reason", "unknown"), data.get("message", "")
        log.failure = (number, f"{who} reported a failed run ({reason}): {message}".rstrip(": "))


# --------------------------------------------------------------------------------------------------- the grammar
def _a(event) -> str:
    return f"{'an' if str(event)[:1] in 'aeiou' else 'a'} {event!r}"


def _int(value, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _positive(value) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    except OverflowError:
        return False


def _finite(value) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:
        return False


def _rate_differs(rate, count, seconds) -> bool:
    """Whether RATE is no rate COUNT over SECONDS gives, SECONDS being rounded to SECONDS_ROUNDING as written (a
    12 us loader-only step is 1.2e-05 s, its rate from the unrounded 1.22e-05 s: 4% apart), within RATE_TOLERANCE."""
    if not _positive(rate):
        return True
    half = SECONDS_ROUNDING / 2
    low = count / (seconds + half)
    high = count / (seconds - half) if seconds > half else math.inf
    slack = RATE_TOLERANCE * rate + 0.002
    return rate < low - slack or rate > high + slack


def _expected(start: dict, model, counts: dict) -> list[str]:
    """The records train.py writes after this run_start, in order (rank_stop lines aside)."""
    warm = ["warmup_end"] if _int(start.get("warmup_steps"), 1) else []
    if model.epochs:
        per_epoch = ["step"] * counts.get("batches_per_epoch", 0) + ["epoch"]
        return ["run_start", "corpus", *warm, *per_epoch * start["measure_epochs"], "run_stop"]
    probe = ["input_rate"] if counts.get("probe") else []
    compiled = ["compile"] if start.get("mode") == "compiled" else []
    after = ["input_rate"] if start.get("loader_only") is True else []
    return ["run_start", *probe, *compiled, *warm, *["step"] * start["measure_steps"], *after, "run_stop"]


def _judge(log: HarnessLog) -> None:
    out = log.problems
    events = log.events
    if not events:
        return
    start_event = events[0] if events[0].event == "run_start" else None
    if start_event is None:
        out.append((events[0].line, f"{_a(events[0].event)} record before run_start (the harness writes run_start "
                                    "first)"))
        return
    start = start_event.data
    model = harness.MODELS.get(start.get("model"))
    if model is None:
        out.append((start_event.line, f"run_start names model {start.get('model')!r}, none of the harness's"))
        return
    wrong = _start_problems(start, model)
    if wrong:
        out.append((start_event.line, "run_start says " + "; ".join(wrong)))
        return
    for e in events:
        if e.data.get("kit") != LOG_VERSION:
            out.append((e.line, f"a record of log version {e.data.get('kit')!r} (the harness writes {LOG_VERSION})"))
        if not _int(e.data.get("time_ms"), 1):
            out.append((e.line, f"{_a(e.event)} record without its clock (time_ms {e.data.get('time_ms')!r})"))
    body = [e for e in events if e.event != "rank_stop"]
    earlier = next((b for a, b in zip(body, body[1:], strict=False) if _int(a.data.get("time_ms"))
                    and _int(b.data.get("time_ms")) and b.data["time_ms"] < a.data["time_ms"]), None)
    if earlier is not None:
        out.append((earlier.line, f"{_a(earlier.event)} record earlier on the clock than the record before it"))
    corpus = next((e.data for e in body if e.event == "corpus"), {})
    counts = {"batches_per_epoch": corpus.get("batches_per_epoch") if _int(corpus.get("batches_per_epoch"), 1)
              else 0, "probe": start.get("loader", start.get("data")) != "synthetic" and start.get("loader_only") is not True}
    if not any(e.event == "run_stop" for e in body):
        out.append((body[-1].line, "the harness run started but never stopped (killed, hung or cut short)"))
        return
    expected = _expected(start, model, counts)
    for index, e in enumerate(body):
        want = expected[index] if index < len(expected) else None
        if e.event != want:
            where = f"where train.py writes {want!r}" if want else "after run_stop"
            out.append((e.line, f"{_a(e.event)} record {where} ({model.name}, timed by "
                                f"{'epochs' if model.epochs else 'steps'})"))
            return
    if len(body) < len(expected):
        out.append((body[-1].line, f"the log ends its records before {expected[len(body)]!r} (record "
                                   f"{len(body) + 1} of {len(expected)})"))
        return
    (_epoch_problems if model.epochs else _step_problems)(log, start, body)
    _stop_problems(log, start, body)


def _start_problems(start: dict, model) -> list[str]:
    wrong = []
    for key, least in (("global_batch", 1), ("ranks", 1), ("warmup_steps", 0)):
        if not _int(start.get(key), least):
            wrong.append(f"{key} {start.get(key)!r} (an integer >= {least})")
    counted = "measure_epochs" if model.epochs else "measure_steps"
    if not _int(start.get(counted), 1):
        wrong.append(f"{counted} {start.get(counted)!r} (an integer >= 1)")
    return wrong


def _same_as_start(e: LogEvent, start: dict) -> list[str]:
    return [f"{k} {repr(e.data[k])[:40]} (run_start: {repr(start[k])[:40]})" for k in STEP_FIELDS
            if k in e.data and k in start and e.data[k] != start[k]]


def _step_problems(log: HarnessLog, start: dict, body: list[LogEvent]) -> None:
    out = log.problems
    first = start["warmup_steps"] + 1
    for index, e in enumerate(x for x in body if x.event == "step"):
        d = e.data
        wrong = []
        if d.get("step") != first + index:
            wrong.append(f"step {d.get('step')!r} where step {first + index} is due")
        if "timing" in d:
            wrong.append(f"timing {d['timing']!r} (a model timed by steps)")
        if d.get("global_batch") != start["global_batch"]:
            wrong.append(f"global_batch {d.get('global_batch')!r} (run_start: {start['global_batch']})")
        wrong += _timed(d, d.get("global_batch"), "samples_per_sec")
        if ("loss" in d or start.get("loader_only") is not True) and not _finite(d.get("loss")):
            wrong.append(f"loss {d.get('loss')!r} (a finite number)")
        wrong += _same_as_start(e, start)
        if wrong:
            out.append((e.line, "a step that says " + "; ".join(wrong)))
    warm = next((e for e in body if e.event == "warmup_end"), None)
    if warm is not None and warm.data.get("steps") != start["warmup_steps"]:
        out.append((warm.line, f"warmup_end after {warm.data.get('steps')!r} steps (run_start: "
                               f"{start['warmup_steps']})"))


def _timed(d: dict, count, rate_key: str) -> list[str]:
    if not _positive(d.get("seconds")):
        return [f"seconds {d.get('seconds')!r} (> 0)"]
    if _int(count, 1) and _rate_differs(d.get(rate_key), count, d["seconds"]):
        return [f"{rate_key} {d.get(rate_key)!r} where {count} over {d['seconds']!r} s is "
                f"{count / d['seconds']:.3f}"]
    return []


def _epoch_problems(log: HarnessLog, start: dict, body: list[LogEvent]) -> None:
    out = log.problems
    unit = harness.UNIT.get(start["model"], "images/s")
    counted = "tokens" if unit == "tokens/s" else "sequences"
    step_number = start["warmup_steps"]
    epoch, steps = 1, []
    for e in body:
        d = e.data
        if e.event == "step":
            step_number += 1
            wrong = []
            if d.get("step") != step_number:
                wrong.append(f"step {d.get('step')!r} where step {step_number} is due")
            if d.get("timing") != "epochs" or d.get("epoch") != epoch:
                wrong.append(f"timing {d.get('timing')!r}, epoch {d.get('epoch')!r} (epochs, {epoch})")
            if not _int(d.get("global_batch"), 1) or not _int(d.get("tokens"), 0):
                wrong.append(f"global_batch {d.get('global_batch')!r}, tokens {d.get('tokens')!r} (integers)")
            wrong += _timed(d, d.get("global_batch"), "samples_per_sec")
            if not _finite(d.get("loss")):
                wrong.append(f"loss {d.get('loss')!r} (a finite number)")
            wrong += _same_as_start(e, start)
            if wrong:
                out.append((e.line, "a step that says " + "; ".join(wrong)))
            steps.append(d)
        elif e.event == "epoch":
            sums = {"steps": len(steps), "sequences": sum(s.get("global_batch") or 0 for s in steps
                                                          if _int(s.get("global_batch"))),
                    "tokens": sum(s.get("tokens") or 0 for s in steps if _int(s.get("tokens")))}
            wrong = [f"{k} {d.get(k)!r} where its steps give {v}" for k, v in sums.items() if d.get(k) != v]
            if d.get("epoch") != epoch:
                wrong.append(f"epoch {d.get('epoch')!r} where epoch {epoch} is due")
            if d.get("unit") != unit:
                wrong.append(f"unit {d.get('unit')!r} ({start['model']}: {unit})")
            seconds = sum(s["seconds"] for s in steps if _positive(s.get("seconds")))
            if not _positive(d.get("seconds")) or abs(d["seconds"] - seconds) > SECONDS_ROUNDING * (len(steps) + 1):
                wrong.append(f"seconds {d.get('seconds')!r} where its steps give {seconds:.6f}")
            else:
                wrong += _timed(d, d.get(counted), "throughput")
            wrong += _same_as_start(e, start)
            if wrong:
                out.append((e.line, "an epoch that says " + "; ".join(wrong)))
            epoch, steps = epoch + 1, []


def _stop_problems(log: HarnessLog, start: dict, body: list[LogEvent]) -> None:
    out = log.problems
    stop = body[-1]
    d = stop.data
    steps = [e.data for e in body if e.event == "step"]
    wrong = []
    if d.get("steps") != len(steps):
        wrong.append(f"steps {d.get('steps')!r} where the log holds {len(steps)}")
    seconds = sum(s["seconds"] for s in steps if _positive(s.get("seconds")))
    if start.get("loader_only") is not True and (not _positive(d.get("seconds")) or abs(
            d["seconds"] - seconds) > SECONDS_ROUNDING * (len(steps) + 1)):
        wrong.append(f"seconds {d.get('seconds')!r} where its steps give {seconds:.6f}")
    elif not wrong and "epochs" not in d and start.get("loader_only") is not True:
        wrong += _timed(d, start["global_batch"] * len(steps), "samples_per_sec")
    wrong += _same_as_start(stop, start)
    if wrong:
        out.append((stop.line, "run_stop says " + "; ".join(wrong)))
    ranks: set = set()
    for e in log.events:
        if e.event != "rank_stop":
            continue
        rank = e.data.get("rank")
        if not _int(rank) or rank >= start["ranks"] or rank in ranks or e.data.get("ranks") != start["ranks"]:
            out.append((e.line, f"a rank_stop of rank {rank!r} of {e.data.get('ranks')!r} (run_start: ranks "
                                f"{start['ranks']}, one line each)"))
        elif e.line < stop.line:
            out.append((e.line, f"rank {rank}'s rank_stop before run_stop (every rank stops after the last step)"))
        elif e.data.get("steps") != d.get("steps"):
            out.append((e.line, f"rank {rank}'s rank_stop after {e.data.get('steps')!r} steps (run_stop: "
                                f"{d.get('steps')!r})"))
        ranks.add(rank)
