"""What the front ends that write Lark skeletons over regex terminals share.

The JSON Schema front end (:mod:`constrain.json_schema.to_grammar`) and the GBNF one
(:mod:`constrain.gbnf`) both keep every recursion-free stretch of a tree as one
terminal and write only the structure around rule references as Lark text: this module
holds the two pieces of that which do not depend on the source language.
"""

from __future__ import annotations

from .regex.tree import (
    Alt, CharSet, Concat, Difference, Intersect, Length, Literals, Members, MemberSet, Nested, Node, Repeat, RuleRef, Tick,
)

__all__ = ["has_rule_ref", "lark_repeat", "nullable"]


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
        return any(has_rule_ref(i) for i in node.items) or (node.extra is not None and has_rule_ref(node.extra))
    if isinstance(node, Intersect):
        return any(has_rule_ref(p) for p in node.parts)
    if isinstance(node, Difference):
        return has_rule_ref(node.base) or any(has_rule_ref(m) for m in node.minus)
    if isinstance(node, Nested):
        return has_rule_ref(node.level)
    if isinstance(node, Length):
        return has_rule_ref(node.node)
    return False


def lark_repeat(inner: str, low: int, high: int | None) -> str:
    """Lark text for ``inner`` repeated ``low`` to ``high`` (None: unbounded) times."""
    if high is None:
        return {0: f"{inner}*", 1: f"{inner}+"}.get(low, f"{inner}~{low} {inner}*")
    if high == 0:
        return ""
    if (low, high) == (0, 1):
        return f"{inner}?"
    return f"{inner}~{low}..{high}" if low else f"({inner}~1..{high})?"


def nullable(node: Node) -> bool:
    """Whether ``node`` matches the empty string (Lark has no empty terminals)."""
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
