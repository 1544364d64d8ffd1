"""Secret values out of bundled text: replaced by <redacted>, each one reported as (line, key or detector).

Patterns: the kit's own secret-looking keys (kit.run.reference.SECRET_MARKERS) and private-key blocks, the
detectors of detect-secrets (Yelp; keyword assignments, URL credentials, AWS/GitHub/GitLab/Slack/... tokens,
JWTs: only their regular expressions, never their verification, which would call out), and the two forms it
lacks (Authorization headers, mysql -pPASSWORD). Each pattern is matched line by line, as detect-secrets does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from kit.run.reference import SECRET_MARKERS

REDACTED = "<redacted>"
PEM_BLOCK = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)
NOT_SECRETS = (IPPublicDetector, PrivateKeyDetector)  # addresses; key headers only (PEM_BLOCK takes the block)


@dataclass(frozen=True)
class Pattern:
    key: str | None  # what provenance.json names; None: the matched key itself (group 1)
    regex: re.Pattern
    group: int | None  # the value's group; None: see _values
    # groups of literals: every match contains one literal of each group (see _may_match); () = none known.
    # A text lacking every literal of a group cannot match, so the regex (most scan every position slowly) is not
    # run there.
    needles: tuple[tuple[str, ...], ...] = ()


# Word groups that some patterns must match (not optional, not repeated zero times), and the words one of which
# each alternative contains: detect-secrets' keyword list (api_?key ... key_?pass: 'key'; db_?pass,
# database_?pass, password, passwd; pwd, secret; contraseña only in a non-ASCII text), and its
# IBM/Cloudant/SoftLayer key names.
_MANDATORY = {
    "(api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key|private_?key|client_?key|db_?pass|"
    "database_?pass|key_?pass|password|passwd|pwd|secret|contraseña|contrasena)": (
        "key", "db_pass", "dbpass", "database_pass", "databasepass", "passw", "pwd", "secret", "contrasena",
        "contraseña"),
    "(?:key|pwd|password|pass|token)": ("key", "pwd", "pass", "token"),
    "(?:key|pwd|pw|password|pass|token)": ("key", "pw", "pass", "token"),
    "(?:secret[-_]?(?:access)?[-_]?key)": ("secret",),
    "(?:softlayer|sl)": ("softlayer", "sl"),
    "(?:cloudant|cl|clou)": ("cl",),
}


def _top_level(pattern: str, at: int) -> bool:
    """Whether pattern[at] lies outside every group (escapes and character classes skipped)."""
    depth, i, in_class = 0, 0, False
    while i < at:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":  # a ']' right after '[' is a member, not the end
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return depth == 0 and not in_class


# Detectors whose every match holds a literal, by their exact text (another version of a pattern gets none)
_LITERALS = {
    r'(?:\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\s|"|$)': ("AKC",),
    r'(?:\s|=|:|"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|"|$)': ("AP",),
    r"[0-9a-z]{32}-us[0-9]{1,2}": ("-us",),
    r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+": ("https://hooks.slack.com/",),
    r"(?:https?\:\/\/)[\w\-]+\:([0-9a-f]{64})\@[\w\-]+\.cloudant\.com": (".cloudant.com",),
    r"(?:https?\:\/\/)[\w\-]+\:([a-z]{24})\@[\w\-]+\.cloudant\.com": (".cloudant.com",),
}


def _needles(regex: re.Pattern) -> tuple[tuple[str, ...], ...]:
    """Groups of literals every match holds one of: _LITERALS, or the words of each mandatory top-level group of
    the pattern (see _MANDATORY), else ()."""
    if regex.pattern in _LITERALS:
        return (_LITERALS[regex.pattern],)
    if "|" in _top_alternation(regex.pattern):
        return ()
    found = []
    for group, words in _MANDATORY.items():
        at = regex.pattern.find(group)
        end = at + len(group)
        if at >= 0 and _top_level(regex.pattern, at) and regex.pattern[end:end + 1] not in ("?", "*", "{", "|") \
                and regex.pattern[at - 1:at] != "|":
            found.append(words)
    return tuple(found)


def _top_alternation(pattern: str) -> str:
    """'|' when the pattern has an alternative at top level (then no group of it is mandatory), else ''."""
    return "|" if any(c == "|" and _top_level(pattern, i) and (i == 0 or pattern[i - 1] != "\\")
                      for i, c in enumerate(pattern)) else ""


def _patterns() -> list[Pattern]:
    kit = [
        # a key whose name ENDS in one of the kit's secret markers, then its value
        Pattern(None, re.compile(r"(?i)\b([A-Z0-9_.-]*(?:" + "|".join(SECRET_MARKERS) + r")S?)\b"
                                 r"(\"?'?\s*[:=]\s*\"?'?)([^\"'\s,}]+)"), 3,
                (tuple(m.lower() for m in SECRET_MARKERS),)),
        Pattern("Authorization header", re.compile(
            r"(?i)\b(?:authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?|bearer\s+)"
            r"([^\s\"',;]+)"), 1, (("authorization", "bearer"),)),
        Pattern("mysql -p password", re.compile(r"(?i)\b(?:mysql|mariadb)\w*\s(?:.*?\s)?-p([^\s\"']+)"), 1,
                (("mysql", "mariadb"),)),
    ]
    keyword = [Pattern(KeywordDetector.secret_type, regex, group, _needles(regex))
               for regex, group in CONFIG_DENYLIST_REGEX_TO_GROUP.items()]
    detectors = [Pattern(cls.secret_type, regex, None, _needles(regex))
                 for _, cls in sorted(get_mapping_from_secret_type_to_class().items())
                 if issubclass(cls, RegexBasedDetector) and not issubclass(cls, NOT_SECRETS)
                 for regex in cls.denylist]
    return kit + keyword + detectors


def _may_match(p: Pattern, text: str, lowered: str | None) -> bool:
    """False only where the pattern cannot match: a text holding none of its needles (a case-insensitive pattern's
    looked for in the lowered text, and only where the text is ASCII)."""
    if not p.needles:
        return True
    if p.regex.flags & re.IGNORECASE:
        return lowered is None or all(any(n.lower() in lowered for n in group) for group in p.needles)
    return all(any(n in text for n in group) for group in p.needles)


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


def _spans(line: str, patterns: list[Pattern]) -> list[tuple[int, int, int, str]]:
    """(start, pattern order, end, key) of every secret value in one line."""
    return sorted((start, order, end, p.key or m.group(1))
                  for order, p in enumerate(patterns) for m in p.regex.finditer(line)
                  for start, end in _values(m, p.group) if line[start:end] != REDACTED)


def redact_text(text: str) -> tuple[str, list[tuple[int, str]]]:
    """(text with secret values replaced, [(line, key)]) — keys are kept so a reader sees what was removed."""
    found: list[tuple[int, str]] = []
    lowered = text.lower() if text.isascii() else None  # ASCII: case-insensitive matching is plain ASCII case
    # most files hold none: one pass each (skipped where the pattern's needles are absent), then done
    active = [p for p in PATTERNS if _may_match(p, text, lowered) and p.regex.search(text)]
    lines = text.split("\n")
    for number, line in enumerate(lines if active else [], 1):
        spans = _spans(line, active)
        if not spans:
            continue
        merged: list[list] = []
        for start, _, end, key in spans:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, key])
        for start, end, _ in reversed(merged):
            line = line[:start] + REDACTED + line[end:]
        lines[number - 1] = line
        found += [(number, key) for _, _, key in merged]

    def pem(m: re.Match) -> str:
        found.append((m.string.count("\n", 0, m.start()) + 1, "private key block"))
        return REDACTED

    return PEM_BLOCK.sub(pem, "\n".join(lines)), sorted(found)
