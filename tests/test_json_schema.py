"""JSON Schema → regex guide: soundness against ``jsonschema``, completeness on real tokenizers."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel, Field

import constrain
from constrain.json_schema import to_regex
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex.automaton import DEAD, ByteNFA, LazyDFA
from constrain.core.limits import Limits
from constrain.testing import accepts, finished_walks, random_walk, token_text, tokenize_continuation


class Address(BaseModel):
    city: str = Field(max_length=20)
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=12)
    age: int = Field(ge=0, le=130)
    email: str | None = None
    address: Address


CASES: list[tuple[str, dict, list]] = [
    ("scalars", {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": -40, "exclusiveMaximum": 1000},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "score": {"type": "number"},
            "label": {"type": "string", "minLength": 2, "maxLength": 6},
            "kind": {"enum": ["a", "b", 3, None]},
            "version": {"const": "v1"},
        },
        "required": ["id", "kind"],
    }, [{"id": -40, "kind": "a"}, {"id": 999, "flag": True, "nothing": None, "score": -1.5e3, "label": "héllo",
         "kind": None, "version": "v1"}, {"id": 0, "label": "\"\\", "kind": 3}]),
    ("arrays", {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
            "point": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": False},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
                       "maxItems": 2},
        },
        "required": ["tags"],
    }, [{"tags": ["x"]}, {"tags": ["a", "bb", "ccc"], "point": [1, -2], "matrix": [[1, 2], []]},
        {"tags": ["東京"], "point": [3]}]),
    ("combinators", {
        "$defs": {"pos": {"type": "integer", "minimum": 1, "maximum": 99}},
        "type": "object",
        "properties": {
            "value": {"anyOf": [{"$ref": "#/$defs/pos"}, {"type": "string", "maxLength": 4}]},
            "either": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
            "both": {"allOf": [{"type": "integer"}, {"minimum": 5, "maximum": 7}]},
        },
        "required": ["value", "either"],
    }, [{"value": 42, "either": True}, {"value": "abcd", "either": None, "both": 6}]),
    ("formats", {
        "type": "object",
        "properties": {f: {"type": "string", "format": f} for f in ("date", "date-time", "uuid", "ipv4", "email")},
    }, [{}, {"date": "2024-02-29", "date-time": "2024-02-29T12:30:00Z",
             "uuid": "123e4567-e89b-12d3-a456-426614174000", "ipv4": "192.168.0.1", "email": "ada@example.org"}]),
    ("contains and number bounds", {
        "type": "object",
        "properties": {
            "readings": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                         "contains": {"minimum": 90}, "minContains": 2},
            "ratio": {"type": "number", "exclusiveMinimum": -1, "maximum": 1.0},
        },
        "required": ["readings"],
    }, [{"readings": [91, 95]}, {"readings": [1, 90, 2, 99, 3], "ratio": -0.25}, {"readings": [99, 99], "ratio": 1}]),
    ("patterns, formats and literal objects", {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "note": {"type": "string", "pattern": "ok"},
            "quoted": {"type": "string", "pattern": "^\"[a-z]+\"$"},
            "when": {"type": "string", "format": "time"},
            "span": {"type": "string", "format": "duration"},
            "host": {"type": "string", "format": "hostname"},
            "addr": {"type": "string", "format": "ipv6"},
            "link": {"type": "string", "format": "uri"},
            "mode": {"oneOf": [{"const": "fast"}, {"const": "safe"}]},
            "preset": {"enum": [{"level": 1}, [1, 2], "none"]},
        },
        "required": ["code"],
    }, [{"code": "AB-123"}, {"code": "ZZ-000", "note": "it is ok!", "quoted": '"abc"', "when": "12:30:00Z",
         "span": "P1DT2H", "host": "api.example.com", "addr": "fe80::1", "link": "https://example.com/a?b=c#d",
         "mode": "safe", "preset": {"level": 1}}, {"code": "AA-999", "preset": [1, 2]}]),
    ("free-form map", {"type": "object", "additionalProperties": {"type": "integer", "maximum": 9}},
     [{}, {"x": 1, "y z": -3}]),
]


def validate(schema: dict, text: str) -> None:
    """The oracle: draft 2020-12 with format assertion (rfc3339, fqdn, rfc3986 checkers installed)."""
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    validator.validate(json.loads(text))


@pytest.mark.parametrize(("name", "schema", "instances"), CASES, ids=[c[0] for c in CASES])
def test_random_walks_are_valid(compiler: constrain.Compiler, name: str, schema: dict, instances: list) -> None:
    guide = compiler.json_schema(schema)
    rng = random.Random(name)
    finished = 0
    for _ in range(12):
        ids, ended = random_walk(guide, compiler.vocabulary, rng, max_tokens=250, eos_probability=0.9)
        if ended:
            finished += 1
            validate(schema, token_text(compiler.vocabulary, ids).decode("utf-8"))
    assert finished


@pytest.mark.parametrize(("name", "schema", "instances"), CASES, ids=[c[0] for c in CASES])
def test_valid_instances_are_accepted(
    compiler: constrain.Compiler, tokenizer: object, name: str, schema: dict, instances: list
) -> None:
    guide = compiler.json_schema(schema)
    for instance in instances:
        for text in (json.dumps(instance), json.dumps(instance, separators=(",", ":")),
                     json.dumps(instance, ensure_ascii=False)):  # fmt: skip
            validate(schema, text)
            ids = tokenize_continuation(tokenizer, text)
            assert accepts(guide, ids), text
            assert re.fullmatch(to_regex(schema), text), text  # the rendered regex is the same language


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        (CASES[0][1], '{"id": 1000, "kind": "a"}'),
        (CASES[0][1], '{"kind": "a"}'),
        (CASES[0][1], '{"id": 1, "kind": "c"}'),
        (CASES[0][1], '{"id": 1, "label": "x", "kind": "a"}'),
        (CASES[1][1], '{"tags": []}'),
        (CASES[1][1], '{"tags": ["a"], "point": [1, 2, 3]}'),
        (CASES[2][1], '{"value": 100, "either": true}'),
        (CASES[3][1], '{"date": "2024-13-01"}'),
        (CASES[4][1], '{"readings": [91, 5]}'),
        (CASES[4][1], '{"readings": [91, 95], "ratio": -1}'),
        (CASES[4][1], '{"readings": [91, 95], "ratio": 1.5}'),
        (CASES[5][1], '{"code": "AB-12"}'),
        (CASES[5][1], '{"code": "AB-123", "note": "nope"}'),
        (CASES[5][1], '{"code": "AB-123", "preset": {"level": 2}}'),
        (CASES[5][1], '{"code": "AB-123", "span": "PT"}'),
        (CASES[6][1], '{"x": 10}'),
    ],
)
def test_invalid_instances_are_rejected(compiler: constrain.Compiler, tokenizer: object, schema: dict, text: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate(schema, text)
    assert not accepts(compiler.json_schema(schema), tokenize_continuation(tokenizer, text))
    assert not re.fullmatch(to_regex(schema), text)


def test_pydantic_round_trip(compiler: constrain.Compiler) -> None:
    guide = compiler.json_schema(Person)
    assert guide.model_class is Person
    texts = finished_walks(guide, compiler.vocabulary, random.Random(3), count=10, max_tokens=250)
    for text in texts:
        Person.model_validate_json(text.decode("utf-8"))
    assert texts


def test_unsupported_keyword_names_keyword_and_pointer() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(constrain.UnsupportedSchemaError) as info:
        to_regex(schema)
    assert info.value.keyword == "uniqueItems" and info.value.pointer == "#/properties/xs/uniqueItems"
    assert "lenient=True" in str(info.value)


def test_lenient_mode_drops_and_reports(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    schema = {"type": "array", "uniqueItems": True}
    with pytest.warns(UserWarning, match="uniqueItems"):
        guide = compiler.json_schema(schema, lenient=True)
    assert guide.dropped == (("uniqueItems", "#/uniqueItems"),)


def test_recursive_schema_needs_a_depth_or_the_grammar_backend(smollm2: object) -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"}  # fmt: skip
    with pytest.raises(constrain.RecursiveSchemaError, match="max_recursion_depth"):
        to_regex(tree)
    compiler = constrain.Compiler(smollm2)
    guide = compiler.json_schema(tree, max_recursion_depth=2)
    tokenizer = smollm2
    assert accepts(guide, tokenize_continuation(tokenizer, '{"kids": [{"kids": []}, {}]}'))
    rng = random.Random(5)
    for _ in range(10):
        ids, ended = random_walk(guide, compiler.vocabulary, rng, max_tokens=200, eos_probability=0.9)
        if ended:
            jsonschema.validate(json.loads(token_text(compiler.vocabulary, ids)), tree)


def test_whitespace_presets(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    pretty = json.dumps({"a": 1}, indent=2)
    assert not accepts(compiler.json_schema(schema), tokenize_continuation(smollm2, pretty))
    assert accepts(compiler.json_schema(schema, whitespace="any"), tokenize_continuation(smollm2, pretty))
    assert not accepts(compiler.json_schema(schema, whitespace="any"),
                       tokenize_continuation(smollm2, '{"a":' + " " * 20 + "1}"))  # fmt: skip


def test_annotations_inside_a_presence_condition_are_listed_too() -> None:
    """A oneOf over required members is read as a truth table (presence.py), which reads only
    the assertions: the unknown keywords inside were dropped without a word."""
    schema = {"type": "object", "properties": {"image": {"type": "string"}, "build": {"type": "string"}},
              "oneOf": [{"required": ["image"], "x-note": 1},
                        {"required": ["build"], "properties": {"build": {"javaName": "B"}}}]}  # fmt: skip
    walk = schema_walk(schema, SchemaOptions(strict_properties=False))
    assert set(walk.ignored) >= {("x-note", "#/oneOf/0/x-note"), ("javaName", "#/oneOf/1/properties/build/javaName")}


def test_annotations_are_ignored_and_listed(smollm2: object) -> None:
    """Keywords the spec does not define (and unknown formats) are annotations: ignored, never an error."""
    schema = {
        "type": "object", "javaName": "Thing", "x-order": 3,
        "properties": {
            "id": {"type": "integer", "readonly": True, "_format": "int64"},
            "when": {"type": "string", "format": "no-such-format", "description": "free text"},
        },
        "required": ["id"],
    }  # fmt: skip
    guide = constrain.Compiler(smollm2).json_schema(schema)
    assert set(guide.ignored) == {
        ("javaName", "#/javaName"), ("x-order", "#/x-order"), ("readonly", "#/properties/id/readonly"),
        ("_format", "#/properties/id/_format"), ("format", "#/properties/when/format"),
    }  # fmt: skip
    assert guide.dropped == ()
    assert accepts(guide, tokenize_continuation(smollm2, '{"id": 7, "when": "any text"}'))
    assert not accepts(guide, tokenize_continuation(smollm2, '{"id": "7"}'))
    with pytest.raises(constrain.UnsupportedSchemaError, match="'idn-email'"):  # defined by the spec: checked
        to_regex({"type": "string", "format": "idn-email"})


def test_older_draft_spellings() -> None:
    """Draft 4 boolean exclusive bounds, draft 7 dependencies, draft 2019 array items + additionalItems."""
    draft4 = {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 3, "exclusiveMaximum": False}
    assert [v for v in range(-2, 6) if re.fullmatch(to_regex(draft4), str(v))] == [1, 2, 3]
    tuple_ = {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}
    regex = to_regex(tuple_)
    assert re.fullmatch(regex, '[1, "a", "b"]') and not re.fullmatch(regex, "[1, 2]")
    assert not re.fullmatch(to_regex({**tuple_, "additionalItems": False}), '[1, "a"]')


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#",
                                   "https://json-schema.org/draft/2020-12/schema", None])  # fmt: skip
def test_keywords_beside_a_ref_count_from_draft_2019_on(draft: str | None) -> None:
    """Up to draft 7 a $ref stands for its target alone: "type": "string" beside it means nothing
    (jsonschema's Draft4Validator agrees). From 2019-09 on, and without $schema, both apply."""
    schema = {"properties": {"s": {"type": "string", "$ref": "#/definitions/o", "maxProperties": 0}},
              "definitions": {"o": {"type": "object"}}}  # fmt: skip
    if draft:
        schema["$schema"] = draft
    walk = schema_walk(schema, SchemaOptions(strict_properties=False))
    dfa = LazyDFA(ByteNFA(walk.tree, Limits()))
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    for text in ['{"s": {"a": 1}}', '{"s": {}}', '{"s": "x"}']:
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), (draft, text)
    old = draft is not None and "draft-0" in draft
    assert (("type", "#/properties/s/type") in walk.ignored) == old


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#"] + [  # the fast tier: draft 4 only
    pytest.param(draft, marks=pytest.mark.slow) for draft in ("http://json-schema.org/draft-06/schema#",
                                                              "http://json-schema.org/draft-07/schema#",
                                                              "https://json-schema.org/draft/2020-12/schema")])  # fmt: skip
def test_keywords_a_draft_does_not_define_are_annotations_there(draft: str) -> None:
    """A draft-04 validator ignores const and if (drafts 6 and 7 added them): so does the walker,
    down to the facts that prove oneOf branches disjoint (two consts are no proof in draft 4)."""
    schema = {"$schema": draft, "type": "object",
              "properties": {"k": {"oneOf": [{"const": 1}, {"const": 2}]}, "c": {"contains": {"const": 1}}},
              "if": {"required": ["a"]}, "then": {"required": ["b"]}}  # fmt: skip
    walk = schema_walk(schema, SchemaOptions(strict_properties=False))
    dfa = LazyDFA(ByteNFA(walk.tree, Limits()))
    validator = jsonschema.validators.validator_for(schema)(schema)
    for text in ['{"k": 1}', '{"k": 3}', '{"a": 1}', '{"a": 1, "b": 2}', '{"c": [2]}', '{"c": [1]}', '{}']:
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), (draft, text)
    ignored = {keyword for keyword, _ in walk.ignored}
    assert ("const" in ignored) == ("draft-04" in draft)
    assert ("if" in ignored) == ("draft-04" in draft or "draft-06" in draft)


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"])
@pytest.mark.slow
def test_older_spellings_stay_enforced_when_read_twice(draft: str) -> None:
    """The walker spells draft-4 'dependencies' as 'dependentSchemas' and reads a merged anyOf
    branch again: a draft that lacks 'dependentSchemas' must not drop what it wrote itself
    (MaskBench o11666 let {"type": "string", "minimum": "10"} through that way)."""
    branch = {"properties": {"type": {"enum": ["integer", "string"]}, "minimum": {"type": "string"}},
              "dependencies": {"minimum": {"properties": {"type": {"enum": ["integer"]}}}, "type": ["minimum"]}}
    schema = {"$schema": draft, "type": "object", "anyOf": [branch]}
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    validator = jsonschema.validators.validator_for(schema)(schema)
    for text in ['{"type": "string", "minimum": "10"}', '{"type": "integer", "minimum": "10"}', '{"type": "integer"}',
                 '{"minimum": "1"}']:  # fmt: skip
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), (draft, text)


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-07/schema#"] + [
    pytest.param(draft, marks=pytest.mark.slow) for draft in ("http://json-schema.org/draft-04/schema#",
                                                              "https://json-schema.org/draft/2019-09/schema",
                                                              "https://json-schema.org/draft/2020-12/schema")])  # fmt: skip
def test_the_names_the_walker_writes_are_annotations_where_the_user_writes_them(draft: str) -> None:
    """dependentRequired, dependentSchemas and prefixItems are the walker's own spellings of
    draft-7 dependencies and array items, but in a draft that lacks them a user who writes them
    writes annotations. Enforced there, they are stricter; under `not`, weaker: this `not` once
    let {"a": 1} through in draft 7."""
    schema = {"$schema": draft, "type": "object", "properties": {"a": {}, "b": {}, "l": {"type": "array"}},
              "not": {"anyOf": [{"required": ["a"], "dependentRequired": {"a": ["b"]}},
                                {"required": ["b"], "dependentSchemas": {"b": {"required": ["l"]}}},
                                {"required": ["l"], "properties": {"l": {"prefixItems": [{"type": "string"}]}}}]}}
    walk = schema_walk(schema, SchemaOptions(strict_properties=False))
    dfa = LazyDFA(ByteNFA(walk.tree, Limits()))
    validator = jsonschema.validators.validator_for(schema)(schema)
    texts = ['{"a": 1}', '{"a": 1, "b": 2}', '{"b": 2}', '{"b": 2, "l": []}', '{"l": [1]}', '{"l": ["x"]}', '{}']
    for text in texts:  # where the draft has them, `not` subtracts a superset of dependentSchemas: stricter
        accepted, valid = dfa.matches(text.encode()), validator.is_valid(json.loads(text))
        assert accepted == valid if "draft-0" in draft else valid or not accepted, (draft, text)
    beside = {"$schema": draft, "dependentRequired": {"a": ["b"]}, "prefixItems": [{"type": "string"}]}
    ignored = {keyword for keyword, _ in schema_walk(beside, SchemaOptions(strict_properties=False)).ignored}
    assert ("dependentRequired" in ignored) == ("draft-0" in draft)
    assert ("prefixItems" in ignored) == ("2020-12" not in draft)


def test_refs_resolve_against_base_uris_anchors_and_remotes(smollm2: object) -> None:
    """$id changes the base below it, $anchor names a target, remote documents come from remotes=."""
    nested = {
        "$id": "http://example.com/root.json",
        "$defs": {
            "inner": {"$id": "inner.json", "$defs": {"t": {"type": "integer"}}, "$ref": "#/$defs/t"},
            "t": {"type": "string"},  # what '#/$defs/t' would mean at the root: must not be used
            "named": {"$anchor": "flag", "type": "boolean"},
        },
        "type": "array", "prefixItems": [{"$ref": "inner.json"}, {"$ref": "#flag"}], "items": False,
    }  # fmt: skip
    regex = to_regex(nested)
    assert re.fullmatch(regex, "[1, true]") and not re.fullmatch(regex, '["a", true]')
    compiler = constrain.Compiler(smollm2)
    remote = {"$ref": "http://example.com/int.json", "minimum": 3}
    with pytest.raises(constrain.UnsupportedSchemaError, match="remotes="):
        compiler.json_schema(remote)
    guide = compiler.json_schema(remote, remotes={"http://example.com/int.json": {"type": "integer"}})
    assert accepts(guide, tokenize_continuation(smollm2, "7"))
    assert not accepts(guide, tokenize_continuation(smollm2, "2"))
    assert not accepts(guide, tokenize_continuation(smollm2, '"x"'))


@pytest.mark.parametrize("base", ["urn:uuid:deadbeef-1234-00ff-ff00-4321feebdaed", "urn:example:1/406/47452/2",
                                  "urn:example:weather?=op=map&lat=39.56", "tag:example.com,2026:schemas/a"])
def test_refs_resolve_against_bases_that_are_not_hierarchical(base: str) -> None:
    """A URN (or tag:) base resolves a pointer as any base does (RFC 3986 5.2): urljoin alone
    left '#/$defs/bar' unresolved there, and the schema was refused as remote."""
    schema = {"$id": base, "properties": {"foo": {"$ref": "#/$defs/bar"}, "baz": {"$ref": "other#/$defs/n"}},
              "$defs": {"bar": {"type": "string"}, "other": {"$id": "other", "$defs": {"n": {"type": "integer"}}}}}
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['{"foo": "x"}', '{"foo": 1}', '{"baz": 2}', '{"baz": "y"}', '{"foo": "x", "baz": 3}', '{"q": 1}']:
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), (base, text)


def test_billion_laughs_and_deep_free_values_end_within_the_time_limit(smollm2: object) -> None:
    """Each definition uses the previous one twice: 2^29 integers in all. Parts are built on
    first visit, so the compile builds one level and a walk builds only the levels it enters:
    both stay far inside the limit, and the text is the start of the one valid shape."""
    import time

    defs: dict = {"d0": {"type": "integer"}}
    for i in range(1, 30):
        defs[f"d{i}"] = {"type": "array", "prefixItems": [{"$ref": f"#/$defs/d{i - 1}"}] * 2, "minItems": 2, "items": False}
    compiler = constrain.Compiler(smollm2, limits=constrain.Limits(timeout_s=3))
    started = time.monotonic()
    guide = compiler.json_schema({"$defs": defs, "$ref": "#/$defs/d29"}, whitespace="none")
    taken, ended = random_walk(guide, compiler.vocabulary, random.Random(0), max_tokens=300)
    assert time.monotonic() - started < 10
    text = token_text(compiler.vocabulary, taken).decode()
    assert not ended and re.fullmatch(r"[\[\],\-0-9]+", text), text
    assert text.startswith("[" * 29), text  # 29 levels open before the first integer
    started = time.monotonic()
    from constrain.json_schema.to_regex import SchemaOptions, schema_walk

    schema_walk(True, SchemaOptions(any_value_depth=16))  # hashing a shared tree once per node
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("pattern", ["^[^a]$", "^.{2,}$", r"^\W$", r"^\D$", "^[^\"]$", r"^[^\\]$", "^[^\n]$"])
def test_negated_classes_in_patterns_write_controls_escaped(pattern: str) -> None:
    """A pattern's character is written as JSON writes it: a control character escaped, never raw
    (negated classes and '.' let raw 0x00-0x1F bytes through, which no JSON parser reads)."""
    dfa = LazyDFA(ByteNFA(schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree, Limits()))
    for code in range(0x20):
        assert not dfa.matches(b'"' + bytes([code]) + b'"'), hex(code)
        escaped = json.dumps(chr(code)).encode()
        assert dfa.matches(escaped) is bool(re.search(pattern, chr(code))), (hex(code), escaped)


ECMA_CLASSES = [  # (pattern, decoded string, matches as ECMA-262 reads it)
    (r"^\S+$", "a\u00a0b", False), (r"^\S+$", "a\u3000b", False), (r"^\S+$", "a\u2028b", False),
    (r"^\S+$", "ab", True), (r"^\s$", "\u00a0", True), (r"^\s$", "\ufeff", True), (r"^\s$", "x", False),
    (r"^[^\s]+$", "a\u2003", False), (r"^[\s\d]+$", "1\u00a0", True), (r"^.$", "\r", False),
    (r"^.$", "\u2029", False), (r"^.$", "\u00e9", True), (r"^\d$", "\u0663", False),
]  # fmt: skip


@pytest.mark.parametrize("pattern,text,matches", ECMA_CLASSES)
def test_patterns_read_classes_as_ecma_262(pattern: str, text: str, matches: bool) -> None:
    """JSON Schema patterns are ECMA-262: \\s holds the Unicode spaces (it held ASCII ones, so
    ^\\S+$ let "a\\u00a0b" through) and '.' leaves out every line terminator."""
    dfa = LazyDFA(ByteNFA(schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree, Limits()))
    assert dfa.matches(json.dumps(text, ensure_ascii=False).encode()) is matches


@pytest.mark.parametrize("pattern", ["x|(^a$|b)c", "(^a$|b)c|x", "^x|y(a$|b)", "(a$|b)|^q$|r(^s)"])
def test_every_alternative_of_a_pattern_with_inner_anchors_is_kept(pattern: str) -> None:
    """A top-level alternative with anchors inside used to replace the alternatives read before
    it (``x|(^a$|b)c`` refused ``"x"``); each string here is judged by Python's ``re``, which reads
    these anchors as ECMA-262 does."""
    dfa = LazyDFA(ByteNFA(schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree, Limits()))
    for text in ["x", "xx", "a", "ac", "bc", "b", "ya", "yb", "q", "rs", "s", "r", ""]:
        assert dfa.matches(json.dumps(text).encode()) is bool(re.search(pattern, text)), text


CONTRADICTIONS = [  # issue #13: each accepted a value that breaks one of its bounds
    {"type": "string", "minLength": 1, "maxLength": 0},
    {"allOf": [{"type": "string", "maxLength": 2}, {"minLength": 5}]},
    {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 2},
    {"type": "object", "minProperties": 3, "maxProperties": 1},
    {"type": "object", "required": ["a", "b"], "maxProperties": 1},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 1}}, "required": ["a"]},
    {"type": "integer", "minimum": 5, "maximum": 3},
    # a pattern that needs more characters than maxLength allows (a counted Length whose body
    # is too long from its entry): the guide's first state allowed no token
    {"type": "string", "allOf": [{"pattern": "^a"}, {"maxLength": 0}]},
    {"type": "array", "items": {"type": "string", "pattern": "^ab", "maxLength": 1}, "minItems": 1},
    # ... and as a required member's value: the object could never close (members looped forever)
    {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a", "maxLength": 0}}, "required": ["x"]},
    # a pattern that ends in its last counted character: that character was not counted
    # against maxLength, so "a" under maxLength 0 and "ab" under 1 compiled (schema fuzzer)
    {"type": "string", "pattern": "^a$", "maxLength": 0},
    {"type": "string", "pattern": "^ab$", "maxLength": 1},
    {"type": "array", "items": {"type": "string", "pattern": "^a$", "maxLength": 0}, "minItems": 1},
    # a required value that is an empty product of scalars, or an array that must hold one:
    # with undeclared members allowed the object went on forever and never closed
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "pattern": "^ab$", "format": "date"}}},
    {"type": "object", "required": ["a"], "properties": {"a": {"oneOf": [{"type": "integer"}, {"type": "integer"}]}}},
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "array", "minItems": 2, "items": {
        "type": "string", "pattern": "^ab$", "format": "date"}}}},
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "array", "minItems": 1, "prefixItems": [
        {"type": "string", "pattern": "^x$", "format": "email"}]}}},
]


@pytest.mark.parametrize("strict", [pytest.param(True, marks=pytest.mark.slow), False])  # fast tier: spec mode
@pytest.mark.parametrize("schema", CONTRADICTIONS, ids=range(len(CONTRADICTIONS)))
def test_contradictory_bounds_are_an_empty_language(smollm2: object, schema: dict, strict: bool) -> None:
    """Nothing satisfies them: a compile-time EmptyLanguageError, not a guide that drops one bound."""
    with pytest.raises(constrain.EmptyLanguageError):
        constrain.Compiler(smollm2).json_schema(schema, strict_properties=strict)


def test_an_optional_member_with_contradictory_bounds_is_left_out(smollm2: object) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 1}, "b": {}}}
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for text, valid in [("{}", True), ('{"b": 1}', True), ('{"a": "x"}', False), ('{"a": "xy"}', False)]:
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, text
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid



@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^a+b$", "maxLength": 3},
    {"type": "string", "pattern": "^(a|bc)*$", "minLength": 1, "maxLength": 4},
    {"type": "array", "items": {"type": "string", "pattern": "x?y", "maxLength": 2}},
])
def test_walks_under_a_pattern_and_a_length_end_where_they_may(smollm2: object, schema: dict) -> None:
    """Found by the schema fuzzer once it judged dead ends: the last character of a pattern was
    left out of the fewest characters still to come, so the guide let "aaa" start under
    ``^a+b$`` and ``maxLength: 3`` and then allowed no token. Every walk must end valid."""
    guide = constrain.Compiler(smollm2).json_schema(schema)
    rng = random.Random(0)
    for _ in range(60):
        taken, ended = random_walk(guide, guide.vocabulary, rng, max_tokens=40)  # raises on a dead end
        if ended:
            jsonschema.validate(json.loads(token_text(guide.vocabulary, taken)), schema)


@pytest.mark.parametrize("branches", [[True, True, True], [True, True, False], [{"title": "any"}, {"type": "integer"}]])
def test_one_of_beside_a_branch_every_value_matches_leaves_only_the_others(smollm2: object, branches: list[object]) -> None:
    """A value matching every branch is no ``oneOf`` instance: with two such branches nothing is
    left, and that is an empty language known without a search (the liveness search of any value
    minus any value ran out of budget and the suite's case was refused with max_search_states)."""
    schema = {"oneOf": branches}
    if sum(b is True or b == {"title": "any"} for b in branches) >= 2:
        with pytest.raises(constrain.EmptyLanguageError):
            constrain.Compiler(smollm2).json_schema(schema)
        return
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)  # anything but an integer
    assert accepts(guide, tokenize_continuation(smollm2, '"x"')) and accepts(guide, tokenize_continuation(smollm2, "1.5"))
    assert not accepts(guide, tokenize_continuation(smollm2, "7"))


def test_an_object_that_cannot_have_enough_keys_is_an_empty_value(smollm2: object) -> None:
    """Found by the schema fuzzer: without ``properties`` or undeclared keys (the default refuses
    them) an object cannot reach ``minProperties: 1``. As the value an ``anyOf`` requires, the
    guide opened the outer object and then allowed no token; it is an empty language."""
    schema = {"type": "object", "properties": {"a": {"type": "object", "minProperties": 1, "maxProperties": 1}},
              "anyOf": [{"required": ["a"]}]}  # fmt: skip
    with pytest.raises(constrain.EmptyLanguageError):
        constrain.Compiler(smollm2).json_schema(schema)
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)  # undeclared keys allowed
    assert accepts(guide, tokenize_continuation(smollm2, '{"a": {"b": 1}}'))


@pytest.mark.parametrize("strict", [True, False])
def test_not_max_properties_is_an_object_with_more_properties(smollm2: object, strict: bool) -> None:
    """Found by the schema fuzzer (seeds 19 at 1310397 and at f5b0509, spec mode): a ``not``
    subtracts a superset of its schema, and the superset of ``maxProperties`` is every object
    (a repeated key makes more members than properties), so ``not: {maxProperties: k}`` was
    any value minus any value. Its liveness search ran out of budget: at the top a
    ``max_search_states`` error, as a member a value that could never start, after the guide had
    allowed the comma before it (a dead end), and valid instances refused. Now ``not`` of
    ``maxProperties`` alone (or beside ``type: object``) is its positive form, an object with
    ``minProperties: k + 1`` (open in
    both modes, as the free-form value it was taken from), and a superset keeps ``maxProperties:
    0`` (a text with a member has a property)."""
    compiler = constrain.Compiler(smollm2)
    objects = ["{}", '{"x": 1}', '{"x": 1, "y": 2}', '{"a": 1, "b": {"x": 1}, "c": 3}']
    for bound in (0, 1, 2):
        negated = {"not": {"maxProperties": bound}}
        typed = {"not": {"type": "object", "maxProperties": bound}}  # non-objects besides
        nested = {"not": {"allOf": [{"maxProperties": 0}]}} if bound == 0 else None  # through the superset
        for schema in filter(None, [negated, typed, nested]):
            guide = compiler.json_schema(schema, strict_properties=strict)
            for text in [*objects, "1", "[]", '"s"']:
                valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
                assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, (schema, text)
    for bound in (0, 1):
        schema = {"type": "object", "properties": {"a": {"type": "null"}, "b": {"not": {"maxProperties": bound}}},
                  "required": ["a"], "additionalProperties": False}  # fmt: skip
        member = compiler.json_schema(schema, strict_properties=strict)
        for text in ['{"a": null, "b": {"x": 1, "y": 2}}', '{"a": null}', '{"a": null, "b": 1}', '{"a": null, "b": {}}',
                     '{"a": null, "b": {"x": 1}}']:  # fmt: skip
            valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
            assert accepts(member, tokenize_continuation(smollm2, text)) is valid, (bound, text)


#: An array no element can satisfy: contains an array of at least one and at most no items.
_NO_ARRAY = {"type": "array", "contains": {"type": "array", "minItems": 1, "maxItems": 0}, "maxContains": 1}

COUNTED_CONTRADICTIONS = [  # schema fuzzer, long run: each opened an object and then allowed no token
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a$", "maxLength": 0}},
     "anyOf": [{"required": ["a"]}]},
    {"type": "object", "properties": {"b": {"type": "null"}, "id": {"type": "null"}}, "anyOf": [{"required": ["id"]}],
     "dependentRequired": {"b": ["a"]}, "minProperties": 2},
    {"allOf": [{"type": "object", "minProperties": 1, "maxProperties": 1}, {"type": "object", "additionalProperties": {
        "type": "string", "pattern": "^a$", "maxLength": 0}}]},
    {"type": "object", "properties": {"a": {}, "b": {"type": "null"}}, "anyOf": [{"not": {"required": ["a"]}}],
     "minProperties": 2},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": [None]}, "uniqueItems": True,
                                            "minItems": 2}}, "anyOf": [{"required": ["a"]}]},
    # a value of no type (if null then boolean, else null) was a free-form value in the tree, so
    # its emptiness was left to its automaton (seed 2 at e82ec18)
    {"type": "object", "properties": {"a": {"if": {"type": "null"}, "then": {"type": "boolean"},
                                            "else": {"type": "null"}}}, "anyOf": [{"required": ["a"]}]},
    # a value that is an empty product (no element can meet contains) gave its member a path
    # the member set's guards counted on (seed 3 at de37989); then a count that needs it
    {"type": "object", "properties": {"a": _NO_ARRAY}, "anyOf": [{"required": ["a"]}]},
    {"type": "object", "properties": {"a": _NO_ARRAY, "b": {}}, "minProperties": 2},
    {"type": "object", "properties": {"a": _NO_ARRAY, "b": {}}, "dependentRequired": {"b": ["a"]}, "required": ["b"]},
]  # fmt: skip


@pytest.mark.parametrize("schema", COUNTED_CONTRADICTIONS, ids=range(len(COUNTED_CONTRADICTIONS)))
def test_members_that_cannot_meet_their_counts_are_an_empty_language(smollm2: object, schema: dict) -> None:
    """With undeclared keys refused (the default), the declared members a condition, a
    dependency and minProperties leave cannot add up (or a value they need is empty): no
    object is valid, which the member set's liveness, blind to counts, did not see."""
    with pytest.raises(constrain.EmptyLanguageError):
        constrain.Compiler(smollm2).json_schema(schema)


def test_a_member_that_matches_nothing_leaves_the_others_free(smollm2: object) -> None:
    """Where a member's value is empty but the object needs it nowhere, the object is still
    made, without it: every walk ends, and what it writes is valid (the member set's guards
    count that member out, rather than open an object that waits for it)."""
    schema = {"type": "object", "properties": {"a": _NO_ARRAY, "b": {"type": "boolean"}}, "minProperties": 1}
    guide = constrain.Compiler(smollm2).json_schema(schema)
    assert accepts(guide, tokenize_continuation(smollm2, '{"b": true}'))
    assert not accepts(guide, tokenize_continuation(smollm2, '{"a": []}'))
    rng = random.Random(3)
    walks = finished_walks(guide, guide.vocabulary, rng, count=20, max_tokens=30)
    assert len(walks) == 20
    for text in walks:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


def test_a_length_body_copied_outside_its_length_keeps_no_length_bookkeeping(smollm2: object) -> None:
    """Found by the schema fuzzer (seed 1): a key matching both patterns takes ``pattern: ^a``
    and ``maxLength: 0`` together; the pattern's nodes, built first inside that Length and then
    copied for the other keys, carried its bookkeeping along, and walks ended in a raw ValueError."""
    schema = {"type": "object", "patternProperties": {
        "b": {"type": "string", "pattern": "^a"}, "^a": {"type": "string", "minLength": 0, "maxLength": 0}}}
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for text, valid in [('{"b": "a"}', True), ('{"ab": ""}', False), ('{"ab": "a"}', False), ('{"a": ""}', True),
                        ('{"xb": "ab", "a": ""}', True), ('{"b": "b"}', False)]:  # fmt: skip
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, text
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid, text
    rng = random.Random(1)
    for text in finished_walks(guide, guide.vocabulary, rng, count=40, max_tokens=40):
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


def test_a_bounded_array_after_forty_members_counts_right(smollm2: object) -> None:
    """A member set's value (seen bits, then count) passes the symbolic-count threshold from 40
    items on. Inside a counted array after them, the token index's stand-in must shift only the
    array's count back, not the set's value: that mix-up was a raw KeyError, found on MaskBench."""
    members = {f"p{i}": {"type": "integer"} for i in range(44)}
    members["p44"] = {"type": "array", "maxItems": 254, "items": {"type": "integer"}}
    schema = {"type": "object", "properties": members, "required": sorted(members), "additionalProperties": False}
    guide = constrain.Compiler(smollm2).json_schema(schema, strict_properties=False)
    for count, valid in [(20, True), (254, True), (255, False)]:
        text = json.dumps({**{f"p{i}": i for i in range(44)}, "p44": list(range(count))})
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, count
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid
    without_one = json.dumps({**{f"p{i}": i for i in range(1, 44)}, "p44": [1]})
    assert not accepts(guide, tokenize_continuation(smollm2, without_one))  # p0 is required

FORMAT_SAMPLES = {  # (accepted, refused), spelled as JSON text content; refused ones break the RFC
    "uri-reference": (["http://a.b/c?d#e", "//host/p", "/abs", "rel/x", "#frag", "", "./this:that"],
                      ["1:b", "/a b", "/%zz", "//a@b@c/", "/[::1]"]),
    "iri": (["http://ƒøø.ßår/?q=1", "urn:example:x", "http://[V1.fe]"], ["/abc", "âππ", "http://[::ffff:1.1.1.01]"]),
    "iri-reference": (["âππ", "#ƒrägmênt", "//ƒøø/p"], ["\\\\\\\\host\\\\x"]),
    "json-pointer": (["", "/", "/a~0b/c~1d", "/k\\\"l", "/x\\u0000y"], ["a", "/~2", "/a~", "#/a"]),
    "relative-json-pointer": (["0", "1#", "12/a/b"], ["/a", "01/a", "0##", "-1"]),
    "uri-template": (["{+var}", "a{x,y}b", "{v:1000}", "x{a.b}"], ["{}", "{a,,b}", "{v:01}", "foo}bar", "{a..b}"]),
}  # fmt: skip


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
@pytest.mark.slow
def test_uri_and_pointer_formats_follow_their_rfcs(fmt: str) -> None:
    dfa = LazyDFA(ByteNFA(schema_walk({"type": "string", "format": fmt}, SchemaOptions()).tree, Limits()))
    accepted, refused = FORMAT_SAMPLES[fmt]
    for text in accepted:
        assert dfa.matches(f'"{text}"'.encode()), text
    for text in refused:
        assert not dfa.matches(f'"{text}"'.encode()), text


#: uniqueItems over items from a finite set, and arrays to judge (JSON equality: 1 and 1.0 are one value).
UNIQUE_SCHEMAS = [
    {"type": "array", "uniqueItems": True, "items": {"type": "string", "enum": ["GET", "POST", "PUT"]}},
    {"type": "array", "uniqueItems": True, "items": {"enum": [1, 1.0, 2, "a", None, True]}, "minItems": 2},
    {"type": "array", "uniqueItems": True, "items": {"type": "boolean"}, "maxItems": 1},
    {"type": "array", "uniqueItems": True, "items": {"type": "integer", "enum": [1, 2, "x", 3.5]}},
]
UNIQUE_BANK = [
    [], ["GET"], ["GET", "GET"], ["POST", "GET"], ["GET", "POST", "PUT"], ["GET", "POST", "PUT", "GET"], [1],
    [1, 1.0], [1, 2], [2, 1], ["a", None, True], [True, 1], [True], [False, True], [True, True], [1, 2, 1], ["x"],
    [3.5], [2, 1, 2],
]  # fmt: skip


@pytest.mark.parametrize("schema", UNIQUE_SCHEMAS)
def test_unique_items_from_a_finite_set_are_exact(smollm2: object, schema: dict) -> None:
    """Each value at most once, in any order, as jsonschema judges it in both property modes and
    both spacings; ``[1, 1.0]`` repeats a value. Valid arrays are accepted token by token."""
    validator = jsonschema.Draft202012Validator(schema)
    for strict in (True, False):
        dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=strict)).tree, Limits()))
        for value in UNIQUE_BANK:
            for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
                assert dfa.matches(text.encode()) == validator.is_valid(value), (strict, text)
    guide = constrain.Compiler(smollm2).json_schema(schema)
    for value in UNIQUE_BANK:
        if validator.is_valid(value):
            assert accepts(guide, tokenize_continuation(smollm2, json.dumps(value))), value


def test_unique_items_over_an_open_set_stay_refused_by_name() -> None:
    with pytest.raises(constrain.UnsupportedSchemaError, match="uniqueItems.*at most 32 values"):
        to_regex({"type": "array", "uniqueItems": True, "items": {"type": "string"}})
    with pytest.raises(constrain.UnsupportedSchemaError, match="uniqueItems"):
        to_regex({"type": "array", "uniqueItems": True, "items": {"enum": list(range(33))}})
    at_most_one = {"type": "array", "uniqueItems": True, "items": {"type": "string"}, "maxItems": 1}
    assert re.fullmatch(to_regex(at_most_one), '["a"]') and not re.fullmatch(to_regex(at_most_one), '["a", "b"]')


#: Regexes seen in real instances (MaskBench: o16749, o53084, accelerator) and common ones, as values.
REGEX_VALUES = [
    r"""^\s*(it|describe)\(\s*['"]([^'"]+)['"]""", "^example$", "^value1|value2$", r"^\d{3}-\d{4}$",
    r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$", r"(?:https?://)?[\w.-]+", r"a{0,3}?b*?", "",
]
#: Texts Python's re refuses to compile: a format "regex" must never let one through.
NOT_REGEXES = ["(a", "a)", "a**", "[z-a]", "*", r"\1", "a{2,1}", "[a", "a|*", "^*", r"\b+", r"\q"]


def test_the_regex_format_takes_regexes_re_compiles(smollm2: object) -> None:
    """format "regex" is a regular part of the regex syntax (groups nested 3 deep, see
    patterns._regex_syntax): every value a walk of the guide produces must compile in Python's
    re (what jsonschema's format checker does), the listed real ones are accepted and the broken
    ones refused, each spelled as the tokenizer spells it."""
    schema = {"type": "string", "format": "regex"}
    compiler = constrain.Compiler(smollm2)
    guide = compiler.json_schema(schema)
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for value in REGEX_VALUES:
        assert accepts(guide, tokenize_continuation(smollm2, json.dumps(value))), value
    for value in NOT_REGEXES:
        assert not checker.is_valid(value), value  # the oracle agrees they are broken
        assert not accepts(guide, tokenize_continuation(smollm2, json.dumps(value))), value
    texts = finished_walks(guide, compiler.vocabulary, random.Random(7), count=150, max_tokens=40, eos_probability=0.5)
    assert len(texts) > 20
    for text in texts:
        assert checker.is_valid(json.loads(text)), text


@pytest.mark.slow
def test_every_text_of_the_regex_format_compiles() -> None:
    """The same, byte by byte and many more: 3,000 random walks of the automaton, each byte drawn
    from the live ones (ending, where it may, with probability 1/8); every value must compile."""
    dfa = LazyDFA(ByteNFA(schema_walk({"type": "string", "format": "regex"}, SchemaOptions()).tree, Limits()))
    rng = random.Random(11)
    depths = []
    for _ in range(3000):
        state, spelled = dfa.start, bytearray()
        while True:
            live = np.flatnonzero(dfa.row(state) != DEAD)
            if dfa.is_final(state) and (not len(live) or rng.random() < 0.125 or len(spelled) > 60):
                break
            byte = int(rng.choice(live[live < 0x80].tolist() or live.tolist()))  # mostly ASCII: the syntax
            spelled.append(byte)
            state = int(dfa.row(state)[byte])
        value = json.loads(spelled.decode())
        re.compile(value)  # a re.error here is a regex the format let through
        depths.append(value.count("("))
    assert max(depths) >= 3  # the walks did reach nested groups


@pytest.mark.parametrize(("options", "names"), [
    ({"whitespace": "defualt"}, "did you mean 'default'"),  # a typo was read as the regex "defualt"
    ({"whitespace": r"\s*"}, "only JSON whitespace"),  # \s takes Unicode spaces JSON does not allow
    ({"lenient": "yes"}, "lenient"),
    ({"any_value_depth": -1}, "any_value_depth"),
    ({"property_order": "sorted"}, "property_order"),
    ({"formats": "ignore"}, "formats"),
])  # fmt: skip
def test_options_are_checked_by_name_and_value(options: dict, names: str) -> None:
    with pytest.raises(constrain.SchemaError, match=re.escape(names)):
        SchemaOptions(**options)


def test_a_custom_whitespace_regex_of_json_whitespace_is_taken() -> None:
    tree = schema_walk({"type": "array"}, SchemaOptions(whitespace=r"[ \t\n]{0,4}")).tree
    assert LazyDFA(ByteNFA(tree, Limits())).matches(b"[\n\t1, 2 ]")


def test_the_docs_example_of_the_specifications_semantics_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "json_schema.md").read_text()
    block = re.search(r"### Example: the specification's semantics\n.*?```python\n(.*?)```", doc, re.S)
    assert block, "docs/json_schema.md has the example"
    exec(compile(block.group(1), "docs/json_schema.md", "exec"), {})
    assert "x-owner" in capsys.readouterr().out


def test_optional_members_are_free_with_the_spec_semantics(smollm2: object) -> None:
    """Only required (and dependentRequired) members are tracked: an optional one may repeat, each
    copy checked (a parser keeps the last), so states inside a wide object are shared by every
    subset of members seen. minProperties counts members: there a repeat is refused."""
    wide = {"type": "object", "properties": {f"key{i}": {"type": "integer"} for i in range(40)}, "required": ["key0"]}
    walk = schema_walk(wide, SchemaOptions(strict_properties=False))
    dfa = LazyDFA(ByteNFA(walk.tree, Limits()))
    validator = jsonschema.Draft202012Validator(wide)
    for text in ['{"key1": 1, "key1": 2, "key0": 0}', '{"key0": 0, "key1": "x"}', '{"key1": 1}']:
        assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), text
    assert not dfa.matches(b'{"key0": 0, "key1": 1, "key1": "x"}')  # the last copy is checked
    assert not dfa.matches(b'{"key0": 1, "key0": 2}')  # a tracked member comes once (stricter, sound)
    counted = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2}
    counted_dfa = LazyDFA(ByteNFA(schema_walk(counted, SchemaOptions(strict_properties=False)).tree, Limits()))
    assert not counted_dfa.matches(b'{"a": 1, "a": 2}') and counted_dfa.matches(b'{"a": 1, "b": 2}')
    guide = constrain.Compiler(smollm2).json_schema(wide, strict_properties=False)
    value = {f"key{i}": i for i in reversed(range(40))}
    assert accepts(guide, tokenize_continuation(smollm2, json.dumps(value)))
    assert guide.index.dfa.num_states < 3000, guide.index.dfa.num_states  # was about 40 key tries


@pytest.mark.parametrize("seed", range(4))
def test_undeclared_keys_are_exactly_the_other_names(seed: int) -> None:
    """An undeclared key takes additionalProperties' schema, a declared one its own: the key
    complement (a trie of the ways to leave the declared names, then one shared free run) must
    hold every other key and no declared one, prefixes, extensions and escaped names included."""
    rng = random.Random(seed)
    units = ["a", "b", "é", '"', "\\", "\n", "ab"]
    names = sorted({"".join(rng.choice(units) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(1, 5))})
    schema = {
        "type": "object", "properties": {name: {"type": "string"} for name in names},
        "additionalProperties": {"type": "integer"},
    }  # fmt: skip
    dfa = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    validator = jsonschema.Draft202012Validator(schema)
    keys = names + [n[:cut] for n in names for cut in range(len(n))]
    keys += ["".join(rng.choice(units) for _ in range(rng.randint(0, 4))) for _ in range(60)]
    for key in keys:
        for value in ('"x"', "1"):
            text = "{" + json.dumps(key, ensure_ascii=False) + ": " + value + "}"
            assert dfa.matches(text.encode()) == validator.is_valid(json.loads(text)), (names, text)


def _number_spellings(rng: random.Random, count: int) -> list[str]:
    """Numbers as JSON may spell them: signs, zeros, fractions with trailing zeros, exponents."""
    out = ["0", "-0", "0.0", "0e0", "-0.0e1", "1e-06", "1E+2", "0.000", "-1e-6", "1e-400", "-0.1e-330", "2e400"]
    for _ in range(count):
        whole = rng.choice(["0", str(rng.randint(1, 999))])
        fraction = rng.choice(["", "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4)))])
        exponent = rng.choice(["", "", f"{rng.choice('eE')}{rng.choice(['', '+', '-'])}{rng.choice([rng.randint(0, 12), 330])}"])
        out.append(rng.choice(["", "-"]) + whole + fraction + exponent)
    return out


@pytest.mark.parametrize("bounds", [
    {"minimum": 0}, {"exclusiveMinimum": 0}, {"maximum": 0}, {"exclusiveMaximum": 0.0},
    {"minimum": 0, "exclusiveMinimum": 0}, {"maximum": 0, "exclusiveMaximum": 0},
])  # fmt: skip
def test_a_bound_at_zero_takes_every_spelling_exponents_too(bounds: dict, smollm2: object) -> None:
    """An exponent never changes a number's sign or whether it is zero, so a one-sided bound at 0
    judges "1e-06" exactly (it was refused as any bounded number with an exponent: MaskBench
    o57716's {"minimum": 0} refused a valid "evalue": 1e-06). "-0" spellings stay out, and negative
    exponents under a strict bound: 1e-400 is above 0, but json.loads reads it as 0.0."""
    schema = {"type": "number", **bounds}
    pattern = re.compile(to_regex(schema))
    validator = jsonschema.Draft202012Validator(schema)
    for text in _number_spellings(random.Random(7), 400):
        valid = validator.is_valid(json.loads(text))
        matched = bool(pattern.fullmatch(text))
        assert not matched or valid, f"{text} let through"
        assert matched or not valid or _may_be_refused(text, bounds), f"{text} refused"
    guide = constrain.Compiler(smollm2).json_schema({"type": "object", "properties": {"x": schema}})
    for value in ("1e-06", "-2.5E3", "0.0e1", "5e-400", "7E+2"):
        text = '{"x": ' + value + "}"
        valid = validator.is_valid(json.loads(value))
        accepted = accepts(guide, tokenize_continuation(smollm2, text))
        assert (not accepted or valid) and (accepted or not valid or _may_be_refused(value, bounds)), text


def _may_be_refused(text: str, bounds: dict) -> bool:
    """Valid spellings a zero bound leaves out: what reads as zero without being spelled as zero ("-0",
    "1e-400" under maximum 0), and a negative exponent under a strict bound (it may read as 0 itself)."""
    reads_as_zero = float(text) == 0 and not re.fullmatch(r"0(\.0+)?([eE][+-]?[0-9]+)?", text)
    return reads_as_zero or ("exclusive" in str(bounds) and "e-" in text.lower())


def _near(bound: float, rng: random.Random) -> list[str]:
    """Decimals a hair from ``bound`` on both sides (15 to 330 digits: json.loads rounds the long
    ones onto it), and short random ones around it."""
    out = []
    for whole in {int(abs(bound)), max(int(abs(bound)) - 1, 0), int(abs(bound)) + 1}:
        for places in (14, 15, 16, 17, 20, 330):
            for fraction in ("9" * places, "0" * (places - 1) + "1", "4" + "9" * places, "5" + "0" * places + "1"):
                out += [f"{whole}.{fraction}", f"-{whole}.{fraction}"]
    return out + [repr(round(rng.uniform(bound - 3, bound + 3), rng.randint(0, 6))) for _ in range(60)]


@pytest.mark.parametrize("bounds", [
    {"exclusiveMinimum": 5}, {"exclusiveMaximum": 5}, {"exclusiveMinimum": -5, "maximum": 8},
    {"minimum": -9, "exclusiveMaximum": -1}, {"exclusiveMinimum": 7, "exclusiveMaximum": 8},
    {"exclusiveMinimum": 0, "maximum": 3}, {"exclusiveMaximum": 4.5}, {"exclusiveMinimum": 0.1, "maximum": 2.5},
    {"exclusiveMinimum": 0}, {"exclusiveMaximum": 2**53}, {"exclusiveMinimum": 1e-10, "maximum": 1},
])  # fmt: skip
def test_strict_bounds_keep_out_what_json_loads_rounds_onto_them(bounds: dict) -> None:
    """json.loads reads 4.99999999999999999999 as 5.0, so under exclusiveMaximum 5 it is invalid,
    though below 5 as a decimal (and "0.(330 zeros)1" reads as 0.0 under exclusiveMinimum 0).
    Long spellings next to a strict bound are judged by what they read as, never let through;
    every spelling of 14 or fewer fraction digits gets the validator's verdict."""
    schema = {"type": "number", **bounds}
    automaton = LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions()).tree, Limits()))
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(8)
    checked = 0
    for bound in bounds.values():
        for text in _near(bound, rng):
            valid = validator.is_valid(json.loads(text))
            matched = automaton.matches(text.encode())
            assert not matched or valid, f"{text} let through"
            short = "e" not in text and len(text.partition(".")[2]) <= 14 and abs(float(text)) < 2**52
            assert matched or not valid or not short, f"{text} refused"
            checked += valid and short
        for whole in {int(abs(bound)), max(int(abs(bound)) - 1, 0)}:  # no JSON number ends in its dot
            assert not automaton.matches(f"{whole}.".encode()) and not automaton.matches(f"-{whole}.".encode())
    assert checked > 20 or max(map(abs, bounds.values())) >= 2**52  # (past 2**52: whole numbers only)


@pytest.mark.parametrize("schema, texts", [
    ({"type": "array", "contains": {"enum": [0.5]}, "minContains": 0, "maxContains": 1},
     ["[0]", "[0, 0.5]", "[0.5, 0]", "[0.5, 0.5]", "[5e-1, 0.50]", "[1.25]", "[]"]),
    ({"not": {"enum": [0.5, -1.25]}}, ["0.5", "0.50", "5e-1", "-1.25", "-1.250", "0.6", "0", "1.25", "0.05"]),
])  # fmt: skip
def test_a_decimal_constant_is_subtracted_by_its_own_spellings(schema: dict, texts: list[str]) -> None:
    """A decimal constant under a subtraction stood for every number (its superset was NUMBER), so
    contains {enum: [0.5]} counted a 0 as a match and refused [0] (found by a 300-example fuzz run).
    Its superset is now its own spelling with trailing zeros, plus exponents and long texts."""
    tree = schema_walk(schema, SchemaOptions(strict_properties=False)).tree
    dfa = LazyDFA(ByteNFA(tree, Limits()))
    validator = jsonschema.Draft202012Validator(schema)
    for text in texts:
        valid = validator.is_valid(json.loads(text))
        matched = dfa.matches(text.encode())
        assert not matched or valid, f"{text} let through"
        if "e" not in text:  # exponent spellings of the constant stay in its superset: refused
            assert matched or not valid, f"{text} refused"


@pytest.mark.slow  # (216 schemas: half a minute)
def test_array_bounds_beside_prefix_items_agree_with_jsonschema(smollm2: object) -> None:
    """Every combination of prefixItems, items, minItems, maxItems and contains on short arrays,
    judged by jsonschema. A prefix's first element came before any bound was read, so
    ``maxItems: 0`` beside ``prefixItems`` took ``[null]`` (the fuzzer's random walks found it)."""
    import itertools

    compiler = constrain.Compiler(smollm2)
    texts = ["[]", "[null]", "[null, null]", "[null, 1]", "[1]", "[null, null, null]"]
    prefixes: list[list[object]] = [[], [{"type": "null"}], [{"type": "null"}, {}]]
    for prefix, items, low, high, contains in itertools.product(
        prefixes, [True, False, {"type": "null"}], [0, 1, 2], [None, 0, 1, 2], [None, {"type": "null"}]
    ):
        schema: dict[str, object] = {"type": "array", "items": items, "minItems": low}
        schema.update({"prefixItems": prefix} if prefix else {})
        schema.update({"maxItems": high} if high is not None else {})
        schema.update({"contains": contains} if contains is not None else {})
        validator = jsonschema.Draft202012Validator(schema)
        try:
            guide = compiler.json_schema(schema)
        except constrain.EmptyLanguageError:
            assert not any(validator.is_valid(json.loads(text)) for text in texts), schema
            continue
        for text in texts:
            assert accepts(guide, tokenize_continuation(smollm2, text)) == validator.is_valid(json.loads(text)), (text, schema)


def test_a_compile_leaves_the_callers_schema_as_it_was(smollm2: object) -> None:
    """The walker reads the document and works on copies: ``facts`` keeps what it read from the
    document's objects by their ids, which is right only while no compile changes them. Schemas
    with every keyword the walker rewrites or pops (``$ref`` beside siblings, ``oneOf`` over a
    shared definition, ``not``, ``if``, ``dependencies``, draft-7 ``items`` arrays), in both modes."""
    import copy

    definitions = {"tag": {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]}}
    schemas: list[dict[str, object]] = [
        {"$defs": definitions, "oneOf": [{"$ref": "#/$defs/tag"}, {"$ref": "#/$defs/tag", "maxProperties": 1},
                                         {"type": "object", "properties": {"kind": {"const": "b"}}}]},
        {"$defs": definitions, "type": "object", "properties": {"x": {"not": {"$ref": "#/$defs/tag"}}},
         "if": {"required": ["x"]}, "then": {"minProperties": 1}, "dependencies": {"x": ["y"]}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": definitions, "type": "array",
         "items": [{"$ref": "#/definitions/tag"}, {"type": "integer"}], "additionalItems": False},
    ]  # fmt: skip
    for schema in schemas:
        for strict in (True, False):
            before = copy.deepcopy(schema)
            constrain.Compiler(smollm2).json_schema(schema, strict_properties=strict)
            assert schema == before
