"""The regex guide on real tokenizers: soundness, completeness, no dead ends, protocol details.

The oracle is Python's ``re.fullmatch`` with ``re.ASCII`` (constrain's ``\\d``,
``\\w`` and ``\\s`` are ASCII classes); matching strings come from hypothesis'
``from_regex``, an independent generator, and are tokenized as the real
tokenizer tokenizes them.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import constrain
from constrain.guide import bitmask_from_token_ids
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

PATTERNS = [
    r"\d{3}-\d{4}",
    r"[A-Z][a-z]{2,8}( [A-Z][a-z]{2,8}){0,2}",
    r"(cat|car|cart|carton)s?",
    r"[^\s,]{1,6}(,[^\s,]{1,6}){0,3}",
    r"[一-龥]{1,4}(、[一-龥]{1,3})?",
    r"(😀|👍🏽|🎉)+ ok",
    r"-?(0|[1-9]\d{0,5})(\.\d{1,3})?",
    r'"([^"\\\x00-\x1f]|\\["\\nt])*"',
    r"(?i)(select|insert) \w+",
    r"[a-f0-9]{8}-[a-f0-9]{4}",
    r".{0,10}",
    r"(ab|a)(bc|c)?d*",
]

HYPOTHESIS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)


def oracle(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text, flags=re.ASCII) is not None


def spellable(compiler: constrain.Compiler, text: str) -> bool:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return all(compiler.vocabulary.byte_alphabet[b] for b in data)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_walks_match(compiler: constrain.Compiler, pattern: str) -> None:
    guide = compiler.regex(pattern)
    rng = random.Random(pattern)
    ended = 0
    for _ in range(25):
        ids, finished = random_walk(guide, compiler.vocabulary, rng, max_tokens=60)
        if finished:
            ended += 1
            text = token_text(compiler.vocabulary, ids).decode("utf-8")
            assert oracle(pattern, text), text
    assert ended > 0


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_strings_are_accepted_as_really_tokenized(
    compiler: constrain.Compiler, tokenizer: object, pattern: str
) -> None:
    guide = compiler.regex(pattern)

    @HYPOTHESIS
    @given(st.from_regex(pattern, fullmatch=True))
    def check(text: str) -> None:
        assume(oracle(pattern, text) and spellable(compiler, text))
        ids = tokenize_continuation(tokenizer, text)
        assume(token_text(compiler.vocabulary, ids) == text.encode("utf-8"))
        assert accepts(guide, ids), (text, ids)

    check()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_mutated_strings_follow_the_oracle(compiler: constrain.Compiler, tokenizer: object, pattern: str) -> None:
    guide = compiler.regex(pattern)

    @HYPOTHESIS
    @given(st.from_regex(pattern, fullmatch=True), st.integers(0, 10**6), st.sampled_from("aZ0 -,\"\\é😀"))
    def check(text: str, where: int, char: str) -> None:
        position = where % (len(text) + 1)
        for mutated in (text[:position] + char + text[position:], text[:position] + text[position + 1 :]):
            assume(spellable(compiler, mutated))
            ids = tokenize_continuation(tokenizer, mutated)
            if token_text(compiler.vocabulary, ids) != mutated.encode("utf-8"):
                continue
            assert accepts(guide, ids) == oracle(pattern, mutated), mutated

    check()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_no_dead_ends(compiler: constrain.Compiler, pattern: str) -> None:
    guide = compiler.regex(pattern)
    guide.precompute()
    states = guide.index.explore()
    assert len(states) > 1
    for state in states:
        allowed = guide.allowed_tokens(state)
        assert allowed.any(), state
        eos_allowed = any(allowed[i] for i in compiler.vocabulary.eos_token_ids)
        assert eos_allowed == guide.is_final(state)


def test_multibyte_character_spelled_by_single_byte_tokens(compiler: constrain.Compiler) -> None:
    vocabulary = compiler.vocabulary
    single = {piece[0]: i for i, piece in enumerate(vocabulary.token_bytes) if piece is not None and len(piece) == 1}
    guide = compiler.regex(r"(😀|東)+")
    for text in ("😀", "東😀東"):
        ids = [single[b] for b in text.encode("utf-8")]
        assert accepts(guide, ids)
    half = [single[b] for b in "😀".encode("utf-8")[:2]]
    assert accepts(guide, half, require_final=False)
    assert not accepts(guide, half)


def test_protocol_details(compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"ab?")
    vocabulary = compiler.vocabulary
    eos = min(vocabulary.eos_token_ids)
    single = {piece: i for i, piece in enumerate(vocabulary.token_bytes) if piece in (b"a", b"b", b"c")}
    state = guide.initial_state
    hash(state)
    assert not guide.is_final(state)
    with pytest.raises(constrain.TokenRejected):
        guide.advance(state, single[b"c"])
    with pytest.raises(constrain.TokenRejected):
        guide.advance(state, eos)
    state = guide.advance(state, single[b"a"])
    assert guide.is_final(state) and guide.allowed_tokens(state)[eos]
    done = guide.advance(state, eos)
    assert guide.is_final(done)
    assert np.flatnonzero(guide.allowed_tokens(done)).tolist() == sorted(vocabulary.eos_token_ids)
    assert guide.advance(done, eos) == done
    with pytest.raises(constrain.TokenRejected):
        guide.advance(done, single[b"b"])


def test_bitmask_matches_bool_mask(compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"[a-z]+\d?")
    size = compiler.vocabulary.size
    out = constrain.allocate_bitmask(size)
    state = guide.initial_state
    for _ in range(3):
        guide.fill_bitmask(state, out)
        assert out.shape == (constrain.bitmask_size(size),) and out.dtype == np.int32
        assert np.array_equal(constrain.bitmask_to_bool(out, size), guide.allowed_tokens(state))
        state = guide.advance(state, int(np.flatnonzero(guide.allowed_tokens(state))[0]))


def test_guide_is_shared_and_cached(compiler: constrain.Compiler) -> None:
    first, again = compiler.regex(r"x+y"), compiler.regex(r"x+y")
    assert first is not again and first.index is again.index  # each call its own guide, the tables shared
    guide = compiler.regex(r"(ab)+")
    ids = {piece: i for i, piece in enumerate(compiler.vocabulary.token_bytes) if piece in (b"a", b"b")}
    a, b = ids[b"a"], ids[b"b"]
    s1 = guide.advance(guide.initial_state, a)
    s2 = guide.advance(guide.initial_state, a)
    assert s1 == s2 and guide.is_final(guide.advance(s1, b)) and not guide.is_final(s2)


@pytest.mark.parametrize("options", [["yes", "no", "maybe"], ["a.b", "(x)", "a.bc", "[*]"], ["東京", "東", "😀"]])
def test_choice_is_literal(compiler: constrain.Compiler, tokenizer: object, options: list[str]) -> None:
    guide = compiler.choice(options)
    for option in options:
        assert accepts(guide, tokenize_continuation(tokenizer, option)), option
    rng = random.Random(0)
    for _ in range(20):
        ids, finished = random_walk(guide, compiler.vocabulary, rng)
        assert finished and token_text(compiler.vocabulary, ids).decode() in options
    assert not accepts(guide, tokenize_continuation(tokenizer, "axb"))


SPLIT_CASES = {  # constraints with wide states: string interiors, keys, free text
    "string": lambda c: c.json_schema({"type": "object", "properties": {"s": {"type": "string"}}}),
    "open object": lambda c: c.json_schema({"type": "object"}, strict_properties=False),
    "declared keys": lambda c: c.json_schema(  # a key's first letters lead elsewhere than its interior
        {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}},
        strict_properties=False,
    ),
    "no quotes": lambda c: c.regex(r'[^"]*"'),
    "no quotes nor é": lambda c: c.regex(r'[^"é]*"'),  # whole UTF-8 characters do not all loop
    "letters and CJK": lambda c: c.regex(r"[a-zA-Z0-9 .,\u4e00-\u9fff]*!"),
    "dot": lambda c: c.regex(r"a.*b"),
    "dotall": lambda c: c.regex(r"(?s)x.*y"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_rows_split_by_byte_class_equal_plain_walks(compiler: constrain.Compiler, name: str) -> None:
    """A wide state's row comes from the vocabulary's class split; a plain walk over the whole
    trie is the independent reference, state by state, along random walks."""
    guide = SPLIT_CASES[name](compiler)
    index = guide.index
    split = 0
    rng = random.Random(3)
    states = {index.dfa.start}
    for _ in range(6):
        state = index.dfa.start
        ids, _ = random_walk(guide, compiler.vocabulary, rng, max_tokens=12)
        for token in ids:
            state = int(guide.advance(state, token))
            states.add(state)
    for state in sorted(states):
        if state < 0 or index.dfa.shared(state, len(index._trie.levels)) is not None:
            continue  # finished, or a counted state whose row a stand-in serves
        row = index._split_row(state)
        if row is None:
            continue
        split += 1
        ref_ids, ref_states = index._sorted(*index._walk(state, index._trie))
        assert np.array_equal(row.token_ids, ref_ids), state
        assert np.array_equal(row.next_states, ref_states), state
        # what a step and a mask read: the split's shared part and the row's own, not merged
        assert row.inside is not None and row.size == ref_ids.size
        size = compiler.vocabulary.size
        assert np.array_equal(row.mask(size), bitmask_from_token_ids(ref_ids, size)), state
        refused = np.setdiff1d(np.arange(size, dtype=np.int32), ref_ids)
        assert [row.find(t) for t in ref_ids.tolist()] == ref_states.tolist(), state
        assert all(row.find(t) is None for t in refused.tolist()), state
    assert split, "no wide state split"


def test_successors_no_token_reads_stay_unbuilt(tokenizer: object) -> None:
    """Expanding a state leaves the successors it has not built before pending; a token walk
    builds those it reads. The masks along a real instance equal those of a DFA whose every
    reached state's row was built whole first, and fewer subset states were built."""
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in (
        "alarms", "bookmarks", "browserAction", "commands", "contextMenus", "cookies", "downloads",
        "extension", "history", "identity", "management", "notifications", "omnibox", "permissions")},
        "additionalProperties": False}  # (members in any order, and finitely many states to explore)
    text = json.dumps({"cookies": "a b", "history": "", "omnibox": "x"})
    token_ids = tokenize_continuation(tokenizer, text)
    masks, sizes = [], []
    for whole in (False, True):
        guide = constrain.Compiler(tokenizer).json_schema(schema, strict_properties=False)
        dfa, state, steps = guide.index.dfa, guide.initial_state, []
        for token_id in token_ids:
            if whole:  # every state the walk meets, and every state those reach, complete
                dfa.explore()
            steps.append(guide.allowed_token_ids(state).tolist())
            state = guide.advance(state, token_id)
        assert guide.is_final(state)
        masks.append(steps)
        sizes.append(dfa.num_states)
    assert masks[0] == masks[1]
    assert sizes[0] < sizes[1] / 2, sizes


def test_successors_on_many_bytes_are_the_successors_one_at_a_time(tokenizer: object) -> None:
    """``LazyDFA.successors`` (a product's probe reads a state's hundred bytes at once) gives what
    ``successor`` gives byte by byte, on fresh states with pending cells, and builds no more
    states than those reads do."""
    schema = {"type": "object", "required": ["ab"],
              "properties": {"ab": {"type": "string", "maxLength": 3}, "ac": {"type": "integer"}}}
    data = np.array([*range(0x20, 0x7F), 0x09, 0xC3, 0xE2], dtype=np.intp)
    results, sizes = [], []
    for together in (True, False):
        dfa = constrain.Compiler(tokenizer).json_schema(schema, strict_properties=False).index.dfa
        frontier, seen, found = [dfa.start], {dfa.start}, []
        while frontier and len(seen) < 200:
            state = frontier.pop()
            cells = dfa.successors(state, data) if together else [dfa.successor(state, int(b)) for b in data]
            found.append((state, cells))
            for cell in cells:
                if cell >= 0 and cell not in seen:
                    seen.add(cell)
                    frontier.append(cell)
        results.append(found)
        sizes.append(dfa.num_states)
    assert results[0] == results[1]
    assert sizes[0] == sizes[1] and len(results[0]) > 50
