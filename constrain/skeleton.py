"""What the front ends that write Lark skeletons over regex terminals share.

The JSON Schema front end (:mod:`constrain.json_schema.to_grammar`) and the GBNF one
(:mod:`constrain.gbnf`) both keep every recursion-free stretch of a tree as one
terminal and write only the structure around rule references as Lark text: this module
holds the two pieces of that which do not depend on the source language.
"""

from __future__ import annotations

from .regex.tree import (
    Alt, CharSet, Concat, Difference, Intersect, Length, Literals, Members, MemberSet, Nested, Node, Repeat, RuleRef, Tick,
    nullable, seq,
)

__all__ = ["SkeletonWriter", "has_rule_ref", "joined", "lark_repeat", "nullable", "terminal_priority"]


def has_rule_ref(node: Node) -> bool:
    """Whether ``node`` refers to a rule anywhere (else it can be one terminal).

    Trees share subtrees (a ``$ref`` used in many places), so the answer is kept on each
    composite node: asked afresh, a walk over a shared DAG is exponential in its depth
    (a SchemaStore schema spent minutes here before).
    """
    if isinstance(node, RuleRef):
        return True
    known: bool | None = node.__dict__.get("_has_rule_ref")
    if known is None:
        known = _has_rule_ref(node)
        object.__setattr__(node, "_has_rule_ref", known)
    return known


def terminal_priority(node: Node) -> int:
    """A terminal's lark priority: the bytes of the shortest text ``node`` matches, capped at 99.

    Lark's lexer tries a context's terminals in priority order and the first that matches
    wins. Where one terminal's text is a prefix of another's (GBNF's ``f`` and ``f(``; a
    schema's ``{`` that opens a recursive object beside a whole object kept as one terminal),
    the shorter one tried first hides the longer for good: the longer goes first, and where
    it does not match, the lexer falls back on the shorter match. A lower bound serves (parts
    whose length is not worked out count nothing), and it is kept on each composite node, as
    ``has_rule_ref`` is: shared subtrees would make a fresh walk exponential.
    """
    return min(_shortest(node), 99)


def _shortest(node: Node) -> int:
    if isinstance(node, CharSet):
        return 1
    if isinstance(node, Literals):
        return min(len(o) for o in node.options)
    known: int | None = node.__dict__.get("_shortest")
    if known is None:
        if isinstance(node, Concat):
            known = sum(_shortest(p) for p in node.parts)
        elif isinstance(node, Alt):
            known = min((_shortest(o) for o in node.options), default=0)
        elif isinstance(node, Repeat):
            known = node.low * _shortest(node.node) if node.low else 0
        elif isinstance(node, Difference):
            known = max(_shortest(node.base), 1)
        elif isinstance(node, Intersect):
            known = max((_shortest(p) for p in node.parts), default=0)
        else:  # members, counted and nested values: nothing counted (a lower bound)
            known = 0
        object.__setattr__(node, "_shortest", known)
    return known


def _has_rule_ref(node: Node) -> bool:
    if isinstance(node, Concat):
        return any(has_rule_ref(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(has_rule_ref(o) for o in node.options)
    if isinstance(node, Repeat):
        return has_rule_ref(node.node) or (node.separator is not None and has_rule_ref(node.separator))
    if isinstance(node, Members):
        return any(has_rule_ref(i) for i, _ in node.items) or (node.extra is not None and has_rule_ref(node.extra))
    if isinstance(node, MemberSet):
        checked = (n for pair in node.checked_groups for n in pair)
        return any(has_rule_ref(i) for i in (*node.items, *node.extra_groups, *checked)) or (
            node.extra is not None and has_rule_ref(node.extra))
    if isinstance(node, Intersect):
        return any(has_rule_ref(p) for p in node.parts)
    if isinstance(node, Difference):
        return has_rule_ref(node.base) or any(has_rule_ref(m) for m in node.minus)
    if isinstance(node, Nested):
        return has_rule_ref(node.level)
    if isinstance(node, Length):
        return has_rule_ref(node.node)
    return False


class SkeletonWriter:
    """Lark text for a tree with rule references: every maximal reference-free stretch is
    handed to :meth:`leaf` (which makes it terminals), the structure around the references
    becomes rule text.

    A front end says how a reference is named (:meth:`rule_name`), how a stretch becomes
    terminals (:meth:`leaf`) and what its own node kinds mean (:meth:`other`: the JSON
    Schema front end's members). Text is "" for the empty string and None for a part that
    matches nothing (a dead terminal): a sequence holding one matches nothing, an
    alternative drops it, a repeat of it can only be empty.
    """

    def rule_name(self, node: RuleRef) -> str | None:
        raise NotImplementedError

    def leaf(self, node: Node) -> str | None:
        raise NotImplementedError

    def other(self, node: Node) -> str | None:
        raise TypeError(f"no rule text for a {type(node).__name__} holding a rule reference")

    def expansion(self, node: Node) -> str | None:
        if not has_rule_ref(node):
            return self.leaf(node)
        if isinstance(node, RuleRef):
            return self.rule_name(node)
        if isinstance(node, Concat):
            parts: list[str | None] = []
            pending: list[Node] = []
            for part in node.parts:  # neighbouring reference-free parts make one stretch
                if has_rule_ref(part):
                    if pending:
                        parts.append(self.leaf(seq(*pending)))
                        pending = []
                    parts.append(self.expansion(part))
                else:
                    pending.append(part)
            if pending:
                parts.append(self.leaf(seq(*pending)))
            return joined(*parts)
        if isinstance(node, Alt):
            options = [o for o in (self.expansion(o) for o in node.options) if o is not None]
            if not options:
                return None
            body = " | ".join(f"({o})" for o in options if o)
            if not body:
                return ""
            return f"({body})?" if any(not o for o in options) else f"({body})"
        if isinstance(node, Repeat):
            if node.high == 0:
                return ""
            item = self.expansion(node.node)
            if item is None:
                return "" if node.low == 0 else None
            if node.separator is None:
                return lark_repeat(f"({item})", node.low, node.high)
            separator = self.leaf(node.separator)
            if separator is None:  # one item at most
                return None if node.low > 1 else (f"({item})" if node.low else f"({item})?")
            pair = f"({joined(separator, f'({item})')})"
            tail = lark_repeat(pair, max(node.low - 1, 0), None if node.high is None else node.high - 1)
            core = f"({item}) {tail}".strip()
            return core if node.low else f"({core})?"
        return self.other(node)


def joined(*parts: str | None) -> str | None:
    """Lark text for parts in sequence; None (matches nothing) if any part is."""
    if any(part is None for part in parts):
        return None
    return " ".join(part for part in parts if part)


def lark_repeat(inner: str, low: int, high: int | None) -> str:
    """Lark text for ``inner`` repeated ``low`` to ``high`` (None: unbounded) times."""
    if high is None:
        return {0: f"{inner}*", 1: f"{inner}+"}.get(low, f"{inner}~{low} {inner}*")
    if high == 0:
        return ""
    if (low, high) == (0, 1):
        return f"{inner}?"
    return f"{inner}~{low}..{high}" if low else f"({inner}~1..{high})?"


