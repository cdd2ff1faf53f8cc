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
from typing import Any, Callable

from ..errors import EmptyLanguageError
from ..skeleton import SkeletonWriter, joined, nullable, terminal_priority
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

#: Where a rule body refers to the rule itself, before the rule has a name (see ``_Writer.rule``).
_SELF = "@self"


@dataclass(frozen=True)
class SchemaGrammar:
    """A recursive schema as lark text over placeholder terminals, and each terminal's tree."""

    text: str
    terminals: dict[str, Node]
    walk: WalkResult


def schema_to_grammar(
    schema: Any, *, remotes: Any = None, limits: Any = None, alive: Callable[[Node], bool] | None = None,
    delegate_unique: bool = False, **options: Any,
) -> SchemaGrammar:
    """The grammar (start rule ``start``) of ``schema``, with the walk (``dropped``, ``ignored``).

    ``alive`` is :func:`tree_to_grammar`'s: whether a terminal's tree matches any text.
    ``delegate_unique`` is :func:`schema_walk`'s: the caller wraps the guide (``walk.unique``).
    """
    walk = schema_walk(load_schema(schema), SchemaOptions(**options), rules=True, remotes=remotes, limits=limits,
                       delegate_unique=delegate_unique)  # fmt: skip
    text, terminals = tree_to_grammar(walk.tree, walk.rules, alive)
    return SchemaGrammar(text, terminals, walk)


def tree_to_grammar(
    start: Node, rules: dict[str, Node], alive: Callable[[Node], bool] | None = None
) -> tuple[str, dict[str, Node]]:
    """Lark text for a start tree and named rule trees (which may refer to each other), and the
    tree of each terminal the text names.

    ``alive(tree)`` says whether a terminal's tree matches any text at all (None: assume so).
    A tree can match nothing where the schema walk could not tell: the keys a ``.*``
    ``patternProperties`` leaves to ``additionalProperties``, a difference of two patterns.
    Such a terminal is left out with everything that needs it (an optional member is just
    not offered), as the regex backend's automaton drops a dead branch: a grammar whose
    terminal never lexes could lead generation into a rule it cannot finish.
    """
    dead_rules: set[str] = set()
    while True:  # a rule that needs a dead terminal is dead, and so are the rules that need it
        writer = _Writer(rules, alive, frozenset(dead_rules))
        top = writer.expansion(start)
        if top is None:
            raise EmptyLanguageError("the schema matches no JSON text at all")
        bodies = {name: writer.expansion(body) for name, body in rules.items()}
        newly_dead = {name for name, body in bodies.items() if body is None} - dead_rules
        if not newly_dead:
            break
        dead_rules |= newly_dead
    lines = [f"start: {top}"]
    lines += [f"{name}: {body}" for name, body in bodies.items() if body is not None]  # dead rules: unused
    lines += writer.extra_rules
    # A placeholder per terminal: lark needs a pattern, and distinct strings keep lark from
    # merging terminals or renaming one into another. The priority puts the longer of two
    # terminals that share a prefix first (``terminal_priority``): a whole object kept as one
    # terminal beside the ``{`` of a recursive one (MaskBench o71453's two oneOf branches).
    lines += [f'{name}.{terminal_priority(tree)}: "<{name}>"' for tree, name in writer.terminals.items()]
    return "\n".join(lines) + "\n", {name: tree for tree, name in writer.terminals.items()}


@dataclass
class _Writer(SkeletonWriter):
    """One pass over the trees (see :class:`~constrain.skeleton.SkeletonWriter`), with the
    members of objects as rules and the dead rules of earlier passes left out."""

    rules: dict[str, Node]
    alive: Callable[[Node], bool] | None = None
    dead_rules: frozenset[str] = frozenset()
    terminals: dict[Node, str] = field(default_factory=dict)
    extra_rules: list[str] = field(default_factory=list)
    #: Rule bodies already written, and the name each was written under (see ``rule``).
    named: dict[str, str] = field(default_factory=dict)
    _members: int = 0

    def rule_name(self, node: RuleRef) -> str | None:
        return None if node.name in self.dead_rules else node.name

    def other(self, node: Node) -> str | None:
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

    def members(self, node: Members) -> str | None:
        """Ordered members as two chains of rules, linear in the member count."""
        bodies = [self.expansion(item) for item, _ in node.items]
        if any(body is None and required for body, (_, required) in zip(bodies, node.items)):
            return None
        sep = self.leaf(node.separator)
        if sep is None:
            raise SchemaError("this schema's member separator matches nothing")
        extra = None if node.extra is None else self.expansion(node.extra)
        k = self._members
        self._members += 1
        n = len(node.items)
        first = [f"m{k}_first_{i}" for i in range(n + 1)]
        later = [f"m{k}_later_{i}" for i in range(n + 1)]
        for i, (body, (_, required)) in enumerate(zip(bodies, node.items)):
            first_options = [joined(body, later[i + 1])] + ([] if required else [first[i + 1]])
            later_options = [joined(sep, body, later[i + 1])] + ([] if required else [later[i + 1]])
            self.extra_rules.append(f"{first[i]}: " + " | ".join(o for o in first_options if o is not None))
            self.extra_rules.append(f"{later[i]}: " + " | ".join(o for o in later_options if o is not None))
        if extra is not None:
            self.extra_rules.append(f"{first[n]}: ({extra} {later[n]})?")
            self.extra_rules.append(f"{later[n]}: " + ("" if sep is None else f"({sep} {extra})*"))
        else:
            self.extra_rules.append(f"{first[n]}: ")
            self.extra_rules.append(f"{later[n]}: ")
        return first[0]

    def member_set(self, node: MemberSet) -> str | None:
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
        required = list(node.required)
        tracked = {j: self.expansion(node.items[j]) for j in required}
        if any(body is None for body in tracked.values()):
            return None
        sep = self.leaf(node.separator)
        if sep is None:
            raise SchemaError("this schema's member separator matches nothing")
        candidates = [self.expansion(item) for i, item in enumerate(node.items) if i not in node.required]
        if node.extra is not None:
            candidates.append(self.expansion(node.extra))
        others = [o for o in candidates if o is not None]
        k = self._members
        self._members += 1
        other = self.rule(f"m{k}_other", " | ".join(f"({o})" for o in others)) if others else ""
        seen: dict[int, str] = {}
        for subset in range(1 << len(required)):
            options = [f"{_SELF} {sep} {other}"] if others else []
            for bit, j in enumerate(required):
                if subset >> bit & 1:
                    options.append(f"{_SELF} {sep} {tracked[j]}")  # again: its last copy counts
                    before = subset & ~(1 << bit)
                    options.append(f"{seen[before]} {sep} {tracked[j]}" if before or others else "")
                    if not before:
                        options.append(f"{tracked[j]}")  # the first member
            if not subset and others:
                options.append(other)
            options = [o for o in options if o]
            seen[subset] = self.rule(f"m{k}_seen_{subset}", " | ".join(dict.fromkeys(options))) if options else ""
        full = seen[(1 << len(required)) - 1]
        return full if required else (f"{full}?" if others else "")

    def rule(self, name: str, body: str) -> str:
        """A rule for ``body`` (``_SELF`` where it refers to itself), or the rule already written for it.

        Two member sets of one ``anyOf`` often share their optional members. Written as two
        rules with the same body, they put a reduce/reduce conflict in every LALR state the
        branches share (the parser must choose a rule before the key that decides the branch);
        one rule for one body defines the same language and leaves the choice to that key.
        """
        existing = self.named.get(body)
        if existing is None:
            existing = self.named[body] = name
            self.extra_rules.append(f"{name}: " + body.replace(_SELF, name))
        return existing

    def leaf(self, node: Node) -> str | None:
        """A reference-free tree as one terminal; a nullable one as an optional terminal."""
        if node == EMPTY or (isinstance(node, Concat) and not node.parts):
            return ""
        if not nullable(node):
            return self.terminal(node)
        if isinstance(node, Repeat) and not nullable(node.node):
            solid = node.node if node.high == 1 else Repeat(node.node, 1, node.high, node.separator)
            name = self.terminal(solid)
            return "" if name is None else f"{name}?"
        if isinstance(node, Alt):
            solid_options = [o for o in node.options if not nullable(o)]
            if len(solid_options) == len(node.options) - sum(1 for o in node.options if o == EMPTY):
                name = self.terminal(Alt(tuple(solid_options))) if solid_options else None
                return "" if name is None else f"{name}?"
        if isinstance(node, Concat):
            return joined(*(self.leaf(part) for part in node.parts))
        raise SchemaError("this schema needs an empty-matching piece the grammar backend cannot express")

    def terminal(self, node: Node) -> str | None:
        """The terminal for a tree that matches no empty text; None if it matches no text at all."""
        if self.alive is not None and not self.alive(node):
            return None
        if node not in self.terminals:
            self.terminals[node] = f"T{len(self.terminals)}"
        return self.terminals[node]
