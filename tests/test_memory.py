"""A long generation's memory stays flat, and the caches that grow while guiding are bounded.

Each guide walks a few thousand tokens of text that keeps repeating one shape (records of
random words and numbers in a list that never closes), asking ``fill_bitmask`` at every
step as a sampler does and picking, with a seeded rng, one of the allowed tokens that
spells the text on. Once the shape has been seen (the warm-up), every lazily built table
(lexer and DFA states, vocabulary walks, parser stacks) is complete and the guide only
looks things up: memory traced after the warm-up must not grow with the text.

A repeating shape meets a finite set of states, so there every cache fills up and stops
by itself; a lexeme that never ends meets a new state each step, and there only the
bounds keep memory flat. The grammar backend's parser memos are bounded by
``Limits.max_memo_entries``, and the stack store (which states refer to, so it cannot
evict) by ``Limits.max_interned_stacks``. The last tests check both: a small memo limit
evicts without changing a single mask, and a small stack limit raises by name.
"""

from __future__ import annotations

import itertools
import random
import tracemalloc
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import constrain
from constrain import LimitExceededError, Limits
from constrain.cfg import CFGGuide, compile_grammar

WORDS = ("alpha", "beta", "gamma", "delta", "north", "south", "sea", "mountain", "river", "x", "id-7", "é")

#: A recursive schema (CFG backend) and a list of records (regex backend: no maxItems, so the
#: list and each free-form string go on as long as the text does).
TREE_SCHEMA = {
    "$defs": {"t": {"type": "object", "properties": {
        "v": {"type": "integer"}, "name": {"type": "string"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
    "$ref": "#/$defs/t",
}  # fmt: skip
LIST_SCHEMA = {
    "type": "array",
    "items": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["name", "n"]},
}  # fmt: skip


def _words(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def _json_records(rng: random.Random) -> Iterator[str]:
    """``[`` then records of the JSON grammar's whole range (objects, lists, numbers, literals)."""
    yield "["
    while True:
        exponent = f"{rng.randint(1, 9)}e{rng.randint(1, 20)}"
        number = rng.choice([str(rng.randint(-999, 99999)), f"{rng.random():.4f}", exponent])
        literal = rng.choice(["true", "false", "null"])
        tags = ", ".join(f'"{rng.choice(WORDS)}"' for _ in range(rng.randint(0, 3)))
        record = f'"id": {number}, "name": "{_words(rng)}", "tags": [{tags}], "ok": {literal}'
        yield f'{{{record}, "child": {{"x": [1, {{}}]}}}}, '


def _tree_records(rng: random.Random) -> Iterator[str]:
    """A tree whose root's ``kids`` go on without end, each kid two levels deep."""
    yield '{"v": 0, "kids": ['
    while True:
        inner = ", ".join(f'{{"v": {rng.randint(0, 999)}}}' for _ in range(rng.randint(0, 2)))
        yield f'{{"v": {rng.randint(-99, 99999)}, "name": "{_words(rng)}", "kids": [{inner}]}}, '


def _list_records(rng: random.Random) -> Iterator[str]:
    yield "["
    while True:
        yield f'{{"name": "{_words(rng)}", "n": {rng.randint(-9999, 999999)}}}, '


CASES: dict[str, tuple[Callable[[constrain.Compiler], Any], Callable[[random.Random], Iterator[str]]]] = {
    "json grammar": (lambda c: c.grammar("json"), _json_records),
    "recursive schema": (lambda c: c.json_schema(TREE_SCHEMA), _tree_records),
    "regex list of records": (lambda c: c.json_schema(LIST_SCHEMA), _list_records),
}


@pytest.fixture(scope="module")
def vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


class Walk:
    """A sampler's loop over one guide: ``fill_bitmask``, then one allowed token spelling the text on."""

    def __init__(self, guide: Any, vocabulary: constrain.Vocabulary, text: Iterator[str], seed: int) -> None:
        self.guide, self.text, self.rng = guide, text, random.Random(seed)
        self.ids = {token: i for i, token in enumerate(vocabulary.token_bytes) if token}
        self.longest = max(len(token) for token in self.ids)
        self.state = guide.initial_state
        self.pending = b""
        self.bitmask = np.zeros((vocabulary.size + 31) // 32, dtype=np.int32)
        self.masks: list[bytes] = []  # a digest of each mask, when asked to keep them

    def run(self, steps: int, keep: bool = False) -> None:
        for _ in range(steps):
            while len(self.pending) < self.longest:
                self.pending += next(self.text).encode()
            self.guide.fill_bitmask(self.state, self.bitmask)
            if keep:
                self.masks.append(self.bitmask.tobytes())
            bits = self.bitmask.view(np.uint32)
            fits = [
                token_id for size in range(1, self.longest + 1)
                if (token_id := self.ids.get(self.pending[:size])) is not None
                and bits[token_id >> 5] >> (token_id & 31) & 1
            ]  # fmt: skip
            assert fits, f"the text {self.pending[:40]!r} cannot go on"
            token_id = self.rng.choice(fits)
            self.state = self.guide.advance(self.state, token_id)
            self.pending = self.pending[len(self.guide.vocabulary.token_bytes[token_id]):]


# ---------------------------------------------------------------------- flat memory

#: Tokens walked before measuring: enough for the shape to have been met in most of its
#: spellings the rng picks, so what is built lazily has been built.
WARM_UP = 1_500
#: Tokens walked while measuring.
MEASURED = 2_500
#: Allowed growth over MEASURED tokens. A mask of SmolLM2's 49,152 tokens is 6 KB and the
#: guides keep up to 4,096 of them, so a cache that kept one mask per step would grow by
#: 15 MB here; a table that kept a row per step, more. What is left is what a state first
#: met late builds (a rare spelling of a number): a mask, a memo entry, a DFA row, at most
#: one vocabulary walk from a new lexer state, whose row set and its interning key hold the
#: vocabulary's row numbers twice (0.8 MB; the JSON grammar's walk here builds one).
MAX_GROWTH = 2 * 1024 * 1024


@pytest.mark.parametrize("name", sorted(CASES))
def test_memory_stays_flat_over_a_long_generation(vocabulary: constrain.Vocabulary, name: str) -> None:
    compile_guide, records = CASES[name]
    guide = compile_guide(constrain.Compiler(vocabulary))
    walk = Walk(guide, vocabulary, records(random.Random(7)), seed=11)
    tracemalloc.start()
    try:
        walk.run(WARM_UP)
        after_warm_up = tracemalloc.get_traced_memory()[0]
        walk.run(MEASURED)
        at_end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    growth = at_end - after_warm_up
    assert growth < MAX_GROWTH, f"{name}: traced memory grew by {growth / 1e6:.2f} MB over {MEASURED} tokens"


def test_memory_stays_flat_through_a_lexeme_that_never_ends(vocabulary: constrain.Vocabulary) -> None:
    """Every step a state never met before: the bounded caches, not the text's shape, keep memory flat.

    After ``a`` the lexeme matches, and each dash is pending on it (lark would fall back on
    the ``a`` if no ``c`` came), so the state carries the dashes read and none repeats: each
    step computes a mask (6 KB, kept by state and by stack signature) and a memo entry keyed
    by the pending bytes. Unbounded, those grow by far more than MAX_GROWTH over the walk
    (about 30 MB); at 16 entries each, what grows is only the keys' pending bytes (16 keys in
    each of three caches, each some 25 KB longer by the end: about 0.5 MB).
    """
    small = 16
    compiled = compile_grammar('start: (ITEM ",")*\nITEM: /a(-+c)?/', vocabulary,
                               limits=Limits(max_memo_entries=small))  # fmt: skip
    guide = CFGGuide(compiled.grammar, vocabulary, mask_cache_size=small)
    guide.index.signature_cache_size = small
    walk = Walk(guide, vocabulary, itertools.chain(["a"], itertools.repeat("-" * 64)), seed=2)
    tracemalloc.start()
    try:
        walk.run(500)
        after_warm_up = tracemalloc.get_traced_memory()[0]
        walk.run(1_000)
        at_end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(walk.state[3]) > 10_000  # the dashes pending: every state was new
    growth = at_end - after_warm_up
    assert growth < MAX_GROWTH, f"traced memory grew by {growth / 1e6:.2f} MB over 1,000 new states"
    assert len(guide._masks) <= small and len(guide.index._sig_depth) <= small


# ---------------------------------------------------------------------- bounds that evict or raise

#: Few enough that one record's parse outgrows them (an unbounded memo holds hundreds here).
SMALL_MEMO = 40


@pytest.mark.parametrize("name", ["json grammar", "recursive schema"])
def test_parser_memos_evict_past_max_memo_entries_and_give_the_same_masks(
    vocabulary: constrain.Vocabulary, name: str
) -> None:
    compile_guide, records = CASES[name]
    steps = 400
    roomy = compile_guide(constrain.Compiler(vocabulary))
    small = compile_guide(constrain.Compiler(vocabulary, limits=Limits(max_memo_entries=SMALL_MEMO)))
    walks = [Walk(guide, vocabulary, records(random.Random(3)), seed=5) for guide in (roomy, small)]
    for walk in walks:
        walk.run(steps, keep=True)
    assert walks[0].masks == walks[1].masks  # an evicted entry is recomputed equal
    memos = ("_feed_memo", "_can_take", "_end_memo")
    unbounded = {memo: len(getattr(roomy.grammar, memo)) for memo in memos}
    assert unbounded["_feed_memo"] > SMALL_MEMO  # so the small limit had something to evict
    for memo in memos:
        assert len(getattr(small.grammar, memo)) <= SMALL_MEMO, (memo, unbounded)
    assert len(small.index._sig_depth) <= SMALL_MEMO


def test_the_stack_store_raises_past_max_interned_stacks(vocabulary: constrain.Vocabulary) -> None:
    """Stacks are named by states, so they are kept; the one past the limit raises by name."""
    compile_guide, records = CASES["json grammar"]
    guide = compile_guide(constrain.Compiler(vocabulary))
    Walk(guide, vocabulary, records(random.Random(3)), seed=5).run(200)
    met = len(guide.grammar.stacks)
    limited = compile_guide(constrain.Compiler(vocabulary, limits=Limits(max_interned_stacks=met - 1)))
    with pytest.raises(LimitExceededError) as error:
        Walk(limited, vocabulary, records(random.Random(3)), seed=5).run(200)
    assert error.value.limit == "max_interned_stacks" and error.value.value == met - 1
    assert "Limits.max_interned_stacks" in str(error.value)
    assert len(limited.grammar.stacks) == met - 1
