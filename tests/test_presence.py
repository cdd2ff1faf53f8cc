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
    # dependentSchemas read as a condition (MaskBench o27154: 5 s as differences, 16 ms as bits)
    "dependentSchemas beside anyOf": {
        "type": "object", "properties": PROPERTIES, "additionalProperties": False,
        "anyOf": [{"required": ["image"]}, {"required": ["args"]}],
        "dependentSchemas": {"image": {"properties": {"args": {"not": {}}}},
                             "dockerfile": {"anyOf": [{"required": ["directory"]}, {"properties": {"other": False}}]}},
    },
    "draft 7 dependencies, both kinds": {
        "$schema": "http://json-schema.org/draft-07/schema#", "properties": PROPERTIES,
        "dependencies": {"image": {"not": {"required": ["args"]}}, "other": ["dockerfile"]},
    },
    "beside patternProperties, minProperties and dependentRequired": {
        "type": "object", "patternProperties": {"^[a-z]+$": {"type": ["string", "integer", "boolean", "null"]}},
        "additionalProperties": False, "minProperties": 2, "dependentRequired": {"directory": ["image"]},
        "dependentSchemas": {"args": {"not": {"required": ["other"]}}},
    },
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


def _other_values_and_random_walks(
    tokenizer: object, guide: constrain.Guide, validator: jsonschema.Draft202012Validator, rng: random.Random,
    max_tokens: int,
) -> int:
    """Values that are not objects (``required``/``properties`` hold for each) get the validator's
    verdict; 30 random walks never dead-end, and each finished one validates. Returns how many finished."""
    for text in ["1", '"s"', "null", "[]"]:
        assert accepts(guide, tokenize_continuation(tokenizer, text)) is validator.is_valid(json.loads(text)), text
    finished = 0
    for _ in range(30):
        ids, done = random_walk(guide, guide.vocabulary, rng, max_tokens=max_tokens, eos_probability=0.5)
        state = guide.initial_state
        for token in ids:
            assert guide.allowed_tokens(state).any(), "a dead end"
            state = guide.advance(state, token)
        if done:
            finished += 1
            text = token_text(guide.vocabulary, ids).decode()
            assert validator.is_valid(json.loads(text)), text
    return finished


@pytest.mark.parametrize("strict", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["spec", "strict"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_presence_conditions_match_jsonschema(smollm2: object, name: str, strict: bool) -> None:
    schema = CASES[name]
    tree = schema_walk(schema, SchemaOptions(strict_properties=strict)).tree
    assert not any(isinstance(n, Difference) for n in _nodes(tree)), "a product where bits do"
    assert any(isinstance(n, MemberSet) and n.condition for n in _nodes(tree))
    validator = jsonschema.validators.validator_for(schema)(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=strict)
    for size in range(len(VALUES) + 1):  # every subset of the members, in definition order
        for names in itertools.combinations(VALUES, size):
            text = json.dumps({n: VALUES[n] for n in names})
            assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text
    finished = _other_values_and_random_walks(smollm2, guide, validator, random.Random(4), max_tokens=80)
    if (strict or schema.get("additionalProperties") is False) and "patternProperties" not in schema:
        # open keys (any undeclared one, any a pattern matches): random walks rarely close one
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


@pytest.mark.parametrize("keyword, closed, sizes", [("oneOf", True, 4), pytest.param("anyOf", False, 3, marks=pytest.mark.slow)],
                         ids=["exactly one", "at least one"])  # fmt: skip
def test_one_of_many_members_is_a_condition_of_few_rows(smollm2: object, keyword: str, closed: bool, sizes: int) -> None:
    """"Exactly one of nine keys" (MaskBench o38403's build) holds on 9 of 512 subsets: a condition,
    where the difference of nine object automata ran into max_dfa_states after 28 s. "At least one
    of nine" holds on 511; merged, that is 9 rows too (k_i there, the names before it absent, the
    rest free), each checked at every member choice."""
    names = [f"k{i}" for i in range(9)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names},
              keyword: [{"required": [n]} for n in names], **({"additionalProperties": False} if closed else {})}  # fmt: skip
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert not any(isinstance(n, Difference) for n in _nodes(tree))
    assert [len(n.condition) for n in _nodes(tree) if isinstance(n, MemberSet) and n.condition] == [9]
    validator = jsonschema.Draft202012Validator(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for size in range(sizes):
        for chosen in itertools.combinations(names, size):
            text = json.dumps({n: 1 for n in chosen})
            assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text


def test_a_condition_true_on_too_many_rows_keeps_the_general_way() -> None:
    """The parity of ten names holds on 512 subsets, no two of which merge: a product instead."""
    names = [f"k{i}" for i in range(10)]
    parity: dict = {"required": [names[-1]]}
    for name in reversed(names[:-1]):
        parity = {"oneOf": [{"required": [name]}, parity]}
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, **parity}
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert any(isinstance(n, Difference) for n in _nodes(tree))  # (its branches may hold smaller conditions)


# Conditions that read a member's value by class: absent, present with a value in the class,
# present with another value. SchemaStore's prometheus schema says "at most one auth method
# is set" as six if/then over `properties: {m: {const: null}}`, in allOf behind a $ref; as
# products its first mask ran past 60 s.
AUTH = ["basic", "token", "oauth", "sigv4"]


def _at_most_one_set(declared: list[str]) -> dict:
    return {
        "$defs": {"auth": {"allOf": [
            {"if": {"not": {"properties": {m: {"const": None}}}},
             "then": {"properties": {o: {"const": None} for o in AUTH if o != m}}} for m in AUTH]}},
        "type": "object",
        "properties": {m: {"type": ["object", "null"], "properties": {"user": {"type": "string", "maxLength": 3}},
                           "additionalProperties": False} for m in declared},
        "allOf": [{"$ref": "#/$defs/auth"}],
    }  # fmt: skip


CLASSED = {  # name: (schema, the members an instance may hold)
    "at most one set": (_at_most_one_set(AUTH), AUTH),
    "at most one set, one undeclared": (_at_most_one_set(AUTH[:3]), AUTH),
    "a value that is not a type": ({
        "type": "object", "properties": {"action": {"enum": ["replace", "keep", "drop"]}, "target": {"type": "integer"}},
        "if": {"properties": {"action": {"const": "replace"}}}, "then": {"required": ["target"]},
        "else": {"properties": {"target": False}},
    }, ["action", "target"]),
    # dependentRequired on a name the condition reads by class (two items, no plain one to depend on)
    "dependentRequired on a classed name": ({
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"action": {"enum": ["replace", "keep", "drop"]}, "target": {"type": "integer"}},
        "dependencies": {"target": {"properties": {"action": {"enum": ["replace"]}}}, "action": ["target"]},
    }, ["action", "target"]),
    "absence as not {}": ({
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "null"}},
        "oneOf": [{"properties": {"a": {"not": {}}}, "required": ["b"]}, {"properties": {"b": False}, "required": ["a"]}],
    }, ["a", "b", "c"]),
}  # fmt: skip
CLASSED_VALUES = {
    **{m: [None, {"user": "ab"}] for m in AUTH},
    "action": ["replace", "keep"], "target": [7], "a": [1], "b": [2], "c": [None],
}  # fmt: skip


@pytest.mark.parametrize("strict", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["spec", "strict"])
@pytest.mark.parametrize("name", [name if name == "at most one set" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(CLASSED)])  # fmt: skip
def test_conditions_on_value_classes_match_jsonschema(smollm2: object, name: str, strict: bool) -> None:
    schema, names = CLASSED[name]
    tree = schema_walk(schema, SchemaOptions(strict_properties=strict)).tree
    differences = [n for n in _nodes(tree) if isinstance(n, Difference)]  # a member's value minus its class: fine
    assert not any(isinstance(m, MemberSet) for d in differences for m in _nodes(d)), "an object product"
    assert any(isinstance(n, MemberSet) and n.condition for n in _nodes(tree))
    validator = jsonschema.validators.validator_for(schema)(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=strict)
    checked = valid = 0
    for choice in itertools.product(*[[...] + CLASSED_VALUES[n] for n in names]):  # every name absent or one value
        data = {n: v for n, v in zip(names, choice) if v is not ...}
        text = json.dumps(data)
        expected = validator.is_valid(data)
        accepted = accepts(guide, tokenize_continuation(smollm2, text))
        assert accepted is expected or strict and not accepted and set(data) - set(schema["properties"]), text
        checked += 1
        valid += expected
    assert 0 < valid < checked
    _other_values_and_random_walks(smollm2, guide, validator, random.Random(5), max_tokens=60)


def test_two_classes_for_one_name_keep_the_general_way() -> None:
    """A condition that reads one member's value in two ways would need three kinds of item."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "anyOf": [{"properties": {"a": {"const": 1}}}, {"properties": {"a": {"const": 2}}}]}  # fmt: skip
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    assert not any(isinstance(n, MemberSet) and n.condition for n in _nodes(tree))


def test_a_not_that_an_annotation_makes_any_value_refuses_every_object(smollm2: object) -> None:
    """Draft 4 has no ``const``: the class is any value, so ``not`` refuses every object. The
    schema is empty; no token may be allowed. (A guide used to compile here only because a
    free-form value read bytes no token spells, and its liveness search found a "witness" there.)"""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"a": {}},
              "not": {"properties": {"a": {"const": None}}}}  # fmt: skip
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert not any(validator.is_valid(json.loads(t)) for t in ('{"a": 1}', "{}", '{"a": null}', '{"b": [1]}'))
    with pytest.raises((constrain.EmptyLanguageError, constrain.LimitExceededError), match="match nothing"):
        constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)


REVIEW_CASES = [
    # draft 6 has no if/then: inside a condition they are annotations
    ({"$schema": "http://json-schema.org/draft-06/schema#", "type": "object", "properties": {"a": {}, "b": {}},
      "not": {"anyOf": [{"required": ["a"], "if": {"required": ["b"]}, "then": False}]}}, ['{"a": 1, "b": 1}', '{"b": 1}']),
    ({"$schema": "http://json-schema.org/draft-06/schema#", "type": "object", "properties": {"a": {}, "b": {}},
      "anyOf": [{"required": ["a"], "if": {"required": ["b"]}, "then": False}]}, ['{"a": 1, "b": 1}', '{"b": 1}']),
    # the item outside the class is empty (a boolean or 1 is never "not minimum 1" ... but "s" is)
    ({"type": "object", "properties": {"b": {"type": "boolean"}, "c": {"enum": [1, "s"]}}, "additionalProperties": False,
      "if": {"required": ["b"]}, "then": {"not": {"properties": {"c": {"minimum": 1}}}}},
     ["{}", '{"c": 1}', '{"b": true}', '{"b": true, "c": "s"}', '{"b": true, "c": 1}']),
]  # fmt: skip


@pytest.mark.parametrize("schema, texts", [REVIEW_CASES[0], *(pytest.param(*case, marks=pytest.mark.slow)
                                                               for case in REVIEW_CASES[1:])])  # fmt: skip
def test_review_cases_get_the_validators_verdict_and_never_dead_end(smollm2: object, schema: dict, texts: list[str]) -> None:
    """Found by review of the value-class conditions: keywords a draft lacks were read inside a
    condition, and an item whose language is empty was counted on (a walk stuck after a member)."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for text in texts:
        assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(json.loads(text)), text
    _other_values_and_random_walks(smollm2, guide, validator, random.Random(6), max_tokens=40)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {}, "d": {}}, "required": ["d"], "maxProperties": 1,
     "anyOf": [{"required": ["a"]}]},
    {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["d", "b"], "maxProperties": 1,
     "not": {"properties": {"a": False}}},
])  # fmt: skip
def test_a_condition_that_maxproperties_and_required_rule_out_is_an_empty_language(smollm2: object, schema: dict) -> None:
    """The required members outside the condition count against maxProperties too: no object fits."""
    with pytest.raises(constrain.EmptyLanguageError):
        constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
