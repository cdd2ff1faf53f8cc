"""The regex syntax tree every front end produces and the automaton builder consumes.

Pattern text is parsed into it (``parse.py``); the JSON Schema walker builds it
directly, so a schema never goes through regex text and back. ``render`` turns
a tree into Python regex text — what ``to_regex`` returns and ``explain`` shows —
whose ``re.fullmatch`` language equals the tree's (with ``re.ASCII`` semantics
nowhere needed: character sets are rendered as explicit ranges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Union

from ..core.utf8 import complement_ranges

__all__ = [
    "CharSet", "Concat", "Alt", "Repeat", "Literals", "Members", "RuleRef", "Intersect", "Difference", "EndsWith", "MemberSet", "Multiple", "Nested", "Length", "Tick", "Node",
    "EMPTY", "NOTHING", "literal", "seq", "alt", "optional", "nullable", "render",
]  # fmt: skip


class _Composite:
    """Trees share subtrees (a ``$ref`` used twice, a free-form value nested k levels), so a
    hash computed afresh on every call would walk the shared parts again and again —
    exponential in the depth. Each node computes its hash once and keeps it."""

    __slots__ = ()
    if TYPE_CHECKING:  # every subclass is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Any]]

    def __getstate__(self) -> dict[str, Any]:
        """The fields and memos, without the hash: it is computed from str hashes, which differ
        between processes, so a pickled node's kept hash would be wrong where it is read back."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    def cached_hash(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((type(self).__name__, *(getattr(self, f) for f in self.__dataclass_fields__)))
            object.__setattr__(self, "_hash", cached)
        return cached


@dataclass(frozen=True)
class CharSet:
    """One character from a set of code point ranges (empty ranges: matches nothing)."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Concat(_Composite):
    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Alt(_Composite):
    options: tuple["Node", ...]


@dataclass(frozen=True)
class Repeat(_Composite):
    """``node`` repeated ``low`` to ``high`` times; ``high`` is None for no upper bound.

    With a ``separator``, it comes between consecutive repetitions (a JSON array's
    items): written as text that is ``x(?:sep x)*``, but the automaton builds ``x``
    once, where the text has it twice — at every nesting level.
    """

    node: "Node"
    low: int
    high: int | None
    separator: "Node | None" = None


@dataclass(frozen=True)
class Literals:
    """Exactly one of these byte strings, built as a byte trie (shared prefixes once)."""

    options: tuple[bytes, ...]


@dataclass(frozen=True)
class Members(_Composite):
    """Items in order, each present or (unless required) absent, with ``separator`` between
    present ones; then, if ``extra`` is given, any number of ``extra`` items.

    This is a JSON object's member list. As regex text it is quadratic in the number of
    optional items (which one comes first decides whether a separator is needed); the
    automaton builder shares the tails and stays linear.
    """

    items: tuple[tuple["Node", bool], ...]
    separator: "Node"
    extra: "Node | None" = None


@dataclass(frozen=True)
class RuleRef:
    """A reference to a named rule: only the grammar backend can follow it (recursion)."""

    name: str


@dataclass(frozen=True)
class MemberSet(_Composite):
    """Items in any order (or in order), each at most once, with ``separator`` between them; plus any
    number of ``extra`` items. ``required`` items must all appear; the member count
    (extras included) lies in ``[min_count, max_count]``; ``dependencies`` pairs
    ``(i, others)`` say that where item ``i`` appears, the items ``others`` appear too.

    A JSON object as the specification reads it: members in any order,
    ``minProperties``/``maxProperties``, ``dependentRequired``. The automaton tracks
    which items were seen (a bit set on the counter stack), so the states it creates
    are the subsets a walk reaches, not all 2^n of them.
    """

    items: tuple["Node", ...]
    required: tuple[int, ...]
    separator: "Node"
    extra: "Node | None" = None
    min_count: int = 0
    max_count: int | None = None
    dependencies: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: Items in their listed order (each after every item before it that appears); extras anywhere.
    ordered: bool = False
    #: ``(i, node)``: earlier occurrences of item ``i``'s key (``node``: that key with any
    #: value), any number of them while item ``i`` has not come yet, which must then come.
    #: A parser keeps a repeated key's last value, so a *superset* of objects needs them.
    repeats: tuple[tuple[int, "Node"], ...] = ()
    #: Which items may be present together (``oneOf``/``anyOf``/``not`` over ``required``): the
    #: object ends only where the items seen match one ``(present, absent)`` pair of bit masks
    #: exactly on those bits. Empty: no such condition.
    condition: tuple[tuple[int, int], ...] = ()
    #: Extras split by the last character byte of their key (each an :class:`EndsWith` of the
    #: key), used instead of ``extra`` where ``min_count`` must count distinct keys: a parser
    #: keeps one member per repeated key (``{"a": 1, "a": 2}`` holds one), and whether two
    #: extras share a key is more than an automaton can remember, but keys of two groups
    #: differ. So ``min_count`` counts the declared items seen plus the groups seen.
    extra_groups: tuple["Node", ...] = ()
    #: A superset's extras, where their values are checked: per group of the key's last byte
    #: (as ``extra_groups``), a member with a value of the schema and one with any value. A
    #: parser keeps a repeated key's last copy, so an earlier copy may hold any value; but a
    #: member with a value outside the schema must be followed by a member of its group (its
    #: key again, or another one: the superset only grows) before the object ends.
    checked_groups: tuple[tuple["Node", "Node"], ...] = ()


@dataclass(frozen=True)
class Multiple:
    """A JSON number whose value is a multiple of ``step / 10**scale`` (``step`` > 0).

    With ``scale`` 0 the number is an integer (``-?(0|[1-9][0-9]*)``); otherwise it may
    have a fraction (no exponent) of any length whose digits past the ``scale``-th are
    zeros. Divisibility is regular: the automaton keeps the remainder of the digits read
    so far and, in the fraction, how many it read.
    """

    step: int
    scale: int = 0


@dataclass(frozen=True)
class Nested(_Composite):
    """A value of ``level`` in which each hole (the byte 0x00, see :mod:`.nested`) is such a
    value again, to any depth: free-form JSON values, exactly."""

    level: "Node"


@dataclass(frozen=True)
class Intersect(_Composite):
    """Text that every one of ``parts`` matches (``pattern`` ∩ ``format`` ∩ ``maxLength``)."""

    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Difference(_Composite):
    """Text that ``base`` matches and none of ``minus`` does (``not``, ``oneOf``, keys that are not declared)."""

    base: "Node"
    minus: tuple["Node", ...]


@dataclass(frozen=True)
class EndsWith(_Composite):
    """Text of ``node`` whose last byte outside the ranges ``skip`` lies in the ranges ``last``
    (inclusive byte ranges), or with ``none`` that holds no byte outside ``skip``: an
    undeclared key of one group (see ``MemberSet.extra_groups``)."""

    node: "Node"
    last: tuple[tuple[int, int], ...]
    skip: tuple[tuple[int, int], ...]
    none: bool = False


@dataclass(frozen=True)
class Length(_Composite):
    """Text of ``node`` holding ``low`` to ``high`` (None: any number of) characters, counted by the
    :class:`Tick` marks inside it (``pattern`` with ``maxLength``).

    The intersection with a character count says the same, but as a product of two
    automata each of its states is a new pair, so a token index can share no row
    between the 17th and the 18th character. Here the count is one counter beside the
    pattern's own, and counts far from the bounds share their rows. The builder
    (``ByteNFA._length``) prunes positions whose shortest way out needs more characters
    than are left, so no walk is stuck at the bound. That is exact when ``low`` is at most 1
    and every counted repeat inside may stop at any count; where one may not (``x{3,300}``),
    the builder builds ``product`` instead, the same language as an intersection.
    """

    node: "Node"
    low: int
    high: int | None
    product: "Node"


@dataclass(frozen=True)
class Tick:
    """Count ``units`` more characters for the innermost :class:`Length` around it; matches nothing itself."""

    units: int


Node = Union[
    CharSet, Concat, Alt, Repeat, Literals, Members, MemberSet, Multiple, Nested, RuleRef, Intersect, Difference,
    EndsWith, Length, Tick,
]

for _cls in (Concat, Alt, Repeat, Members, MemberSet, Nested, Intersect, Difference, EndsWith, Length):
    setattr(_cls, "__hash__", _Composite.cached_hash)  # dataclass put its own there

#: The empty string, and the empty language.
EMPTY: Node = Concat(())
NOTHING: Node = CharSet(())


def literal(text: str) -> Node:
    return Literals((text.encode("utf-8"),)) if text else EMPTY


def seq(*parts: Node) -> Node:
    """Concatenation, short inner concatenations inlined.

    Only short ones: a schema whose definitions each hold the previous one twice
    (``[d, d]``) would otherwise double its part list at every level, and a tree of
    shared nodes would become an exponentially long flat one.
    """
    flat: list[Node] = []
    for part in parts:
        if isinstance(part, Concat) and len(part.parts) <= _INLINED_PARTS:
            flat.extend(part.parts)
        else:
            flat.append(part)
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


#: Concatenations up to this long are inlined into the one around them (see ``seq``).
_INLINED_PARTS = 8


def alt(*options: Node) -> Node:
    unique = tuple(dict.fromkeys(options))
    return unique[0] if len(unique) == 1 else Alt(unique)


def nullable(node: Node) -> bool:
    """Whether ``node`` matches the empty string (Lark has no empty terminals; inner anchors split a pattern there)."""
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Literals):
        return any(not o for o in node.options)
    if isinstance(node, Concat):
        return all(nullable(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(nullable(o) for o in node.options)
    if isinstance(node, Repeat):
        return node.low == 0 or nullable(node.node)
    if isinstance(node, Members):
        return not any(required for _, required in node.items)
    if isinstance(node, Length):
        return node.low == 0 and nullable(node.node)
    return isinstance(node, Tick)


def optional(node: Node) -> Node:
    return Repeat(node, 0, 1)


# ---------------------------------------------------------------------- rendering


def render(node: Node) -> str:
    """Python regex text for ``node`` (for display and ``to_regex``; the guide uses the tree)."""
    if isinstance(node, CharSet):
        return _render_charset(node)
    if isinstance(node, Literals):
        texts = ["".join(_char(ord(c)) for c in o.decode("utf-8")) for o in node.options]
        return texts[0] if len(texts) == 1 else "(?:" + "|".join(texts) + ")"
    if isinstance(node, Concat):
        return "".join(_atom(p) if isinstance(p, Alt) else render(p) for p in node.parts)
    if isinstance(node, Alt):
        return "(?:" + "|".join(render(o) for o in node.options) + ")"
    if isinstance(node, Repeat) and node.separator is not None:
        item = _atom(node.node)
        tail = render(Repeat(Concat((node.separator, node.node)), max(node.low - 1, 0),
                             None if node.high is None else node.high - 1))  # fmt: skip
        if node.high == 0:
            return ""
        return f"{item}{tail}" if node.low else f"(?:{item}{tail})?"
    if isinstance(node, Repeat):
        if (node.low, node.high) == (0, 1):
            suffix = "?"
        elif node.high is None:
            suffix = "*" if node.low == 0 else "+" if node.low == 1 else f"{{{node.low},}}"
        else:
            suffix = f"{{{node.low}}}" if node.low == node.high else f"{{{node.low},{node.high}}}"
        return _atom(node.node) + suffix
    if isinstance(node, Members):
        return _render_members(node)
    if isinstance(node, RuleRef):
        raise TypeError(f"rule {node.name!r} is recursive: no regex can express it")
    if isinstance(node, Tick):
        return ""
    if isinstance(node, (Intersect, Difference, EndsWith, MemberSet, Multiple, Nested, Length)):
        raise TypeError("an intersection, a difference, a counted length, an unordered member set or a value "
                        "nested without bound has no Python regex text; the automaton builds it")
    raise TypeError(f"unknown regex node {node!r}")


def _atom(node: Node) -> str:
    text = render(node)
    if isinstance(node, CharSet) or (isinstance(node, Literals) and len(node.options) > 1):
        return text
    if isinstance(node, Literals) and len(node.options[0].decode("utf-8")) == 1:
        return text
    return f"(?:{text})"


def _render_members(node: Members) -> str:
    sep = render(node.separator)
    items = [(render(n), req) for n, req in node.items]
    extra = render(node.extra) if node.extra is not None else None

    def after(i: int) -> str:  # items from i on, each preceded by a separator
        text = "".join(f"{sep}{m}" if req else f"(?:{sep}{m})?" for m, req in items[i:])
        return text + (f"(?:{sep}{extra})*" if extra is not None else "")

    options = []
    for i, (member, req) in enumerate(items):
        options.append(member + after(i + 1))
        if req:
            break
    else:
        if extra is not None:
            options.append(f"{extra}(?:{sep}{extra})*")
        return "(?:" + "|".join(options) + ")?" if options else ""
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _render_charset(node: CharSet) -> str:
    if not node.ranges:
        return r"[^\x00-\U0010FFFF]"
    if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
        return _char(node.ranges[0][0])
    if sum(hi - lo + 1 for lo, hi in node.ranges) > 0x8000:
        # A large set reads (and compiles, in re, Lark and interegular) far better as the
        # negation of its small complement; surrogates never occur in UTF-8 text, so
        # whether the complement lists them does not matter.
        complement = _complement(node.ranges)
        return f"[^{_class_body(complement)}]" if complement else "(?s:.)"
    return f"[{_class_body(node.ranges)}]"


def _class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The complement, without a range made only of surrogates (they never occur in UTF-8)."""
    return tuple((lo, hi) for lo, hi in complement_ranges(sorted(ranges)) if not (lo >= 0xD800 and hi <= 0xDFFF))


def _char(code: int) -> str:
    """One character, escaped so that both Python's ``re`` and Lark's ``/.../`` literals
    (which evaluate ``\\x``/``\\u`` escapes *before* compiling) read it as that character.

    ASCII punctuation gets a backslash (``\\]``), never ``\\x5d``: Lark would turn
    ``\\x5d`` into a bare ``]`` and end the character class.
    """
    if code < 0x80:
        char = chr(code)
        if char.isalnum():
            return char
        if 0x20 <= code < 0x7F:
            return "\\" + char
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
