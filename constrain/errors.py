"""The exception hierarchy.

Every error this library raises on purpose derives from :class:`ConstrainError`,
so a caller can catch one class. Errors that are about bad arguments also derive
from :class:`ValueError`, as lark's ``ConfigurationError`` does, so code written
against the standard exception still works.
"""

from __future__ import annotations

__all__ = [
    "ConstrainError",
    "VocabularyError",
    "PatternError",
    "InvalidPatternError",
    "NonRegularPatternError",
    "EmptyLanguageError",
    "LimitExceededError",
    "TokenRejected",
    "GrammarError",
    "GBNFError",
    "SchemaError",
    "UnsupportedSchemaError",
    "RecursiveSchemaError",
    "BitmaskError",
    "InvalidStateError",
    "ConfigurationError",
]


class ConstrainError(Exception):
    """Root of every error raised by constrain."""


class VocabularyError(ConstrainError, ValueError):
    """A tokenizer could not be turned into an exact byte vocabulary (e.g. no EOS)."""


class PatternError(ConstrainError, ValueError):
    """Base class of everything wrong with a regular expression."""


class InvalidPatternError(PatternError):
    """The pattern is not valid regex syntax; ``position`` is the offending index."""

    def __init__(self, message: str, *, pattern: str, position: int | None = None) -> None:
        where = f" at position {position}" if position is not None else ""
        super().__init__(f"invalid regex{where}: {message} (pattern: {_excerpt(pattern, position)})")
        self.pattern = pattern
        self.position = position


class NonRegularPatternError(PatternError):
    """The pattern uses a feature with no finite automaton (lookaround, backreference, anchors inside)."""

    def __init__(self, feature: str, *, pattern: str) -> None:
        super().__init__(
            f"{feature} cannot be expressed by a finite automaton, so it cannot be enforced token by "
            f"token; rewrite the pattern without it (pattern: {_excerpt(pattern, None)})"
        )
        self.feature = feature
        self.pattern = pattern


class EmptyLanguageError(PatternError):
    """No string of the vocabulary's tokens can complete the pattern: generation would dead-end."""


class LimitExceededError(ConstrainError):
    """A limit of :class:`~constrain.Limits` (``limit`` names the field: states, time, memory) was reached.

    Most are reached while compiling; lazily built states and the parser stack's depth
    can also be reached while generating.
    """

    def __init__(self, limit: str, value: float, message: str) -> None:
        super().__init__(f"limit {limit}={value} exceeded: {message}")
        self.limit = limit
        self.value = value


class TokenRejected(ConstrainError, ValueError):
    """``advance`` was given a token that the guide does not allow in that state."""

    def __init__(self, token_id: int, state: object, detail: str = "") -> None:
        super().__init__(
            f"token {token_id} is not allowed in state {state!r}" + (f": {detail}" if detail else "")
        )
        self.token_id = token_id
        self.state = state


class GrammarError(ConstrainError, ValueError):
    """A grammar that cannot be compiled into a guide.

    ``rule`` and ``terminal`` name the grammar parts at fault (either may be
    ``None``), so tools can point at the offending line without parsing the message.
    """

    def __init__(self, message: str, *, rule: str | None = None, terminal: str | None = None) -> None:
        parts = []
        if rule is not None:
            parts.append(f"rule {rule!r}")
        if terminal is not None:
            parts.append(f"terminal {terminal!r}")
        where = f" ({', '.join(parts)})" if parts else ""
        super().__init__(f"{message}{where}")
        self.rule = rule
        self.terminal = terminal


class GBNFError(GrammarError):
    """A GBNF grammar that cannot be compiled; ``line`` is the 1-based line at fault (None: none)."""

    def __init__(self, message: str, *, rule: str | None = None, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message, rule=rule)
        self.line = line


class SchemaError(ConstrainError, ValueError):
    """The schema itself is malformed (not JSON, a dangling ``$ref``, a bad keyword value)."""


class UnsupportedSchemaError(SchemaError):
    """A keyword the regex cannot enforce; ``keyword`` and ``pointer`` say which and where."""

    def __init__(
        self, keyword: str, pointer: str, reason: str,
        remedy: str = "pass lenient=True to drop it (the guide then lists it in .dropped)",
    ) -> None:
        super().__init__(f"{keyword!r} at {pointer or '#'} cannot be enforced: {reason}; {remedy}")
        self.keyword = keyword
        self.pointer = pointer or "#"


class RecursiveSchemaError(UnsupportedSchemaError):
    """A ``$ref`` cycle: a regex can only unroll it to a fixed depth."""


class BitmaskError(ConstrainError, TypeError):
    """The buffer given to ``fill_bitmask`` has the wrong type, dtype or shape."""


class InvalidStateError(ConstrainError, TypeError):
    """A state or token id a guide cannot read: the wrong type, or a state another guide handed out."""


class ConfigurationError(ConstrainError, TypeError):
    """An argument of the wrong kind (a ``Compiler`` without a tokenizer, ``limits`` that are no ``Limits``)."""


def _excerpt(pattern: str, position: int | None, width: int = 60) -> str:
    """Show a long pattern around the position instead of printing megabytes."""
    if len(pattern) <= width:
        return repr(pattern)
    centre = position if position is not None else 0
    start = max(0, centre - width // 2)
    return f"…{pattern[start:start + width]!r}… ({len(pattern)} chars)"
