"""What a rule finds: the Rule itself, the Finding it fills (how much it checked, what did not hold) and each Violation.
Plain data, imported by the engine and by every predicate module alike."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_MESSAGE = 500  # characters of one violation's message


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    file: str
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict:
        return {"rule": self.rule, "message": self.message, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class Rule:
    name: str
    predicate: str  # its versioned identity, name@N
    args: dict = field(default_factory=dict)
    description: str = ""
    source: str = ""  # file:line of its definition


@dataclass
class Finding:
    """One rule's outcome: how many things it looked at, and what did not hold."""

    rule: Rule
    checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    note: str = ""

    def fail(self, message: str, file: str, line: int | None = None) -> None:
        if len(message) > MAX_MESSAGE:  # a value from a hostile log is never echoed whole
            message = message[:MAX_MESSAGE] + f"... ({len(message) - MAX_MESSAGE} more characters)"
        self.violations.append(Violation(self.rule.name, message, file[:MAX_MESSAGE], line))
