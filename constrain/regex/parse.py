"""Pattern text → a small regex syntax tree over code point sets.

interegular does the parsing (it knows Python's regex syntax well); this module
validates its output, applies flags (case folding, ``.`` and newlines), turns its
character groups into code point ranges and rejects what no finite automaton
can enforce, with messages that say what to change. The result is a tree of
``tree.py`` nodes, the same nodes the JSON Schema walker builds directly.
"""

from __future__ import annotations

import re
from functools import lru_cache

import interegular
from interegular import patterns as ip

from ..errors import InvalidPatternError, NonRegularPatternError, PatternError
from .tree import Alt, CharSet, Concat, Literals, Node, Repeat
from .utf8 import codepoint_ranges

__all__ = ["parse_regex", "literal_choice"]


_UNICODE_ESCAPE = re.compile(r"\\\\|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_NOT_REGULAR = {
    "Group references are not implemented": "a backreference",
    "Conditional matching is not implemented": "a conditional group",
    "'^'": "the anchor '^' inside the pattern (patterns always match whole)",
    "'$'": "the anchor '$' inside the pattern (patterns always match whole)",
}


def parse_regex(pattern: str) -> Node:
    """Parse a pattern that must match the *whole* generated text (like ``re.fullmatch``)."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a str, not {type(pattern).__name__}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InvalidPatternError(exc.msg, pattern=pattern, position=exc.pos) from None
    _refuse_misread_syntax(pattern)
    body = _strip_anchors(_expand_unicode_escapes(pattern))
    try:
        parsed = interegular.parse_pattern(body)
    except ip.Unsupported as exc:
        message = str(exc)
        feature = _NOT_REGULAR.get(message)
        if feature:
            raise NonRegularPatternError(feature, pattern=pattern) from None
        raise PatternError(f"unsupported regex feature: {message} (pattern: {pattern[:80]!r})") from None
    except (ip.InvalidSyntax, Exception) as exc:  # interegular's parser signals some errors with bare exceptions
        raise InvalidPatternError(str(exc) or type(exc).__name__, pattern=pattern) from None
    return _convert(parsed, ip.REFlags(0), pattern)


def literal_choice(options: list[str] | tuple[str, ...]) -> Node:
    """The language of exactly these strings, matched literally (no regex syntax)."""
    if not options:
        raise PatternError("choice() needs at least one option")
    for option in options:
        if not isinstance(option, str):
            raise PatternError(f"choice() options must be str, got {type(option).__name__}")
    return Literals(tuple(dict.fromkeys(o.encode("utf-8") for o in options)))


def _refuse_misread_syntax(pattern: str) -> None:
    """Refuse what the parser would read as something else (a weaker or different language).

    Possessive quantifiers (``a*+``, ``\\d{4}+``) would become a repeat followed by ``+``;
    a ``]`` first in a class (``[]a]``, ``[^]a]``) and braces that are no quantifier
    (``a{}``, ``a{,``) are read differently than Python's ``re`` reads them.
    """
    i, after_quantifier = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i, after_quantifier = i + 2, False
            continue
        if char == "[":
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[j : j + 1] == "]":
                raise PatternError(f"a ']' first in a character class is not supported; escape it as '\\]' "
                                   f"(pattern: {pattern[:80]!r}, position {j})")  # fmt: skip
            j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i, after_quantifier = j + 1, False
            continue
        if char in "*+?}" and after_quantifier and not (char == "?" and pattern[i - 1] != "?"):
            if char == "+":
                raise PatternError(f"possessive quantifiers ('*+', '++', '?+', '{{m,n}}+') are not supported "
                                   f"(pattern: {pattern[:80]!r}, position {i})")  # fmt: skip
        if char == "{":
            close = pattern.find("}", i)
            inside = pattern[i + 1 : close] if close > 0 else None
            if inside is not None and not re.fullmatch(r"\d+(,\d*)?", inside):
                raise PatternError(f"braces that are no quantifier ('{{{inside}}}') are not supported; escape "
                                   f"them as '\\{{' (pattern: {pattern[:80]!r}, position {i})")  # fmt: skip
            if inside is not None:
                i, after_quantifier = close + 1, True
                continue
        after_quantifier = char in "*+?"
        i += 1


def _expand_unicode_escapes(pattern: str) -> str:
    r"""Turn ``\uXXXX`` / ``\UXXXXXXXX`` (valid in Python's ``re``) into characters interegular parses."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1) or match.group(2)
        if code is None:
            return match.group(0)  # an escaped backslash stays as it is
        char = chr(int(code, 16))
        return f"\\x{ord(char):02x}" if ord(char) < 0x80 else char

    return _UNICODE_ESCAPE.sub(replace, pattern)


def _strip_anchors(pattern: str) -> str:
    """A leading ``^`` and trailing ``$`` are redundant: the whole text always has to match."""
    if pattern.startswith("^"):
        pattern = pattern[1:]
    if pattern.endswith("$"):
        body = pattern[:-1]
        if (len(body) - len(body.rstrip("\\"))) % 2 == 0:  # an escaped '\$' is a literal dollar
            pattern = body
    return pattern


def _convert(node: object, flags: ip.REFlags, pattern: str) -> Node:
    if isinstance(node, ip.Pattern):
        flags = ip._combine_flags(flags, node.added_flags, node.removed_flags)
        options = tuple(_convert(o, flags, pattern) for o in node.options)
        return options[0] if len(options) == 1 else Alt(options)
    if isinstance(node, ip._Concatenation):
        parts = []
        for part in node.parts:
            if isinstance(part, ip._NonCapturing):
                kind = "a lookbehind" if part.backwards else "a lookahead"
                raise NonRegularPatternError(kind, pattern=pattern)
            parts.append(_convert(part, flags, pattern))
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))
    if isinstance(node, ip._Repeated):
        return Repeat(_convert(node.base, flags, pattern), node.min, node.max)
    if isinstance(node, ip._CharGroup):
        return _charset(node.chars, node.negated, bool(flags & ip.REFlags.CASE_INSENSITIVE))
    if node is ip._DOT:
        # '.' is any character but '\n' unless the DOTALL flag (?s) is set, as in Python's re.
        return _charset(frozenset() if flags & ip.REFlags.SINGLE_LINE else frozenset("\n"), True, False)
    if node is ip._EMPTY:
        return Concat(())
    raise PatternError(f"unexpected regex construct {type(node).__name__} in {pattern[:80]!r}")


@lru_cache(maxsize=4096)
def _charset(chars: frozenset[str], negated: bool, ignore_case: bool) -> CharSet:
    if ignore_case:
        chars = frozenset(c for ch in chars for c in (ch, ch.lower(), ch.upper()) if len(c) == 1)
    return CharSet(tuple(codepoint_ranges(chars, negated=negated)))
