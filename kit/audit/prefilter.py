"""What lets a redaction pattern skip text it cannot match (kit.audit.redact): facts about a regular expression,
read from its text and re's own parse, never guessed.

    needles(regex)               groups of literals every match holds one of (a line lacking a group cannot match)
    gate(regex)                  a tail of the pattern every match holds a match of, cheaper to look for first
    case_sensitive(pattern, f)   the pattern compiled without IGNORECASE for lowered ASCII text, where that finds
                                 everything the pattern finds in the text itself (lowered_ok); else None

Each answers None or () where it does not know: then the pattern runs on the whole text, as it would without them.
"""

from __future__ import annotations

import re

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
    return depth == 0 and not in_class and i == at  # i > at: pattern[at] is the second character of an escape


# Detectors whose every match holds a literal, by their exact text (another version of a pattern gets none)
_LITERALS = {
    r'(?:\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\s|"|$)': ("AKC",),
    r'(?:\s|=|:|"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|"|$)': ("AP",),
    r"[0-9a-z]{32}-us[0-9]{1,2}": ("-us",),
    r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+": ("https://hooks.slack.com/",),
    r"(?:https?\:\/\/)[\w\-]+\:([0-9a-f]{64})\@[\w\-]+\.cloudant\.com": (".cloudant.com",),
    r"(?:https?\:\/\/)[\w\-]+\:([a-z]{24})\@[\w\-]+\.cloudant\.com": (".cloudant.com",),
    r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+": ("xox",),
    r"(?:r|s)k_live_[0-9a-zA-Z]{24}": ("k_live_",),
    r"(?:http|https)://api.softlayer.com/soap/(?:v3|v3.1)/([a-z0-9]{64})": ("/soap/",),
}


def needles(regex: re.Pattern) -> tuple[tuple[str, ...], ...]:
    """Groups of literals every match holds one of: _LITERALS, or the words of each mandatory top-level group of
    the pattern (see _MANDATORY), else ()."""
    if regex.pattern in _LITERALS:
        return (_LITERALS[regex.pattern],)
    if "|" in _top_alternation(regex.pattern):
        return ()
    return tuple(_MANDATORY[group] for _, group in _mandatory_groups(regex.pattern))


def _mandatory_groups(pattern: str) -> list[tuple[int, str]]:
    """(position, text) of each _MANDATORY group at top level of a pattern without top-level alternatives, not
    optional nor an alternative itself."""
    found = []
    for group in _MANDATORY:
        at = pattern.find(group)
        end = at + len(group)
        if at >= 0 and _top_level(pattern, at) and pattern[end:end + 1] not in ("?", "*", "{", "|") \
                and pattern[at - 1:at] != "|":
            found.append((at, group))
    return found


def _top_alternation(pattern: str) -> str:
    """'|' when the pattern has an alternative at top level (then no group of it is mandatory), else ''."""
    return "|" if any(c == "|" and _top_level(pattern, i) and (i == 0 or pattern[i - 1] != "\\")
                      for i, c in enumerate(pattern)) else ""


_SPECIAL = set(".^$*+?{}[]()|\\")
_LEADING_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
_QUANTIFIER = re.compile(r"[?*+]|\{(\d*)(?:,\d*)?\}")


def _item_end(pattern: str, i: int) -> int | None:
    """The end of the pattern's item starting at i (an escape, a class, a group or one character); None for an
    escape that may be longer than two characters (\\x41, \\u0041, \\N{...}, octal, group 10 and on), which is
    not cut into items here."""
    c = pattern[i]
    if c == "\\":
        after = pattern[i + 1:i + 2]
        return None if after in ("", "x", "u", "U", "N") or after.isdigit() else i + 2
    if c not in "[(":
        return i + 1
    j = i + 1
    while not _top_level(pattern, j):  # the first position outside the class or group again
        j += 1
        if j > len(pattern):
            return None
    return j


def _plain_alternatives(item: str) -> bool:
    """A literal, or a group of literal alternatives ('(ghp|gho)'): re finds those fast by itself."""
    inner = item[3:-1] if item.startswith("(?:") else item[1:-1] if item.startswith("(") else item
    return all(alt and not _SPECIAL & set(alt) for alt in inner.split("|"))


def gate(regex: re.Pattern) -> str | None:
    """A tail of the pattern, from its first mandatory literal or _MANDATORY group at top level on, that every match
    of the pattern holds (the pattern is a sequence: no top-level alternative), where the pattern's first item is
    slow to look for (neither a literal nor literal alternatives, which re finds fast); else None. None too for a
    verbose pattern (whose spaces mean nothing) and a tail that refers to a group (numbered from the start)."""
    pattern = regex.pattern
    if regex.flags & re.VERBOSE or "|" in _top_alternation(pattern):
        return None
    body = 0
    while m := _LEADING_FLAGS.match(pattern, body):  # global flags: regex.flags holds them
        body = m.end()
    i, first = body, True
    while i < len(pattern):
        end = _item_end(pattern, i)
        if end is None:
            return None
        item = pattern[i:end]
        quantifier = _QUANTIFIER.match(pattern, end)
        optional = bool(quantifier) and (quantifier.group(0) in ("?", "*") or quantifier.group(1) in ("", "0"))
        after = quantifier.end() if quantifier else end
        if after < len(pattern) and pattern[after] in "?+" and quantifier:  # lazy or possessive
            after += 1
        literal = item[0] not in _SPECIAL or (item[0] == "\\" and not item[1].isalnum())
        if first and (literal or _plain_alternatives(item)):
            return None
        if not first and not optional and (literal or item in _MANDATORY):
            tail = pattern[i:]
            return None if re.search(r"\\[1-9]|\(\?P=|\(\?\(", tail) else tail
        i, first = after, False
    return None


# ASCII letters that non-ASCII characters match case-insensitively (re's Unicode case folding; checked by a test)
FOLDS_TO_ASCII = frozenset("\u0130\u0131\u017f\u212a")


def lowered_ok(pattern: str, flags: int) -> bool:
    """Whether `pattern` compiled case-sensitively finds, in an ASCII text lowered, a match wherever it finds one
    with IGNORECASE in the text itself (and, inside a negative lookaround, only there): then the fast form may
    decide that a text is free of it. Judged on re's own parse; anything not known to hold answers False."""
    if not flags & re.IGNORECASE or flags & re.VERBOSE:
        return False
    try:
        from re import _constants as c
        from re import _parser

        tree = _parser.parse(pattern, flags)
    except Exception:  # another Python's private parser: judged not to hold
        return False

    classes = {c.CATEGORY_DIGIT: r"\d", c.CATEGORY_NOT_DIGIT: r"\D", c.CATEGORY_SPACE: r"\s",
               c.CATEGORY_NOT_SPACE: r"\S", c.CATEGORY_WORD: r"\w", c.CATEGORY_NOT_WORD: r"\W"}

    def member(items: list, ch: str) -> bool:  # whether a class (its items) holds a character, case-sensitively
        return any(op is c.LITERAL and chr(av) == ch or op is c.RANGE and av[0] <= ord(ch) <= av[1]
                   or op is c.CATEGORY and re.fullmatch(classes[av], ch, flags & re.UNICODE) is not None
                   for op, av in items)

    def closed(items: list) -> bool:  # a class holding any case of an ASCII letter holds its lower case
        items = [x for x in items if x[0] is not c.NEGATE]
        if any(op not in (c.LITERAL, c.RANGE, c.CATEGORY) or op is c.CATEGORY and av not in classes
               for op, av in items):
            return False
        for low in "abcdefghijklmnopqrstuvwxyz":
            cases = [low, low.upper(), *(f for f in FOLDS_TO_ASCII if re.fullmatch(f, low, re.IGNORECASE))]
            if any(member(items, x) for x in cases) and not member(items, low):
                return False
        return True

    def ok(seq, positive: bool) -> bool:
        for op, av in seq:
            if op is c.LITERAL:
                ch = chr(av)
                if positive and (ch.isascii() and ch.isupper() or ch in FOLDS_TO_ASCII):
                    return False
            elif op is c.NOT_LITERAL:
                ch = chr(av)
                if not positive and (ch.isascii() and ch.isupper() or ch in FOLDS_TO_ASCII):
                    return False
            elif op is c.IN:
                negated = bool(av) and av[0][0] is c.NEGATE
                if negated != positive and not closed(av):
                    return False
            elif op in (c.ANY, c.AT, c.CATEGORY, c.GROUPREF):
                continue
            elif op is c.SUBPATTERN:
                if av[1] or av[2] or not ok(av[3], positive):  # scoped flags: not judged
                    return False
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                if not ok(av[2], positive):
                    return False
            elif op is c.ATOMIC_GROUP:
                if not ok(av, positive):
                    return False
            elif op is c.BRANCH:
                if not all(ok(branch, positive) for branch in av[1]):
                    return False
            elif op in (c.ASSERT, c.ASSERT_NOT):
                if not ok(av[1], positive if op is c.ASSERT else not positive):
                    return False
            else:  # GROUPREF_EXISTS and anything newer
                return False
        return True

    return ok(tree, True)


def case_sensitive(pattern: str, flags: int) -> re.Pattern | None:
    """`pattern` compiled without IGNORECASE for lowered ASCII text, where lowered_ok holds; else None."""
    body = pattern
    while m := _LEADING_FLAGS.match(body):
        body = body[m.end():]
    return re.compile(body, flags & ~re.IGNORECASE) if lowered_ok(body, flags) else None
