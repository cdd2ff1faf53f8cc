"""Conditions on which members an object holds, and of which kind their values are: as bits.

``oneOf: [{required: [image]}, {required: [build]}]`` reads two facts about an object:
is ``image`` there, is ``build`` there. Written as a difference of whole object
languages it is a product automaton searched on every first visit (MaskBench o29445
ran past 30 s); as a condition on the member set's seen bits (``MemberSet.condition``)
it costs a table lookup per member choice.

The same holds one step further. SchemaStore's prometheus schema says "at most one
of six auth methods is set", written as six ``if: {not: {properties: {basic_auth:
{const: null}}}}, then: {properties: {authorization: {const: null}, …}}``: each
condition reads whether a member is absent, present with a value in a class
(``null``), or present with another value. So a name may carry one *class* schema
``X``; the object's member set then holds two items for it, the key with a value in
``P ∩ X`` and the key with a value in ``P − X`` (``P`` its property schema), and the
condition reads their bits. The two items share a key, and every row of the table
keeps one of them absent while the other may be there, so no object holds both.

This module owns the reading: a condition schema into a small formula (``read``), its
truth table over every valuation of the names, and that table as few rows as it can
(``Presence``). The walker (``to_regex``) decides where a condition applies and builds
the items.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Presence", "read", "dependent", "ABSENT", "IN", "OUT", "MAX_NAMES", "MAX_ROWS", "MAX_VALUATIONS"]

#: A name's value in a valuation: absent, present (with a value in its class, where it has
#: one), present with a value outside its class.
ABSENT, IN, OUT = "absent", "in", "out"

#: A condition reads at most this many names, ...
MAX_NAMES = 12
#: ... its truth table is built over at most this many valuations (2 per name, 3 per name
#: with a class: 3^6 · 2^3 = 5,832 for six classed names and three plain ones), ...
MAX_VALUATIONS = 8192
#: ... and holds on at most this many rows once merged: each member choice checks the rows.
#: "Exactly one of 9 keys" (MaskBench o38403's build) is 9 rows, where as a difference of 9
#: object automata it ran into max_dfa_states after 28 s.
MAX_ROWS = 256
#: Conditions nest at most this deep (they are read recursively).
_MAX_DEPTH = 16

#: Keywords a condition may use; every other assertion keyword makes it a general schema.
_CONDITION_KEYWORDS = frozenset({"required", "properties", "not", "anyOf", "oneOf", "allOf", "if", "then", "else"})

Formula = tuple[Any, ...]


def read(
    schema: Any, assertions: frozenset[str], classes: dict[str, str], raw_classes: dict[str, Any], depth: int = 0,
) -> Formula | None:
    """A condition schema as a formula over member presence and value classes, or None where it
    reads anything else (a value's type, a length, a ``$ref``, a member's value in two ways).

    ``classes`` collects, per name, the canonical text of the one class schema that
    ``properties`` gives it (``raw_classes`` the schema itself). Keywords that are not
    ``assertions`` are annotations here, as anywhere.
    """
    if isinstance(schema, bool):
        return ("const", schema)
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return None
    schema = {k: v for k, v in schema.items() if k in assertions}  # the rest: annotations here
    if set(schema) - _CONDITION_KEYWORDS:
        return None
    parts: list[Formula] = []
    if "required" in schema:
        names = schema["required"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return None
        parts.append(("required", tuple(dict.fromkeys(names))))
    if "properties" in schema:
        properties = schema["properties"]
        if not isinstance(properties, dict):
            return None
        for name, sub in properties.items():
            if isinstance(sub, dict) and not set(sub) & assertions:
                sub = True  # annotations only (or keywords the draft does not define): any value
            if sub is True:
                continue
            if sub is False or sub == {"not": {}} or sub == {"not": True}:
                parts.append(("absent", name))
                continue
            text = json.dumps(sub, sort_keys=True)
            if classes.setdefault(name, text) != text:
                return None  # two classes for one name: the items would need more than two kinds
            raw_classes[name] = sub
            parts.append(("class", name))
    for key, kind in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
        if key in schema:
            branches = schema[key]
            if not isinstance(branches, list) or not branches:
                return None
            inner = [read(b, assertions, classes, raw_classes, depth + 1) for b in branches]
            if any(f is None for f in inner):
                return None
            parts.append((kind, tuple(inner)))
    if "not" in schema:
        inner_not = read(schema["not"], assertions, classes, raw_classes, depth + 1)
        if inner_not is None:
            return None
        parts.append(("not", inner_not))
    if "if" in schema:
        sides = [read(schema.get(k, True), assertions, classes, raw_classes, depth + 1)
                 for k in ("if", "then", "else")]  # fmt: skip
        if any(f is None for f in sides):
            return None
        parts.append(("if", *sides))
    return ("all", tuple(parts))


def dependent(name: str, formula: Formula) -> Formula:
    """``dependentSchemas: {name: …}`` as a formula: an object holding ``name`` satisfies
    ``formula``; one without it, and every value that is no object, satisfies it anyway."""
    return ("dependent", name, formula)


def names_of(formula: Formula, out: list[str]) -> list[str]:
    """Every name the formula reads, in first-seen order."""
    kind = formula[0]
    if kind == "required":
        out.extend(n for n in formula[1] if n not in out)
    elif kind in ("absent", "class"):
        if formula[1] not in out:
            out.append(formula[1])
    elif kind in ("all", "any", "one"):
        for f in formula[1]:
            names_of(f, out)
    elif kind == "not":
        names_of(formula[1], out)
    elif kind == "dependent":
        if formula[1] not in out:
            out.append(formula[1])
        names_of(formula[2], out)
    elif kind == "if":
        for f in formula[1:]:
            names_of(f, out)
    return out


def holds(formula: Formula, value: dict[str, str] | None) -> bool:
    """Whether an object whose members are as ``value`` says (name → ABSENT/IN/OUT) satisfies it;
    ``value`` None: a value that is no object, for which ``required`` and ``properties`` hold."""
    kind = formula[0]
    if kind == "const":
        return bool(formula[1])
    if kind in ("required", "absent", "class"):
        if value is None:
            return True
        if kind == "required":
            return all(value[n] != ABSENT for n in formula[1])
        return value[formula[1]] == ABSENT if kind == "absent" else value[formula[1]] != OUT
    if kind == "all":
        return all(holds(f, value) for f in formula[1])
    if kind == "any":
        return any(holds(f, value) for f in formula[1])
    if kind == "one":
        return sum(holds(f, value) for f in formula[1]) == 1
    if kind == "not":
        return not holds(formula[1], value)
    if kind == "dependent":
        return value is None or value[formula[1]] == ABSENT or holds(formula[2], value)
    if_, then, otherwise = formula[1:]
    return holds(then, value) if holds(if_, value) else holds(otherwise, value)


#: A row: per name, the values it allows. Only these sets can be written as bit masks that
#: keep a classed name's two items apart (see ``Presence.clauses``).
_PLAIN_SETS = (frozenset({ABSENT}), frozenset({IN}), frozenset({ABSENT, IN}))
_CLASSED_SETS = (frozenset({ABSENT}), frozenset({IN}), frozenset({OUT}),
                 frozenset({ABSENT, IN}), frozenset({ABSENT, OUT}))  # fmt: skip


@dataclass(frozen=True)
class Presence:
    """A condition over the members ``names``: the rows (per name, the values allowed) on which
    it holds, and whether it holds for a value that is no object (``required`` and
    ``properties`` hold for every one)."""

    names: tuple[str, ...]
    #: Per name, its class schema (None: the condition reads only whether it is there).
    classes: tuple[Any, ...]
    rows: tuple[tuple[frozenset[str], ...], ...]
    others: bool

    @classmethod
    def of(cls, formula: Formula, classes: dict[str, Any]) -> "Presence | None":
        """The condition's table, merged into rows; None past the size bounds above."""
        names = tuple(names_of(formula, []))
        if not names or len(names) > MAX_NAMES:
            return None
        kinds = [(ABSENT, IN, OUT) if n in classes else (ABSENT, IN) for n in names]
        total = 1
        for k in kinds:
            total *= len(k)
        if total > MAX_VALUATIONS:
            return None
        true_rows = [tuple(frozenset({v}) for v in values) for values in itertools.product(*kinds)
                     if holds(formula, dict(zip(names, values)))]  # fmt: skip
        rows = _merged(true_rows, [n in classes for n in names])
        if len(rows) > MAX_ROWS:
            return None
        others = holds(formula, None)
        return cls(names, tuple(classes.get(n) for n in names), tuple(rows), others)

    def class_of(self, name: str) -> Any:
        """The class schema of ``name`` (None where it has none)."""
        return self.classes[self.names.index(name)] if name in self.names else None

    def clauses(
        self, index: dict[tuple[str, str | None], int], required: set[str], high: int | None, required_bits: int,
    ) -> tuple[tuple[int, int], ...]:
        """The rows over member-set item bits, as ``(present, absent)`` masks, that the object's
        own required members (names, and the bits of its required items) and ``maxProperties``
        leave possible. ``index`` maps ``(name, None)`` to a plain member's item and ``(name,
        IN)``/``(name, OUT)`` to a classed name's two items; a value with no item (its schema
        admits none) is impossible."""
        out = []
        for row in self.rows:
            present = absent = 0
            possible = True
            for name, values, kind in zip(self.names, row, self.classes):
                found = {IN: index.get((name, None if kind is None else IN)), OUT: index.get((name, OUT))}
                bits = {v: 1 << bit for v, bit in found.items() if bit is not None}
                allowed = {v for v in values if v == ABSENT or v in bits} - ({ABSENT} if name in required else set())
                if not allowed:
                    possible = False
                    break
                for v, bit in bits.items():  # a value the row leaves out: its item stays unseen
                    if v not in allowed:
                        absent |= bit
                if ABSENT not in allowed:  # exactly one value, which must be there
                    (v,) = allowed
                    present |= bits[v]
            if possible and not absent & required_bits and (high is None or bin(present | required_bits).count("1") <= high):
                out.append((present, absent))
        return tuple(dict.fromkeys(out))


def _merged(rows: list[tuple[frozenset[str], ...]], classed: list[bool]) -> list[tuple[frozenset[str], ...]]:
    """The same set of valuations in fewer rows: rows alike on every name but one become one
    row, where the values they differ in form a set that bit masks can write."""
    for position, has_class in enumerate(classed):
        writable = _CLASSED_SETS if has_class else _PLAIN_SETS
        groups: dict[tuple[frozenset[str], ...], set[str]] = {}
        for row in rows:
            key = row[:position] + row[position + 1 :]
            groups.setdefault(key, set()).update(row[position])
        rows = []
        for key, values in groups.items():
            for part in _cover(frozenset(values), writable):
                rows.append(key[:position] + (part,) + key[position:])
    return rows


def _cover(values: frozenset[str], writable: tuple[frozenset[str], ...]) -> list[frozenset[str]]:
    """``values`` as a union of as few disjoint writable sets as the largest-first choice finds."""
    out, left = [], set(values)
    for candidate in sorted(writable, key=len, reverse=True):
        if candidate <= left:
            out.append(candidate)
            left -= candidate
    return out
