"""Large parts of an automaton are built on first visit (``ByteNFA``'s stubs and fragments).

A real schema's automaton is mostly parts a walk never enters, so the compile builds the
outer levels and each large part waits until a walk reaches it. What must hold: the
language is the one an eager build gives (checked text by text against an eager build
and against ``jsonschema``), counters (``maxItems``, member sets) work across the seam
between a stub and its fragment, and a walk never reaches a dead end.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

import constrain
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex import automaton
from constrain.regex.automaton import ByteNFA, LazyDFA
from constrain.core.limits import Limits
from constrain.testing import accepts, finished_walks, tokenize_continuation


def _record(i: int) -> dict:
    return {
        "type": "object",
        "properties": {f"field_{i}_{j}": {"type": "string", "maxLength": 12} for j in range(8)}
        | {"count": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
        "required": [f"field_{i}_0", "count"],
    }


#: A wide object of wide objects, one of them in a counted array: most of it a walk never enters.
WIDE = {
    "type": "object",
    "properties": {f"part_{i}": _record(i) for i in range(10)}
    | {"list": {"type": "array", "items": _record(99), "minItems": 1, "maxItems": 3}},
    "required": ["part_0", "list"],
}


def _instance(rng: random.Random, items: int) -> dict:
    def record(i: int) -> dict:
        out = {f"field_{i}_{j}": "x" * rng.randint(0, 12) for j in range(8) if j == 0 or rng.random() < 0.3}
        return out | {"count": rng.randint(0, 99), "tags": rng.choices(["a", "b"], k=rng.randint(0, 2))}

    value = {f"part_{i}": record(i) for i in range(10) if i == 0 or rng.random() < 0.2}
    return value | {"list": [record(99) for _ in range(items)]}


def _dfa(schema: dict, defer: int) -> LazyDFA:
    saved, automaton._DEFER_STATES = automaton._DEFER_STATES, defer
    try:
        return LazyDFA(ByteNFA(schema_walk(schema, SchemaOptions(strict_properties=False)).tree, Limits()))
    finally:
        automaton._DEFER_STATES = saved


def test_the_compile_builds_the_outer_levels_only() -> None:
    eager, lazy = _dfa(WIDE, 10**12), _dfa(WIDE, automaton._DEFER_STATES)
    assert len(lazy.nfa) * 10 < len(eager.nfa), (len(lazy.nfa), len(eager.nfa))
    built = len(lazy.nfa)
    assert lazy.matches(json.dumps(_instance(random.Random(0), 2)).encode())
    assert len(lazy.nfa) > built  # the walk built the parts it entered


def test_a_deferred_build_gives_the_eager_language() -> None:
    """Text by text, against an eager build and jsonschema: valid instances, and each with one
    byte changed, an item too many or too few (the array's counter runs across the seam)."""
    eager, lazy = _dfa(WIDE, 10**12), _dfa(WIDE, automaton._DEFER_STATES)
    validator = jsonschema.Draft202012Validator(WIDE)
    rng = random.Random(1)
    checked = {True: 0, False: 0}
    for trial in range(40):
        value = _instance(rng, rng.randint(0, 4))
        text = json.dumps(value)
        variants = [text, text.replace('"count": ', '"count": -1', 1), text[:-1], text.replace('"x', '"\\u0078', 1)]
        cut = rng.randrange(1, len(text))
        variants.append(text[:cut] + rng.choice('{}[],:"a1 ') + text[cut:])
        for variant in variants:
            try:
                valid = validator.is_valid(json.loads(variant))
            except json.JSONDecodeError:
                valid = False
            got = lazy.matches(variant.encode())
            assert got == eager.matches(variant.encode()), variant
            assert got == valid or (valid and "\\u0078" in variant), variant  # respelled keys: stricter, documented
            checked[got] += 1
    assert checked[True] > 20 and checked[False] > 40, checked


@pytest.mark.slow
def test_walks_through_deferred_parts_are_valid_and_complete(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    narrow = {**WIDE, "properties": {k: v for k, v in WIDE["properties"].items() if k in ("part_0", "list")}}
    guide = compiler.json_schema(narrow)  # declared members only, so that walks end
    validator = jsonschema.Draft202012Validator(narrow)
    rng = random.Random(2)
    texts = finished_walks(guide, compiler.vocabulary, rng, count=12, max_tokens=600)
    for text in texts:
        validator.validate(json.loads(text))
    assert len(texts) >= 3, texts
    wide = compiler.json_schema(WIDE, strict_properties=False)
    for items in (1, 3):
        text = json.dumps(_instance(rng, items))
        assert accepts(wide, tokenize_continuation(smollm2, text)), text
    assert not accepts(wide, tokenize_continuation(smollm2, json.dumps(_instance(rng, 4))))


@pytest.mark.parametrize("items", [0, 4])
def test_counters_around_a_stub_still_bound_it(items: int) -> None:
    lazy = _dfa(WIDE, automaton._DEFER_STATES)
    assert not lazy.matches(json.dumps(_instance(random.Random(items), items)).encode())


PROMETHEUS = Path(__file__).resolve().parents[2] / "shared/data/maskbench-dev/JsonSchemaStore---prometheus.json"


@pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs ../shared/data/maskbench-dev")
@pytest.mark.slow
def test_a_first_visit_keeps_to_timeout_s_however_deep_its_builds_nest(smollm2: object) -> None:
    """Prometheus' configuration schema: a first visit builds a deferred part whose products search
    parts that build deferred parts of their own (it compiled eagerly in 22 s before parts were
    deferred, then ran out of max_dfa_states). Nested builds share the outermost one's clock
    (algebra.visit_deadline), so the step ends in a LimitExceededError on time, not depth × limit.

    Its "at most one auth method" is now a presence condition (test_presence), which walks in
    under a second; a vacuous ``minProperties: 0`` in each ``if`` keeps the old products here."""
    import time

    doc = json.loads(PROMETHEUS.read_text())
    for case in doc["schema"]["definitions"]["auth"]["allOf"]:
        case["if"]["minProperties"] = 0  # not a condition keyword: the general way, products
    compiler = constrain.Compiler(smollm2, limits=Limits(timeout_s=4))
    guide = compiler.json_schema(doc["schema"], strict_properties=False)
    ids = tokenize_continuation(smollm2, json.dumps(doc["tests"][0]["data"]))
    state, started = guide.initial_state, time.monotonic()
    with pytest.raises(constrain.LimitExceededError, match="timeout_s"):
        for token in ids:
            step = time.monotonic()
            guide.allowed_token_ids(state)
            assert time.monotonic() - step < 4 * 2.5, "one step ran far past timeout_s"
            state = guide.advance(state, token)
    assert time.monotonic() - started < 60
