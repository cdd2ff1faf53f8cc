"""``inclusion.contained``: a structural proof of ``L(a) ⊆ L(b)``, judged by independent oracles.

The proof only ever skips work (a difference it shows empty is never searched), so the one
thing that must hold is soundness: wherever it says "contained", every text of ``a`` is a
text of ``b``. Judged by Python's ``re`` over every short text for generated patterns, and by
the ``jsonschema`` library over generated instances for schemas; and it must say so often
enough to matter (the widened patterns and the ``oneOf`` of real schemas below).
"""

from __future__ import annotations

import itertools
import json
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrain import Compiler
from constrain.json_schema import SchemaOptions, load_schema, schema_walk
from constrain.regex.automaton import narrowed
from constrain.regex.inclusion import contained
from constrain.regex.parse import parse_regex
from constrain.regex.tree import NOTHING, Difference, Repeat, alt, literal
from constrain.testing import accepts, tokenize_continuation

ALPHABET = "ab"
TEXTS = ["".join(t) for n in range(7) for t in itertools.product(ALPHABET, repeat=n)]


def _atoms() -> st.SearchStrategy[str]:
    return st.sampled_from(["a", "b", "[ab]", "[a]", "()", "ab", "ba"])


def _pattern(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    quantifier = st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}"])
    return st.one_of(
        st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
        st.tuples(inner, inner).map(lambda p: f"({p[0]}|{p[1]})"),
        st.tuples(inner, quantifier).map(lambda p: f"({p[0]}){p[1]}"),
    )


PATTERNS = st.recursive(_atoms(), _pattern, max_leaves=6)

#: Rewrites that only widen a pattern's language, so that the pair (pattern, widened) is
#: contained and the proof has something to show.
WIDENINGS = [("+", "*"), ("{2}", "{1,3}"), ("{1,3}", "{0,}"), ("[a]", "[ab]"), ("?", "*"), ("{2,}", "+")]


def _language(pattern: str) -> set[str]:
    compiled = re.compile(pattern)
    return {t for t in TEXTS if compiled.fullmatch(t)}


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(PATTERNS, PATTERNS, st.integers(0, len(WIDENINGS) - 1))
def test_a_shown_inclusion_holds_for_every_short_text(a: str, other: str, widening: int) -> None:
    old, new = WIDENINGS[widening]
    for b in (other, a.replace(old, new), f"({a}|{other})", a):
        if contained(parse_regex(a), parse_regex(b)):
            assert _language(a) <= _language(b), (a, b)


def test_the_proof_shows_widened_patterns_and_refuses_narrowed_ones() -> None:
    """Not vacuous: the pairs a widening makes are shown, and none of their reverses that ``re``
    tells apart is."""
    pairs = [("a+b", "a*b"), ("(?:ab){2}", "(?:ab){1,3}"), ("[a]b?", "[ab]b*"), ("a|b", "[ab]"),
             ("ab", "a(?:b|ba)"), ("(?:a|b)+", "[ab]*"), ("a{2,}", "a+")]  # fmt: skip
    for a, b in pairs:
        assert contained(parse_regex(a), parse_regex(b)), (a, b)
        if not _language(b) <= _language(a):
            assert not contained(parse_regex(b), parse_regex(a)), (b, a)


def test_a_repeat_without_a_separator_is_not_one_with_a_separator() -> None:
    """``xx`` is no text of ``x(,x)*`` and ``x,x`` none of ``x*``: only a repeat of at most one copy
    has no separator to compare (array items are repeats with a separator; patterns are not)."""
    x, comma = literal("x"), literal(",")
    assert not contained(Repeat(x, 0, None), Repeat(x, 0, None, comma))
    assert not contained(Repeat(x, 0, None, comma), Repeat(x, 0, None))
    assert contained(Repeat(x, 0, 1), Repeat(x, 0, None, comma))
    assert contained(Repeat(x, 1, 3, comma), Repeat(x, 0, None, alt(comma, literal(";"))))


def _tree(schema: object) -> object:
    return schema_walk(load_schema(schema), SchemaOptions(strict_properties=False)).tree


HEX = {"type": "string", "pattern": "^[a-f0-9]+$"}
HEX_OR_EMPTY = {"type": "string", "pattern": "^[a-f0-9]*$"}


def _package(checksum: dict[str, object], system: str) -> dict[str, object]:
    """MaskBench o25731's shape: a oneOf whose branches differ in an enum and in + against *."""
    return {
        "properties": {
            "attributes": {"type": "object", "required": ["system"], "properties": {"system": {"enum": [system]}}},
            "items": {"type": "array", "items": {"type": "object", "required": ["name", "sum"],
                                                 "properties": {"name": {"type": "string"}, "sum": checksum}}},
        }
    }  # fmt: skip


SCHEMA_PAIRS = [
    ({"type": "object", "properties": {"sum": HEX}, "required": ["sum"]},
     {"type": "object", "properties": {"sum": HEX_OR_EMPTY}, "required": ["sum"]}, True),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}, True),
    ({"type": "array", "items": HEX, "minItems": 2}, {"type": "array", "items": HEX_OR_EMPTY}, True),
    ({"enum": ["rpm"]}, {"enum": ["rpm", "dpkg"]}, True),
    ({"type": "string", "minLength": 3}, {"type": "string"}, True),
    ({"type": "object", "properties": {"sum": HEX_OR_EMPTY}, "required": ["sum"]},
     {"type": "object", "properties": {"sum": HEX}, "required": ["sum"]}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}}},
     {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]}, True),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]},
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}, False),
    ({"type": "object", "properties": {"a": HEX, "b": {"type": "array", "items": HEX}}, "required": ["a"]},
     {"type": "object", "properties": {"a": HEX_OR_EMPTY, "b": {"type": "array", "items": HEX_OR_EMPTY}}, "required": ["a", "b"]},
     False),
    ({"type": "object", "properties": {"a": HEX, "b": {"type": "array", "items": HEX}}, "required": ["a", "b"]},
     {"type": "object", "properties": {"a": HEX_OR_EMPTY, "b": {"type": "array", "items": HEX_OR_EMPTY}}, "required": ["a"]},
     True),
]  # fmt: skip

INSTANCES = [
    {}, {"sum": "ab"}, {"sum": ""}, {"sum": "xyz"}, {"a": 1}, {"a": 1, "b": "x"}, {"b": "x"}, {"a": "1"},
    {"x": 1}, {"x": [1, {"y": None}]}, [], ["ab", "cd"], ["ab", ""], ["ab"], "rpm", "dpkg", 3,
    {"a": "ab", "b": ["cd"]}, {"a": "ab"}, {"a": "", "b": []}, {"a": "ab", "b": [""]},
]  # fmt: skip


@pytest.mark.parametrize("a, b, expected", SCHEMA_PAIRS)
def test_schema_inclusion_is_shown_where_jsonschema_agrees(a: dict, b: dict, expected: bool) -> None:
    shown = contained(_tree(a), _tree(b))
    assert shown == expected
    if shown:  # every instance of a that jsonschema accepts, it accepts for b too
        for instance in INSTANCES:
            if jsonschema.Draft202012Validator(a).is_valid(instance):
                assert jsonschema.Draft202012Validator(b).is_valid(instance), instance


def test_a_difference_shown_empty_is_no_product() -> None:
    """``a - b`` with ``a`` inside ``b`` narrows to nothing: no liveness search runs (before, it ran out
    of budget where values nest without bound and counted the start dead unproved)."""
    a = _tree({"type": "object", "properties": {"sum": HEX}, "required": ["sum"]})
    b = _tree({"type": "object", "properties": {"sum": HEX_OR_EMPTY}, "required": ["sum"]})
    assert narrowed(Difference(a, (b,))) == NOTHING
    assert narrowed(Difference(b, (a,))) != NOTHING


def test_a_one_of_whose_branches_differ_in_one_place_stays_exact(compiler: Compiler, tokenizer: object) -> None:
    """Each tokenizer family, token by token: exactly one branch, as ``jsonschema`` judges."""
    schema = {"type": "object", "oneOf": [_package(HEX, "rpm"), _package(HEX_OR_EMPTY, "dpkg")]}
    guide = compiler.json_schema(schema, strict_properties=False)
    instances = [
        {"attributes": {"system": "rpm"}, "items": [{"name": "x", "sum": "ab"}]},
        {"attributes": {"system": "dpkg"}, "items": [{"name": "x", "sum": ""}]},
        {"attributes": {"system": "rpm"}, "items": [{"name": "x", "sum": ""}]},
        {"attributes": {"system": "dpkg"}, "items": [{"name": "x", "sum": "zz"}]},
        {"items": [{"name": "x", "sum": "ab"}]},  # both branches hold it: not exactly one
        {"attributes": {"system": "yum"}, "items": []},
        {"attributes": {"system": "rpm"}},
    ]
    verdicts = []
    for instance in instances:
        text = json.dumps(instance)
        valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
        verdicts.append(valid)
        assert accepts(guide, tokenize_continuation(tokenizer, text)) == valid, text
    assert True in verdicts and False in verdicts
