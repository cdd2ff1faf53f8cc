"""Keywords built from intersection and difference: never weaker than the schema, exact where promised.

Oracle: the ``jsonschema`` library. Soundness is checked twice: every value of a fixed
bank that the byte automaton accepts must validate (both property modes, compact and
``json.dumps`` spacing), and random walks of the real token guides on three tokenizer
families must produce only valid JSON. Completeness: the values listed as expected are
accepted, spelled as the tokenizer really spells them, token by token.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import jsonschema
import pytest
from oracles import ExactValidator

import constrain
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex.algebra import _WORK
from constrain.regex.automaton import ByteNFA, LazyDFA
from constrain.core.limits import Limits
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

BANK = [
    None, True, False, 0, 1, -1, 2, 1.5, 3, 8, 16, 24, 100, 0.5, -0.5, 1.1, 1.2, 2.25, -1.1, -2.5, 4.5, 0.3, 7.5,
    0.0001, 12.34, -0.0, "", "a", "b", "ab", "ba", "99", "x99y", "abc", "01", "07",
    [], [1], [1, 2], ["a"], [1, "a"], [1, 1, "a"], [2, 2, 2], ["a", 1, "b"], [1, "a", "b", "c"], {}, {"a": 1}, {"a": "x"}, {"b": 1}, {"a": 1, "b": 2}, {"b": 2, "a": 1},
    {"x-a": 1}, {"x-b": "s"}, {"q1": "ab"}, {"q1": "abc"}, {"error": 1}, {"x": 1, "error": 2}, {"1": [1, 2]},
    {"a": 1, "c": 3}, {"a": 1, "b": 2, "c": 3}, {"a": "x", "c": "abc"}, {"c": "abc", "a": "x"}, {"a": "x", "c": "b"},
    {"a": "x"}, {"c": "abc"},
]  # fmt: skip

# (schema, values that must be accepted with the specification's property semantics)
CASES = {
    "not-type": ({"not": {"type": "integer"}}, ["a", 1.5, None, [1], {"a": 1}]),
    "not-multiple": ({"type": "integer", "not": {"multipleOf": 8}}, [1, 3, 100]),
    "not-required": ({"type": "object", "not": {"required": ["error"]}}, [{}, {"a": 1}]),
    "not-pattern": ({"type": "string", "not": {"pattern": "99"}}, ["a", "abc"]),
    "not-enum": ({"not": {"enum": [1, "a", None]}}, [2, "b", True]),
    "not-not": ({"not": {"not": {"type": "string"}}}, ["a", ""]),
    "not-minimum-zero": ({"not": {"minimum": 0}}, [-1, -0.5]),  # -0 is zero: it got through
    "not-const-array": ({"not": {"const": [1]}}, [1, "a", None, {"a": 1}]),  # was an empty language
    # a superset of a container constant is its spellings (was "[" or "{" and any text after)
    "not-enum-object-array": ({"not": {"enum": [{"a": True}, [1, "a"]]}}, [{"a": 1}, [1], {"b": 1}, [1, 1, "a"]]),
    "const-object-any-order": ({"const": {"a": 1, "b": 2}}, [{"b": 2, "a": 1}, {"a": 1, "b": 2}]),
    "not-enum-containers": ({"not": {"enum": [[], {}]}}, [0, "", True]),
    "not-maximum-zero": ({"not": {"type": "integer", "minimum": -3, "maximum": 0}}, [1, -4, "a"]),
    "oneOf-overlap": ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 0, "a"]),
    "oneOf-required": ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"b": 1}]),
    # disjoint by a name the other branch never holds, a value the other excludes, a listed
    # object the other does not admit (MaskBench o11666's data types)
    "oneOf-closed": ({"type": "object", "oneOf": [
        {"required": ["a"], "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        {"required": ["b"], "properties": {"b": True}}]}, [{"a": 1}, {"b": 1}, {"b": 1, "c": 3}]),
    "oneOf-excluded-tag": ({"type": "object", "oneOf": [
        {"required": ["a"], "properties": {"a": {"enum": [1, "x"]}}},
        {"required": ["a"], "properties": {"a": {"not": {"enum": [1.0, "x", "y"]}}}}]}, [{"a": 1}, {"a": 2}, {"a": "b"}]),
    "oneOf-listed-object": ({"oneOf": [{"enum": [{"a": "x"}, {"c": 3}]},
                                       {"type": "object", "required": ["a"], "properties": {"a": {"enum": [1, 2]}}}]},
                            [{"a": "x"}, {"c": 3}, {"a": 1}]),  # fmt: skip
    "json-equality": ({"allOf": [{"const": True}, {"const": 1}]}, []),
    "oneOf-equal-consts": ({"oneOf": [{"const": 1}, {"const": 1.0}]}, []),
    "patternProperties": ({
        "type": "object", "properties": {"x-a": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": ["integer", "string"]}, "[0-9]$": {"type": "string", "maxLength": 2}},
        "additionalProperties": {"type": "boolean"},
    }, [{"x-a": 1}, {"x-b": "s"}, {"q1": "ab"}, {}]),  # fmt: skip
    "propertyNames": ({"type": "object", "propertyNames": {"pattern": "^[a-c]+$", "maxLength": 1}},
                      [{"a": 1}, {"b": 1}, {}]),  # fmt: skip
    "min-max-dependent": ({
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["a"], "minProperties": 2, "maxProperties": 3, "dependentRequired": {"b": ["c"]},
    }, [{"a": 1, "c": 3}, {"a": 1, "b": 2, "c": 3}]),  # fmt: skip
    "dependentRequired-undeclared": ({"dependentRequired": {"b": ["a"], "c": ["a", "b"]}},
                                     [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 3, "b": 2}, {}]),  # fmt: skip
    "dependentSchemas": ({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
                         [{"b": 1}, {"a": 1, "b": 2}, {}]),  # fmt: skip
    "if-then-else": ({"if": {"type": "integer"}, "then": {"minimum": 2}, "else": {"type": "string"}},
                     [2, 3, "a"]),  # fmt: skip
    # the witness {"a": "x", "c": "abc"} lies 19 bytes deep in two open objects: a breadth-first
    # liveness search spent its budget on nested free-form values first (an empty language)
    "if-then-else-open-objects": ({
        "type": "object", "properties": {"a": {"type": "string"}, "c": {"enum": ["abc", "b"]}},
        "if": {"properties": {"c": {"const": "abc"}}}, "then": {"required": ["a", "c"]}, "else": {"required": ["a", "c"]},
    }, [{"a": "x", "c": "abc"}, {"c": "abc", "a": "x"}, {"a": "x", "c": "b"}]),  # fmt: skip
    # a superset's repeated keys took any value wherever the tracked member was absent, so the
    # superset of these properties held every object and the not refused them all
    "not-properties": ({"not": {"properties": {"c": {"const": "abc"}}}}, [{"a": "x", "c": "b"}]),
    # a superset of oneOf is each branch's minus the overlaps: as an anyOf, a branch "true" made it
    # any value and the not (or outer oneOf) refused everything
    "not-oneOf-true-branch": ({"not": {"oneOf": [{}, {"type": "string"}]}}, ["a", ""]),
    "oneOf-inner-oneOf-true-branch": ({"oneOf": [
        {"x-unknown": 1}, {"type": "string"}, {"type": "array", "items": {"oneOf": [{}, {"type": "string"}]}, "minItems": 1},
    ]}, [["a"], 1, {"a": 1}, []]),  # fmt: skip
    # a lookahead right after ^ is an intersection or a difference with what starts with its match
    "pattern-lookaheads": ({"type": "string", "pattern": "^(?!a)(?=.*b)[a-z]+$"}, ["b", "ba"]),
    "not-pattern-lookahead": ({"type": "string", "not": {"pattern": "^(?!a)b"}}, ["a", "ab", "abc", "99", ""]),
    "allOf-clash": ({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]}, ["ab", "ba"]),
    "pattern-format-length": ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "format": "hostname"},
                              ["ab", "abc", "ba"]),  # fmt: skip
    "anchors-per-alternative": ({"type": "string", "pattern": "^01$|^07$"}, ["01", "07"]),
    "multipleOf": ({"type": "integer", "multipleOf": 8, "minimum": 1}, [8, 16, 24]),
    "decimal-bounds": ({"type": "number", "exclusiveMinimum": -1.1, "maximum": 1.2}, [0, 1, -1, 0.5, 1.1, 1.2, -0.5]),
    "decimal-multipleOf": ({"type": "number", "multipleOf": 1.5, "maximum": 7.5}, [0, 1.5, 3, 4.5, 7.5, -1.5]),
    "integer-multipleOf-decimal": ({"type": "integer", "multipleOf": 1.5}, [0, 3, 24, -3]),
    "maxContains": ({"type": "array", "contains": {"type": "integer"}, "minContains": 1, "maxContains": 2},
                    [[1], [1, 2], [1, "a"], [1, 1, "a"], ["a", 1, "b"]]),  # fmt: skip
    "contains-prefix-maxItems": ({"prefixItems": [{"type": "string"}], "contains": {"const": 1}, "maxItems": 3},
                                 [["a", 1, "b"], ["a", 1]]),  # fmt: skip
    "minContains-zero": ({"contains": {"type": "string"}, "minContains": 0, "maxContains": 1},
                         [[], [1], [1, "a"], [2, 2, 2]]),  # fmt: skip
    "unevaluatedProperties-anyOf": ({
        "properties": {"a": {"type": "integer"}}, "anyOf": [{"properties": {"b": True}}, {"required": ["x-a"]}],
        "unevaluatedProperties": False,
    }, [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2, "a": 1}]),  # fmt: skip
    "unevaluatedProperties-if": ({
        "if": {"required": ["a"]}, "then": {"properties": {"c": True}}, "else": {"properties": {"b": True}},
        "properties": {"a": True}, "unevaluatedProperties": {"type": "string"},
    }, [{}, {"a": 1}, {"a": 1, "c": 3}, {"b": 1}, {"q1": "ab"}]),  # fmt: skip
    "unevaluatedItems": ({"prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "string"}},
                         [[], [1], [1, "a"], [1, "a", "b", "c"]]),  # fmt: skip
    "unevaluatedItems-contains": ({"contains": {"type": "integer"}, "unevaluatedItems": {"const": "a"}},
                                  [[1], [1, 2], [1, "a"], [1, 1, "a"]]),  # fmt: skip
    "small-step": ({"type": "number", "multipleOf": 0.0001}, [0.0001, 12.34, 1, 0.5]),
    # a tag tells objects apart only: "a", 1 and [] satisfy both branches (was accepted)
    "oneOf-untyped-tags": ({"oneOf": [{"required": ["a"], "properties": {"a": {"const": 1}}},
                                      {"required": ["a"], "properties": {"a": {"const": 2}}}]},
                           [{"a": 1}]),  # fmt: skip
    "oneOf-integer-number": ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1.5, 0.5, -2.5]),
    "oneOf-const-types": ({"oneOf": [{"const": 1.0}, {"type": "string"}, {"type": ["array", "boolean"]}]},
                          [1, "a", [], True, ""]),  # fmt: skip
    "oneOf-tags-through-refs": ({
        "$defs": {"base": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        "oneOf": [{"allOf": [{"$ref": "#/$defs/base"}, {"properties": {"a": {"const": 1}}, "required": ["a"]}]},
                  {"allOf": [{"$ref": "#/$defs/base"}, {"properties": {"a": {"enum": [2, "x"]}}}]}],
    }, [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}, {}, {"a": 2}]),  # fmt: skip
    # an optional tag splits each branch: objects holding "a" against the branches whose tag
    # differs, objects without it against all (non-objects and {} match both: refused)
    "oneOf-optional-tags": ({"oneOf": [{"properties": {"a": {"const": 1}, "b": {"type": "integer"}}},
                                       {"properties": {"a": {"const": "x"}, "b": {"type": "string"}}}]},
                            [{"a": 1}, {"a": "x"}, {"a": 1, "b": 2}, {"b": 1}, {"a": "x", "c": "abc"}, {"a": 1, "c": 3}]),  # fmt: skip
}

# A key written with an escape is the same key to a parser: the supersets that not, oneOf and
# dependentSchemas subtract know keys as json.dumps spells them, so free-form keys are spelled so too.
KEY_SPELLINGS = [
    ({"not": {"required": ["a"]}}, '{"\\u0061": 1}'),
    ({"properties": {"x": {"not": {"minProperties": 1}}}}, '{"x": {"\\/": 1}}'),
    ({"dependentSchemas": {"a": False}}, '{"\\u0061": null}'),
    ({"dependentSchemas": {"a": False}}, '{"\\u0062": 1, "a": null}'),
    ({"dependentSchemas": {"a": {"propertyNames": {"maxLength": 1}}}}, '{"a": 0, "\\u00781": 0}'),
    ({"not": {"$ref": "#/$defs/d"}, "$defs": {"d": {"exclusiveMinimum": 0}}}, '{"\\u0061": ""}'),
]


# A repeated key parses to its last value: the supersets subtracted by not, oneOf and
# dependentSchemas hold texts that repeat a key (each was accepted, all invalid).
KEY_SPELLINGS += [
    ({"not": {"required": ["a"]}}, '{"a": 1, "a": 2}'),
    ({"not": {"properties": {"z": {"const": 1}}}}, '{"z": 2, "z": 1}'),
    ({"not": {"properties": {"a": True}, "maxProperties": 1}}, '{"a": 1, "a": 2}'),
    ({"oneOf": [{"required": ["a"]}, {"properties": {"a": {"const": 1}}}]}, '{"a": 2, "a": 1}'),
    ({"dependentSchemas": {"a": False}}, '{"a": 1, "a": 2}'),
    ({"dependentSchemas": {"a": False}}, '{"b": 1, "a": 2, "a": 3}'),
    # undeclared keys: a superset's extra members take any value and its maxProperties goes
    ({"type": "object", "not": {"additionalProperties": {"type": "integer"}}}, '{"z": "a", "z": 1}'),
    ({"type": "object", "not": {"patternProperties": {"^x": {"type": "integer"}}}}, '{"x": "s", "x": 1}'),
    ({"not": {"type": "object", "maxProperties": 1}}, '{"z": 1, "z": 2}'),
    # and outside any `not`: minProperties counts the undeclared members as one at most
    ({"type": "object", "minProperties": 2}, '{"a": 1, "a": 2}'),
    ({"type": "object", "properties": {"a": {}}, "minProperties": 2}, '{"b": 1, "b": 2}'),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3},
     '{"a": 1, "a": 2}'),
]


REPEATED = ['"a": 1', '"a": 2', '"b": 0', '"x": 5', '"x": 6', '"y": "s"']
#: Every text of up to three of those members (repeated keys among them), and the empty object.
REPEATED_TEXTS = ["{}"] + ["{" + ", ".join(c) + "}" for n in (1, 2, 3) for c in itertools.permutations(REPEATED, n)]


@pytest.mark.parametrize("schema,exact", [
    ({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [
        {"properties": {"a": {"const": 1}}, "required": ["a"]}, {"required": ["b"]}]}, True),
    ({"type": "object", "properties": {"a": {}}, "not": {"additionalProperties": {"type": "integer"}}}, False),
    ({"type": "object", "not": {"minProperties": 2, "additionalProperties": {"type": "integer"}}}, False),
    ({"type": "object", "oneOf": [{"maxProperties": 1}, {"additionalProperties": {"type": "integer"}}]}, False),
    ({"type": "object", "properties": {"a": {}}, "minProperties": 2, "maxProperties": 2}, True),
    ({"type": "object", "patternProperties": {"^[xy]$": {"type": "integer"}}, "minProperties": 2}, True),
    ({"type": "object", "minProperties": 2}, True),
    ({"type": "object", "minProperties": 3, "maxProperties": 3}, True),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3}, True),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
      "maxProperties": 2}, True),
])  # fmt: skip
@pytest.mark.slow
def test_texts_that_repeat_keys_are_judged_by_the_value_a_parser_keeps(schema: dict, exact: bool) -> None:
    """Soundness on 157 texts, about half of them repeating a key, against what json.loads keeps.
    Not ``exact``: stricter by design (docs/json_schema.md, "Repeated keys"): in a superset an
    undeclared member outside the schema is taken wherever a checked one follows it. ``exact``: a text without repeats is accepted iff it is
    valid, where the keys' last bytes differ modulo 8 (minProperties counts undeclared keys by
    that group: ``MemberSet.extra_groups``)."""
    validator = ExactValidator(schema)
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    for text in REPEATED_TEXTS:
        valid, accepted = validator.is_valid(json.loads(text)), dfa.matches(text.encode())
        assert valid or not accepted, text
        keys = [member.split(":")[0] for member in text[1:-1].split(", ") if member]
        if exact and len({ord(key[-2]) % 8 for key in keys}) == len(keys):  # keys that surely differ
            assert accepted == valid, text


#: Counted objects, a text of keys that surely differ (their last bytes do) and one that
#: repeats a key or ends its keys alike, so that its count is not sure.
COUNTED = [
    ({"type": "object", "minProperties": 2}, '{"a": 1, "b": 2}', '{"a": 1, "a": 2}'),
    ({"type": "object", "minProperties": 2, "maxProperties": 2}, '{"a1": 1, "a2": 2}', '{"ba": 1, "a": 2}'),
    ({"type": "object", "properties": {"ab": {"type": "integer"}}, "minProperties": 3, "maxProperties": 4},
     '{"ab": 1, "a": 2, "b": 3}', '{"ab": 1, "a": 2, "a": 3}'),
    ({"type": "object", "propertyNames": {"pattern": "^[ab]"}, "minProperties": 2}, '{"a": 1, "b": 2}',
     '{"ba": 1, "a": 2}'),
]
#: The bytes of the walks below: keys that share a last byte or not, repeated or not.
WALK_BYTES = b'{}":, ab12'


@pytest.mark.parametrize("schema,surely,unsure", COUNTED)
def test_undeclared_keys_count_apart_by_last_byte_without_dead_ends(schema: dict, surely: str, unsure: str) -> None:
    """minProperties over undeclared keys: two keys count as two where their last bytes differ
    (modulo 16, ``MemberSet.extra_groups``). Byte walks over a small alphabet end only in valid
    objects, and never reach a state that can neither end nor go on: a key of a group seen
    already is offered only while the object can still reach its count."""
    validator = ExactValidator(schema)
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    rng = random.Random(json.dumps(schema))
    ended = 0
    for _ in range(300):
        state, text = dfa.start, b""
        for _ in range(40):
            if dfa.is_final(state) and rng.random() < 0.3:
                ended += 1
                assert validator.is_valid(json.loads(text)), text
                break
            row = dfa.row(state)
            options = [b for b in WALK_BYTES if row[b] != -1] or [b for b in range(256) if row[b] != -1]
            assert options or dfa.is_final(state), f"dead end after {text!r}"
            if not options:
                break
            byte = rng.choice(options)
            state, text = int(row[byte]), text + bytes([byte])
    assert ended
    assert dfa.matches(surely.encode())
    assert not dfa.matches(unsure.encode())  # stricter: docs/json_schema.md, "Repeated keys"


def test_min_properties_that_keys_of_one_last_byte_cannot_reach_is_refused_by_name() -> None:
    """Keys that all end with "a" may all be one repeated key: two members cannot be told
    apart, so the guide would be empty. The keyword is named instead (dropped when lenient)."""
    schema = {"type": "object", "propertyNames": {"pattern": "a$"}, "minProperties": 2}
    with pytest.raises(constrain.UnsupportedSchemaError, match="minProperties"):
        schema_walk(schema, SchemaOptions(strict_properties=False))
    with pytest.warns(UserWarning, match="minProperties"):
        walk = schema_walk(schema, SchemaOptions(strict_properties=False, lenient=True))
    assert ("minProperties", "#/minProperties") in walk.dropped


NOT_UNDECLARED = {"type": "object", "not": {"additionalProperties": {"type": "integer"}}}


@pytest.mark.parametrize("schema,text,valid", [
    ({"allOf": [{"enum": [{"foo": 1}]}, {"not": {"additionalProperties": {"type": "boolean"}}}]}, '{"foo": 1}', True),
    ({"allOf": [{"enum": [{"foo": "bar", "foooooo": "baz"}]}, {"not": {"patternProperties": {"f.*o": {
        "type": "integer"}}}}]}, '{"foo": "bar", "foooooo": "baz"}', True),
    (NOT_UNDECLARED, '{"z": "a"}', True),
    (NOT_UNDECLARED, '{"z": 1, "z": "a"}', True),  # {"z": "a"}
    (NOT_UNDECLARED, '{"z": "a", "z": 1}', False),  # {"z": 1}
    (NOT_UNDECLARED, '{"z": 1, "y": 2}', False),
])  # fmt: skip
def test_not_around_undeclared_values_keeps_what_it_does_not_match(schema: dict, text: str, valid: bool) -> None:
    """A superset's undeclared members are checked (``MemberSet.checked_groups``): one with a
    value outside the schema must be followed by a checked member, as an earlier copy of a
    repeated key would be. 5dbdcc5 took any value there, and `not` refused every object with an
    undeclared member."""
    assert ExactValidator(schema).is_valid(json.loads(text)) == valid
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    assert dfa.start != -1 and dfa.matches(text.encode()) == valid


def test_not_around_undeclared_values_refuses_what_a_later_member_may_repeat() -> None:
    """Stricter by design (docs/json_schema.md, "Repeated keys"): a checked member after one
    outside the schema may repeat its key, so {"z": "a", "y": 1} might hold an integer only."""
    assert ExactValidator(NOT_UNDECLARED).is_valid({"z": "a", "y": 1})
    dfa = LazyDFA(ByteNFA(schema_walk(NOT_UNDECLARED, SchemaOptions(strict_properties=False)).tree, Limits()))
    assert not dfa.matches(b'{"z": "a", "y": 1}')


@pytest.mark.parametrize("schema,text", KEY_SPELLINGS)
@pytest.mark.slow
def test_escaped_or_repeated_keys_do_not_slip_past_a_subtracted_schema(schema: dict, text: str) -> None:
    assert not ExactValidator(schema).is_valid(json.loads(text))
    for spec in (False, True):
        dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=not spec)).tree, Limits()))
        assert not dfa.matches(text.encode()), (spec, text)


# A subtracted superset spells a free-form value's first levels exactly: "[" then any text
# swallowed the members after the value, so a key that decides the `not` after an array or
# object value was refused (MaskBench Handwritten---pnmp2: a valid instance rejected).
NESTED_BEFORE_KEY = {"type": "object", "not": {"propertyNames": {"not": {"enum": ["1", "3"]}}}}


@pytest.mark.parametrize("text", [
    '{"2": [1, 2], "1": [3, 4]}', '{"2": {}, "1": 2}', '{"2": [[[{"x": 1}]]], "1": 2}', '{"2": {"a": [1]}, "3": 2}',
    '{"2": [1], "4": 2}', '{"2": [[[1]]], "4": {"1": 2}}', '{"2": {"1": 2}}',
])  # fmt: skip
def test_a_nested_value_before_the_deciding_key_is_judged_exactly(text: str) -> None:
    expected = ExactValidator(NESTED_BEFORE_KEY).is_valid(json.loads(text))
    dfa = LazyDFA(ByteNFA(schema_walk(NESTED_BEFORE_KEY, SchemaOptions(strict_properties=False)).tree, Limits()))
    assert dfa.matches(text.encode()) == expected, text


# oneOf schemas whose branches the walker proves pairwise disjoint: an anyOf, no difference built
#: Cases whose oneOf branches are proved disjoint, with the differences their tree still holds
#: (those of a ``not`` inside a branch)
DISJOINT = {"oneOf-const-types": 0, "oneOf-tags-through-refs": 0, "oneOf-closed": 0, "oneOf-excluded-tag": 1,
            "oneOf-listed-object": 0}




def _texts(value: object) -> set[str]:
    return {json.dumps(value), json.dumps(value, separators=(",", ":"))}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_byte_automaton_is_sound_and_accepts_the_expected(name: str) -> None:
    schema, expected = CASES[name]
    validator = ExactValidator(schema, format_checker=jsonschema.FormatChecker())
    for spec in (False, True):
        dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=not spec)).tree, Limits()))
        for value in BANK:
            for text in _texts(value):
                if dfa.matches(text.encode()):
                    assert validator.is_valid(value), f"{name}: accepted invalid {text}"
        if spec:
            for value in expected:
                assert validator.is_valid(value)
                assert dfa.matches(json.dumps(value).encode()), f"{name}: rejected valid {value!r}"


@pytest.mark.parametrize("name", sorted(DISJOINT))
def test_disjoint_branches_need_no_difference(name: str) -> None:
    from constrain.regex.tree import Difference

    def differences(node: object) -> int:
        found = isinstance(node, Difference)
        children = getattr(node, "__dataclass_fields__", {})
        return found + sum(differences(c) for f in children for c in _children(getattr(node, f)))

    def _children(value: object) -> list[object]:
        return list(value) if isinstance(value, tuple) else [value]

    assert differences(schema_walk(CASES[name][0], SchemaOptions(strict_properties=False)).tree) == DISJOINT[name]


@pytest.mark.parametrize("name", ["not-pattern", "oneOf-overlap", "patternProperties", "min-max-dependent",
                                  "if-then-else", "pattern-format-length"])  # fmt: skip
def test_token_guides_walk_only_to_valid_json(compiler: constrain.Compiler, tokenizer: object, name: str) -> None:
    schema, expected = CASES[name]
    validator = ExactValidator(schema, format_checker=jsonschema.FormatChecker())
    guide = compiler.json_schema(schema, strict_properties=False)
    for value in expected:
        assert accepts(guide, tokenize_continuation(tokenizer, json.dumps(value))), value
    guide = compiler.json_schema(schema)  # walks through closed objects: open ones wander off in long keys
    rng = random.Random(name)
    ended = 0
    for _ in range(16):
        ids, done = random_walk(guide, compiler.vocabulary, rng, max_tokens=120, eos_probability=0.9)
        if done:
            ended += 1
            value = json.loads(token_text(compiler.vocabulary, ids))
            assert validator.is_valid(value), (name, value)
    assert ended


def test_empty_intersections_and_huge_divisors_are_errors_not_weaker_guides(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    with pytest.raises(constrain.ConstrainError):
        compiler.json_schema({"type": "string", "pattern": "^[a-z]+$", "format": "ipv4"})  # empty language
    with pytest.raises(constrain.UnsupportedSchemaError, match="multipleOf"):
        compiler.json_schema({"type": "integer", "multipleOf": 10**400})  # was: every integer


def test_an_end_anchor_first_leaves_only_what_matches_nothing() -> None:
    """``^$[a-z]*$`` (seen in real schemas) matches only the empty string, ``^$a`` nothing at all."""
    for pattern, empty in ((r"^$[a-z0-9]*$", True), (r"^$a", False)):
        tree = schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree
        dfa = LazyDFA(ByteNFA(tree, Limits()))
        assert dfa.matches(b'""') is empty and not dfa.matches(b'"a"')


#: (pattern, the same with ECMA-262's '^' and '$' written as Python's '\\A' and '\\Z'): anchors inside
#: a group or an alternative (o65011; gradle-enterprise's certificate pattern opens with (?:^|\r?\n)).
INNER_ANCHORS = [
    (r"(?:^|,)a", r"(?:\A|,)a"), (r"b(^|x)", r"b(\A|x)"), (r"(^a|b$)+", r"(\Aa|b\Z)+"), (r"(^|$)", r"(\A|\Z)"),
    (r"(?:^|\n)x(?:$|\n)", r"(?:\A|\n)x(?:\Z|\n)"), (r"(a|^){2,3}b", r"(a|\A){2,3}b"), (r"(^$|a)", r"(\A\Z|a)"),
    (r"(?:a^|b)+c", r"(?:a\A|b)+c"), (r"x(^)*y", r"x(\A)*y"), (r"(^|a)(a|$)", r"(\A|a)(a|\Z)"),
    (r"(?:^|/)(?:\.{2}|[a-z]*)(?:$|/)", r"(?:\A|/)(?:\.{2}|[a-z]*)(?:\Z|/)"), (r"((^|x)y)+$", r"((\A|x)y)+\Z"),

    (r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$", r"^(\/?((\.{2})|([a-z0-9\-]*))(\Z|\/))*\Z"),  # o65011
    (r"a($|b)c?", r"a(\Z|b)c?"), (r"(x$)?y", r"(x\Z)?y"), (r"(a|$)+", r"(a|\Z)+"), (r"ab$|c$d", r"ab\Z|c\Zd"),
    (r"x(?:$|,)*", r"x(?:\Z|,)*"), (r"(?i)z($|/)", r"(?i)z(\Z|/)"), (r"[$]($|\$)", r"[$](\Z|\$)"),
    (r"^(a$|b){2,3}", r"^(a\Z|b){2,3}"), (r"(?:a|$)(?:$|x)", r"(?:a|\Z)(?:\Z|x)"),
]  # fmt: skip


@pytest.mark.parametrize(("pattern", "python"), INNER_ANCHORS)
def test_anchors_inside_a_pattern_are_the_ends_of_the_string(pattern: str, python: str) -> None:
    """ECMA-262's '^' and '$' (no m flag) assert the start and end of the input wherever they
    stand: every text of up to four characters over the patterns' own alphabet is judged as
    ``re.search`` judges it with them written '\\A' and '\\Z' (Python's '$' also matches before
    a final newline: stricter here)."""
    tree = schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree
    dfa = LazyDFA(ByteNFA(tree, Limits()))
    texts = ["".join(t) for n in range(5) for t in itertools.product("abxyz/.-$,\n", repeat=n)]
    wrong = [t for t in texts if dfa.matches(json.dumps(t).encode()) != bool(re.search(python, t))]
    assert not wrong, (pattern, wrong[:5])


def test_anchors_that_are_no_ends_stay_refused() -> None:
    """With the m flag '^' and '$' also match at each line end: no ends of the text, so refused."""
    for pattern in ("(?m)a($|b)", "(?m)(a|^)b", "(a|$)\ue000"):  # the last holds the character that marks '$'
        with pytest.raises(constrain.UnsupportedSchemaError, match="anchor"):
            schema_walk({"type": "string", "pattern": pattern}, SchemaOptions())
    literal = schema_walk({"type": "string", "pattern": "^a\ue001b$"}, SchemaOptions()).tree  # no anchor inside
    dfa = LazyDFA(ByteNFA(literal, Limits()))
    assert dfa.matches('"a\ue001b"'.encode()) and not dfa.matches(b'"ab"')  # the mark character is itself


#: Seven patterns, some never matching one key together ("^a", "^b"), some overlapping ("^a", "x$",
#: "[0-9]"): one key language per set of patterns a key can match together, not 2^7.
MANY_PATTERNS = {
    "type": "object", "properties": {"ab1": {"type": "null"}},
    "patternProperties": {"^a": {"type": "integer"}, "^b": {"type": "string"}, "^c": {"type": "boolean"},
                          "x$": {"minimum": 2}, "^ab": {"maximum": 5}, "[0-9]": {"type": "number"},
                          "^zz$": {"const": 0}},
    "additionalProperties": {"type": "array"},
}  # fmt: skip
MANY_PATTERNS_BANK = [
    {}, {"a": 1}, {"a": "s"}, {"ax": 1}, {"ax": 3}, {"ab": 6}, {"ab": 4}, {"abx": 4}, {"abx": 1}, {"b": "s"},
    {"b": 1}, {"bx": "s"}, {"b1": "s"}, {"c": True}, {"c9": True}, {"cx": False}, {"zz": 0}, {"zz": 1},
    {"zzx": 3}, {"q": []}, {"q": 1}, {"9": 1.5}, {"9x": 1}, {"9x": 2.5}, {"ab1": None}, {"ab1": 1}, {"a1x": 3},
]  # fmt: skip


def test_many_patterns_take_every_schema_they_match() -> None:
    """Against jsonschema, both property modes: a key takes every pattern it matches, and only
    additionalProperties' schema when it matches none (was refused past 4 patterns; MaskBench
    o12335 and o12337 hold 19 and 22 patterns with distinct literal prefixes)."""
    validator = jsonschema.Draft202012Validator(MANY_PATTERNS)
    for strict in (True, False):
        dfa = LazyDFA(ByteNFA(schema_walk(MANY_PATTERNS, SchemaOptions(strict_properties=strict)).tree, Limits()))
        for value in MANY_PATTERNS_BANK:
            assert dfa.matches(json.dumps(value).encode()) == validator.is_valid(value), (strict, value)
    overlapping = {"type": "object", "patternProperties": {c: {"type": "integer"} for c in "abcdef"}}
    with pytest.raises(constrain.UnsupportedSchemaError, match="more than 24 ways"):
        schema_walk(overlapping, SchemaOptions())  # any key may hold any of the six letters: 63 sets


def test_a_superset_holds_every_spelling_of_a_decimal() -> None:
    """Found by the schema fuzzer: ``not: {minimum: 0}`` let "94.90" through, a spelling of 94.9
    (a trailing zero) that the subtracted language missed."""
    tree = schema_walk({"type": "array", "items": {"not": {"type": "number", "minimum": 0}}}, SchemaOptions()).tree
    dfa = LazyDFA(ByteNFA(tree, Limits()))
    assert dfa.matches(b"[-1, -0.5]") and not dfa.matches(b"[94.90]") and not dfa.matches(b"[2.50]")


def test_a_search_out_of_budget_says_so_instead_of_calling_the_schema_empty(smollm2: object) -> None:
    """MaskBench Handwritten allOfPProp2: four distinct keys of four or more characters, each
    with an "a", one with a "b". Satisfiable (jsonschema takes the instance below), but its
    witness lies past any search budget, and the compile said "matches no string at all"."""
    schema = {"type": "object", "minProperties": 4, "not": {"patternProperties": {"b": False}},
              "allOf": [{"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True},
                        {"patternProperties": {"a": True}, "additionalProperties": False}]}  # fmt: skip
    assert jsonschema.Draft202012Validator(schema).is_valid({"abbb": 0, "aaaa": 0, "aaaaa": 0, "aaaaaa": 0})
    with pytest.raises(constrain.LimitExceededError) as caught:
        constrain.Compiler(smollm2).json_schema(schema, strict_properties=False,
                                                limits=constrain.Limits(max_search_states=64))  # fmt: skip
    assert caught.value.limit == "max_search_states"
    with pytest.raises(constrain.EmptyLanguageError):  # a proved empty language keeps its own error
        constrain.Compiler(smollm2).json_schema({"type": "string", "minLength": 3, "pattern": "^a?$"})


@pytest.mark.slow
def test_a_witness_behind_long_required_keys_is_found() -> None:
    """A difference whose witness needs two long required keys (o27154, reduced): the budgeted
    liveness search spent its budget on shorter key spellings and judged the whole language
    empty. The probe (the base's shortest completion, checked against the subtracted parts)
    finds one, and the valid instance is accepted."""
    schema = {"dependencies": {"num_input": {"properties": {"num_input": {"not": {}}}}},
              "required": ["list_int_input", "config_num"]}  # fmt: skip
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    validator = jsonschema.Draft7Validator(schema)
    for text in ['{"config_num": 4, "list_int_input": [1, 2, 3]}', '{"list_int_input": 1, "config_num": 4, "x": 0}',
                 '{"config_num": 4}', '{"config_num": 4, "list_int_input": 1, "num_input": 2}']:  # fmt: skip
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), text


LISTED_BESIDE_CONDITIONS = [
    # MaskBench Synthesized maxProperties not_2: the superset of maxProperties drops the bound
    # (a repeated key), and the only value was lost; judged by its own text it stays
    {"enum": [{"bar": 2, "baz": 3, "foo": 1}, {"a": 1}], "not": {"maxProperties": 2}},
    {"const": {"a": 1, "b": 2}, "not": {"maxProperties": 1}},
    {"enum": [1, "x", {"k": [1, 2]}, {}], "oneOf": [{"type": "integer"}, {"type": "object", "minProperties": 1}]},
    {"enum": [{"a": 1}, {"a": 1, "b": 2}, 3], "if": {"required": ["b"]}, "then": {"maxProperties": 1}},
    {"allOf": [{"enum": [{"a": 1, "b": 2, "c": 3}, {"a": 1}]}, {"not": {"not": {"maxProperties": 2}}}]},
]


@pytest.mark.parametrize("schema", LISTED_BESIDE_CONDITIONS, ids=range(len(LISTED_BESIDE_CONDITIONS)))
def test_listed_values_beside_a_condition_get_the_validators_verdict(smollm2: object, schema: dict) -> None:
    """``enum``/``const`` beside ``not``, ``oneOf`` or ``if``: the validator's verdict on every
    listed value (a ``not`` subtracts a superset for texts with distinct keys, as listed values
    are written, so it keeps ``maxProperties``)."""
    validator = jsonschema.Draft202012Validator(schema)
    listed = schema["allOf"][0]["enum"] if "allOf" in schema else schema.get("enum", [schema.get("const")])
    assert any(validator.is_valid(v) for v in listed)  # a value to keep: the guide must not be empty
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for value in listed:
        for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
            assert accepts(guide, tokenize_continuation(smollm2, text)) is validator.is_valid(value), text


TYPED_BOOLEAN_ALGEBRA = [
    # (schema, texts and whether each is valid): allany23 in small, a not of an anyOf of nots of
    # allOfs of patterns, beside a type that leaves strings only; allany4 in small; oneofpr1 in
    # small, where the objects' undeclared values are free-form still
    ({"type": "string", "not": {"anyOf": [{"not": {"allOf": [{"pattern": "a"}, {"pattern": "b"}]}}]}},
     {'"ab"': True, '"ba"': True, '"a"': False, '"b"': False, '""': False, "1": False, '{"a": "ab"}': False}),
    ({"type": "integer", "not": {"multipleOf": 8}, "anyOf": [{"multipleOf": 3}, {"not": {"minimum": 10}}]},
     {"3": True, "5": True, "24": False, "12": True, "16": False, "11": False, '"3"': False}),
    ({"type": "object", "not": {"patternProperties": {"a": {"not": {"type": "string", "pattern": "7"}}}}},
     {'{"a": "77"}': True, '{"b": 1, "a": "7"}': True, '{"a": 7}': False, '{"a": "x"}': False, '{"b": 7}': False,
      "{}": False, '"a"': False}),
]


@pytest.mark.parametrize("schema, texts", TYPED_BOOLEAN_ALGEBRA, ids=range(len(TYPED_BOOLEAN_ALGEBRA)))
def test_a_typed_value_subtracts_only_values_of_its_own_type(schema: dict, texts: dict[str, bool]) -> None:
    """A ``not`` or ``anyOf`` without a ``type`` of its own is a free-form value (objects and
    arrays nested without bound), but beside ``type: string`` only its strings can meet the
    base: the builder leaves the rest out (``automaton.narrowed``), and no product searches
    through a part that nests without bound, which budgets its search and may give up. The
    language stays the schema's, judged by the ``jsonschema`` library."""
    validator = jsonschema.Draft202012Validator(schema)
    nfa = ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits())
    dfa = LazyDFA(nfa)
    for text, valid in texts.items():
        assert validator.is_valid(json.loads(text)) == valid, text
        assert dfa.matches(text.encode()) == valid, text
    products = [p for key, p in nfa._parts.items() if key[0] == "product"]
    assert products and not any(p.gave_up for p in products)
    assert any(p.unbounded for p in products) == ("object" in schema.values())


REST_BESIDE_PATTERNS = [
    # schema fuzz seed 2 at 41b2a9a: merged into one schema, ^a from the second branch exempted
    # "ab" from the first branch's additionalProperties: false, and {"ab": null} got through
    ({"allOf": [{"type": "object", "additionalProperties": False},
                {"type": "object", "patternProperties": {"^a": {"type": "null"}}, "additionalProperties": False}]},
     {"{}": True, '{"ab": null}': False, '{"b": null}': False}),
    ({"allOf": [{"properties": {"b": True}, "additionalProperties": {"type": "integer"}},
                {"patternProperties": {"^a": {"type": "null"}}}]},
     {'{"ab": null}': False, '{"ab": 1}': False, '{"b": "x", "c": 2}': True, '{"a": "x"}': False, "{}": True}),
]


@pytest.mark.parametrize("schema, texts", REST_BESIDE_PATTERNS, ids=range(len(REST_BESIDE_PATTERNS)))
def test_an_all_of_branch_judges_the_keys_another_branchs_patterns_match(schema: dict, texts: dict[str, bool]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for spec in (False, True):
        dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=not spec)).tree, Limits()))
        for text, valid in texts.items():
            assert validator.is_valid(json.loads(text)) == valid, text
            assert not dfa.matches(text.encode()) or valid, text  # never weaker, in either mode
            if spec:
                assert dfa.matches(text.encode()) == valid, text


def test_a_free_form_value_in_a_product_is_live_only_through_bytes_a_token_spells(smollm2: object) -> None:
    """SmolLM2 has no token for the byte 0xF1 (a lead byte of U+40000..U+7FFFF). A free-form
    value's automaton read every byte, so a difference that holds one proved tuples live by a
    key no token spells: after ``{"a"`` (which both branches below match, whatever follows) the
    guide let the model go on, into a key that could never close."""
    compiler = constrain.Compiler(smollm2)
    assert not compiler.vocabulary.byte_alphabet[0xF1]
    schema = {"oneOf": [{"type": "object"}, {"type": "object", "required": ["a"]}]}
    validator = jsonschema.Draft202012Validator(schema)
    guide = compiler.json_schema(schema, strict_properties=False)
    assert not validator.is_valid({"a": 1}) and not validator.is_valid({"a": 1, "\U00040000": 1})
    assert validator.is_valid({"ab": 1})
    assert accepts(guide, tokenize_continuation(smollm2, '{"ab": 1}'))
    assert not accepts(guide, tokenize_continuation(smollm2, '{"a": 1'), require_final=False)
    rng = random.Random(7)
    for _ in range(8):  # every walk that ends is valid, and none meets a dead end
        ids, done = random_walk(guide, compiler.vocabulary, rng, max_tokens=60, eos_probability=0.9)
        if done:
            assert validator.is_valid(json.loads(token_text(compiler.vocabulary, ids)))


def test_a_typeless_one_of_is_split_by_first_byte_before_its_liveness_search(smollm2: object) -> None:
    """Snowplow sp_336: a oneOf of two closed objects that name no ``type``. Each branch is any
    value of its kind, so the difference's base is an alternation of every JSON type; whole,
    the liveness search from the start spent its budget in the free-form arrays that both
    branches hold and counted the branch dead, and the valid instances were refused. Split by
    first byte, the objects' product meets only the objects."""
    schema = {"oneOf": [
        {"additionalProperties": False, "required": ["type", "key", "value", "message"], "properties": {
            "key": {"maxLength": 32, "type": "string"}, "message": {"type": "string"},
            "type": {"enum": ["InvalidValue"]}, "value": {"type": "string"}}},
        {"additionalProperties": False, "required": ["type", "message"], "properties": {
            "message": {"type": "string"}, "type": {"enum": ["UnhandledRowDecodingError"]}}},
    ]}  # fmt: skip
    valid = ['{"type": "UnhandledRowDecodingError", "message": "x"}', '{"message": "x", "type": "UnhandledRowDecodingError"}',
             '{"type": "InvalidValue", "key": "k", "value": "v", "message": "m"}']  # fmt: skip
    # anything but an object matches both branches, so neither
    invalid = ['{"type": "InvalidValue", "message": "x"}', '{"type": "UnhandledRowDecodingError", "message": "x", "key": "k"}',
               '[1, {"a": []}]', '"text"']  # fmt: skip
    _assert_exact_on(smollm2, schema, valid, invalid, seed=11)


def _assert_exact_on(tokenizer: object, schema: dict[str, object], valid: list[str], invalid: list[str], seed: int,
                     limits: Limits | None = None) -> None:  # fmt: skip
    """The spec-mode guide of ``schema`` agrees with jsonschema on ``valid`` and ``invalid`` (which
    the oracle must sort the same way), and its random walks that end are valid."""
    compiler = constrain.Compiler(tokenizer)
    validator = jsonschema.Draft202012Validator(schema)
    guide = compiler.json_schema(schema, strict_properties=False, limits=limits)
    for text in valid + invalid:
        assert validator.is_valid(json.loads(text)) == (text in valid), text
        assert accepts(guide, tokenize_continuation(tokenizer, text)) == (text in valid), text
    rng = random.Random(seed)
    for _ in range(8):
        ids, done = random_walk(guide, compiler.vocabulary, rng, max_tokens=80, eos_probability=0.9)
        if done:
            assert validator.is_valid(json.loads(token_text(compiler.vocabulary, ids)))


def test_an_optional_discriminator_is_found_behind_every_optional_member(smollm2: object) -> None:
    """o21819 (vzlogger's meters): a oneOf of objects told apart by ``protocol``, an enum that
    no branch requires, beside a dozen optional members each. A difference's liveness search
    had to find ``"protocol"`` by itself behind every spelling of the optional members; it ran
    out of budget at the object's start, and the guide was refused (or valid meters were).
    Split by the tag, the objects that hold it need no difference from branches of other tags."""
    meter = {"type": "object", "properties": {
        "enabled": {"type": "boolean"}, "allowskip": {"type": "boolean"}, "interval": {"type": "integer"},
        "aggtime": {"type": "integer"}, "aggfixedinterval": {"type": "boolean"}}}  # fmt: skip

    def branch(protocol: str, **properties: object) -> dict[str, object]:
        return {"allOf": [{"$ref": "#/$defs/meter"},
                          {"properties": {"protocol": {"type": "string", "enum": [protocol]}, **properties}}]}  # fmt: skip

    text, integer = {"type": "string"}, {"type": "integer"}
    schema = {"$defs": {"meter": meter}, "oneOf": [
        branch("s0", device=text, gpio=integer, resolution=integer), branch("d0", device=text, baudrate=integer, parity=text),
        branch("sml", device=text, host=text, pullseq=text), branch("file", path=text, format=text, rewind={"type": "boolean"}),
        branch("exec", command=text, format=text, interval=integer),
    ]}  # fmt: skip
    valid = ['{"enabled": true, "interval": 5, "device": "x", "parity": "8n1", "protocol": "d0"}',
             '{"protocol": "file", "path": "/tmp/x"}', '{"device": "x", "protocol": "d0", "gpio": "a"}']  # fmt: skip
    invalid = ['{"enabled": true}', '{"protocol": "d0", "baudrate": "fast"}', '{"protocol": "usb"}', '[]']
    _assert_exact_on(smollm2, schema, valid, invalid, seed=5)


@pytest.mark.parametrize("budget", [64, 256])
def test_one_of_objects_that_lack_the_others_required_names_need_no_search(smollm2: object, budget: int) -> None:
    """o19343 (Vega-Lite): ``oneOf`` of a unit spec (requires ``mark``), a layer spec
    (``layers``) and a facet spec (``facet`` and ``spec``), every other member free-form.
    Each branch was only its difference from the others, and where that liveness search ran
    out of budget the branch counted as empty: ``{"layers": []}`` was refused (the whole guide
    with a small budget). Objects that lack a name each other branch requires match no other
    branch; they are kept beside the difference, live without a search."""
    mark = {"type": "object", "required": ["mark"]}
    schema = {"oneOf": [
        {"type": "object", "required": ["mark"], "properties": {"mark": {"enum": ["bar", "line"]}}},
        {"type": "object", "required": ["layers"], "properties": {"layers": {"type": "array", "items": mark}}},
        {"type": "object", "required": ["facet", "spec"], "properties": {"facet": {"type": "object"}, "spec": mark}},
    ]}  # fmt: skip
    valid = ['{"mark": "bar"}', '{"layers": []}', '{"facet": {}, "spec": {"mark": 1}}', '{"layers": [], "facet": {}}',
             '{"mark": "bar", "x": [[{}]]}', '{"layers": [{"mark": "x"}], "spec": {}}']  # fmt: skip
    invalid = ['{"layers": [], "mark": "bar"}', '{"mark": "bar", "facet": {}, "spec": {"mark": 2}}', '{}',
               '{"layers": [{}]}', '{"mark": "pie"}']  # fmt: skip
    _assert_exact_on(smollm2, schema, valid, invalid, seed=4, limits=Limits(max_search_states=budget))
    # without "type": "object" every other value matches all three branches: none is valid
    untyped = {"oneOf": [{key: value for key, value in branch.items() if key != "type"} for branch in schema["oneOf"]]}
    _assert_exact_on(smollm2, untyped, valid, invalid + ['"x"', "1", "[]"], seed=4, limits=Limits(max_search_states=budget))


def test_a_witness_that_closes_many_members_in_any_order_is_found(smollm2: object) -> None:
    """o25692 (rpm -V output): ``oneOf`` of a changed file (five required members, in any order)
    and a deleted one (``changes: ["deleted"]``). The deleted branch's superset lets a key
    repeat, so it stays alive until the object closes: a witness for the first branch must
    write all five members. The budgeted search expanded every subset of them first and gave
    up, and the changed files were refused; the first branch's own completion, found depth
    first, is one such witness."""
    changes = {"type": "array", "minItems": 1, "items": {"enum": ["size", "mode", "md5", "user", "group", "time"]}}
    schema = {"oneOf": [
        {"required": ["changes", "mode", "user", "group", "type"], "properties": {
            "changes": changes, "mode": {"type": "string", "pattern": "^[0-7]{3,4}$"}, "user": {"type": "string", "minLength": 1},
            "group": {"type": "string", "minLength": 1}, "type": {"enum": ["file", "dir"]}}},
        {"required": ["changes"], "properties": {"changes": {"enum": [["deleted"]]}}},
    ]}  # fmt: skip
    valid = ['{"changes": ["size"], "mode": "644", "user": "u", "group": "g", "type": "file"}',
             '{"type": "dir", "group": "g", "user": "u", "mode": "0755", "changes": ["md5", "time"]}',
             '{"changes": ["deleted"], "mode": "644"}']  # fmt: skip
    invalid = ['{"changes": ["size"]}', '{}', '"x"', '{"changes": ["size"], "mode": "9", "user": "u", "group": "g", "type": "file"}']
    _assert_exact_on(smollm2, schema, valid, invalid, seed=3)


def test_branches_told_apart_by_a_nested_optional_member_need_no_difference_where_it_is_present(smollm2: object) -> None:
    """o25731 (package lists): the two branches differ in ``_attributes.package_system`` (an
    optional member whose value requires ``rpm`` in one, ``dpkg`` in the other) and in a
    checksum pattern deep inside ``_elements``. The branch minus the other's superset had to
    find that nested enum by itself: out of budget, the guide refused at compile. Members
    whose value facts are disjoint now separate branches as listed tags do. (Without
    ``_attributes`` the difference stays: ``{"_elements": [{"name": "a", "checksum": ""}]}``
    matches the second branch only, and its search still runs out of budget: refused,
    stricter than the schema, never weaker.)"""
    def branch(system: str, checksum: str) -> dict[str, object]:
        return {"properties": {
            "_attributes": {"type": "object", "required": ["package_system"], "properties": {"package_system": {"enum": [system]}}},
            "_elements": {"type": "array", "items": {"type": "object", "required": ["name", "checksum"], "properties": {
                "name": {"type": "string", "minLength": 1}, "checksum": {"type": "string", "pattern": checksum}}}}}}  # fmt: skip

    schema = {"type": "object", "required": ["_elements"], "oneOf": [branch("rpm", "^[a-f0-9]+$"), branch("dpkg", "^[a-f0-9]*$")]}
    valid = ['{"_attributes": {"package_system": "rpm"}, "_elements": [{"name": "a", "checksum": "0ff"}]}',
             '{"_elements": [{"name": "a", "checksum": ""}], "_attributes": {"package_system": "dpkg"}}']  # fmt: skip
    invalid = ['{"_attributes": {"package_system": "rpm"}, "_elements": [{"name": "a", "checksum": ""}]}',
               '{"_elements": [{"name": "a", "checksum": "0ff"}]}', '{"_elements": []}',
               '{"_attributes": {"package_system": "yum"}, "_elements": []}']  # fmt: skip
    _assert_exact_on(smollm2, schema, valid, invalid, seed=9)



def test_one_of_geojson_geometries_settles_its_starts_by_probes(smollm2: object) -> None:
    """GeoJSON o63308: geometries told apart by ``type``, and a collection whose ``type`` enum is
    misspelt (``emum``, an annotation), so it overlaps every geometry. Each branch's start is
    live, proved by a completion of the branch alone; but the probe that went first settled 128
    states and these completions need up to 384 (``bbox`` comes first, with four numbers), so
    every start searched its budget of tuples before the fallback probe found them (o63308:
    compiles 3.3-4.0 s, now 0.8-0.9 s). A probe on a sixteenth of the budget goes second: no
    search, no tuple expanded, and the guide is exact."""
    numbers = {"type": "array", "items": {"type": "number"}}
    bbox = {"type": "array", "minItems": 4, "items": {"type": "number"}}

    def geometry(name: str, coordinates: dict[str, object]) -> dict[str, object]:
        return {"type": "object", "required": ["type", "coordinates"], "properties": {
            "type": {"type": "string", "enum": [name]}, "coordinates": coordinates, "bbox": bbox}}  # fmt: skip

    point = geometry("Point", {**numbers, "minItems": 2})
    line = geometry("LineString", {"type": "array", "minItems": 2, "items": {**numbers, "minItems": 2}})
    collection = {"type": "object", "required": ["type", "geometries"], "properties": {
        "type": {"type": "string", "emum": ["GeometryCollection"]},
        "geometries": {"type": "array", "items": {"oneOf": [point, line]}}, "bbox": bbox}}  # fmt: skip
    schema = {"oneOf": [point, line, collection]}
    before = _WORK.expanded
    constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    assert _WORK.expanded - before < Limits().max_search_states  # at 55a20ae: 17,852
    valid = ['{"type": "Point", "coordinates": [1, 2]}', '{"coordinates": [[0, 0], [1, 1]], "type": "LineString"}',
             '{"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [1, 2, 3]}]}',
             '{"type": "Point", "geometries": [], "bbox": [0, 0, 1, 1]}']  # fmt: skip
    invalid = ['{"type": "Point", "coordinates": [1, 2], "geometries": []}', '{"type": "Point", "coordinates": [1]}',
               '{"type": "LineString", "coordinates": [[0, 0]]}', '{"type": "Point", "coordinates": [1, 2], "bbox": [0]}',
               '{"type": "GeometryCollection", "geometries": [{"type": "Point"}]}']  # fmt: skip
    _assert_exact_on(smollm2, schema, valid, invalid, seed=5)

# (schema, instances) where a subtracted part nests a free-form value: its liveness search has
# a budget, and the budgets below run out long before it settles
SUBTRACTED_UNDER_BUDGET = [
    ({"dependentSchemas": {"foo\tbar": {"minProperties": 4}}},
     [{"foo\tbar": 1, "a": 2}, {"foo\tbar": 1}, {"foo\tbar": 1, "a": 2, "b": [3]}, {"a": 1}]),
    ({"dependentSchemas": {"foo": {"minProperties": 3}}}, [{"foo": 1}, {"foo": {"x": 1}, "a": 2}, {"b": 1}]),
    ({"not": {"required": ["a"], "maxProperties": 2}}, [{"a": 1}, {"a": 1, "b": [2]}, {"a": 1, "b": 2, "c": 3}]),
]  # fmt: skip


@pytest.mark.parametrize("budget", [16, 64, 256])
@pytest.mark.parametrize(("schema", "instances"), SUBTRACTED_UNDER_BUDGET)
def test_a_subtracted_part_keeps_what_its_search_could_not_settle(
    smollm2: object, budget: int, schema: dict, instances: list
) -> None:
    """A search that runs out of budget counted its tuple dead: stricter where the product's
    language is kept, weaker where it is subtracted. The part "has ``foo\\tbar`` and fewer
    than four members" died after ``{"foo\\tbar"`` and the difference took
    ``{"foo\\tbar": 1, "a": 2}`` (the test suite's dependentSchemas case, under a probe that
    settled less). Refusing the schema is allowed; letting an invalid instance through is not."""
    validator = jsonschema.Draft202012Validator(schema)
    compiler = constrain.Compiler(smollm2, limits=Limits(max_search_states=budget))
    try:
        guide = compiler.json_schema(schema, strict_properties=False)
    except constrain.LimitExceededError:
        return
    for instance in instances:
        for text in (json.dumps(instance), json.dumps(instance, separators=(",", ":"))):
            if accepts(guide, tokenize_continuation(smollm2, text)):
                assert validator.is_valid(instance), text
    rng = random.Random(budget)
    for _ in range(6):
        ids, done = random_walk(guide, compiler.vocabulary, rng, max_tokens=40, eos_probability=0.5)
        if done:
            assert validator.is_valid(json.loads(token_text(compiler.vocabulary, ids)))


AERLEON = Path(__file__).resolve().parents[2] / "shared/data/maskbench-dev/JsonSchemaStore---aerleon-policies.schema.json"


@pytest.mark.skipif(not AERLEON.exists(), reason="needs ../shared/data/maskbench-dev")
@pytest.mark.slow
def test_a_deep_difference_finds_its_witness_by_the_short_probe_first(smollm2: object) -> None:
    """Aerleon's policy files: a ``oneOf`` of open objects, each requiring another key, around
    arrays of ``oneOf``s. Deep inside ``filters`` every step asks whether the product of the
    branch and the (still open) others can end; the budgeted search expanded the branch's states
    until it ran past max_dfa_states (200,000) in the first valid instance. The branch's own
    completion (close every bracket, write no other required key) is a witness: a short probe
    now goes first, and both valid instances walk to their end, the invalid ones are stopped."""
    doc = json.loads(AERLEON.read_text())
    guide = constrain.Compiler(smollm2).json_schema(doc["schema"], strict_properties=False)
    verdicts = [accepts(guide, tokenize_continuation(smollm2, json.dumps(t["data"], ensure_ascii=False)))
                for t in doc["tests"]]  # fmt: skip
    assert verdicts == [t["valid"] for t in doc["tests"]]
    assert verdicts.count(True) >= 2
