"""Language inclusion read off the regex tree: ``contained(a, b)`` proves ``L(a) ⊆ L(b)`` or says
it cannot.

A difference ``a - b`` whose base the subtracted part contains is empty, and the only other way
to learn that is the product's liveness search (``ProductDFA._is_live``), which must exhaust
every reachable tuple. Where a part nests without bound it cannot: it runs out of its budget
and counts the start dead unproved. A ``oneOf`` whose branches differ in one place (an enum
value, ``+`` against ``*`` in a pattern) is such a difference in each of its cases that cannot
tell the branches apart, and the search spent half a second on each (MaskBench o25731, the
Handwritten oneofpr files). Read off the trees, most of these are a pointwise comparison.

The proof is structural and one-sided: ``True`` only where every rule on the way is sound,
``False`` for "not shown" (different shapes, a budget spent, a depth passed). A caller may
act on ``True`` alone; acting on it never changes a language, it only skips a search.
"""

from __future__ import annotations

from .tree import (
    Alt, CharSet, Concat, Difference, EndsWith, Intersect, Length, Literals, Members, MemberSet, Multiple, Nested,
    Node, Repeat, Tick,
)  # fmt: skip
from .nested import HOLE

__all__ = ["contained"]

#: Node pairs compared per call at most (a pair again where it was not memoised): the trees share
#: subtrees, and the memo keeps a pair compared once, but two wide trees of different shapes could
#: still ask for many pairs.
_PAIR_BUDGET = 50000
#: Nesting depth at most: past it the answer is "not shown".
_MAX_DEPTH = 200


class _OutOfBudget(Exception):
    pass


def contained(a: Node, b: Node) -> bool:
    """Whether ``L(a) ⊆ L(b)`` is shown by the trees' structure (False: not shown, maybe still true)."""
    try:
        return _Prover().contained(a, b, 0)
    except _OutOfBudget:
        return False


class _Prover:
    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], tuple[Node, Node, bool | None]] = {}
        self.steps = 0
        self.assumed = 0  # how often a pair under way was read
        self.unfolded: dict[int, tuple[Nested, Node | None]] = {}

    def contained(self, a: Node, b: Node, depth: int) -> bool:
        if a is b:
            return True
        key = (id(a), id(b))
        known = self.memo.get(key)
        if known is not None:
            if known[2] is None:  # under way: unfolding a free-form value can meet its pair again
                self.assumed += 1
                return False
            return known[2]
        self.steps += 1
        if depth > _MAX_DEPTH or self.steps > _PAIR_BUDGET:
            raise _OutOfBudget
        # The memo holds the pair itself, so no id in a key is reused while the memo lives (the
        # proof makes nodes of its own: a concatenation's rest, a value unfolded). A pair under
        # way reads as not shown; a "not shown" that rests on one is not kept (it may be shown
        # once that pair is), a "shown" always is (assuming less only proves less).
        self.memo[key] = (a, b, None)
        assumed = self.assumed
        result = a == b or self._rules(a, b, depth + 1)
        if result or self.assumed == assumed:
            self.memo[key] = (a, b, result)
        else:
            del self.memo[key]
        return result

    def _rules(self, a: Node, b: Node, depth: int) -> bool:
        sub = self.contained
        # what a is made of, whatever b is
        if isinstance(a, CharSet) and not a.ranges:
            return True
        if isinstance(a, Alt):
            return all(sub(option, b, depth) for option in a.options)
        if isinstance(a, Intersect) and any(sub(part, b, depth) for part in a.parts):
            return True
        if isinstance(a, Difference) and sub(a.base, b, depth):
            return True
        if isinstance(a, (Length, EndsWith)) and sub(a.node, b, depth):
            return True  # both only narrow their node
        # what b is made of
        if isinstance(b, Repeat) and b.low == 0 and b.high is None and b.separator is None:
            if self._in_closure(a, b, depth):
                return True
        if isinstance(a, Nested) and not isinstance(b, Nested):
            unfolded = self._unfold(a)  # one level, each hole the whole value again
            return unfolded is not None and sub(unfolded, b, depth)
        if isinstance(b, Alt):
            return any(sub(a, option, depth) for option in b.options)
        if isinstance(b, Intersect):
            return all(sub(a, part, depth) for part in b.parts)
        if isinstance(b, Difference):
            # a ⊆ base, and whatever b takes away a takes away too: each of b's subtracted parts
            # lies inside one of a's
            return (isinstance(a, Difference) and sub(a.base, b.base, depth)
                    and all(any(sub(m, n, depth) for n in a.minus) for m in b.minus))  # fmt: skip
        if isinstance(b, Repeat) and not isinstance(a, Repeat) and b.low <= 1 and (b.high is None or b.high >= 1):
            return sub(a, b.node, depth)
        # the same kind of node on both sides
        if isinstance(a, CharSet) and isinstance(b, CharSet):
            return all(any(lo <= low and high <= hi for lo, hi in b.ranges) for low, high in a.ranges)
        if isinstance(a, Literals) and isinstance(b, Literals):
            return set(a.options) <= set(b.options)
        if isinstance(a, Literals) and isinstance(b, CharSet):
            return _chars_in(a, b)
        if isinstance(a, Concat) and isinstance(b, Concat):
            return self._concat(a.parts, b.parts, depth)
        if isinstance(b, Concat) and len(b.parts) == 1:
            return sub(a, b.parts[0], depth)
        if isinstance(a, Repeat) and isinstance(b, Repeat):
            return (b.low <= a.low and (b.high is None or (a.high is not None and a.high <= b.high))
                    and sub(a.node, b.node, depth) and self._separators(a, b, depth))  # fmt: skip
        if isinstance(a, Length) and isinstance(b, Length):
            # the same node only: its Tick marks do the counting, and a part matched to another
            # part of b need not carry the same marks
            return b.low <= a.low and (b.high is None or (a.high is not None and a.high <= b.high)) and a.node == b.node
        if isinstance(a, Nested) and isinstance(b, Nested):
            return sub(a.level, b.level, depth)  # the holes hold a's values, inside b's by induction
        if isinstance(a, Multiple) and isinstance(b, Multiple):
            return a.scale == b.scale and a.step % b.step == 0
        if isinstance(a, Members) and isinstance(b, Members):
            return (len(a.items) == len(b.items) and sub(a.separator, b.separator, depth)
                    and all((ra or not rb) and sub(x, y, depth) for (x, ra), (y, rb) in zip(a.items, b.items))
                    and self._optional(a.extra, b.extra, depth))  # fmt: skip
        if isinstance(a, MemberSet) and isinstance(b, MemberSet):
            return self._member_sets(a, b, depth)
        return False

    def _concat(self, a: tuple[Node, ...], b: tuple[Node, ...], depth: int) -> bool:
        """Two concatenations, matched part for part from both ends; what is left on one side
        must then lie inside the single part left on the other (``"k": "x+"`` against ``"k": (a |
        b)``, where one side inlined the value's parts and the other could not)."""
        sub = self.contained
        if len(a) == len(b) and all(sub(x, y, depth) for x, y in zip(a, b)):
            return True
        start = 0
        while start < min(len(a), len(b)) - 1 and sub(a[start], b[start], depth):
            start += 1
        end = 0
        while end < min(len(a), len(b)) - start - 1 and sub(a[-1 - end], b[-1 - end], depth):
            end += 1
        rest_a, rest_b = a[start : len(a) - end], b[start : len(b) - end]
        if len(rest_b) == 1 and (start or end):
            return sub(rest_a[0] if len(rest_a) == 1 else Concat(rest_a), rest_b[0], depth)
        return False

    def _in_closure(self, a: Node, star: Repeat, depth: int) -> bool:
        """``a`` inside ``star`` = ``x*``: each of a's components is, since x* x* and (x*)* are x*."""
        sub = self.contained
        if isinstance(a, Literals):
            return isinstance(star.node, CharSet) and _chars_in(a, star.node, any_length=True)
        if isinstance(a, Tick):
            return True
        if isinstance(a, Multiple):
            return isinstance(star.node, CharSet) and _chars_in(_NUMBER_CHARS, star.node, any_length=True)
        if isinstance(a, Concat):
            return all(sub(part, star, depth) for part in a.parts)
        if isinstance(a, Repeat):
            return sub(a.node, star, depth) and (a.separator is None or sub(a.separator, star, depth))
        if isinstance(a, Nested):
            return sub(a.level, star, depth)  # the holes hold values of the same parts, by induction
        if isinstance(a, Members):
            return (all(sub(item, star, depth) for item, _ in a.items) and sub(a.separator, star, depth)
                    and (a.extra is None or sub(a.extra, star, depth)))  # fmt: skip
        if isinstance(a, MemberSet):
            parts = [*a.items, a.separator, *a.extra_groups, *(n for pair in a.checked_groups for n in pair),
                     *(n for _, n in a.repeats), *([a.extra] if a.extra is not None else [])]  # fmt: skip
            return all(sub(part, star, depth) for part in parts)
        if isinstance(a, CharSet):
            return sub(a, star.node, depth)
        return False

    def _unfold(self, nested: Nested) -> Node | None:
        """``nested``'s level with each hole replaced by ``nested`` itself (the same language), or
        None where the hole sits in a node this does not rebuild."""
        known = self.unfolded.get(id(nested))
        if known is None:
            known = self.unfolded[id(nested)] = (nested, _substitute(nested.level, nested))
        return known[1]

    def _separators(self, a: Repeat, b: Repeat, depth: int) -> bool:
        """a's separators inside b's; a repeat without one has none to compare only where it holds
        at most one copy (``xx`` is no text of ``x(,x)*``, nor ``x,x`` of ``x*``)."""
        if a.separator is not None and b.separator is not None:
            return self.contained(a.separator, b.separator, depth)
        return (a.separator is None and b.separator is None) or (a.high is not None and a.high <= 1)

    def _optional(self, x: Node | None, y: Node | None, depth: int) -> bool:
        """Extras, which may be absent: none fit anywhere, some only inside others."""
        return x is None or (y is not None and self.contained(x, y, depth))

    def _member_sets(self, a: MemberSet, b: MemberSet, depth: int) -> bool:
        """Each of a's items inside one of b's (its own, one to one), every item b requires one
        that a requires, a's extras inside b's, a's counts within b's.

        A text of ``a`` parses as ``b`` item for item, with the same member count. The extra
        machinery (dependencies, conditions over the seen bits, repeats, groups of extras) must
        match index for index, so where either side has any, the items must pair off in order.
        """
        if a.separator != b.separator and not self.contained(a.separator, b.separator, depth):
            return False
        if not (b.min_count <= a.min_count and (b.max_count is None or (a.max_count is not None and a.max_count <= b.max_count))):
            return False
        # b's earlier copies of a key only add texts (a parser keeps the last copy): a text of a
        # that has none parses in b without them
        if a.repeats not in ((), b.repeats) or a.condition != b.condition:
            return False
        if a.extra_groups == b.extra_groups and a.checked_groups == b.checked_groups:
            if not self._optional(a.extra, b.extra, depth):
                return False
        elif b.extra_groups or b.checked_groups or b.extra is None or b.max_count is not None:
            return False
        else:
            # a's extras come by groups of the key's last byte (to count distinct keys, or with
            # their values checked), b's are one kind: each of a's inside it. Counted by groups, a
            # text of a may hold more members than a counts, so only where b has no maximum.
            extras = [*a.extra_groups, *(n for pair in a.checked_groups for n in pair), *([a.extra] if a.extra else [])]
            if not all(self.contained(extra, b.extra, depth) for extra in extras):
                return False
        pairs: list[int] | None = None
        if len(a.items) == len(b.items) and all(self.contained(x, y, depth) for x, y in zip(a.items, b.items)):
            pairs = list(range(len(a.items)))
        elif not (b.ordered or b.dependencies or b.condition or a.repeats or b.extra_groups or b.checked_groups):
            used: set[int] = set()
            pairs = []
            for x in a.items:  # greedy: a pairing found is a proof, one missed only a lost shortcut
                j = next((j for j, y in enumerate(b.items) if j not in used and self.contained(x, y, depth)), None)
                if j is None and b.extra is not None and self.contained(x, b.extra, depth):
                    j = -1  # one of b's extras (an optional member a walker left to the extras)
                if j is None:
                    return False
                if j >= 0:
                    used.add(j)
                pairs.append(j)
        if pairs is None:
            return False
        identity = pairs == list(range(len(b.items)))
        if b.ordered and not (a.ordered and identity):
            return False
        if b.dependencies and not (identity and set(b.dependencies) <= set(a.dependencies)):
            return False
        if (b.condition or a.repeats or b.extra_groups or b.checked_groups) and not identity:
            return False
        required = {pairs[i] for i in a.required}
        return all(j in required for j in b.required)


_HOLE_TEXT = bytes([HOLE])
#: Every character a :class:`Multiple` spells (a sign, digits, a decimal point; no exponent).
_NUMBER_CHARS = Literals((b"-.0123456789",))


def _substitute(node: Node, by: Node) -> Node | None:
    """``node`` with every hole (the literal byte ``HOLE``) replaced by ``by``; None where a hole
    sits in a node other than a concatenation, an alternation or a repeat (a free-form level has
    no other)."""
    if isinstance(node, Literals):
        if _HOLE_TEXT in node.options:
            return by if node.options == (_HOLE_TEXT,) else None
        return node
    if isinstance(node, CharSet):
        return node if not any(lo <= HOLE <= hi for lo, hi in node.ranges) else None
    if isinstance(node, Concat):
        parts = [_substitute(p, by) for p in node.parts]
        return None if any(p is None for p in parts) else Concat(tuple(parts))  # type: ignore[arg-type]
    if isinstance(node, Alt):
        options = [_substitute(o, by) for o in node.options]
        return None if any(o is None for o in options) else Alt(tuple(options))  # type: ignore[arg-type]
    if isinstance(node, Repeat):
        inner = _substitute(node.node, by)
        separator = None if node.separator is None else _substitute(node.separator, by)
        if inner is None or (node.separator is not None and separator is None):
            return None
        return Repeat(inner, node.low, node.high, separator)
    return None


def _chars_in(literals: Literals, chars: CharSet, any_length: bool = False) -> bool:
    """Whether every option of ``literals`` is one character of ``chars`` (with ``any_length``,
    any number of them). Options that are no UTF-8 text are not shown to be anything."""
    try:
        texts = [option.decode("utf-8") for option in literals.options]
    except UnicodeDecodeError:
        return False
    return all((any_length or len(text) == 1) and all(any(lo <= ord(c) <= hi for lo, hi in chars.ranges) for c in text)
               for text in texts)  # fmt: skip
