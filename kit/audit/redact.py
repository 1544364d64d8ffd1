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


def _patterns() -> list[Pattern]:
    kit = [
        # a key whose name ENDS in one of the kit's secret markers, then its value
        Pattern(None, re.compile(r"(?i)\b([A-Z0-9_.-]*(?:" + "|".join(SECRET_MARKERS) + r")S?)\b"
                                 r"(\"?'?\s*[:=]\s*\"?'?)([^\"'\s,}]+)"), 3),
        Pattern("Authorization header", re.compile(
            r"(?i)\b(?:authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?|bearer\s+)"
            r"([^\s\"',;]+)"), 1),
        Pattern("mysql -p password", re.compile(r"(?i)\b(?:mysql|mariadb)\w*\s(?:.*?\s)?-p([^\s\"']+)"), 1),
    ]
    keyword = [Pattern(KeywordDetector.secret_type, regex, group)
               for regex, group in CONFIG_DENYLIST_REGEX_TO_GROUP.items()]
    detectors = [Pattern(cls.secret_type, regex, None)
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


def _spans(line: str, patterns: list[Pattern]) -> list[tuple[int, int, int, str]]:
    """(start, pattern order, end, key) of every secret value in one line."""
    return sorted((start, order, end, p.key or m.group(1))
                  for order, p in enumerate(patterns) for m in p.regex.finditer(line)
                  for start, end in _values(m, p.group) if line[start:end] != REDACTED)


def redact_text(text: str) -> tuple[str, list[tuple[int, str]]]:
    """(text with secret values replaced, [(line, key)]) — keys are kept so a reader sees what was removed."""
    found: list[tuple[int, str]] = []
    active = [p for p in PATTERNS if p.regex.search(text)]  # most files hold none: one pass each, then done
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
