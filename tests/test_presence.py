"""``oneOf``/``anyOf``/``not`` over ``required``: which members are there, as the object's own bits.

``oneOf: [{required: [image]}, {required: [build_directory]}]`` is a condition on two of
the member set's seen bits, but written as a difference of whole object languages it
was a product searched on each first visit (MaskBench o29445 ran past 30 s). The walker
now hands such a condition to the member set (``MemberSet.condition``). Checked here
against ``jsonschema``: every subset of the members, random walks, no dead end, both
property modes, and values that are not objects.
"""

from __future__ import annotations

import itertools
import json
import random

import jsonschema
import pytest

import constrain
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex.tree import Difference, MemberSet
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

PROPERTIES = {
    "image": {"type": "string", "maxLength": 5},
    "args": {"type": "integer"},
    "dockerfile": {"type": "boolean"},
    "directory": {"type": "string", "maxLength": 4},
    "other": {"type": "null"},
}
VALUES = {"image": "ab", "args": 3, "dockerfile": True, "directory": "x", "other": None}

CASES = {
    "exactly one, one side with a not": {
        "type": "object", "properties": PROPERTIES, "additionalProperties": False,
        "oneOf": [{"not": {"required": ["args", "dockerfile"]}, "required": ["image"]}, {"required": ["directory"]}],
    },
    "any of two, no type": {"properties": PROPERTIES, "anyOf": [{"required": ["image"]}, {"required": ["other"]}]},
    "required beside a not": {
        "type": "object", "properties": PROPERTIES, "required": ["other"],
        "not": {"anyOf": [{"required": ["image"]}, {"required": ["dockerfile"]}]},
    },
    "with maxProperties": {
        "type": "object", "properties": PROPERTIES, "maxProperties": 2,
        "oneOf": [{"required": ["image", "other"]}, {"required": ["dockerfile"]}, {"allOf": [{"required": ["args"]}]}],
    },
    "not alone, no type": {"properties": PROPERTIES, "not": {"required": ["image"]}},
}  # fmt: skip


def _nodes(node: object) -> list[object]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        for name in ("parts", "options", "items", "node", "base", "minus"):
            value = getattr(n, name, None)
            stack += [v for v in (value if isinstance(value, tuple) else (value,)) if hasattr(v, "__dataclass_fields__")]
    return out


@pytest.mark.parametrize("strict", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["spec", "strict"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_presence_conditions_match_jsonschema(smollm2: object, name: str, strict: bool) -> None:
    schema = CASES[name]
    tree = schema_walk(schema, SchemaOptions(strict_properties=strict)).tree
    assert not any(isinstance(n, Difference) for n in _nodes(tree)), "a product where bits do"
    assert any(isinstance(n, MemberSet) and n.condition for n in _nodes(tree))
    validator = jsonschema.Draft202012Validator(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=strict)
    for size in range(len(VALUES) + 1):  # every subset of the members, in definition order
        for names in itertools.combinations(VALUES, size):
            text = json.dumps({n: VALUES[n] for n in names})
            assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text
    for text in ["1", '"s"', "null", "[]"]:  # `required` holds for every value that is not an object
        assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text
    rng = random.Random(4)
    finished = 0
    for _ in range(30):
        ids, done = random_walk(guide, guide.vocabulary, rng, max_tokens=80, eos_probability=0.5)
        state = guide.initial_state
        for token in ids:
            assert guide.allowed_tokens(state).any(), "a dead end"
            state = guide.advance(state, token)
        if done:
            finished += 1
            text = token_text(guide.vocabulary, ids).decode()
            assert validator.is_valid(json.loads(text)), text
    if strict or schema.get("additionalProperties") is False:  # open keys: random walks rarely close one
        assert finished


def test_a_condition_no_object_meets_is_an_empty_language(smollm2: object) -> None:
    """Both branches hold together or not at all: no object, and no other value, is valid."""
    schema = {"properties": PROPERTIES, "oneOf": [{"required": ["image"]}, {"required": ["image"]}]}
    with pytest.raises(constrain.EmptyLanguageError):
        constrain.Compiler(smollm2).json_schema(schema)


def test_other_keywords_in_the_branches_keep_the_general_way() -> None:
    """A branch that constrains a value, not only presence, is not a condition on bits."""
    schema = {"type": "object", "properties": PROPERTIES,
              "oneOf": [{"required": ["image"], "properties": {"image": {"maxLength": 1}}}, {"required": ["args"]}]}
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert any(isinstance(n, Difference) for n in _nodes(tree))


def test_exactly_one_of_many_members_is_a_condition_too(smollm2: object) -> None:
    """"Exactly one of nine keys" (MaskBench o38403's build) holds on 9 of 512 rows: a condition,
    where the difference of nine object automata ran into max_dfa_states after 28 s."""
    names = [f"k{i}" for i in range(9)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "additionalProperties": False,
              "oneOf": [{"required": [n]} for n in names]}  # fmt: skip
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert not any(isinstance(n, Difference) for n in _nodes(tree))
    assert any(isinstance(n, MemberSet) and len(n.condition) == 9 for n in _nodes(tree))
    validator = jsonschema.Draft202012Validator(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for size in range(4):
        for chosen in itertools.combinations(names, size):
            text = json.dumps({n: 1 for n in chosen})
            assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text


def test_a_condition_true_on_too_many_rows_keeps_the_general_way() -> None:
    """"At least one of nine" holds on 511 rows, each checked at every member choice: a product instead."""
    names = [f"k{i}" for i in range(9)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names},
              "anyOf": [{"required": [n]} for n in names]}  # fmt: skip
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert not any(isinstance(n, MemberSet) and n.condition for n in _nodes(tree))
