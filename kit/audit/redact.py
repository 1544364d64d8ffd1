"""Secret values out of bundled text: replaced by <redacted>, each one reported as (line, key or detector).

Patterns: the kit's own secret-looking keys (kit.core.secrets.SECRET_MARKERS) and private-key blocks, the
detectors of detect-secrets (Yelp; keyword assignments, URL credentials, AWS/GitHub/GitLab/Slack/... tokens,
JWTs: only their regular expressions, never their verification, which would call out), and the two forms it
lacks (Authorization headers, mysql -pPASSWORD). Each pattern is matched line by line, as detect-secrets does.

What the parsers read is never changed (issue 31): the kit's key pattern leaves MLPerf's structural "key" field,
counts ("tokens": 4096.5), lookup-field names (cache_key, sort_key) and vocabulary symbols (pad_token) alone
(_not_secret); tests/test_redaction.py parses every fixture log before and after redaction.

Speed (a run holds thousands of logs; most hold no secret): a pattern runs only on the lines holding its needles
(literals every match holds), after a cheaper gate (the part of the pattern from its first mandatory literal or
keyword group on) found something there; a case-insensitive pattern runs case-sensitively on the lowered text
where that finds everything it finds (needles, gates and that judgement: kit.audit.prefilter). Lines, needles and
gates only skip text that cannot match: what is redacted is what the patterns find line by line.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from kit.audit import prefilter
from kit.core.secrets import SECRET_MARKERS

REDACTED = "<redacted>"
PEM_BLOCK = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)
NOT_SECRETS = (IPPublicDetector, PrivateKeyDetector)  # addresses; key headers only (PEM_BLOCK takes the block)


@dataclass(frozen=True)
class Pattern:
    key: str | None  # what provenance.json names; None: the matched key itself (group 1)
    regex: re.Pattern
    group: int | None  # the value's group; None: see _values
    # groups of literals: every match contains one literal of each group (see _Text.candidates); () = none known.
    # A line lacking every literal of a group cannot match, so the regex (most scan every position slowly) is not
    # run there; a case-insensitive pattern's are looked for in the lowered text, and only where the text is ASCII.
    needles: tuple[tuple[str, ...], ...] = ()
    # a pattern every match of regex holds a match of (a top-level tail of it, see prefilter.gate), or None
    gate: re.Pattern | None = None
    # case-sensitive forms of regex and gate for lowered ASCII text (None: not known to find all, see
    # prefilter.lowered_ok)
    lowered: re.Pattern | None = None
    gate_lowered: re.Pattern | None = None


def _pattern(key: str | None, regex: re.Pattern, group: int | None, needles: tuple) -> Pattern:
    gate = prefilter.gate(regex)
    return Pattern(key, regex, group, needles, re.compile(gate, regex.flags) if gate else None,
                   prefilter.case_sensitive(regex.pattern, regex.flags),
                   prefilter.case_sensitive(gate, regex.flags) if gate else None)


def _patterns() -> list[Pattern]:
    markers = "|".join(m.lower() for m in SECRET_MARKERS)  # lower case: the pattern runs fast on lowered text
    kit = [
        # a key whose name ENDS in one of the kit's secret markers, then its value
        _pattern(None, re.compile(r"(?i)\b([a-z0-9_.-]*(?:" + markers + r")s?)\b"
                                  r"(\"?'?\s*[:=]\s*\"?'?)([^\"'\s,}]+)"), 3,
                 (tuple(m.lower() for m in SECRET_MARKERS),)),
        _pattern("Authorization header", re.compile(
            r"(?i)\b(?:authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?|bearer\s+)"
            r"([^\s\"',;]+)"), 1, (("authorization", "bearer"),)),
        _pattern("mysql -p password", re.compile(r"(?i)\b(?:mysql|mariadb)\w*\s(?:.*?\s)?-p([^\s\"']+)"), 1,
                 (("mysql", "mariadb"),)),
    ]
    keyword = [_pattern(KeywordDetector.secret_type, regex, group, prefilter.needles(regex))
               for regex, group in CONFIG_DENYLIST_REGEX_TO_GROUP.items()]
    detectors = [_pattern(cls.secret_type, regex, None, prefilter.needles(regex))
                 for _, cls in sorted(get_mapping_from_secret_type_to_class().items())
                 if issubclass(cls, RegexBasedDetector) and not issubclass(cls, NOT_SECRETS)
                 for regex in cls.denylist]
    return kit + keyword + detectors


PATTERNS = _patterns()


def _values(m: re.Match, group: int | None) -> list[tuple[int, int]]:
    """Where the secret lies in a match: its named group; else the groups when they close the match (a password
    before '@' or a quote), else the whole match (a group may be just a token's prefix, as GitHub's 'ghp')."""
    if group is not None:
        return [m.span(group)] if m.group(group) else []
    spans = [m.span(g) for g in range(1, m.re.groups + 1) if m.group(g)]
    if spans and spans[0][0] > m.start() and m.end() - max(end for _, end in spans) <= 2:
        return spans
    return [m.span()]


# What the kit's key pattern (a name ending in a secret marker, then its value) finds that is no secret. The
# parsers read these fields (the harness's "tokens", MLPerf's "key"), so redacting them would change a figure or
# make a bundle fail its own verification; the other detectors still look at the same values (a GitHub token
# under "key" or "cache_key" is redacted all the same).
_LOGGED_JSON = (":::MLLOG ", ":::KITLOG ")  # the lines whose "key" field the parsers read (m.string: one line)
_KIT_MARKERS = tuple(sorted((m.lower() for m in SECRET_MARKERS), key=len, reverse=True))
# a number as JSON, Python or a shell writes it (4096, 4096.5, -3, 1e-05, NaN, inf), maybe a list's first or last
_NUMBER = re.compile(r"[\[(]*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[\])]*"
                     r"|[-+]?(?:nan|inf|infinity)", re.IGNORECASE | re.ASCII)
# a name's last word before the marker that makes its number a count or a limit (max_tokens=5120, num_keys: 12)
_COUNTED = frozenset({"max", "min", "num", "n", "total", "avg", "mean", "count"})
# names of lookup fields, not of credentials: cache_key, sort_key(s), a model's missing_keys ...
_LOOKUP_KEYS = frozenset({
    "cache", "sort", "primary", "foreign", "partition", "group", "dict", "lookup", "index", "join", "unique",
    "shard", "row", "column", "metric", "monitor", "order", "map", "missing", "unexpected", "input", "output",
    "label", "target", "image", "feature", "layer", "param", "field", "attr"})
# a tokenizer's vocabulary symbols: 'pad_token': '<pad>', 'eos_token': '</s>' (PaddleNLP prints its whole config)
_VOCABULARY = frozenset({
    "bos", "eos", "pad", "unk", "cls", "sep", "mask", "special", "start", "end", "sos", "eot", "begin", "stop"})


def _not_secret(p: Pattern, m: re.Match) -> bool:
    """A field the kit's key pattern names that holds no secret:
    - MLPerf's structural field: a JSON (or dict) key named exactly "key" in a line the parsers read as JSON
      (':::MLLOG {... "key": "tracked_stats"'; kit.results.parsers.kitlog), not in any other JSON;
    - a count: a number under a plural name or a counted one ("tokens": 4096.5 in the harness's NLP epoch lines,
      fairseq's max_tokens=5120); a number under a singular credential name ("token": 123456, PASSWORD=1234) is
      still a secret;
    - a lookup field's name (cache_key, sort_key) or a vocabulary symbol (pad_token), whatever its value."""
    if p.key is not None:
        return False
    name, value = m.group(1).casefold(), m.group(3)  # casefold: the pattern ignores case the Unicode way
    before = m.string[m.start(1) - 1:m.start(1)]
    if name == "key" and before in ("\"", "'") and m.group(2).startswith(before) \
            and any(marker in m.string for marker in _LOGGED_JSON):
        return True
    plural = name.endswith("s") and name[:-1].endswith(_KIT_MARKERS)
    single = name[:-1] if plural else name
    marker = next((mk for mk in _KIT_MARKERS if single.endswith(mk)), None)
    if marker is None:  # a name only Unicode case folding makes a marker: judged a secret, as before
        return False
    qualifier = re.split(r"[_.-]", single[:-len(marker)].rstrip("_.-"))[-1]
    if (plural or qualifier in _COUNTED) and _NUMBER.fullmatch(value):
        return True
    return marker == "key" and qualifier in _LOOKUP_KEYS or marker == "token" and qualifier in _VOCABULARY


def _spans(line: str, patterns: list[tuple[int, Pattern]]) -> list[tuple[int, int, int, str]]:
    """(start, pattern order, end, key) of every secret value in one line."""
    return sorted((start, order, end, p.key or m.group(1))
                  for order, p in patterns for m in p.regex.finditer(line) if not _not_secret(p, m)
                  for start, end in _values(m, p.group) if line[start:end] != REDACTED)


def _looked_for(p: Pattern) -> tuple[bool, tuple[tuple[str, ...], ...]]:
    """(whether the needles are looked for in the lowered text, the needles as looked for)."""
    lowered = bool(p.regex.flags & re.IGNORECASE)
    return lowered, tuple(tuple(n.lower() if lowered else n for n in group) for group in p.needles)


LOOKED_FOR = [_looked_for(p) for p in PATTERNS]
# needles looked for in a whole text (the first group of each pattern; the others only in its lines)
_WHOLE = {n for _, groups in LOOKED_FOR for n in (groups[0] if groups else ())}
_PARTS: dict[str, tuple[str, ...]] = {}


def _parts(needle: str) -> tuple[str, ...]:
    """The other needles inside a needle ('pass' in 'password'): where one is absent, so is the needle."""
    if needle not in _PARTS:
        _PARTS[needle] = tuple(sorted((n for n in _WHOLE if n != needle and n in needle), key=len))
    return _PARTS[needle]


def redact_line(line: str, patterns: list[tuple[int, Pattern]]) -> tuple[str, list[str]]:
    """(the line with the secret values these (order, pattern) find replaced, the key of each)."""
    merged: list[list] = []
    for start, _, end, key in _spans(line, patterns):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, key])
    for start, end, _ in reversed(merged):
        line = line[:start] + REDACTED + line[end:]
    return line, [key for _, _, key in merged]


class _Text:
    """One text with its lowered form (ASCII only) and, per needle, whether it holds it and the lines that do."""

    def __init__(self, text: str):
        self.text = text
        self.lowered = text.lower() if text.isascii() else None  # ASCII: case-insensitive is plain ASCII case
        self._has: dict[tuple[str, bool], bool] = {}
        self._lines: dict[tuple[str, bool], list[tuple[int, int]]] = {}
        self._regions: dict[tuple, tuple[str, str | None]] = {}

    def has(self, needle: str, lowered: bool) -> bool:
        key = (needle, lowered)
        found = self._has.get(key)
        if found is None:
            if self.lowered is not None and (not needle.isascii() or not lowered and not self.has(needle.lower(),
                                                                                                 True)):
                found = False  # an ASCII text: no other character, and what its lowered form lacks
            else:
                found = all(self.has(part, lowered) for part in _parts(needle)) \
                    and needle in (self.lowered if lowered else self.text)
            self._has[key] = found
        return found

    def lines_with(self, needle: str, lowered: bool) -> list[tuple[int, int]]:
        """(start, end) of every line holding the needle."""
        key = (needle, lowered)
        if key not in self._lines:
            hay = self.lowered if lowered else self.text
            out, at = [], hay.find(needle)
            while at >= 0:
                end = hay.find("\n", at)
                end = len(hay) if end < 0 else end
                out.append((hay.rfind("\n", 0, at) + 1, end))
                at = hay.find(needle, end)
            self._lines[key] = out
        return self._lines[key]

    def candidates(self, order: int) -> list[tuple[int, int]] | None:
        """The lines pattern `order` can match in (holding a needle of each group); None: every line."""
        lowered, groups = LOOKED_FOR[order]
        if not groups or lowered and self.lowered is None:
            return None  # no needles, or case-insensitive ones in a non-ASCII text: not looked for
        held = [n for n in groups[0] if self.has(n, lowered)]
        if not held:
            return []
        spans = self.lines_with(held[0], lowered) if len(held) == 1 else \
            sorted({s for n in held for s in self.lines_with(n, lowered)})
        if len(groups) == 1:
            return spans
        hay = self.lowered if lowered else self.text
        return [(s, e) for s, e in spans if all(any(n in hay[s:e] for n in group) for group in groups[1:])]

    def region(self, spans: list[tuple[int, int]] | None) -> tuple[str, str | None]:
        """(text, lowered text) of those lines joined by newlines, or the whole text."""
        if spans is None:
            return self.text, self.lowered
        key = tuple(spans)
        if key not in self._regions:
            lowered = None if self.lowered is None else "\n".join(self.lowered[s:e] for s, e in spans)
            self._regions[key] = ("\n".join(self.text[s:e] for s, e in spans), lowered)
        return self._regions[key]


def _found_in(p: Pattern, text: str, lowered: str | None) -> bool:
    """Whether the pattern (its gate first) finds anything in the text: case-sensitively in the lowered text where
    that finds all it finds (an ASCII text)."""
    for plain, fast in ((p.gate, p.gate_lowered), (p.regex, p.lowered)):
        if plain is None:
            continue
        if not (fast.search(lowered) if fast is not None and lowered is not None else plain.search(text)):
            return False
    return True


def redact_text(text: str) -> tuple[str, list[tuple[int, str]]]:
    """(text with secret values replaced, [(line, key)]) — keys are kept so a reader sees what was removed."""
    found: list[tuple[int, str]] = []
    scan = _Text(text)
    # most texts hold none: each pattern looked for once, in the lines holding its needles, then done
    active = []
    for order, p in enumerate(PATTERNS):
        spans = scan.candidates(order)
        if spans == [] or not _found_in(p, *scan.region(spans)):
            continue
        active.append((order, p, spans))
    if active:
        lines = text.split("\n")
        starts = list(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
        todo: dict[int, list[tuple[int, Pattern]]] = {}
        for order, p, spans in active:
            numbers = range(len(lines)) if spans is None else (bisect.bisect_right(starts, s) - 1 for s, _ in spans)
            for number in numbers:
                todo.setdefault(number, []).append((order, p))
        for number in sorted(todo):
            lines[number], keys = redact_line(lines[number], todo[number])
            found += [(number + 1, key) for key in keys]
        text = "\n".join(lines)

    def pem(m: re.Match) -> str:
        found.append((m.string.count("\n", 0, m.start()) + 1, "private key block"))
        return REDACTED

    return PEM_BLOCK.sub(pem, text), sorted(found)
