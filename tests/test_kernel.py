"""The compiled kernels (constrain/_kernel.c) against the numpy paths they replace.

The numpy paths are the reference: they are what runs where the package was installed
without a C compiler, and they are plain array code. Each test below runs both on the same
input and asserts the same answer, on real vocabularies and on the states real guides visit,
including states whose rows are not built yet (the kernel hands those back to be expanded).
"""

from __future__ import annotations

import itertools
import json
import os
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import constrain
from constrain import kernel
from constrain.regex import algebra, automaton
from constrain.guide import allocate_bitmask, bitmask_from_token_ids
from constrain.testing import random_walk

needs_kernel = pytest.mark.skipif(kernel.compiled is None, reason="not built, or CONSTRAIN_KERNEL=numpy")

COMPILED = kernel.compiled

#: Schemas whose automata hold what the walk meets in real ones: key tries, counted strings,
#: member sets, a product (``not``), numbers, nested arrays.
SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "kind": {"enum": ["alpha", "beta", "gamma delta"]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 4},
            "size": {"type": "number", "minimum": 0},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
        },
        "required": ["name", "kind"],
    },
    {"type": "string", "minLength": 3, "maxLength": 12, "not": {"pattern": "^ab"}},
    {"type": "array", "items": {"type": "integer", "multipleOf": 3}, "minItems": 1, "maxItems": 6},
]


def _walks(monkeypatch: pytest.MonkeyPatch, index: Any, state: int, trie: Any, skip: Any = None) -> list[Any]:
    """The walk from ``state`` by the kernel and by numpy, each as (id, state) pairs in id order;
    the kernel goes first on even states, numpy on odd ones (so each meets unexpanded states)."""
    results = {}
    for name in (("compiled", "numpy") if state % 2 == 0 else ("numpy", "compiled")):
        monkeypatch.setattr(kernel, "compiled", COMPILED if name == "compiled" else None)
        ids, states = index._walk(state, trie, skip)
        order = np.lexsort((states, ids))
        results[name] = (ids[order].tolist(), states[order].tolist())
    monkeypatch.setattr(kernel, "compiled", COMPILED)
    return [results["compiled"], results["numpy"]]


@needs_kernel
@pytest.mark.parametrize("schema", SCHEMAS, ids=["object", "not", "array"])
def test_the_compiled_walk_reaches_what_the_numpy_walk_reaches(
    monkeypatch: pytest.MonkeyPatch, tokenizer: object, schema: dict[str, Any]
) -> None:
    guide = constrain.Compiler(tokenizer).json_schema(schema)  # a compiler of its own: every row unbuilt
    index, vocabulary = guide.index, guide.vocabulary
    rng = random.Random(7)
    visited: set[int] = set()
    for _ in range(6):
        state = guide.initial_state
        ids, _ended = random_walk(guide, vocabulary, rng, max_tokens=40)
        for token_id in ids:
            visited.add(state)
            state = guide.advance(state, token_id)
    compared = 0
    skip = np.zeros(256, dtype=bool)
    skip[ord('"')] = True
    for state in sorted(visited):
        for trie in (index._trie, index._short, index._long):
            compiled, reference = _walks(monkeypatch, index, state, trie)
            assert compiled == reference, f"state {state}: the walks differ"
            compared += len(reference[0])
        compiled, reference = _walks(monkeypatch, index, state, index._trie, skip)
        assert compiled == reference, f"state {state}, first byte '\"' skipped: the walks differ"
    assert len(visited) > 5 and compared > 100  # the walks reached states with tokens to compare


@needs_kernel
def test_rows_and_masks_are_the_same_either_way(monkeypatch: pytest.MonkeyPatch, smollm2: object) -> None:
    """Whole guides, one compiled with the kernel and one without: the same mask at every step
    of a real instance's tokens (rows sorted and packed by scatter/gather vs argsort/packbits)."""
    instance = {"name": "Ada Lovelace", "kind": "gamma delta", "tags": ["x", "yz"], "size": 12.5, "nested": {"on": True}}
    masks: dict[str, list[list[int]]] = {}
    for name in ("compiled", "numpy"):
        monkeypatch.setattr(kernel, "compiled", COMPILED if name == "compiled" else None)
        guide = constrain.Compiler(smollm2).json_schema(SCHEMAS[0])
        state = guide.initial_state
        masks[name] = []
        for token_id in smollm2.encode(json.dumps(instance), add_special_tokens=False):  # type: ignore[attr-defined]
            mask = allocate_bitmask(guide.vocab_size)
            guide.fill_bitmask(state, mask)
            masks[name].append(mask.tolist())
            state = guide.advance(state, token_id)
        assert guide.is_final(state)
    assert masks["compiled"] == masks["numpy"]


def _canonical_node(index: Any, node: Any) -> tuple[Any, ...]:
    """A walk node's content, independent of the order its groups were met in and of the numbers
    a lexer gives its emissions as it meets them (an emission by its terminals' names)."""
    emits = index.grammar.emits

    def emission(e: int) -> Any:
        return ("",) if e < 0 else (emits.names[emits.raw[e]], emits.final_name[e])

    ended = sorted(_ids(index, node.ended)) if node.ended is not None else None
    inside = sorted((names, emission(matched), tuple(sorted(_ids(index, tokens))))
                    for _, _, members in node.inside for names, matched, tokens in members)  # fmt: skip
    groups = sorted((emission(e), resume, tuple(index._row_sets[rows].tolist())) for e, resume, rows in node.groups)
    return ended, inside, groups


def _ids(index: Any, tokens: Any) -> list[int]:
    if tokens.dtype == np.uint32:  # packed bits
        return np.flatnonzero(np.unpackbits(tokens.view(np.uint8), bitorder="little")).tolist()
    return sorted(set(tokens.tolist()))


@needs_kernel
@pytest.mark.parametrize("name", ["json", "sql"])
def test_grammar_walks_are_the_same_either_way(monkeypatch: pytest.MonkeyPatch, smollm2: object, name: str) -> None:
    """The grammar index's walks (kernel.lex_walk, or numpy level by level): the same mask at every
    step of random walks, and every walk from a lexer state the same tokens grouped the same way."""
    from constrain.cfg import compile_grammar

    vocabulary = constrain.Vocabulary.from_tokenizer(smollm2)
    guides = {}
    for kind in ("compiled", "numpy"):
        monkeypatch.setattr(kernel, "compiled", COMPILED if kind == "compiled" else None)
        guides[kind] = compile_grammar(name, vocabulary)
    rng = random.Random(11)
    steps = 0
    mask, other = allocate_bitmask(vocabulary.size), allocate_bitmask(vocabulary.size)
    for _ in range(8):
        monkeypatch.setattr(kernel, "compiled", COMPILED)
        ids, _ended = random_walk(guides["compiled"], vocabulary, rng, max_tokens=60)
        states = {kind: guide.initial_state for kind, guide in guides.items()}
        for token_id in ids:
            for kind, guide in guides.items():
                monkeypatch.setattr(kernel, "compiled", COMPILED if kind == "compiled" else None)
                guide.fill_bitmask(states[kind], mask if kind == "compiled" else other)
                states[kind] = guide.advance(states[kind], token_id)
            assert np.array_equal(mask, other)
            steps += 1
    walks = {}
    for kind, guide in guides.items():
        # Every walk built from a lexer context's start (numbered alike in both: the contexts are
        # added at compile; other lexer states are numbered as each walk meets them), by what it
        # walked: row sets by content.
        index = guide.index
        starts = set(guide.grammar.start_of_state) | set(guide.grammar.start_after_ignore_of_state)
        found = {("root", q): node for q, node in index._roots.items() if q in starts}
        for (q, rows, offset, drop), node in index._nodes.items():
            if q in starts:
                found[(q, tuple(index._row_sets[rows].tolist()), offset, drop)] = node
        walks[kind] = {key: _canonical_node(index, node) for key, node in found.items()}
    common = set(walks["compiled"]) & set(walks["numpy"])
    for key in common:
        assert walks["compiled"][key] == walks["numpy"][key], key[:1]
    assert steps > 100 and len(common) > 20


@needs_kernel
def test_lex_walk_refuses_bad_arguments() -> None:
    table = np.full((2, 256), -1, np.int32)
    emit, possible, final = np.full(2, -1, np.int32), np.zeros(2, np.int32), np.zeros(2, bool)
    matrix, lengths = np.zeros((3, 4), np.uint8), np.full(3, 2, np.int64)
    rows = np.arange(3, dtype=np.int64)
    walkers, out = np.zeros((3, 4), np.int64), np.zeros((3, 3), np.int64)
    walkers[:] = (0, -1, -1, 0)  # state 0, no match yet, at byte 0
    assert COMPILED.lex_walk(table, emit, final, possible, matrix, 4, lengths, rows, None, walkers, out, 0, False) == 0
    assert out[:, 0].tolist() == [1, 1, 1] and out[:, 1].tolist() == [-1, -1, -1]  # dead at once, no match
    with pytest.raises(ValueError, match="4 and 3 items"):
        COMPILED.lex_walk(table, emit, final, possible, matrix, 4, lengths, rows, None, walkers[:2], out, 0, False)
    with pytest.raises(IndexError, match="outside the matrix"):
        COMPILED.lex_walk(table, emit, final, possible, matrix, 4, lengths, rows + 5, None, walkers, out, 0, False)
    walkers[0, 0] = 7
    with pytest.raises(ValueError, match="outside the lexer"):
        COMPILED.lex_walk(table, emit, final, possible, matrix, 4, lengths, rows, None, walkers, out, 0, False)


@needs_kernel
def test_scatter_and_gather_agree_with_numpy() -> None:
    rng = np.random.default_rng(3)
    for vocab_size in (1, 31, 32, 33, 49_152, 128_256):
        for count in (0, 1, min(vocab_size, 500), vocab_size):
            ids = rng.choice(vocab_size, size=count, replace=False).astype(np.int32)
            states = rng.integers(0, 1 << 30, size=count).astype(np.int32)
            words = np.zeros((vocab_size + 31) // 32, np.int32)
            dense = np.empty(vocab_size, np.int32)
            COMPILED.scatter(ids, states, words, dense)
            bits = np.zeros(words.size * 32, dtype=bool)
            bits[ids] = True
            assert np.array_equal(words, np.packbits(bits, bitorder="little").view("<i4"))
            out_ids, out_states = np.empty(count, np.int32), np.empty(count, np.int32)
            assert COMPILED.gather(words, dense, out_ids, out_states) == count
            order = np.argsort(ids)
            assert np.array_equal(out_ids, ids[order]) and np.array_equal(out_states, states[order])
            assert np.array_equal(bitmask_from_token_ids(ids, vocab_size), words)


@needs_kernel
def test_unpack_agrees_with_numpy(monkeypatch: pytest.MonkeyPatch, smollm2: object) -> None:
    rng = np.random.default_rng(5)
    # Both paths (AVX2's 32 tokens a step where the CPU has it, and the byte table), on sizes
    # around their steps, into byte and bool arrays.
    sizes = (1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 95, 96, 97, 200, 49_152, 128_256)
    for vocab_size, portable, dtype in itertools.product(sizes, (False, True), (np.uint8, np.bool_)):
        words = rng.integers(-(2**31), 2**31 - 1, size=(vocab_size + 31) // 32, dtype=np.int32)
        out = np.full(vocab_size, 7, np.uint8).view(dtype)
        COMPILED.unpack(words, out, portable)
        expected = np.unpackbits(words.view(np.uint8), count=vocab_size, bitorder="little")
        assert np.array_equal(out.view(np.uint8), expected), (vocab_size, portable)
    with pytest.raises(ValueError, match="more items"):
        COMPILED.unpack(np.zeros(1, np.int32), np.empty(33, np.uint8))
    # and through a guide, in a narrow state and a wide one (a string's interior): the same bool arrays
    guide = constrain.Compiler(smollm2).json_schema(SCHEMAS[0])
    states = [guide.initial_state]
    for token_id in smollm2.encode('{"name": "Ad', add_special_tokens=False):  # type: ignore[attr-defined]
        states.append(guide.advance(states[-1], token_id))
    masks = [guide.allowed_tokens(state) for state in states]
    monkeypatch.setattr(kernel, "compiled", None)
    for state, mask in zip(states, masks):
        assert mask.dtype == np.bool_ and np.array_equal(mask, guide.allowed_tokens(state))
    assert 1 < masks[0].sum() < 100 < masks[-1].sum()


@needs_kernel
def test_bad_arguments_are_errors_not_reads_out_of_bounds() -> None:
    words = np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="outside the mask"):
        COMPILED.scatter(np.array([64], np.int32), None, words, None)
    with pytest.raises(ValueError, match="outside the mask"):
        COMPILED.scatter(np.array([-1], np.int32), None, words, None)
    with pytest.raises(TypeError, match="4-byte items"):
        COMPILED.scatter(np.array([1], np.int64), None, words, None)
    with pytest.raises(ValueError, match="more bits set"):
        COMPILED.gather(np.array([3], np.int32), np.zeros(32, np.int32), np.empty(1, np.int32), np.empty(1, np.int32))
    table = np.full((1, 256), -1, np.int32)
    table[0, 97] = 5  # a state past the table's rows
    one = np.ones(1, np.uint8)
    # node 0 ("a", one child), node 1 ("ab"), node 2 the root
    trie = (np.array([97, 98, 0], np.uint8), np.full(3, -1, np.int32), np.array([1, 2, 0], np.int32),
            np.array([2, 2, 1], np.int32))  # fmt: skip
    out = [np.empty(3, np.int32) for _ in range(4)]
    with pytest.raises(ValueError, match="outside its array"):
        COMPILED.walk(table, one, *trie, 2, None, np.array([2], np.int32), np.array([0], np.int32), *out)


@needs_kernel
def test_a_task_with_a_pending_successor_comes_back_whole() -> None:
    """A cell below DEAD is a successor not built yet: the task that would read it is handed back
    before any of its children is visited, so resuming it finds each token once."""
    table = np.full((2, 256), -1, np.int32)
    table[0, 97] = 1  # "a" leads to state 1
    table[0, 98] = -2  # "b" is pending
    expanded = np.ones(2, np.uint8)
    # node 0 "a" (a token), node 1 "b" (a token), node 2 the root
    trie = (np.array([97, 98, 0], np.uint8), np.array([10, 11, -1], np.int32), np.array([0, 0, 0], np.int32),
            np.array([0, 0, 2], np.int32))  # fmt: skip
    out = [np.empty(3, np.int32) for _ in range(4)]
    assert COMPILED.walk(table, expanded, *trie, 2, None, np.array([2], np.int32), np.array([0], np.int32), *out) == (0, 1)
    assert (out[2][0], out[3][0]) == (2, 0)  # the root's task, from state 0, untouched
    table[0, 98] = 1
    assert COMPILED.walk(table, expanded, *trie, 2, None, np.array([2], np.int32), np.array([0], np.int32), *out) == (2, 0)
    assert sorted(out[0][:2].tolist()) == [10, 11]


def _random_row(rng: random.Random) -> np.ndarray:
    """256 cells in a few runs: dead stretches, one target over a range, single bytes (digits)."""
    row = np.full(256, -1, np.int32)
    for _ in range(rng.randrange(0, 8)):
        low = rng.randrange(256)
        high = min(255, low + rng.choice((0, 0, 1, 9, 40, 200)))
        row[low : high + 1] = rng.choice((-1, rng.randrange(6), rng.randrange(1 << 30)))
    return row


@needs_kernel
def test_merge_agrees_with_numpy() -> None:
    """A product state's successors and spans, compiled and numpy, on random rows of one to six
    parts (some dead), in intersections and differences; and a wrong row is refused."""
    rng = random.Random(11)
    nonempty = 0
    for _ in range(3000):
        rows: list[Any] = [_random_row(rng) for _ in range(rng.randrange(1, 7))]
        for j in range(1, len(rows)):
            if rng.random() < 0.2:
                rows[j] = None
        subtract = rng.random() < 0.5
        if not subtract and any(row is None for row in rows):
            rows = [row for row in rows if row is not None]
        expected = algebra.merge_rows(rows, subtract)
        assert COMPILED.merge(rows, subtract) == expected
        nonempty += bool(expected[0])
        for successor in expected[0]:  # and each span's byte really leads to its tuple
            assert all(isinstance(cell, int) for cell in successor)
        for low, high, k in expected[1]:
            for byte in (low, high):
                cells = tuple(int(row[byte]) if row is not None else -1 for row in rows)
                assert cells == expected[0][k]
    assert nonempty > 1000
    with pytest.raises(ValueError, match="256 int32"):
        COMPILED.merge([np.zeros(255, np.int32)], False)
    with pytest.raises(ValueError, match="256 int32"):
        COMPILED.merge([np.zeros(256, np.int64)], False)
    with pytest.raises(ValueError, match="at least one"):
        COMPILED.merge([], False)


def test_sweep_runs_cut_moves_where_they_change() -> None:
    """The Python cut of a state's moves (``sweep_runs``) on random sorted moves (ranges that
    nest, touch and repeat, targets shared and distinct): each run's targets are exactly the
    moves over its bytes, and no move begins or ends inside a run."""
    rng = random.Random(12)
    overlapping = 0
    for _ in range(3000):
        moves = []
        for _ in range(rng.randrange(0, 12)):
            low = rng.randrange(256)
            high = min(255, low + rng.choice((0, 0, 1, 9, 40, 200)))
            moves.append((low, high, (rng.randrange(5), (rng.randrange(3),) * rng.randrange(2))))
        moves.sort()
        runs = automaton.sweep_runs(moves)
        overlapping += any(isinstance(targets, frozenset) for _, _, targets in runs)
        for low, high, targets in runs:
            covering = {move for lo, hi, move in moves if lo <= low and high <= hi}
            assert covering == (set(targets) if isinstance(targets, frozenset) else {targets})
            assert not any(lo <= low <= hi < high or low < lo <= high for lo, hi, _ in moves)
        assert {b for lo, hi, _ in runs for b in range(lo, hi + 1)} == {b for lo, hi, _ in moves for b in range(lo, hi + 1)}
    assert overlapping > 1000


@needs_kernel
def test_expand_agrees_with_python() -> None:
    """A subset state's row, compiled (``expand``) and through ``sweep_runs`` + ``LazyDFA._place``:
    the same cells, placed runs, pending codes and pending entries, on random member sets (edges
    that nest, touch, repeat and lead to shared targets), extra moves, and successors known,
    unknown and dead; and wrong arguments are refused."""
    rng = random.Random(13)
    overlapping = 0
    for _ in range(3000):
        edges: list[list[tuple[int, int, int]]] = []
        for _ in range(8):
            edge_list = []
            for _ in range(rng.choice((0, 1, 1, 2, 4))):
                low = rng.randrange(256)
                edge_list.append((low, min(255, low + rng.choice((0, 0, 1, 9, 40, 200))), rng.randrange(5)))
            edges.append(edge_list)
        members = frozenset((rng.randrange(8), (rng.randrange(2),) * rng.randrange(2)) for _ in range(rng.randrange(0, 5)))
        extra = []
        for _ in range(rng.choice((0, 0, 1, 3))):
            low = rng.randrange(256)
            extra.append((low, min(255, low + rng.choice((0, 5, 90))), (rng.randrange(8), (rng.randrange(3),))))
        moves = sorted([(lo, hi, (t, c)) for q, c in members for lo, hi, t in edges[q]] + extra)
        runs = automaton.sweep_runs(moves)
        overlapping += any(isinstance(targets, frozenset) for _, _, targets in runs)
        targets_seen = [targets for _, _, targets in runs]
        known = {t: rng.choice((-1, rng.randrange(50))) for t in targets_seen if rng.random() < 0.5}
        state = rng.randrange(4)
        before = [("old", 0, 0, (0, ()))] * rng.randrange(3)
        python = SimpleNamespace(_moves=known, _pending=list(before), table=np.full((4, 256), -1, np.int32))
        pending: list[int] = []
        placed: list[Any] = []
        for low, high, run_targets in runs:
            automaton.LazyDFA._place(python, state, low, high, run_targets, pending, placed)  # type: ignore[arg-type]
        compiled_pending = list(before)
        table = np.full((4, 256), -1, np.int32)
        assert COMPILED.expand(state, members, edges, extra, known, compiled_pending, table[state]) == (placed, pending)
        assert compiled_pending == python._pending
        assert np.array_equal(table, python.table)
    assert overlapping > 500
    with pytest.raises(ValueError, match="256 int32"):
        COMPILED.expand(0, frozenset(), [], [], {}, [], np.zeros(255, np.int32))
    with pytest.raises(TypeError, match="frozenset"):
        COMPILED.expand(0, [(0, ())], [[]], [], {}, [], np.zeros(256, np.int32))
    with pytest.raises(IndexError, match="state 3"):
        COMPILED.expand(0, frozenset([(3, ())]), [[]], [], {}, [], np.zeros(256, np.int32))
    with pytest.raises(TypeError, match="low, high, target"):
        COMPILED.expand(0, frozenset([(0, ())]), [[(1, 2)]], [], {}, [], np.zeros(256, np.int32))
    with pytest.raises(ValueError, match="0..255"):
        COMPILED.expand(0, frozenset(), [], [(5, 4, (0, ()))], {}, [], np.zeros(256, np.int32))


@needs_kernel
def test_closure_agrees_with_python() -> None:
    """The plain part of an epsilon closure, compiled and Python, on random NFAs (cycles, dead
    states, special states met and not entered, capped states dropped under their counts or
    walked, a seen set carried in); and wrong tables are refused."""
    rng = random.Random(14)
    met_any = capped_out = 0
    free = 1 << 40
    for _ in range(2000):
        n = rng.randrange(1, 30)
        epsilon = [[rng.randrange(n) for _ in range(rng.choice((0, 1, 1, 2, 3)))] for _ in range(n)]
        edges = [[(0, 1, rng.randrange(n))] if rng.random() < 0.4 else [] for _ in range(n)]
        live = bytearray(rng.random() < 0.85 for _ in range(n))
        special = tuple({q: None for q in rng.sample(range(n), rng.randrange(0, min(n, 4) + 1))} for _ in range(2))
        counters = tuple(rng.choice((0, 3, 7, free + 2)) for _ in range(rng.randrange(1, 4)))
        # a capped state may also be special: the cap is looked up first (as ``LazyDFA._closure`` fills it)
        caps = {q: (rng.randrange(len(counters)), rng.randrange(-1, 9)) for q in rng.sample(range(n), rng.randrange(0, n + 1) // 2)}
        q = rng.randrange(n)
        seen = {q} | set(rng.sample(range(n), rng.randrange(0, min(n, 2) + 1)))
        python_seen, uncapped_seen = set(seen), set(seen)
        expected = automaton.plain_closure(q, python_seen, epsilon, edges, live, n - 1, special, caps, counters, free)
        assert COMPILED.closure(q, seen, epsilon, edges, live, n - 1, special, caps, counters, free) == expected
        assert seen == python_seen
        met_any += bool(expected[1])
        uncapped = automaton.plain_closure(q, uncapped_seen, epsilon, edges, live, n - 1, special, {}, counters, free)
        capped_out += uncapped != expected
    assert met_any > 300 and capped_out > 300
    with pytest.raises(IndexError, match="state 3"):
        COMPILED.closure(0, {0}, [[3]], [[]], bytearray(b"\x01"), 0, (), {}, (), free)
    with pytest.raises(TypeError, match="dicts"):
        COMPILED.closure(0, {0}, [[]], [[]], bytearray(b"\x01"), 0, ([],), {}, (), free)
    with pytest.raises(IndexError, match="slot 2"):
        COMPILED.closure(0, {0}, [[]], [[]], bytearray(b"\x01"), 0, (), {0: (2, 5)}, (1,), free)
    with pytest.raises(TypeError, match="pairs"):
        COMPILED.closure(0, {0}, [[]], [[]], bytearray(b"\x01"), 0, (), {0: 5}, (1,), free)


@needs_kernel
def test_lexer_closure_agrees_with_python() -> None:
    """A lexer state's threads, compiled and Python, on random priority NFAs (cycles, dead
    states, accepting states that cut the walk, pending states that stop it); and wrong tables
    are refused."""
    from constrain.cfg.lexer import priority_closure

    rng = random.Random(15)
    stopped = cut = 0
    for _ in range(3000):
        n = rng.randrange(1, 40)
        eps = [[rng.randrange(n) for _ in range(rng.choice((0, 1, 1, 2, 3)))] for _ in range(n)]
        edges = [[(0, 1, rng.randrange(n))] if rng.random() < 0.5 else [] for _ in range(n)]
        accept = [rng.randrange(5) if rng.random() < 0.1 else -1 for _ in range(n)]
        live = bytearray(rng.random() < 0.85 for _ in range(n))
        pending = set(rng.sample(range(n), rng.choice((0, 0, 0, 1))))
        seeds = rng.sample(range(n), rng.randrange(1, min(n, 4) + 1))
        expected = priority_closure(seeds, live, pending, accept, edges, eps)
        assert COMPILED.lexer_closure(seeds, live, pending, accept, edges, eps) == expected
        stopped += expected[0] is None
        cut += expected[0] is not None and expected[1] >= 0
    assert stopped > 100 and cut > 300
    for _ in range(3):  # the seen marks of one call never leak into the next
        assert COMPILED.lexer_closure([0], bytearray(b"\x01\x01"), set(), [-1, -1], [[(0, 1, 1)], []], [[1], []]) == ((0,), -1)
    with pytest.raises(IndexError, match="state 3"):
        COMPILED.lexer_closure([3], bytearray(b"\x01"), set(), [-1], [[]], [[]])
    with pytest.raises(TypeError, match="lists"):
        COMPILED.lexer_closure([0], bytearray(b"\x01"), set(), [-1], [None], [[]])


@needs_kernel
def test_relocate_agrees_with_python() -> None:
    """A slice of NFA states copied and moved, compiled and as ``ByteNFA._instantiate``'s Python
    path writes it (edges that leave the slice dropped); and a slice outside the tables is refused."""
    rng = random.Random(15)
    for _ in range(500):
        n = rng.randrange(1, 40)
        edges = [[(lo, lo + rng.randrange(3), rng.randrange(n)) for lo in rng.sample(range(250), rng.randrange(3))]
                 for _ in range(n)]  # fmt: skip
        epsilon = [[rng.randrange(n) for _ in range(rng.randrange(3))] for _ in range(n)]
        base = rng.randrange(n)
        top = rng.randrange(base, n + 1)
        offset = n - base
        expected_edges = edges + [[(lo, hi, t + offset) for lo, hi, t in edges[q] if base <= t < top]
                                  for q in range(base, top)]  # fmt: skip
        expected_epsilon = epsilon + [[t + offset for t in epsilon[q] if base <= t < top] for q in range(base, top)]
        COMPILED.relocate(edges, epsilon, base, top, offset)
        assert edges == expected_edges and epsilon == expected_epsilon
    with pytest.raises(IndexError, match="outside"):
        COMPILED.relocate([[]], [[]], 0, 2, 1)


@needs_kernel
def test_coreachable_agrees_with_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which states reach the target, compiled and as ``ByteNFA._coreachable``'s Python loop
    finds them, on random fragments: moves out of the fragment, unbuilt stubs passing to the
    state after them, blocked loops that never take their last epsilon move (the same target
    reached another way too); and bad arguments are errors."""
    rng = random.Random(16)
    differ = 0
    for _ in range(1500):
        n = rng.randrange(2, 40)
        first = rng.randrange(n - 1)
        edges = [[(lo, lo, rng.randrange(first, n)) for lo in rng.sample(range(250), rng.randrange(3))]
                 for _ in range(n)]  # fmt: skip
        epsilon = [[rng.randrange(n) for _ in range(rng.randrange(4))] for _ in range(n)]
        deferred = {q: None for q in range(first, n - 1) if rng.random() < 0.1}
        blocked = {q for q in range(first, n) if epsilon[q] and epsilon[q][-1] >= first
                   and rng.random() < 0.2}
        target = rng.randrange(first, n)
        nfa = SimpleNamespace(edges=edges, epsilon=epsilon, deferred=deferred,
                              _blocked_loops=lambda _first: blocked)
        monkeypatch.setattr(kernel, "compiled", None)
        expected = automaton.ByteNFA._coreachable(nfa, first, target)  # type: ignore[arg-type]
        monkeypatch.setattr(kernel, "compiled", COMPILED)
        assert COMPILED.coreachable(edges, epsilon, first, target, deferred, blocked) == expected
        differ += expected != COMPILED.coreachable(edges, epsilon, first, target, deferred, set())
    assert differ > 50  # blocked loops changed the answer often enough to be tested
    with pytest.raises(IndexError, match="outside"):
        COMPILED.coreachable([[]], [[]], 0, 1, {}, set())
    with pytest.raises(TypeError, match="tuple"):
        COMPILED.coreachable([[(1, 2)]], [[]], 0, 0, {}, set())


@needs_kernel
def test_products_are_the_same_either_way(monkeypatch: pytest.MonkeyPatch, smollm2: object) -> None:
    """Guides whose automata are products (``not``, an overlapping ``oneOf``, ``allOf`` of
    patterns), compiled with the merge, sweep, place, closure and relocate kernels and without: the same rows at every state a walk of
    random tokens meets."""
    schemas: list[dict[str, Any]] = [
        SCHEMAS[1],
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "maxLength": 4}]},
        {"type": "integer", "allOf": [{"multipleOf": 3}, {"not": {"multipleOf": 5}}]},
    ]
    for schema in schemas:
        guides = {}
        for name in ("compiled", "numpy"):
            monkeypatch.setattr(kernel, "compiled", COMPILED if name == "compiled" else None)
            guides[name] = constrain.Compiler(smollm2).json_schema(schema)
        monkeypatch.setattr(kernel, "compiled", COMPILED)
        rng = random.Random(5)
        steps = 0
        for _ in range(8):
            ids, _ended = random_walk(guides["compiled"], guides["compiled"].vocabulary, rng, max_tokens=12)
            states = {name: guide.initial_state for name, guide in guides.items()}
            for token_id in ids:
                for name, guide in guides.items():
                    monkeypatch.setattr(kernel, "compiled", COMPILED if name == "compiled" else None)
                    assert guide.allowed_tokens(states[name])[token_id], f"{schema}: {name} refuses a token"
                masks = {name: guide.allowed_tokens(states[name]) for name, guide in guides.items()}
                assert np.array_equal(masks["compiled"], masks["numpy"]), schema
                states = {name: guide.advance(states[name], token_id) for name, guide in guides.items()}
                steps += 1
        monkeypatch.setattr(kernel, "compiled", COMPILED)
        assert steps > 20


def test_the_package_build_compiled_the_kernels() -> None:
    """``pip install`` (the README's commands) builds the extension here: without this, a broken
    build would pass every other test on the numpy paths and lose the speed silently."""
    if os.environ.get("CONSTRAIN_KERNEL", "").lower() == "numpy":
        pytest.skip("CONSTRAIN_KERNEL=numpy asks for the numpy paths")
    assert kernel.name == "compiled"
