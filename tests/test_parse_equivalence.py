"""What the log parsers read, pinned: every fixture log's records and detected format against a golden file.

The golden (tests/fixtures/parse-golden.json.gz) was written by the parsers as they were before the parse
speed-up of issue 21; any change in what is parsed (a record's value, unit, metric, kind, line, step, epoch,
timestamp or rank, the record count, the detected format, whether the log is unterminated, or an error's
message) fails here. Each case is one fixture log read in one way:
  auto           parse_log(path): detection, decoding and every record, stored in full;
  fmt:<name>     the text read with each format named explicitly (most refuse it: their error is pinned);
  twice          the text repeated (as bench/bench_parse.py builds its corpus);
  crlf           CRLF line endings; notrail: the final newline removed;
  tagged, ranks, some-tagged   mpirun '[1,r]<stdout>:' tags on every line (one rank, ranks in turn) or every other;
  cut@<offset>   the tail of the log cut inside its last throughput line, at every offset of that line
                 (the "log cut mid-line" rules), read as auto and as the log's format;
  tagged-cut@<offset>  the same on the log with '<date>[1,r]<stdout>:' tags (every 7th offset);
  two-fragments  its last throughput line split by another rank's fragment (scan_lines joins them);
  mut<i>         seeded mutations of a throughput line's number or text (NaN, negative, huge, garbage, cut).
Regenerate (only when a change in what is parsed is intended): .venv/bin/python tests/test_parse_equivalence.py
(KIT_GOLDEN_FROM=<another checkout> writes it with that checkout's parsers, e.g. the commit before a change).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if os.environ.get("KIT_GOLDEN_FROM"):  # writing the golden with another checkout's parsers (the ones before a change)
    sys.path.insert(0, os.environ["KIT_GOLDEN_FROM"])
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kit.results.parsers import FORMATS, ParseError, parse_log, parse_text  # noqa: E402
from kit.results.parsers.logtext import read_log_text  # noqa: E402

assert not os.environ.get("KIT_GOLDEN_FROM") or __name__ == "__main__", "KIT_GOLDEN_FROM is for writing the golden"

SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")  # as in conftest.py
PUBLISHED = SHARED / "fixtures" / "published-logs"
LOCAL = REPO / "tests" / "fixtures"
GOLDEN = LOCAL / "parse-golden.json.gz"
HOSTILE = ["nan", "-inf", "inf", "-1", "0", "-0.0", "1e309", "9" * 400, "", "x1", "1.2.3", "+5", ".5e3", "1e-3",
           "[1,0]<stdout>:", "\r", "\x00", "\ufffd"]


def fixture_logs() -> list[tuple[str, Path]]:
    """(name, path) of every fixture log: all of published-logs but its .yaml/.md, and the repository's own."""
    found = [(f"published/{p.relative_to(PUBLISHED).as_posix()}", p)
             for p in sorted(PUBLISHED.rglob("*")) if p.is_file() and p.suffix not in (".yaml", ".md")]
    found += [(f"local/{p.relative_to(LOCAL).as_posix()}", p) for p in sorted(LOCAL.rglob("*.log"))
              if p.is_file() and "golden-bundles" not in p.parts]  # the rule sets' bundles: test_rule_versions
    return found


def _digest(records) -> str:
    canon = json.dumps([list(r) for r in records], separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def _outcome(read, full: bool = False) -> dict:
    try:
        parsed = read()
    except ParseError as exc:
        return {"error": str(exc)}
    out = {"format": parsed.format.name, "n": len(parsed.records), "sha256": _digest(parsed.records),
           "unterminated": parsed.unterminated}
    if full:
        out["records"] = [list(r) for r in parsed.records]
    return out


def _cut_window(text: str, name: str, fmt: str) -> list[tuple[str, str]]:
    """The log's last few lines ending inside its last throughput line, cut at every offset of that line."""
    try:
        records = parse_text(text, name, fmt).records
    except ParseError:
        return []
    lines = text.split("\n")
    last = max(r.line for r in records)
    head = "\n".join(lines[max(0, last - 4) : last - 1]) + "\n"
    line = lines[last - 1]
    return [(f"cut@{i}", head + line[:i]) for i in range(0, len(line) + 1)]


def _mutations(text: str, name: str, fmt: str, count: int = 12) -> list[tuple[str, str]]:
    try:
        records = parse_text(text, name, fmt).records
    except ParseError:
        return []
    rng = random.Random(name)
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    out = []
    for i in range(count):
        lineno = records[rng.randrange(len(records))].line
        line = lines[lineno - 1]
        digits = [j for j, c in enumerate(line) if c.isdigit()]
        if not digits:
            continue
        at = digits[rng.randrange(len(digits))]
        end = at
        while end < len(line) and (line[end].isdigit() or line[end] == "."):
            end += 1
        begin = at
        while begin > 0 and (line[begin - 1].isdigit() or line[begin - 1] == "."):
            begin -= 1
        token = HOSTILE[rng.randrange(len(HOSTILE))]
        op = rng.randrange(3)
        if op == 0:  # replace the number
            new = line[:begin] + token + line[end:]
        elif op == 1:  # insert the token
            new = line[:at] + token + line[at:]
        else:  # cut the log here
            out.append((f"mut{i}", text[: offsets[lineno - 1] + at]))
            continue
        out.append((f"mut{i}", text[: offsets[lineno - 1]] + new + text[offsets[lineno - 1] + len(line) :]))
    return out


def observe(name: str, path: Path) -> dict:
    """Every reading of one fixture log (see the module's docstring)."""
    rel = Path(os.path.relpath(path))  # error messages name the file as given: relative, the same on every machine
    cases = {"auto": _outcome(lambda: parse_log(rel), full=True)}
    try:
        text = read_log_text(rel)
    except ParseError:
        return cases
    for fmt in sorted(FORMATS):
        cases[f"fmt:{fmt}"] = _outcome(lambda f=fmt: parse_text(text, name, f))
    variants = [("twice", text + ("" if text.endswith("\n") else "\n") + text),
                ("crlf", text.replace("\n", "\r\n")),
                ("notrail", text.rstrip("\n")),
                ("tagged", "".join("[1,0]<stdout>:" + ln for ln in text.splitlines(keepends=True)))]
    lines = text.splitlines(keepends=True)
    variants += [("ranks", "".join(f"[1,{i % 3}]<stdout>:{ln}" for i, ln in enumerate(lines))),
                 ("some-tagged", "".join(f"[1,{i % 2}]<stderr>:{ln}" if i % 2 else ln for i, ln in enumerate(lines)))]
    for label, variant in variants:
        cases[label] = _outcome(lambda v=variant: parse_text(v, name))
    fmt = cases["auto"].get("format")
    if fmt is not None:
        tagged = "".join(f"Mon May 31 14:03:44 2021[1,{i % 4}]<stdout>:{ln}" for i, ln in enumerate(lines))
        for label, variant in _cut_window(tagged, name, fmt)[::7]:  # a tagged log cut inside its last line
            cases["tagged-" + label] = _outcome(lambda v=variant, f=fmt: parse_text(v, name, f))
        last = max(r.line for r in parse_text(text, name, fmt).records)
        split = lines[last - 1]
        half = len(split) // 2
        lines2 = [*lines[: last - 1], f"[1,0]<stdout>:{split[:half]}[1,1]<stdout>:x[1,0]<stdout>:{split[half:]}",
                  *lines[last:]]
        cases["two-fragments"] = _outcome(lambda: parse_text("".join(lines2), name, fmt))
        for label, variant in _cut_window(text, name, fmt):
            cases[label] = _outcome(lambda v=variant: parse_text(v, name))
            cases[label + ":fmt"] = _outcome(lambda v=variant, f=fmt: parse_text(v, name, f))
        for label, variant in _mutations(text, name, fmt):
            cases[label] = _outcome(lambda v=variant: parse_text(v, name))
            cases[label + ":fmt"] = _outcome(lambda v=variant, f=fmt: parse_text(v, name, f))
    return cases


def _in(folder: Path):
    class _Cwd:
        def __enter__(self):
            self.old = os.getcwd()
            os.chdir(folder)

        def __exit__(self, *exc):
            os.chdir(self.old)

    return _Cwd()


def observe_all() -> dict:
    out = {}
    for name, path in fixture_logs():
        root = PUBLISHED if name.startswith("published/") else LOCAL
        with _in(root):
            out[name] = observe(name, path.relative_to(root))
    return out


def load_golden() -> dict:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return json.load(f)


GOLDEN_DATA = load_golden() if GOLDEN.is_file() else None


def test_the_golden_covers_every_fixture_log(published):
    assert GOLDEN_DATA is not None, f"{GOLDEN} missing: generate it with the parsers as they were"
    names = [name for name, _ in fixture_logs()]
    assert len(names) > 100 and sorted(GOLDEN_DATA) == sorted(names)
    auto = [GOLDEN_DATA[n]["auto"] for n in names]
    assert sum("format" in a for a in auto) > 100 and sum(a.get("n", 0) for a in auto) > 10_000


@pytest.mark.parametrize("name", [name for name, _ in fixture_logs()])
def test_every_reading_of_a_fixture_log_is_unchanged(published, name, monkeypatch):
    assert GOLDEN_DATA is not None
    path = dict(fixture_logs())[name]
    root = PUBLISHED if name.startswith("published/") else LOCAL
    monkeypatch.chdir(root)
    got = observe(name, path.relative_to(root))
    want = GOLDEN_DATA[name]
    assert sorted(got) == sorted(want)
    if got["auto"] != want["auto"]:  # show the first record that differs, not two huge lists
        g, w = got["auto"].get("records", []), want["auto"].get("records", [])
        first = next((i for i, (a, b) in enumerate(zip(g, w, strict=False)) if a != b), min(len(g), len(w)))
        assert got["auto"] | {"records": g[first : first + 2]} == want["auto"] | {"records": w[first : first + 2]}
    changed = {case: (got[case], want[case]) for case in want if got[case] != want[case]}
    assert not changed, f"{len(changed)} readings changed, e.g. {next(iter(changed.items()))}"


if __name__ == "__main__":  # KIT_GOLDEN_FROM=<a checkout>: the golden of that checkout's parsers
    data = observe_all()
    with gzip.open(GOLDEN, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(data, f, sort_keys=True, separators=(",", ":"))
    cases = sum(len(v) for v in data.values())
    print(f"wrote {GOLDEN}: {len(data)} logs, {cases} readings, {GOLDEN.stat().st_size / 1e3:.0f} kB")
