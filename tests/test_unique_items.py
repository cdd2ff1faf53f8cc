"""``uniqueItems`` over strings, checked as the text comes (``constrain.unique_items``).

Soundness against the ``jsonschema`` library over random walks on the three tokenizer
families, completeness on arrays tokenized as each tokenizer really tokenizes them (with
items spelled in other escapes), the exact tokens refused at an item's end, and where the
walk keeps refusing the keyword.
"""

from __future__ import annotations

import json
import pickle
import random

import jsonschema
import pytest

import constrain
from constrain.json_schema import to_regex
from constrain.testing import accepts, finished_walks, token_text
from constrain.unique_items import UniqueItemsGuide, string_byte
from constrain.vocabulary import tokenize_continuation

_TAGS = {"type": "array", "items": {"type": "string", "pattern": "^[ab]+$"}, "uniqueItems": True, "minItems": 3}

#: (schema, strict_properties): each puts a uniqueItems array somewhere else in the instance.
SCHEMAS = [
    (_TAGS, True),
    # escapes: a quote, a backslash, a slash and é (raw or \u00e9) inside the items
    ({"type": "array", "items": {"type": "string", "pattern": '^[a\\\\"/\u00e9]*$'}, "uniqueItems": True}, True),
    # nested: an array of arrays, each one's items unique (and the outer array's own items free)
    ({"type": "object", "required": ["t", "u"], "properties": {
        "t": {"type": "array", "items": {"type": "string", "pattern": "^[ab]*$"}, "uniqueItems": True},
        "u": {"type": "array", "items": {"type": "array", "uniqueItems": True,
                                         "items": {"type": "string", "pattern": "^(x|y)*$"}}}}}, True),
    # one definition at two places, and under patternProperties and additionalProperties
    ({"$defs": {"tags": {"type": "array", "items": {"type": "string", "pattern": "^[ab]*$"}, "uniqueItems": True}},
      "type": "object", "maxProperties": 3, "propertyNames": {"pattern": "^[pqr]$"},
      "properties": {"p": {"$ref": "#/$defs/tags"}},
      "patternProperties": {"^q$": {"allOf": [{"$ref": "#/$defs/tags"}]}},
      "additionalProperties": {"type": "object", "properties": {"in": {"$ref": "#/$defs/tags"}},
                               "additionalProperties": False}}, False),
]  # fmt: skip


def valid_walks(guide: UniqueItemsGuide, schema: object, *, seed: int, eos_probability: float) -> list[bytes]:
    """150 random walks' finished texts, each checked by the ``jsonschema`` library (soundness)."""
    validator = jsonschema.Draft202012Validator(schema)
    texts = finished_walks(guide, guide.vocabulary, random.Random(seed), count=150, max_tokens=150,
                           eos_probability=eos_probability)  # fmt: skip
    for text in texts:
        assert validator.is_valid(json.loads(text)), text
    return texts


@pytest.mark.parametrize(("schema", "strict"), SCHEMAS)
def test_random_walks_never_repeat_an_item(compiler: constrain.Compiler, schema: object, strict: bool) -> None:
    guide = compiler.json_schema(schema, strict_properties=strict)
    assert isinstance(guide, UniqueItemsGuide)
    texts = valid_walks(guide, schema, seed=3, eos_probability=0.5)
    assert len(texts) >= 100
    # walks that could have repeated an item: three or more in one array
    assert sum(text.count(b",") >= 2 for text in texts) >= 20


@pytest.mark.parametrize("schema", [_TAGS, {"type": "array", "items": {"type": "string"}, "uniqueItems": True}])
def test_arrays_are_accepted_exactly_when_their_items_differ(
    compiler: constrain.Compiler, tokenizer: object, schema: dict[str, object]
) -> None:
    """Completeness and soundness on given texts: every spelling of distinct items is taken; a
    repeat is refused however it is spelled (``"/"`` and ``"\\/"``, ``"é"`` and ``"\\u00e9"``,
    ``"😀"`` and its surrogate pair)."""
    guide = compiler.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    pool = (["a", "b", "ab", "ba", "aab", "bba"] if "minItems" in schema
            else ["a", "\\", '"', "/", "\u00e9", "a/", "", "\U0001f600", "x\ny"])  # fmt: skip
    rng = random.Random(5)
    for _ in range(80):
        items = rng.sample(pool, rng.randint(3, 5))
        if rng.random() < 0.5:
            items.insert(rng.randrange(len(items) + 1), rng.choice(items))  # a repeat
        text = "[" + ", ".join(json.dumps(item, ensure_ascii=rng.random() < 0.5) for item in items) + "]"
        if rng.random() < 0.3:
            text = text.replace("/", "\\/")
        ids = tokenize_continuation(tokenizer, text)
        assert token_text(compiler.vocabulary, ids) == text.encode()
        assert accepts(guide, ids) == validator.is_valid(json.loads(text)), text


def test_the_tokens_that_would_end_an_item_as_a_repeat_are_refused(
    compiler: constrain.Compiler, tokenizer: object
) -> None:
    schema = {"type": "array", "items": {"type": "string", "pattern": "^[a.]+$"}, "uniqueItems": True}
    guide = compiler.json_schema(schema)
    pieces = compiler.vocabulary.token_bytes
    state = guide.initial_state
    for token_id in tokenize_continuation(tokenizer, '["a.", "a'):
        state = guide.advance(state, token_id)
    allowed = guide.allowed_tokens(state)
    closers = [i for i, p in enumerate(pieces) if p in (b'."', b'.",', b'."]', b'.", ')]  # "a." again
    assert closers and not allowed[closers].any()
    assert allowed[pieces.index(b".")] and allowed[pieces.index(b'"')]  # "a.." later, or "a" now
    with pytest.raises(constrain.TokenRejected, match="repeat an item"):
        guide.advance(state, closers[0])
    packed = constrain.allocate_bitmask(guide.vocab_size)
    guide.fill_bitmask(state, packed)
    assert (constrain.bitmask_to_bool(packed, guide.vocab_size) == allowed).all()


@pytest.mark.parametrize(
    "schema",
    [
        # seven values ("", "a", "b", "aa", ...), seven items: every array is an order of all of them
        {"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 2}, "uniqueItems": True,
         "minItems": 7},
        {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True, "maxItems": 6},
        # words beside strings: null, true and false once each, and "null" is no null
        {"type": "array", "items": {"type": ["string", "null", "boolean"], "pattern": "^[ab]*$", "maxLength": 1},
         "uniqueItems": True, "minItems": 6},
    ],
)  # fmt: skip
def test_items_with_few_endings_are_never_stranded(compiler: constrain.Compiler, schema: dict[str, object]) -> None:
    """Where an item can run out of endings (``maxLength``), a token that leaves it able to end
    only as a repeat is refused, and so is a comma with no fresh item left: ``random_walk``
    raises at a state that allows nothing."""
    texts = valid_walks(compiler.json_schema(schema), schema, seed=2, eos_probability=0.3)
    assert len(texts) >= 140
    every = {7: ["", "a", "aa", "ab", "b", "ba", "bb"], 6: ["", "a", "b", False, None, True]}.get(schema.get("minItems"))
    if every is not None:  # all the values there are, in some order
        assert all(sorted(json.loads(text), key=repr) == sorted(every, key=repr) for text in texts)


def test_the_guide_pickles_and_keeps_the_inner_guides_members(
    compiler: constrain.Compiler, tokenizer: object
) -> None:
    guide = compiler.json_schema(SCHEMAS[3][0], strict_properties=False)
    assert guide.backend == "regex" and "uniqueItems" in repr(guide) and guide.source == guide.inner.source
    copy = pickle.loads(pickle.dumps(guide))
    for text, valid in [('{"q": ["a", "b"], "r": {"in": ["b", "a"]}}', True),
                        ('{"q": ["a", "b"], "r": {"in": ["b", "b"]}}', False),  # under additionalProperties
                        ('{"q": ["a", "a"]}', False), ('{"p": ["b", "b"]}', False), ('{"p": [], "q": []}', True)]:
        ids = tokenize_continuation(tokenizer, text)
        assert accepts(copy, ids) == accepts(guide, ids) == valid, text


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"anyOf": [{"type": "array", "items": {"type": "string"}, "uniqueItems": True}, {"type": "array",
                                                                                          "maxItems": 1}]},
         "at most 32 values"),  # a branch beside another of arrays: whether an array must be unique depends
        # on which branch it takes  # fmt: skip
        ({"type": "array", "items": {"type": "string", "pattern": "^[ab]*$", "maxLength": 2}, "uniqueItems": True,
          "minItems": 8}, "strings"),  # seven values: no eighth item  # fmt: skip
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "strings"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True,
          "contains": {"const": "x"}}, "contains"),  # fmt: skip
        ({"$defs": {"t": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
          "properties": {"a": {"$ref": "#/$defs/t"}}, "anyOf": [{"$ref": "#/$defs/t"}, {"type": "array"}]},
         "uniqueItems"),  # one definition at one place and in a branch  # fmt: skip
    ],
)
def test_uniqueItems_elsewhere_stays_a_named_refusal(compiler: constrain.Compiler, schema: object, why: str) -> None:
    with pytest.raises(constrain.UnsupportedSchemaError, match=why) as info:
        compiler.json_schema(schema)
    assert info.value.keyword == "uniqueItems"


def test_a_branch_that_alone_admits_arrays_or_objects_is_checked(compiler: constrain.Compiler, tokenizer: object) -> None:
    """``"tags": "a"`` or a list of distinct ones: an array there is valid by that branch or not at
    all, and so is an object by the one branch of objects, so what lies inside applies at one place."""
    tags = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    schema = {"type": "object", "properties": {
        "tags": {"anyOf": [{"type": "string"}, tags]},
        "by": {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": tags}]}}}  # fmt: skip
    guide = compiler.json_schema(schema, strict_properties=False)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['{"tags": "a"}', '{"tags": ["a", "b"]}', '{"tags": ["a", "a"]}', '{"by": {"k": ["x", "y"]}}',
                 '{"by": {"k": ["x", "x"]}}', '{"by": null, "tags": ["b", "a", "b"]}']:  # fmt: skip
        assert accepts(guide, tokenize_continuation(tokenizer, text)) == validator.is_valid(json.loads(text)), text


def test_the_regex_text_of_such_a_schema_is_still_refused() -> None:
    """``to_regex`` hands out text without a guide around it: the array would be a plain one."""
    with pytest.raises(constrain.UnsupportedSchemaError, match="uniqueItems"):
        to_regex(_TAGS)


def test_string_bytes_decode_as_json_does() -> None:
    for text in ['a\\u0041\\n', '\\ud83d\\ude00x', '\\ud83d', '\\ud83d\\u0041', '\\ud83d\\n', '\\/\\"\\\\', 'é\\u00e9']:
        value, pending = b"", b""
        for byte in (text + '"').encode():
            value, pending, closed = string_byte(value, pending, byte)
        assert closed and not pending
        assert value == json.loads(f'"{text}"').encode("utf-8", "surrogatepass"), text


def test_generation_with_the_real_model_writes_distinct_tags(
    model_and_tokenizer: tuple[object, object], model_compiler: constrain.Compiler
) -> None:
    from constrain.sampling import generate

    model, tokenizer = model_and_tokenizer
    schema = {"type": "object", "required": ["tags"], "properties": {"tags": {
        "type": "array", "minItems": 4, "maxItems": 6, "uniqueItems": True,
        "items": {"type": "string", "pattern": "^[a-z]+$"}}}}  # fmt: skip
    guide = model_compiler.json_schema(schema)
    result = generate(model, tokenizer, "Tag this article about cats: ", guide, model_compiler.vocabulary,
                      max_new_tokens=60)  # fmt: skip
    assert result.complete, result.text
    jsonschema.validate(json.loads(result.text), schema)


def test_explain_shows_the_automaton_and_judges_the_repeat(compiler: constrain.Compiler, tokenizer: object) -> None:
    from constrain.explain import explain

    guide = compiler.json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    repeated = explain(guide, text='["a", "b", "a"]', tokenizer=tokenizer)
    assert repeated.dfa_states > 0 and repeated.verdict is not None
    assert not repeated.verdict.complete and repeated.verdict.accepted == b'["a", "b", "a'
    assert [v[0] for v in repeated.verdict.violations] == ["uniqueItems"]
    distinct = explain(guide, text='["a", "b"]', tokenizer=tokenizer)
    assert distinct.verdict is not None and distinct.verdict.complete


def test_a_recursive_schema_keeps_its_unique_arrays_outside_the_recursion(
    compiler: constrain.Compiler, tokenizer: object
) -> None:
    """The grammar backend's guide is wrapped as the regex one is; an array inside the recursive
    definition lies at every depth of it, at no one place the scan could name, and stays refused."""
    tags = {"type": "array", "items": {"type": "string", "pattern": "^[ab]+$"}, "uniqueItems": True, "minItems": 2}
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    schema = {"$defs": {"node": node}, "type": "object", "required": ["root", "tags"],
              "properties": {"root": {"$ref": "#/$defs/node"}, "tags": tags}}  # fmt: skip
    guide = compiler.json_schema(schema)
    assert isinstance(guide, UniqueItemsGuide) and guide.backend == "cfg"
    assert len(valid_walks(guide, schema, seed=1, eos_probability=0.5)) >= 100
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['{"root": {"kids": [{}]}, "tags": ["a", "b"]}', '{"root": {}, "tags": ["ab", "b", "ab"]}']:
        assert accepts(guide, tokenize_continuation(tokenizer, text)) == validator.is_valid(json.loads(text)), text
    inside = {"$defs": {"node": {**node, "properties": {**node["properties"], "tags": tags}}}, "$ref": "#/$defs/node"}
    with pytest.raises(constrain.UnsupportedSchemaError, match="uniqueItems"):
        compiler.json_schema(inside)


def test_a_word_is_an_item_of_its_own(compiler: constrain.Compiler, tokenizer: object) -> None:
    """``null`` once, ``"null"`` beside it: a string's value and a word are never equal."""
    schema = {"type": "array", "items": {"type": ["string", "null", "boolean"]}, "uniqueItems": True}
    guide = compiler.json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ['["null", null, "true", true, false]', "[null, null]", '[false, "x", false]', "[true, false]",
                 '[null, "a", "b", "a"]']:  # fmt: skip
        assert accepts(guide, tokenize_continuation(tokenizer, text)) == validator.is_valid(json.loads(text)), text


@pytest.mark.parametrize("pattern", [r"[ab]{0,3}", r"(x|yz|\\q)?", r"[a-c]{2}d|[a-c]{2}", r"(ab|a)(b|)", r"a*|b", r"q\\?y{1,2}"])
def test_the_spellings_counted_are_the_texts_without_a_backslash(pattern: str) -> None:
    """``plain_spellings`` (how many values the items have, for ``minItems``) against Python's
    ``re`` over every text of up to five letters of the patterns' alphabet (each finite language
    here lies inside it), capped at several heights; an endless language counts as the cap."""
    import itertools
    import re
    import time

    from constrain.core.limits import Limits
    from constrain.regex.automaton import ByteNFA, LazyDFA
    from constrain.regex.counting import plain_spellings
    from constrain.regex.parse import parse_regex

    texts = ["".join(letters) for n in range(6) for letters in itertools.product("abcdqxyz\\", repeat=n)]
    matching = sum(1 for text in texts if "\\" not in text and re.fullmatch(pattern, text))
    endless = "*" in pattern
    for cap in (1, 5, 12, 1000):
        dfa = LazyDFA(ByteNFA(parse_regex(pattern), Limits()))
        expected = cap if endless else min(cap, matching)
        assert plain_spellings(dfa, cap, time.monotonic() + 10) == expected, (pattern, cap)
