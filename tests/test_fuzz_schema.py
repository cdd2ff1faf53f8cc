"""Differential fuzzing of the JSON Schema front end against the ``jsonschema`` library.

Hypothesis generates schemas from the keywords the walker enforces (among them
``patternProperties`` with ``propertyNames``, conditions on which members are there beside
``dependentSchemas``/``dependentRequired``, ``uniqueItems`` over listed values, patterns with
inner anchors) and JSON values to judge. Two properties, each against the independent oracle:

* **soundness**: random walks through the schema's byte automaton (each step a random
  byte that keeps the text completable, stopping at random where it may) produce only
  JSON that ``json.loads`` reads and the library validates;
* **soundness by value**: a value the automaton accepts validates, with the default search
  budget and with one so small that most searches over free-form values run out;
* **soundness of the grammar backend**: recursive schemas (a node whose ``kids`` are nodes),
  every value its token guide takes and every finished random walk validates;
* **uniqueItems over strings** (the guide's scan, ``constrain.unique_items``): arrays at every
  kind of place, values taken exactly when the library validates them, walks validated;
* **completeness**: a value the library calls valid, written as ``json.dumps`` writes it
  (both separator styles), is accepted — for the keyword families the docs promise to be
  exact (``not``, ``oneOf`` and ``if`` subtract supersets and may refuse a few valid
  values, so they are checked for soundness only).

The standing test runs a bounded, derandomized number of examples; set
``CONSTRAIN_FUZZ_EXAMPLES`` (``make fuzz``) for a long run, and ``CONSTRAIN_FUZZ_SEED`` for other
examples (a long run goes in chunks of seeds: hypothesis keeps every example it ran in memory).
"""

from __future__ import annotations

import json
import math
import os
import random
from decimal import Decimal, InvalidOperation
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from oracles import ExactValidator

import constrain
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex.algebra import DEAD
from constrain.regex.automaton import ByteNFA, LazyDFA
from constrain.core.limits import Limits
from constrain.testing import accepts, finished_walks, tokenize_continuation

EXAMPLES = int(os.environ.get("CONSTRAIN_FUZZ_EXAMPLES", "25"))
SEED = os.environ.get("CONSTRAIN_FUZZ_SEED")
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
MODES = {"spec": SchemaOptions(strict_properties=False, property_order="any"), "default": SchemaOptions()}



# ---------------------------------------------------------------------- strategies

_NAMES = st.sampled_from(["a", "b", "c", "id", "x-1"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-20, 20), st.sampled_from([0.5, -1.5, 2.25, 10.0, 0.1]),
    st.sampled_from(["", "a", "ab", "abc", "x1", "1"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_NAMES, inner, max_size=3)),
    max_leaves=6,
)


#: Patterns beside minLength/maxLength: the pattern's own characters counted against the bounds.
_LENGTH_PATTERNS = ["^a$", "^ab$", "^a+b$", "^[a-c]{2,}$", "b", "^(a|bc)*$", "x?y", "^.{1,3}$", "\\d$"]
_KEY_PATTERNS = st.sampled_from(["^a", "b", "^x-", "^[a-c]+$", "1$", "(^i|c$)"])
_REQUIRED = st.lists(_NAMES, min_size=1, max_size=2, unique=True).map(lambda names: {"required": names})
_COUNTED = st.one_of(
    st.builds(lambda n: {"minProperties": n}, st.integers(2, 4)), st.builds(lambda n: {"maxProperties": n}, st.integers(0, 2)),
    st.builds(lambda r, n: {**r, "maxProperties": n}, _REQUIRED, st.integers(1, 2)),
)
_PRESENCE = st.one_of(_REQUIRED, _REQUIRED.map(lambda r: {"not": r}),
                      st.builds(lambda a, b: {"anyOf": [a, b]}, _REQUIRED, _REQUIRED))  # fmt: skip


def _leaf_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(dict, type=st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])),
        st.builds(lambda low, span: {"type": "integer", "minimum": low, "maximum": low + span},
                  st.integers(-10, 10), st.integers(-2, 15)),  # fmt: skip
        st.builds(lambda low, strict: {"type": "number", ("exclusiveMinimum" if strict else "minimum"): low},
                  st.sampled_from([-1.5, 0, 0.25, 2]), st.booleans()),  # fmt: skip
        st.builds(lambda step: {"type": "number", "multipleOf": step}, st.sampled_from([0.5, 2, 3, 0.25, 1.5])),
        st.builds(lambda low, span: {"type": "string", "minLength": low, "maxLength": max(0, low + span)},
                  st.integers(0, 2), st.integers(-2, 2)),  # fmt: skip
        st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a", "b$", "^[a-c]+$", "1", "^$", "^[^a]$", "^.{2}$", "\\W", "^[^\"]+$",
                                                                               "(^a|b)c", "a($|b)", "^(a(b|$))*$"])),  # inner anchors
        st.builds(lambda p, low, span: {"type": "string", "pattern": p, "minLength": low, "maxLength": max(0, low + span)},
                  st.sampled_from(_LENGTH_PATTERNS), st.integers(0, 2), st.integers(-1, 3)),  # a count beside a pattern
        st.builds(lambda values, low: {"type": "array", "items": {"enum": values}, "uniqueItems": True, "minItems": low},
                  st.lists(_SCALARS, min_size=1, max_size=4), st.integers(0, 2)),  # fmt: skip
        st.just({"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True}),
        st.builds(lambda values: {"enum": values}, st.lists(_SCALARS, min_size=1, max_size=3)),
        st.builds(lambda value: {"const": value}, _SCALARS),
        st.just({}),
    )


def _schemas(exact: bool) -> st.SearchStrategy[dict[str, Any]]:
    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        options = [
            st.builds(lambda props, req, extra: {
                "type": "object", "properties": props, "required": sorted(set(req) & set(props)),
                **({} if extra is None else {"additionalProperties": extra})},
                st.dictionaries(_NAMES, inner, max_size=3), st.lists(_NAMES, max_size=2),
                st.one_of(st.none(), st.booleans(), inner)),  # fmt: skip
            st.builds(lambda item, low, span: {"type": "array", "items": item, "minItems": low,
                                               "maxItems": max(0, low + span)},
                      inner, st.integers(0, 2), st.integers(-2, 2)),  # fmt: skip
            st.builds(lambda prefix, item: {"type": "array", "prefixItems": prefix, "items": item},
                      st.lists(inner, min_size=1, max_size=2), st.one_of(st.just(False), inner)),  # fmt: skip
            st.builds(lambda c, low, high: {"type": "array", "contains": c, "minContains": low, "maxContains": high},
                      inner, st.integers(0, 2), st.integers(1, 2)),  # fmt: skip
            st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda branches: {"allOf": branches}, st.lists(inner, min_size=1, max_size=2)),
            st.builds(lambda props, rest: {"properties": props, "unevaluatedProperties": rest},
                      st.dictionaries(_NAMES, inner, max_size=2), st.one_of(st.just(False), inner)),  # fmt: skip
            st.builds(lambda low, high: {"type": "object", "minProperties": low, "maxProperties": max(0, low + high)},
                      st.integers(0, 2), st.integers(-2, 2)),  # fmt: skip
            st.builds(lambda props, patterns, extra, names: {
                "type": "object", "properties": props, "patternProperties": patterns, "additionalProperties": extra,
                **({} if names is None else {"propertyNames": names})},
                st.dictionaries(_NAMES, inner, max_size=2), st.dictionaries(_KEY_PATTERNS, inner, min_size=1, max_size=3),
                st.one_of(st.booleans(), inner), st.one_of(st.none(), st.sampled_from([{"maxLength": 2}, {"pattern": "^[a-c]"}]))),  # fmt: skip
            # conditions on which members are there (read as a truth table over the member set's bits)
            st.builds(lambda props, keyword, branches, dependent, needs, extra: {
                "type": "object", "properties": props, keyword: branches, "dependentSchemas": dependent,
                "dependentRequired": needs, **extra},
                st.dictionaries(_NAMES, inner, max_size=3), st.sampled_from(["anyOf", "oneOf"]),
                st.lists(_PRESENCE, min_size=1, max_size=3), st.dictionaries(_NAMES, _PRESENCE, max_size=2),
                st.dictionaries(_NAMES, st.lists(_NAMES, max_size=2, unique=True), max_size=2),
                st.sampled_from([{}, {"additionalProperties": False}, {"minProperties": 2}, {"maxProperties": 2},
                                 {"patternProperties": {"^x": {"type": "integer"}}}])),  # fmt: skip
        ]
        if not exact:
            options += [
                st.builds(lambda s: {"not": s}, inner),
                # a subtracted part over undeclared members (free-form values): its searches have a budget
                st.builds(lambda props, name, counted: {"properties": props, "dependentSchemas": {name: counted}},
                          st.dictionaries(_NAMES, inner, max_size=2), _NAMES, _COUNTED),  # fmt: skip
                st.builds(lambda counted: {"not": counted}, _COUNTED),
                st.builds(lambda branches: {"oneOf": branches}, st.lists(inner, min_size=1, max_size=3)),
                st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, inner, inner, inner),
            ]
        return st.one_of(*options)

    return st.recursive(_leaf_schemas(), extend, max_leaves=4)


# ---------------------------------------------------------------------- helpers


def _automaton(schema: dict[str, Any], mode: str, limits: Limits = Limits(timeout_s=20)) -> LazyDFA | None:
    """The schema's byte automaton, or None where the schema is refused or matches nothing."""
    try:
        return LazyDFA(ByteNFA(schema_walk(schema, MODES[mode]).tree, limits))
    except constrain.ConstrainError:
        return None  # refused by name (a keyword, a limit, an empty language): allowed


def _walk(dfa: LazyDFA, rng: random.Random, max_bytes: int = 300) -> bytes | None:
    """A random text through the automaton, or None if it ran out of length first."""
    state, out = dfa.start, bytearray()
    while len(out) < max_bytes:
        if dfa.is_final(state) and rng.random() < 0.25:
            return bytes(out)
        row = dfa.row(state)
        choices = [b for b in range(256) if row[b] != DEAD]
        if not choices:  # every byte the automaton offers must keep the text completable
            if not dfa.is_final(state):
                raise AssertionError(f"dead end after {bytes(out)!r}: no byte allowed and the text cannot end")
            return bytes(out)
        # prefer structural bytes now and then, so walks close what they open
        byte = rng.choice(choices)
        out.append(byte)
        state = int(row[byte])
    return None


def _somewhere(node: Any, test: Callable[[Any], bool]) -> bool:
    """Whether ``test`` holds for ``node`` or for any value nested in it (array items, object values)."""
    if test(node):
        return True
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    return any(_somewhere(child, test) for child in children)


def _overflows(value: Any) -> bool:
    return _somewhere(value, lambda v: isinstance(v, float) and not math.isfinite(v))


def _rounds(text: bytes) -> bool:
    """Whether a number of the text (read as a Decimal) changes when Python reads it as a float."""
    try:
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    except InvalidOperation:  # an exponent past even Decimal's range (1e999999999)
        return True
    return _somewhere(value, lambda v: isinstance(v, Decimal) and v.is_finite() and Decimal(repr(float(v))) != v)


def _integral_float(value: Any) -> bool:
    """1.0 and the like: JSON's integer 1 in another spelling, which the guide writes as '1' only."""
    return _somewhere(value, lambda v: isinstance(v, float) and math.isfinite(v) and v.is_integer())


def _keys_counted_as_one(schema: Any, value: Any) -> bool:
    """Whether the documented stricter count may refuse ``value``: under ``minProperties`` of 2
    or more, undeclared keys count once per group of their last byte modulo 8, for two such
    keys may be one repeated key (docs/json_schema.md, "Repeated keys"; pinned by
    test_schema_algebra's counted-object tests). Judged coarsely: some ``minProperties`` ≥ 2
    in the schema and some object of the value with two keys of one group."""
    counts_two = _somewhere(schema, lambda s: isinstance(s, dict) and isinstance(s.get("minProperties"), int)
                            and s["minProperties"] >= 2)  # fmt: skip
    return counts_two and _somewhere(
        value, lambda v: isinstance(v, dict) and len({key.encode()[-1] % 8 if key else -1 for key in v}) < len(v)
    )


def _contains_beside_a_loose_superset(schema: Any) -> bool:
    """Whether a counted ``contains`` may refuse a valid value on purpose: past ``minContains`` alone,
    the elements that do not match are the element schema minus a *superset* of ``contains``,
    and a superset drops ``maxProperties`` (a repeated key would count twice;
    docs/json_schema.md, "Repeated keys"), so an object that fails ``contains`` only by its
    member count is refused as an element (stricter). Judged coarsely, by the keyword."""
    return _somewhere(schema, lambda s: isinstance(s, dict) and "maxContains" in s
                      and "maxProperties" in json.dumps(s.get("contains")))  # fmt: skip


# ---------------------------------------------------------------------- properties


def _seeded(test: Callable[..., None]) -> Callable[..., None]:
    return hypothesis_seed(int(SEED))(test) if SEED is not None else test


@pytest.mark.parametrize("mode", sorted(MODES))
@_seeded
@FUZZ
@given(schema=_schemas(exact=False), seed=st.integers(0, 2**16))
@pytest.mark.slow
def test_random_walks_validate(mode: str, schema: dict[str, Any], seed: int) -> None:
    dfa = _automaton(schema, mode)
    if dfa is None or dfa.start == DEAD:
        return
    rng = random.Random(seed)
    for _ in range(4):
        try:
            text = _walk(dfa, rng)
        except constrain.LimitExceededError:
            return  # a named limit while guiding (products of free values can take long): allowed
        if text is None:
            continue
        value = json.loads(text)  # raises on non-JSON: a failure
        if _overflows(value) or _rounds(text):
            continue  # 1e400 reads as inf, 439654509499347051.000 as 4.396545094993471e+17:
            # the oracle (jsonschema on floats) cannot judge such a number, the schema can
        errors = list(ExactValidator(schema).iter_errors(value))
        assert not errors, f"{text!r} accepted for {json.dumps(schema)}: {errors[0].message}"


#: Search budgets for the value check: the default, and one that runs out in most products
#: over a free-form value, where what an unsettled search concludes decides soundness.
_BUDGETS = {"default": Limits(timeout_s=20), "tight": Limits(timeout_s=20, max_search_states=48)}


@pytest.mark.parametrize("budget", sorted(_BUDGETS))
@pytest.mark.parametrize("mode", sorted(MODES))
@_seeded
@FUZZ
@given(schema=_schemas(exact=False), values=st.lists(_VALUES, min_size=1, max_size=8))
def test_invalid_values_are_refused(mode: str, budget: str, schema: dict[str, Any], values: list[Any]) -> None:
    """Soundness by value: every value the automaton takes, in either spelling, validates.

    Random walks reach what a schema admits widely; an invalid value that slips through a
    narrow gap (a subtracted part that died too soon) is found by judging given values."""
    dfa = _automaton(schema, mode, _BUDGETS[budget])
    if dfa is None or dfa.start == DEAD:
        return
    oracle = ExactValidator(schema)
    for value in values:
        for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
            try:
                taken = dfa.matches(text.encode())
            except constrain.LimitExceededError:
                return  # a named limit while deciding: allowed
            if taken and not _overflows(value) and not _rounds(text.encode()):
                errors = list(oracle.iter_errors(value))
                assert not errors, f"{text!r} accepted for {json.dumps(schema)}: {errors[0].message}"


@_seeded
@FUZZ
@given(schema=_schemas(exact=True), values=st.lists(_VALUES, min_size=1, max_size=6))
def test_valid_values_are_accepted(schema: dict[str, Any], values: list[Any]) -> None:
    dfa = _automaton(schema, "spec")
    if dfa is None:
        return
    oracle = ExactValidator(schema, format_checker=jsonschema.FormatChecker())
    for value in values:
        if (_integral_float(value) or not oracle.is_valid(value) or _keys_counted_as_one(schema, value)
                or _contains_beside_a_loose_superset(schema)):
            continue
        for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
            assert dfa.matches(text.encode()), f"valid {text} refused for {json.dumps(schema)}"


# ---------------------------------------------------------------------- recursive schemas (the grammar backend)

_NODE = {"$ref": "#/$defs/node"}
_TREE_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=2),
                            st.dictionaries(st.sampled_from(["kids", "v", "a"]), inner, max_size=3)),  # fmt: skip
    max_leaves=6,
)


def _recursive_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """A node that is a leaf schema or an object whose ``kids`` are nodes again: the walker
    makes the reference a rule, and the guide is the grammar backend's."""
    leaf = _schemas(exact=False)
    return st.builds(
        lambda keyword, leaf, value, required, closed: {"$defs": {"node": {keyword: [leaf, {
            "type": "object", "properties": {"kids": {"type": "array", "items": _NODE, "maxItems": 2}, "v": value},
            "required": required, **({"additionalProperties": False} if closed else {})}]}}, **_NODE},
        st.sampled_from(["anyOf", "oneOf"]), leaf, leaf, st.sampled_from([[], ["kids"], ["v"], ["kids", "v"]]),
        st.booleans(),
    )  # fmt: skip


def _guide_examples(
    schemas: st.SearchStrategy[dict[str, Any]], values: st.SearchStrategy[Any]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The examples of a property checked through a token guide: a schema, up to six values to
    judge, and a seed for the random walks (seeded and bounded as every property here)."""
    def decorate(run: Callable[..., None]) -> Callable[..., None]:
        given_run = given(schema=schemas, values=st.lists(values, min_size=1, max_size=6), seed=st.integers(0, 2**16))
        return _seeded(FUZZ(given_run(run)))

    return decorate


@pytest.mark.parametrize("mode", sorted(MODES))
def test_recursive_schemas_take_only_valid_values(smollm2: object, mode: str) -> None:
    """Soundness of the grammar backend by value and by walk: every value its guide takes,
    spelled as the tokenizer spells it, and every finished random walk validates."""
    compiler = constrain.Compiler(smollm2, limits=Limits(timeout_s=20))

    @_guide_examples(_recursive_schemas(), _TREE_VALUES)
    def run(schema: dict[str, Any], values: list[Any], seed: int) -> None:
        try:
            guide = compiler.json_schema(schema, strict_properties=mode == "default")
            oracle = ExactValidator(schema)
            for value in values:
                for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
                    if accepts(guide, tokenize_continuation(smollm2, text)) and not _overflows(value):
                        errors = list(oracle.iter_errors(value))
                        assert not errors, f"{text!r} accepted for {json.dumps(schema)}: {errors[0].message}"
            for text in finished_walks(guide, compiler.vocabulary, random.Random(seed), count=3, max_tokens=80):
                if not _rounds(text):
                    errors = list(oracle.iter_errors(json.loads(text)))
                    assert not errors, f"{text!r} written for {json.dumps(schema)}: {errors[0].message}"
        except constrain.ConstrainError:
            return  # refused by name, or a limit while guiding: allowed

    run()


# ---------------------------------------------------------------------- uniqueItems over strings (the guide's scan)

#: Item schemas with few values and with endless ones, beside words: repeats come often.
_UNIQUE_ITEMS = st.one_of(
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^[ab]*$", "^a", "^[ab]{0,2}$", "b$"])),
    st.builds(lambda low, span: {"type": "string", "minLength": low, "maxLength": low + span},
              st.integers(0, 1), st.integers(0, 2)),  # fmt: skip
    st.builds(lambda types: {"type": types, "pattern": "^[ab]*$", "maxLength": 1},
              st.sampled_from([["string", "null"], ["string", "boolean", "null"]])),  # fmt: skip
)
_UNIQUE_VALUES = st.recursive(
    st.sampled_from(["", "a", "b", "ab", "ba", "aa", "bab", None, True, False, 1]),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(["t", "tx", "a"]), inner,
                                                                         max_size=2)),  # fmt: skip
    max_leaves=8,
)


def _unique_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """A uniqueItems array of strings somewhere: the root, a member, a pattern's or the undeclared
    members' value, an array's items, an allOf part, a branch that alone admits arrays or objects,
    and a branch beside another of arrays (refused by name)."""
    array = st.builds(lambda item, low, high: {"type": "array", "items": item, "uniqueItems": True, "minItems": low,
                                               **({} if high is None else {"maxItems": high})},
                      _UNIQUE_ITEMS, st.integers(0, 3), st.one_of(st.none(), st.integers(2, 5)))  # fmt: skip
    places: list[Callable[[dict[str, Any]], dict[str, Any]]] = [
        lambda a: a,
        lambda a: {"type": "object", "properties": {"t": a}},
        lambda a: {"type": "object", "patternProperties": {"^t": a}},
        lambda a: {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": a},
        lambda a: {"type": "array", "items": a, "maxItems": 2},
        lambda a: {"allOf": [{"type": "object", "properties": {"t": a}}, {"required": ["t"]}]},
        lambda a: {"anyOf": [a, {"type": "null"}]},  # the one branch of arrays: checked there
        lambda a: {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": a}]},
        lambda a: {"anyOf": [a, {"type": "array", "maxItems": 1}]},  # two array branches: refused by name
    ]
    return st.builds(lambda a, place: place(a), array, st.sampled_from(places))


def test_unique_string_arrays_take_exactly_the_valid_values(smollm2: object) -> None:
    """The guide around a uniqueItems array of strings, against the library both ways: a value
    spelled as the tokenizer spells it is taken exactly when it validates, and every finished
    random walk validates (``random_walk`` also fails at a state that allows nothing)."""
    compiler = constrain.Compiler(smollm2, limits=Limits(timeout_s=20))

    @_guide_examples(_unique_schemas(), _UNIQUE_VALUES)
    def run(schema: dict[str, Any], values: list[Any], seed: int) -> None:
        try:
            guide = compiler.json_schema(schema, strict_properties=False)
        except constrain.ConstrainError:
            return  # refused by name (an anyOf branch, too few values for minItems): allowed
        oracle = ExactValidator(schema)
        for value in values:
            for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
                taken = accepts(guide, tokenize_continuation(smollm2, text))
                assert taken == oracle.is_valid(value), f"{text!r} {'taken' if taken else 'refused'} for {json.dumps(schema)}"
        for text in finished_walks(guide, compiler.vocabulary, random.Random(seed), count=4, max_tokens=80):
            errors = list(oracle.iter_errors(json.loads(text)))
            assert not errors, f"{text!r} written for {json.dumps(schema)}: {errors[0].message}"

    run()
