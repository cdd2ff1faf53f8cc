"""JSON Schema → Lark grammar, for the schemas a regex cannot express (recursive ``$ref``s).

The same keyword walker as the regex path runs in *rules mode*: every ``$ref`` on a
cycle becomes a rule reference instead of an error or an unrolling, so both backends
enforce the same keywords with the same no-silent-drop policy. This module turns the
resulting trees into Lark: each maximal part of a tree without a rule reference
becomes **one terminal** (its regex rendered from the tree, whitespace included, so no
``%ignore`` is needed), and only the structure around the references becomes rules.
Object members keep the linear two-chain shape of the regex automaton (``first_i``:
nothing emitted yet; ``later_i``: a separator comes first).

Lark's own parser is then the exact oracle of the guide. A text it accepts is in the
schema's language; the other direction depends on Lark's lexer not splitting a text
differently than the tree would — over-constrained at worst, never under-constrained.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..regex.tree import EMPTY, Alt, CharSet, Concat, Literals, Members, Node, Repeat, RuleRef, render
from .to_regex import SchemaError, SchemaOptions, UnsupportedSchemaError, WalkResult, load_schema, schema_walk

__all__ = ["schema_to_lark", "tree_to_lark"]


def schema_to_lark(schema: Any, *, remotes: Any = None, **options: Any) -> tuple[str, WalkResult]:
    """Lark grammar text (start rule ``start``) for ``schema``, and the walk (``dropped``, ``ignored``)."""
    walk = schema_walk(load_schema(schema), SchemaOptions(**options), rules=True, remotes=remotes)
    return tree_to_lark(walk.tree, walk.rules), walk


def tree_to_lark(start: Node, rules: dict[str, Node]) -> str:
    """Lark grammar text for a start tree and named rule trees (which may refer to each other)."""
    writer = _Writer(rules)
    lines = [f"start: {writer.expansion(start)}"]
    for name, body in rules.items():
        lines.append(f"{name}: {writer.expansion(body)}")
    lines += writer.extra_rules
    lines += [f"{name}: /{_lark_regex(regex)}/" for regex, name in writer.terminals.items()]
    return "\n".join(lines) + "\n"


@dataclass
class _Writer:
    rules: dict[str, Node]
    terminals: dict[str, str] = field(default_factory=dict)
    extra_rules: list[str] = field(default_factory=list)
    _members: int = 0

    def expansion(self, node: Node) -> str:
        if not _has_ref(node):
            return self.leaf(node)
        if isinstance(node, RuleRef):
            return node.name
        if isinstance(node, Concat):
            parts, pending = [], []
            for part in node.parts:  # neighbouring reference-free parts make one terminal
                if _has_ref(part):
                    if pending:
                        parts.append(self.leaf(Concat(tuple(pending))))
                        pending = []
                    parts.append(self.expansion(part))
                else:
                    pending.append(part)
            if pending:
                parts.append(self.leaf(Concat(tuple(pending))))
            return " ".join(p for p in parts if p)
        if isinstance(node, Alt):
            options = [self.expansion(o) for o in node.options]
            body = " | ".join(o for o in options if o)
            return f"({body})?" if any(not o for o in options) else f"({body})"
        if isinstance(node, Repeat) and node.separator is not None:
            if node.high == 0:
                return ""
            item = f"({self.expansion(node.node)})"
            pair = f"({self.leaf(node.separator)} {item})"
            tail = _repeat(pair, max(node.low - 1, 0), None if node.high is None else node.high - 1)
            core = f"{item} {tail}".strip()
            return core if node.low else f"({core})?"
        if isinstance(node, Repeat):
            return _repeat(f"({self.expansion(node.node)})", node.low, node.high)
        if isinstance(node, Members):
            return self.members(node)
        raise SchemaError(f"cannot express {type(node).__name__} in a grammar")

    def members(self, node: Members) -> str:
        """Ordered members as two chains of rules, linear in the member count."""
        k = self._members
        self._members += 1
        n = len(node.items)
        sep = self.leaf(node.separator)
        first = [f"m{k}_first_{i}" for i in range(n + 1)]
        later = [f"m{k}_later_{i}" for i in range(n + 1)]
        for i, (item, required) in enumerate(node.items):
            body = self.expansion(item)
            first_options = [f"{body} {later[i + 1]}"] + ([] if required else [first[i + 1]])
            later_options = [f"{sep} {body} {later[i + 1]}"] + ([] if required else [later[i + 1]])
            self.extra_rules.append(f"{first[i]}: " + " | ".join(first_options))
            self.extra_rules.append(f"{later[i]}: " + " | ".join(later_options))
        if node.extra is not None:
            extra = self.expansion(node.extra)
            self.extra_rules.append(f"{first[n]}: ({extra} {later[n]})?")
            self.extra_rules.append(f"{later[n]}: ({sep} {extra})*")
        else:
            self.extra_rules.append(f"{first[n]}: ")
            self.extra_rules.append(f"{later[n]}: ")
        return first[0]

    def leaf(self, node: Node) -> str:
        """A reference-free tree as one terminal; a nullable one as an optional terminal."""
        if node == EMPTY or (isinstance(node, Concat) and not node.parts):
            return ""
        if not _nullable(node):
            return self.terminal(node)
        if isinstance(node, Repeat) and not _nullable(node.node):
            solid = node.node if node.high == 1 else Repeat(node.node, 1, node.high, node.separator)
            return f"{self.terminal(solid)}?"
        if isinstance(node, Alt):
            solid = [o for o in node.options if not _nullable(o)]
            if len(solid) == len(node.options) - sum(1 for o in node.options if o == EMPTY):
                return f"{self.terminal(Alt(tuple(solid)))}?" if solid else ""
        if isinstance(node, Concat):
            return " ".join(p for p in (self.leaf(part) for part in node.parts) if p)
        raise SchemaError("this schema needs an empty-matching piece the grammar backend cannot express")

    def terminal(self, node: Node) -> str:
        try:
            regex = render(node)
        except TypeError:  # an intersection or difference: no regex text for lark's lexer
            raise UnsupportedSchemaError(
                "patternProperties", "#",
                "a recursive schema (grammar backend) cannot hold an intersection or difference of patterns "
                "(patternProperties, propertyNames, pattern with format or length limits, not, oneOf) yet",
            ) from None
        if regex not in self.terminals:
            self.terminals[regex] = f"T{len(self.terminals)}"
        return self.terminals[regex]


def _repeat(inner: str, low: int, high: int | None) -> str:
    """Lark text for ``inner`` repeated ``low`` to ``high`` (None: unbounded) times."""
    if high is None:
        return {0: f"{inner}*", 1: f"{inner}+"}.get(low, f"{inner}~{low} {inner}*")
    if high == 0:
        return ""
    if (low, high) == (0, 1):
        return f"{inner}?"
    return f"{inner}~{low}..{high}" if low else f"({inner}~1..{high})?"


def _has_ref(node: Node) -> bool:
    if isinstance(node, RuleRef):
        return True
    if isinstance(node, Concat):
        return any(_has_ref(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(_has_ref(o) for o in node.options)
    if isinstance(node, Repeat):
        return _has_ref(node.node) or (node.separator is not None and _has_ref(node.separator))
    if isinstance(node, Members):
        return any(_has_ref(i) for i, _ in node.items) or (node.extra is not None and _has_ref(node.extra))
    return False


def _nullable(node: Node) -> bool:
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Literals):
        return any(not o for o in node.options)
    if isinstance(node, Concat):
        return all(_nullable(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(_nullable(o) for o in node.options)
    if isinstance(node, Repeat):
        return node.low == 0 or _nullable(node.node)
    if isinstance(node, Members):
        return not any(required for _, required in node.items)
    return False


def _lark_regex(regex: str) -> str:
    """A Python regex as the body of a Lark ``/.../`` literal: only '/' needs escaping."""
    out, escaped = [], False
    for char in regex:
        if char == "/" and not escaped:
            out.append("\\/")
        else:
            out.append(char)
        escaped = char == "\\" and not escaped
    return "".join(out)
