"""Compiled guides are shared: by threads (one guide, eight walkers) and by processes (pickled).

Both backends fill caches lazily (rows, products, lexer states, masks), so the checks
compare masks state by state against an independent copy of the guide walked alone.
"""

from __future__ import annotations

import pickle
import random
import threading
from typing import Any, Callable

import numpy as np
import pytest

import constrain
from constrain.testing import random_walk

SCHEMAS: dict[str, Callable[[constrain.Compiler], Any]] = {
    "regex": lambda c: c.regex(r"(\d{3}-)?\d{4}|[a-z]+@[a-z]+\.(com|org)"),
    # a product (oneOf over overlapping branches) and a free-form value nested without bound
    "schema with products": lambda c: c.json_schema({
        "type": "object", "properties": {"n": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}, "free": {}},
        "required": ["n"]}, strict_properties=False),  # fmt: skip
    # parts built on first visit: unbuilt stubs travel by pickle, and threads race to build them
    "schema with deferred parts": lambda c: c.json_schema({
        "type": "object", "properties": {f"p{i}": {"type": "object", "properties": {
            f"k{j}": {"type": "string", "maxLength": 9} for j in range(12)}} for i in range(6)}}),  # fmt: skip
    "json grammar": lambda c: c.grammar("json"),
    "recursive schema": lambda c: c.json_schema({
        "$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
        "$ref": "#/$defs/t"}),  # fmt: skip
}


@pytest.fixture(scope="module")
def vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


def _walks(guide: Any, vocabulary: constrain.Vocabulary, seed: int, count: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [random_walk(guide, vocabulary, rng, max_tokens=30)[0] for _ in range(count)]


def _masks(guide: Any, ids: list[int]) -> list[np.ndarray]:
    state, masks = guide.initial_state, []
    for token in ids:
        masks.append(guide.allowed_tokens(state))
        state = guide.advance(state, token)
    masks.append(guide.allowed_tokens(state))
    return masks


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_pickled_guide_gives_the_same_masks(vocabulary: constrain.Vocabulary, name: str) -> None:
    fresh = SCHEMAS[name](constrain.Compiler(vocabulary))
    copy = pickle.loads(pickle.dumps(fresh))  # before any walk: caches nearly empty
    walks = _walks(fresh, vocabulary, seed=1, count=4)
    warm = pickle.loads(pickle.dumps(fresh))  # after the walks: the filled caches travel along
    for ids in walks:
        expected = _masks(fresh, ids)
        for other in (copy, warm):
            for want, got in zip(expected, _masks(other, ids)):
                assert np.array_equal(want, got)
    if name == "json grammar":  # the lark parser is rebuilt on demand, not pickled
        copy.grammar.lark.parse("[1, {}]")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_eight_threads_on_one_guide_agree_with_one_thread(vocabulary: constrain.Vocabulary, name: str) -> None:
    reference = SCHEMAS[name](constrain.Compiler(vocabulary))
    walks = _walks(reference, vocabulary, seed=2, count=8)
    expected = [_masks(reference, ids) for ids in walks]
    shared = SCHEMAS[name](constrain.Compiler(vocabulary))  # fresh: every first visit is contended
    results: dict[int, list[np.ndarray]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(walks))

    def walk(k: int) -> None:
        try:
            start.wait()
            results[k] = _masks(shared, walks[k])
        except BaseException as exc:  # reported below: a thread's exception would vanish
            errors.append(exc)

    threads = [threading.Thread(target=walk, args=(k,)) for k in range(len(walks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, want in enumerate(expected):
        assert all(np.array_equal(a, b) for a, b in zip(want, results[k])), k


def test_the_mask_cache_is_bounded_and_evicted_masks_come_back_the_same(
    vocabulary: constrain.Vocabulary,
) -> None:
    """A long walk visits a new DFA state per token (a counted repeat): the packed-mask cache keeps
    a bounded number, per-call guides share it, and a mask recomputed after eviction is the same."""
    compiler = constrain.Compiler(vocabulary, limits=constrain.Limits(max_cached_masks=8))
    first, second = compiler.regex("[a-z]{0,300}"), compiler.regex("[a-z]{0,300}")
    token = next(i for i, piece in enumerate(vocabulary.token_bytes) if piece == b"a")

    def packed_walk(guide: Any) -> list[np.ndarray]:
        state, out = guide.initial_state, []
        for _ in range(40):
            buffer = constrain.allocate_bitmask(vocabulary.size)
            guide.fill_bitmask(state, buffer)
            out.append(buffer.copy())
            state = guide.advance(state, token)
        return out

    once = packed_walk(first)
    assert len(first._masks) == 8 and second._masks is first._masks
    for want, got in zip(once, packed_walk(second)):
        assert np.array_equal(want, got)
