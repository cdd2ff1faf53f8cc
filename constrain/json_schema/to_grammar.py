"""JSON Schema → Lark grammar, for the schemas a regex cannot express (recursive ``$ref``s).

The same keyword walker as the regex path runs in *rules mode*: every ``$ref`` on a
cycle becomes a rule reference instead of an error or an unrolling, so both backends
enforce the same keywords with the same no-silent-drop policy. This module turns the
resulting trees into Lark: each maximal part of a tree without a rule reference
becomes **one terminal**, and only the structure around the references becomes rules.
Object members keep the linear two-chain shape of the regex automaton (``first_i``:
nothing emitted yet; ``later_i``: a separator comes first).

A terminal's language is its *tree*, compiled by the regex backend (whitespace included,
so no ``%ignore`` is needed); lark only sees a placeholder string for it. So lark's LALR
construction works on the recursive skeleton alone — a Kubernetes or SchemaStore schema
has a few dozen terminals, each of which may stand for thousands of regex states that
lark never has to read (rendered as regex text they took megabytes, and lark minutes).
Every lexeme is in its terminal's language and every terminal sequence is one the
skeleton derives, so whatever the guide accepts is valid; where two terminals of one
lexer context share a prefix, the first in lark's order wins (over-constrained at worst).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..skeleton import has_rule_ref, lark_repeat, nullable
from ..regex.tree import EMPTY, Alt, Concat, Members, MemberSet, Node, Repeat, RuleRef
from .to_regex import (
    MAX_TRACKED_REQUIRED,
    SchemaError,
    SchemaOptions,
    UnsupportedSchemaError,
    WalkResult,
    load_schema,
    schema_walk,
)

__all__ = ["SchemaGrammar", "schema_to_grammar", "tree_to_grammar"]


@dataclass(frozen=True)
class SchemaGrammar:
    """A recursive schema as lark text over placeholder terminals, and each terminal's tree."""

    text: str
    terminals: dict[str, Node]
    walk: WalkResult


def schema_to_grammar(schema: Any, *, remotes: Any = None, limits: Any = None, **options: Any) -> SchemaGrammar:
    """The grammar (start rule ``start``) of ``schema``, with the walk (``dropped``, ``ignored``)."""
    walk = schema_walk(load_schema(schema), SchemaOptions(**options), rules=True, remotes=remotes, limits=limits)
    text, terminals = tree_to_grammar(walk.tree, walk.rules)
    return SchemaGrammar(text, terminals, walk)


def tree_to_grammar(start: Node, rules: dict[str, Node]) -> tuple[str, dict[str, Node]]:
    """Lark text for a start tree and named rule trees (which may refer to each other), and the
    tree of each terminal the text names."""
    writer = _Writer(rules)
    lines = [f"start: {writer.expansion(start)}"]
    for name, body in rules.items():
        lines.append(f"{name}: {writer.expansion(body)}")
    lines += writer.extra_rules
    # A placeholder per terminal: lark needs a pattern, and distinct strings keep lark from
    # merging terminals or renaming one into another.
    lines += [f'{name}: "<{name}>"' for name in writer.terminals.values()]
    return "\n".join(lines) + "\n", {name: tree for tree, name in writer.terminals.items()}


@dataclass
class _Writer:
    rules: dict[str, Node]
    terminals: dict[Node, str] = field(default_factory=dict)
    extra_rules: list[str] = field(default_factory=list)
    _members: int = 0

    def expansion(self, node: Node) -> str:
        if not has_rule_ref(node):
            return self.leaf(node)
        if isinstance(node, RuleRef):
            return node.name
        if isinstance(node, Concat):
            parts: list[str] = []
            pending: list[Node] = []
            for part in node.parts:  # neighbouring reference-free parts make one terminal
                if has_rule_ref(part):
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
            tail = lark_repeat(pair, max(node.low - 1, 0), None if node.high is None else node.high - 1)
            core = f"{item} {tail}".strip()
            return core if node.low else f"({core})?"
        if isinstance(node, Repeat):
            return lark_repeat(f"({self.expansion(node.node)})", node.low, node.high)
        if isinstance(node, Members):
            return self.members(node)
        if isinstance(node, MemberSet):
            return self.member_set(node)
        # A context-free language has no intersection or complement in general: a recursive
        # reference under one of these stays refused, by name.
        raise UnsupportedSchemaError(
            "$ref", "#",
            "a recursive reference inside not, an overlapping oneOf, an allOf that needs an intersection or "
            "members in any order cannot be expressed by the grammar backend",
        )

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

    def member_set(self, node: MemberSet) -> str:
        """Members in any order, where some value refers to a rule: a list of members, with
        rules that track which required members were seen.

        A member may repeat here, which the regex automaton's bit set forbids. That is
        sound: every copy's value is checked and a parser keeps the last one, so the value
        read is one the schema accepts (and ``json.dumps`` never repeats a key). What must
        be tracked is only that each required member comes: one rule per subset of them.
        Past ``MAX_TRACKED_REQUIRED`` required members the members keep definition order instead
        (stricter). Counting members (``minProperties``, ``maxProperties``) and
        ``dependentRequired`` need every member tracked, and stay refused.
        """
        bounds = (("minProperties", node.min_count), ("maxProperties", node.max_count is not None),
                  ("dependentRequired", node.dependencies), ("oneOf", node.condition))  # fmt: skip
        counted = [name for name, on in bounds if on]
        if counted:
            raise UnsupportedSchemaError(counted[0], "#", f"{counted[0]} on an object that holds a recursive "
                                         "reference (its members are not counted)")  # fmt: skip
        if node.ordered or len(node.required) > MAX_TRACKED_REQUIRED:  # definition order: stricter, linear
            return self.members(Members(tuple((item, i in node.required) for i, item in enumerate(node.items)),
                                        node.separator, node.extra))  # fmt: skip
        k = self._members
        self._members += 1
        sep = self.leaf(node.separator)
        required = list(node.required)
        others = [self.expansion(item) for i, item in enumerate(node.items) if i not in node.required]
        if node.extra is not None:
            others.append(self.expansion(node.extra))
        tracked = {j: self.expansion(node.items[j]) for j in required}
        other = f"m{k}_other"
        if others:
            self.extra_rules.append(f"{other}: " + " | ".join(f"({o})" for o in others))

        def seen(subset: int) -> str:
            return f"m{k}_seen_{subset}"

        for subset in range(1 << len(required)):
            options = [f"{seen(subset)} {sep} {other}"] if others else []
            for bit, j in enumerate(required):
                if subset >> bit & 1:
                    options.append(f"{seen(subset)} {sep} {tracked[j]}")  # again: its last copy counts
                    before = subset & ~(1 << bit)
                    options.append(f"{seen(before)} {sep} {tracked[j]}" if before or others else "")
                    if not before:
                        options.append(tracked[j])  # the first member
            if not subset and others:
                options.append(other)
            options = [o for o in options if o]
            if options:
                self.extra_rules.append(f"{seen(subset)}: " + " | ".join(dict.fromkeys(options)))
        full = seen((1 << len(required)) - 1)
        return full if required else (f"{full}?" if others else "")

    def leaf(self, node: Node) -> str:
        """A reference-free tree as one terminal; a nullable one as an optional terminal."""
        if node == EMPTY or (isinstance(node, Concat) and not node.parts):
            return ""
        if not nullable(node):
            return self.terminal(node)
        if isinstance(node, Repeat) and not nullable(node.node):
            solid = node.node if node.high == 1 else Repeat(node.node, 1, node.high, node.separator)
            return f"{self.terminal(solid)}?"
        if isinstance(node, Alt):
            solid_options = [o for o in node.options if not nullable(o)]
            if len(solid_options) == len(node.options) - sum(1 for o in node.options if o == EMPTY):
                return f"{self.terminal(Alt(tuple(solid_options)))}?" if solid_options else ""
        if isinstance(node, Concat):
            return " ".join(p for p in (self.leaf(part) for part in node.parts) if p)
        raise SchemaError("this schema needs an empty-matching piece the grammar backend cannot express")

    def terminal(self, node: Node) -> str:
        if node not in self.terminals:
            self.terminals[node] = f"T{len(self.terminals)}"
        return self.terminals[node]


