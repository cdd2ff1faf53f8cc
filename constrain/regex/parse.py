"""Pattern text → a small regex syntax tree over code point sets.

interegular does the parsing (it knows Python's regex syntax well); this module
validates its output, applies flags (case folding, ``.`` and newlines), turns its
character groups into code point ranges and rejects what no finite automaton
can enforce, with messages that say what to change. The result is a tree of
``tree.py`` nodes, the same nodes the JSON Schema walker builds directly.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from interegular import patterns as ip
from interegular.utils.simple_parser import nomatch

from ..errors import InvalidPatternError, NonRegularPatternError, PatternError
from .tree import EMPTY, NOTHING, Alt, CharSet, Concat, Literals, Node, Repeat, nullable
from ..core.utf8 import codepoint_ranges

__all__ = ["Anchored", "parse_regex", "parse_ecma_anchored", "literal_choice"]


#: Escapes interegular doesn't read as Python does: ``\uXXXX``, ``\UXXXXXXXX``, ``\N{name}``, a
#: lone ``\0`` (NUL) and an escaped non-ASCII character (itself); an escaped backslash is skipped.
_ESCAPE = re.compile(
    r"\\\\|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})|\\N\{([^}]*)\}|\\(0)(?![0-7])|\\([^\x00-\x7f])"
)
_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_FLAG_GROUP = re.compile(r"\(\?([aiLmsux]*)(-[imsx]*)?([:)])")
_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")
_NOT_REGULAR = {
    "Group references are not implemented": "a backreference",
    "Conditional matching is not implemented": "a conditional group",
    "'^'": "the anchor '^' inside the pattern (patterns always match whole)",
    "'$'": "the anchor '$' inside the pattern (patterns always match whole)",
}


def parse_regex(pattern: str, *, ecma: bool = False) -> Node:
    """Parse a pattern that must match the *whole* generated text (like ``re.fullmatch``).

    With ``ecma`` (a JSON Schema ``pattern``, which is ECMA-262), ``\\s`` is ECMA-262's
    whitespace (Unicode spaces such as U+00A0 and U+3000 too) and ``.`` leaves out every
    line terminator (``\\n``, ``\\r``, U+2028, U+2029); ``\\d`` and ``\\w`` are ASCII in both.
    """
    return _parse(pattern, ecma, marks_anchors=False)[0]


@dataclass(frozen=True)
class Anchored:
    """An ECMA-262 pattern whose ``^`` and ``$`` may stand anywhere (``(?:^|\\n)-----BEGIN``,
    ``^(a($|/))*$``), as four languages: by which of its inner anchors a text may use.

    In ECMA-262 (no ``m`` flag) ``^`` asserts the start of the input and ``$`` its end. A
    text that uses an inner ``$`` ends right there (what the pattern reads after it must
    match nothing), and one that uses an inner ``^`` starts there. ``free`` uses neither (any
    text may come before and after), ``starting`` only ``^`` (nothing before), ``ending`` only
    ``$`` (nothing after), ``whole`` both. Without inner anchors the four are one tree. Python's
    ``$`` also matches before a final newline: these leave that out (stricter).
    """

    free: Node
    starting: Node
    ending: Node
    whole: Node


def parse_ecma_anchored(pattern: str) -> Anchored:
    """The :class:`Anchored` languages of an ECMA-262 ``pattern`` (matched whole, see ``parse_regex``)."""
    tree, marked = _parse(pattern, True, marks_anchors=True)
    if not marked:  # (a mark character the pattern holds itself is that character)
        return Anchored(tree, tree, tree, tree)
    memo: dict[tuple[int, bool, bool], Node] = {}
    held: dict[int, bool] = {}
    return Anchored(*(_anchored(tree, start, end, memo, held) for start, end in _SIDES))


def _parse(pattern: str, ecma: bool, *, marks_anchors: bool) -> tuple[Node, bool]:
    """The tree, and whether inner anchors were marked in it (``marks_anchors``, see ``Anchored``)."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a str, not {type(pattern).__name__}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InvalidPatternError(exc.msg, pattern=pattern, position=exc.pos) from None
    except (OverflowError, RecursionError) as exc:  # a{4294967296}; thousands of nested groups
        raise InvalidPatternError(f"Python's re cannot read it: {exc}", pattern=pattern) from None
    body = _strip_anchors(_expand_escapes(_normalize(pattern)))
    marked = body
    if marks_anchors:
        marked = _mark_anchors(body, pattern)
    try:
        # Not interegular's simplify(): it merges a group into its only child group and drops the
        # child's removed flags ('(?i)(?:(?-i:a))' matched 'A'); _convert nests flags itself.
        # (interegular's parser methods are unannotated.)
        parsed = (_EcmaParser if ecma else _Parser)(marked).parse()  # type: ignore[no-untyped-call]
    except ip.Unsupported as exc:
        message = str(exc)
        feature = _NOT_REGULAR.get(message)
        if feature:
            raise NonRegularPatternError(feature, pattern=pattern) from None
        raise PatternError(f"unsupported regex feature: {message} (pattern: {pattern[:80]!r})") from None
    except (ip.InvalidSyntax, Exception) as exc:  # interegular's parser signals some errors with bare exceptions
        raise InvalidPatternError(str(exc) or type(exc).__name__, pattern=pattern) from None
    return _convert(parsed, ip.REFlags(0), pattern, _ECMA_LINE_ENDS if ecma else frozenset("\n")), marked != body


def literal_choice(options: list[str] | tuple[str, ...]) -> Node:
    """The language of exactly these strings, matched literally (no regex syntax)."""
    if not options:
        raise PatternError("choice() needs at least one option")
    for option in options:
        if not isinstance(option, str):
            raise PatternError(f"choice() options must be str, got {type(option).__name__}")
        try:
            option.encode("utf-8")
        except UnicodeEncodeError:
            raise PatternError(f"choice() option {option!r} holds a lone surrogate, which no UTF-8 text can") from None
    return Literals(tuple(dict.fromkeys(o.encode("utf-8") for o in options)))


class _CategoryClass(ip._CharGroup):
    """A class that holds a negated category (``[\\W\\d]``, ``[^\\Sa]``): one character set
    either way, but it folds case differently than a class of listed characters (see ``_charset``)."""

    __slots__ = ()


class _Parser(ip._ParsePattern):
    """interegular's parser, reading two things as Python does.

    interegular joins ``\\W``, ``\\D``, ``\\S`` in a class by the *union* of the sets they
    leave out, so ``[\\W\\D]`` became ``\\W``; a class matches what any item matches, so
    what it leaves out is the *intersection* (``[\\W\\D]`` is ``\\D``). And each global
    flag group replaced the flags of the one before (``(?i)(?s)a`` lost ``i``); they add up.
    """

    def extension_group(self) -> object:
        before = self.flags
        result = super().extension_group()  # type: ignore[no-untyped-call]  # interegular: unannotated
        if before is not None and self.flags is not None:
            self.flags |= before
        return result

    def chargroup(self) -> ip._CharGroup:
        negate = self.static_b("^")
        groups = []
        while True:
            try:
                groups.append(self.chargroup_inner())
            except nomatch:
                break
        self.static("]")
        listed = frozenset().union(*(g.chars for g in groups if not g.negated))
        left_out = [g.chars for g in groups if g.negated]
        if not left_out:
            return ip._CharGroup(listed, negate)
        return _CategoryClass(frozenset.intersection(*left_out) - listed, not negate)


#: ECMA-262's WhiteSpace and LineTerminator code points: what ``\\s`` matches in a JSON Schema pattern.
_ECMA_SPACE = frozenset("\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
#: What ``.`` leaves out in ECMA-262 (no ``s`` flag).
_ECMA_LINE_ENDS = frozenset("\n\r\u2028\u2029")


class _EcmaParser(_Parser):
    """The parser for JSON Schema patterns: ``\\s`` and ``\\S`` as ECMA-262 reads them."""

    def escaped(self, inner: bool = False) -> ip._CharGroup:
        if self.static_b("s"):
            return ip._CharGroup(_ECMA_SPACE, False)
        if self.static_b("S"):
            return ip._CharGroup(_ECMA_SPACE, True)
        group: ip._CharGroup = super().escaped(inner)  # type: ignore[no-untyped-call]  # unannotated there
        return group


def _normalize(pattern: str) -> str:
    """Rewrite what the parser would read differently than Python's ``re``; refuse what it can't read.

    Comments ``(?#…)`` are dropped, group names and the flag ``a`` too (interegular fails
    on them; groups only group and classes are always ASCII here). Possessive quantifiers
    (``a*+``, ``\\d{4}+``) would become a repeat followed by ``+``, and atomic groups
    ``(?>…)`` are unknown to the parser: both are refused. So are a ``]`` first in a class
    (``[]a]``, ``[^]a]``), a ``{`` that opens no quantifier (``a{}``, ``a{x}``, ``a{``) and
    ``{,n}``: interegular misreads them, and where Python reads them one way, a JSON Schema
    ``pattern`` (ECMA-262, parsed here too) reads ``[]``, ``[^]`` and ``{,n}`` another.
    """
    out: list[str] = []
    i, after_quantifier = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            end = i + 2
            if pattern[i + 1 : i + 3] == "N{":  # a named character: its braces are no quantifier
                end = pattern.index("}", i) + 1  # re.compile accepted it, so it is closed
            out.append(pattern[i:end])
            i, after_quantifier = end, False
            continue
        if char == "[":
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[j : j + 1] == "]":
                raise PatternError(f"a ']' first in a character class is not supported; escape it as '\\]' "
                                   f"(pattern: {pattern[:80]!r}, position {j})")  # fmt: skip
            start = i
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[start : j + 1])
            i, after_quantifier = j + 1, False
            continue
        if pattern.startswith("(?#", i):
            i = pattern.index(")", i) + 1  # re.compile accepted it, so it is closed
            continue
        flags = _FLAG_GROUP.match(pattern, i)
        if flags and "a" in flags.group(1):  # (?a) asks for ASCII classes: they always are (docs/regex.md)
            added, removed, closer = flags.group(1).replace("a", ""), flags.group(2) or "", flags.group(3)
            out.append(f"(?{added}{removed}{closer}" if added or removed or closer == ":" else "")
            i = flags.end()
            continue
        if pattern.startswith("(?P<", i):  # groups only group, and interegular allows ASCII names only
            out.append("(?:")
            i = pattern.index(">", i) + 1
            continue
        if pattern.startswith("(?>", i):
            raise PatternError(f"atomic groups ('(?>...)') are not supported "
                               f"(pattern: {pattern[:80]!r}, position {i})")  # fmt: skip
        if char in "*+?":
            if after_quantifier and char == "+":
                raise PatternError(f"possessive quantifiers ('*+', '++', '?+', '{{m,n}}+') are not supported "
                                   f"(pattern: {pattern[:80]!r}, position {i})")  # fmt: skip
            # A '?' right after a quantifier makes it lazy (re.compile refused any other repeat of one).
            out.append(char)
            i, after_quantifier = i + 1, not after_quantifier
            continue
        if char == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier is None:
                raise PatternError(f"braces other than '{{n}}', '{{n,}}', '{{n,m}}' ('{{}}', '{{x}}', '{{,n}}') "
                                   f"are not supported; escape a literal one as '\\{{' or write '{{0,n}}' "
                                   f"(pattern: {pattern[:80]!r}, position {i})")  # fmt: skip
            out.append(quantifier.group())
            i, after_quantifier = quantifier.end(), True
            continue
        out.append(char)
        i, after_quantifier = i + 1, False
    return "".join(out)


def _expand_escapes(pattern: str) -> str:
    r"""Turn escapes Python's ``re`` reads but interegular doesn't (see ``_ESCAPE``) into characters.

    An ASCII result stays escaped as ``\xHH`` (it may be special, like ``]`` in a class).
    """

    def replace(match: re.Match[str]) -> str:
        hex4, hex8, name, nul, other = match.groups()
        if hex4 or hex8:
            char = chr(int(hex4 or hex8, 16))
        elif name is not None:
            char = unicodedata.lookup(name)  # re.compile accepted the name
        elif nul is not None:
            char = "\0"
        elif other is not None:
            char = other
        else:
            return match.group(0)  # an escaped backslash stays as it is
        return f"\\x{ord(char):02x}" if ord(char) < 0x80 else char

    return _ESCAPE.sub(replace, pattern)


def _strip_anchors(pattern: str) -> str:
    """A leading ``^`` and trailing ``$`` are redundant: the whole text always has to match.

    The ``^`` may follow the global flag groups (``(?i)^abc``): it is at the start of the text too.
    """
    global_flags = _GLOBAL_FLAGS.match(pattern)  # a repeat of zero or more: it matches at least ""
    flags = global_flags.end() if global_flags is not None else 0
    if pattern.startswith("^", flags):
        pattern = pattern[:flags] + pattern[flags + 1 :]
    if pattern.endswith("$"):
        body = pattern[:-1]
        if (len(body) - len(body.rstrip("\\"))) % 2 == 0:  # an escaped '\$' is a literal dollar
            pattern = body
    return pattern


#: Stand for an inner ``^`` and ``$`` while interegular parses (it reads no anchors, see
#: ``Anchored``): private-use characters. A pattern that holds one itself keeps its anchors refused.
_START_MARK, _END_MARK = "\ue001", "\ue000"
_START, _END = CharSet(((0xE001, 0xE001),)), CharSet(((0xE000, 0xE000),))
#: (start, end): which inner anchors a language lets a text use, in ``Anchored``'s field order.
_SIDES = ((False, False), (True, False), (False, True), (True, True))


def _mark_anchors(body: str, pattern: str) -> str:
    """``body`` with each ``^`` and ``$`` anchor (not escaped, not in a class) written as a mark."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            out.append(body[i : i + 2])
            i += 2
            continue
        if char == "[":
            j = i + 1
            while j < len(body) and body[j] != "]":
                j += 2 if body[j] == "\\" else 1
            out.append(body[i : j + 1])
            i = j + 1
            continue
        out.append(_START_MARK if char == "^" else _END_MARK if char == "$" else char)
        i += 1
    marked = "".join(out)
    multiline = any("m" in flags.group(1) for flags in _FLAG_GROUP.finditer(body))
    if marked != body and (_START_MARK in body or _END_MARK in body or multiline):  # no start or end of the text
        raise NonRegularPatternError(_NOT_REGULAR["'$'" if _END_MARK in marked else "'^'"], pattern=pattern)
    return marked


def _holds_anchor(node: Node, held: dict[int, bool]) -> bool:
    known = held.get(id(node))
    if known is None:
        if node in (_START, _END):
            known = True
        elif isinstance(node, Concat):
            known = any(_holds_anchor(part, held) for part in node.parts)
        elif isinstance(node, Alt):
            known = any(_holds_anchor(option, held) for option in node.options)
        else:
            known = isinstance(node, Repeat) and _holds_anchor(node.node, held)
        held[id(node)] = known
    return known


def _anchored(
    node: Node, start: bool, end: bool, memo: dict[tuple[int, bool, bool], Node], held: dict[int, bool]
) -> Node:
    """The texts ``node`` matches using inner ``^`` only if ``start`` and only before its first
    character, ``$`` only if ``end`` and only after its last (see ``Anchored``).

    A concatenation ``p r`` splits its text ``x y``: an anchor of ``p`` may not face ``y`` nor
    one of ``r`` face ``x``, so ``$`` in ``p`` needs ``y`` empty and ``^`` in ``r`` needs ``x``
    empty. A repeat counts its copies: with one nonempty copy it is that copy's language, with
    more the first may use ``^``, the last ``$``, those between neither; empty copies fill the
    count where a copy's language holds the empty text (and may stand where their anchors hold).
    """
    if not _holds_anchor(node, held):
        return node
    key = (id(node), start, end)
    known = memo.get(key)
    if known is not None:
        return known
    if node == _START:
        result = EMPTY if start else NOTHING
    elif node == _END:
        result = EMPTY if end else NOTHING
    elif isinstance(node, Alt):
        result = _alt([_anchored(option, start, end, memo, held) for option in node.options])
    elif isinstance(node, Concat):
        tail = {sides: EMPTY for sides in _SIDES}  # the languages of the parts after this one
        for part in reversed(node.parts):
            here = {}
            for s, e in _SIDES:
                head_open, head = _anchored(part, s, False, memo, held), _anchored(part, s, e, memo, held)
                options = [_seq(head_open, tail[False, e])]
                if nullable(tail[False, e]):
                    options.append(head)  # a '$' of the head: the tail reads nothing
                if nullable(head_open):
                    options.append(tail[s, e])  # a '^' of the tail: the head read nothing
                if nullable(head) and nullable(tail[s, e]):
                    options.append(EMPTY)
                here[s, e] = _alt(options)
            tail = here
        result = tail[start, end]
    elif isinstance(node, Repeat):
        result = _anchored_repeat(node, start, end, memo, held)
    else:  # _holds_anchor finds anchors under the three kinds above only
        result = node
    memo[key] = result
    return result


def _anchored_repeat(
    node: Repeat, start: bool, end: bool, memo: dict[tuple[int, bool, bool], Node], held: dict[int, bool]
) -> Node:
    if node.high == 0:
        return EMPTY
    plain = _anchored(node.node, False, False, memo, held)
    first = _anchored(node.node, start, False, memo, held)
    last = _anchored(node.node, False, end, memo, held)
    only = _anchored(node.node, start, end, memo, held)
    padded = nullable(plain) or nullable(first) or nullable(last)  # empty copies fill any count
    options = [EMPTY] if node.low == 0 or nullable(only) else []
    if padded or node.low <= 1:
        options.append(only)
    if node.high is None or node.high >= 2:
        low = 0 if padded else max(node.low, 2) - 2
        middle = Repeat(plain, low, None if node.high is None else node.high - 2) if plain != NOTHING else (
            EMPTY if low == 0 else NOTHING)
        options.append(_seq(_seq(first, middle), last))
    return _alt(options)


def _seq(head: Node, tail: Node) -> Node:
    return NOTHING if NOTHING in (head, tail) else tail if head == EMPTY else head if tail == EMPTY else Concat((head, tail))


def _alt(options: list[Node]) -> Node:
    kept = tuple(dict.fromkeys(o for o in options if o != NOTHING))
    return NOTHING if not kept else kept[0] if len(kept) == 1 else Alt(kept)


def _convert(node: object, flags: ip.REFlags, pattern: str, line_ends: frozenset[str]) -> Node:
    if isinstance(node, ip.Pattern):
        flags = ip._combine_flags(flags, node.added_flags, node.removed_flags)
        options = tuple(_convert(o, flags, pattern, line_ends) for o in node.options)
        return options[0] if len(options) == 1 else Alt(options)
    if isinstance(node, ip._Concatenation):
        parts = []
        for part in node.parts:
            if isinstance(part, ip._NonCapturing):
                kind = "a lookbehind" if part.backwards else "a lookahead"
                raise NonRegularPatternError(kind, pattern=pattern)
            parts.append(_convert(part, flags, pattern, line_ends))
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))
    if isinstance(node, ip._Repeated):
        return Repeat(_convert(node.base, flags, pattern, line_ends), node.min, node.max)
    if isinstance(node, ip._CharGroup):
        ignore_case = bool(flags & ip.REFlags.CASE_INSENSITIVE)
        return _charset(node.chars, node.negated, ignore_case, isinstance(node, _CategoryClass))
    if node is ip._DOT:
        # '.' is any character but a line end ('\n' in Python's re) unless the DOTALL flag (?s) is set.
        return _charset(frozenset() if flags & ip.REFlags.SINGLE_LINE else line_ends, True, False)
    if node is ip._EMPTY:
        return Concat(())
    raise PatternError(f"unexpected regex construct {type(node).__name__} in {pattern[:80]!r}")


@lru_cache(maxsize=4096)
def _charset(chars: frozenset[str], negated: bool, ignore_case: bool, category: bool = False) -> CharSet:
    """The code point set of a character group, case folded with ``(?i)``.

    A listed character matches its simple case mappings too, so the listed set grows to
    them (``[^k]`` leaves out ``k`` and ``K``). A class with a negated category
    (``_CategoryClass``) stores the characters it leaves out (or, negated, the ones it
    keeps) as what the categories leave out minus the listed characters; folding that
    set would wrongly let a listed character's other case through its category, so it
    shrinks instead to the characters whose every case variant is in it: ``(?i)[\\WA]``
    keeps ``a`` and ``A``, as Python's ``re`` does (categories are closed under case).
    """
    if ignore_case and category:
        variants = {ch: [c for c in (ch.lower(), ch.upper()) if len(c) == 1] for ch in chars}
        chars = frozenset(ch for ch in chars if all(c in chars for c in variants[ch]))
    elif ignore_case:
        chars = frozenset(c for ch in chars for c in (ch, ch.lower(), ch.upper()) if len(c) == 1)
    return CharSet(tuple(codepoint_ranges(chars, negated=negated)))
