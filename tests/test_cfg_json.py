"""The bundled JSON grammar on real tokenizers: soundness, completeness, exactness, protocol.

The oracles are lark itself (``Lark(grammar, parser="lalr").parse``) and
``json.loads``; documents are spelled the way each real tokenizer spells them.
"""

from __future__ import annotations

import json
import random

import lark
import numpy as np
import pytest

import constrain
from constrain.cfg import CFGGuide, compile_grammar
from constrain.cfg.grammar import load_grammar_source
from constrain.testing import accepts, finished_walks, token_text, tokenize_continuation

_GUIDES: dict[tuple[int, str], CFGGuide] = {}
JSON_TEXT = load_grammar_source("json")[0]
LARK = lark.Lark(JSON_TEXT, parser="lalr")


def guide_for(compiler: constrain.Compiler, name: str = "json") -> CFGGuide:
    key = (id(compiler.vocabulary), name)
    if key not in _GUIDES:
        _GUIDES[key] = compile_grammar(name, compiler.vocabulary)
    return _GUIDES[key]


def lark_accepts(text: str) -> bool:
    try:
        LARK.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


DOCUMENTS = [
    '{"name": "Ada", "age": 36, "languages": ["en", "fr"], "admin": true, "manager": null}',
    '[1, -2, 3.5, -0.25e-10, 6E+3, 0, 1e5]',
    '{"nested": {"deep": [{"a": [[], {}]}, {"b": ""}]}}',
    '"a string with \\"escapes\\", \\\\ backslashes, \\/ and \\u00e9 \\n\\t\\r\\b\\f"',
    '  42  ',
    'null',
    '{"unicode": "日本語 ünïcödé 😀", "emoji_key_😀": [true, false]}',
    json.dumps({"items": [{"id": i, "price": i * 1.25, "tags": ["x"] * (i % 3)} for i in range(5)], "total": 12.5},
               indent=2),  # fmt: skip
    json.dumps({"matrix": [[1, 2], [3, 4]], "empty": {}, "list": []}, indent="\t"),
    '{\r\n "crlf": 1\r\n}',
    '{"a":1,"b":[2,3],"c":{"d":"e"}}',
    '[{"k":"},{"},{"k2":"],["}]',
]

MUTATION_CHARS = list('{}[],:" 0123456789.eE+-tfn\\\n') + ["u00", "ull", "rue"]


def test_documents_are_valid_json() -> None:
    for doc in DOCUMENTS:
        json.loads(doc)
        assert lark_accepts(doc), doc


def test_real_documents_are_accepted_token_by_token(compiler: constrain.Compiler, tokenizer: object) -> None:
    guide = guide_for(compiler)
    for doc in DOCUMENTS:
        ids = tokenize_continuation(tokenizer, doc)
        assert token_text(compiler.vocabulary, ids) == doc.encode("utf-8")
        assert accepts(guide, ids), doc


def test_random_walks_parse_with_lark_and_json(compiler: constrain.Compiler) -> None:
    guide = guide_for(compiler)
    texts = finished_walks(guide, compiler.vocabulary, random.Random(20261130), count=25, max_tokens=50,
                           eos_probability=0.5)  # fmt: skip
    for text in texts:
        assert lark_accepts(text.decode("utf-8")), text
        json.loads(text)
    assert len(texts) >= 5


def test_mutations_are_rejected_exactly_when_lark_rejects(compiler: constrain.Compiler, tokenizer: object) -> None:
    guide = guide_for(compiler)
    rng = random.Random(7)
    checked = rejected = 0
    for _ in range(60):
        doc = rng.choice(DOCUMENTS)
        position = rng.randrange(len(doc) + 1)
        kind = rng.randrange(3)
        if kind == 0:
            mutated = doc[:position] + rng.choice(MUTATION_CHARS) + doc[position:]
        elif kind == 1:
            mutated = doc[:position] + doc[position + 1 :]
        else:
            mutated = doc[:position] + rng.choice(MUTATION_CHARS) + doc[position + 1 :]
        ids = tokenize_continuation(tokenizer, mutated)
        if token_text(compiler.vocabulary, ids) != mutated.encode("utf-8"):
            continue
        expected = lark_accepts(mutated)
        checked += 1
        rejected += not expected
        assert accepts(guide, ids) == expected, mutated
    assert checked > 40 and rejected > 10


def test_boundary_crossing_tokens_exist_and_work(compiler: constrain.Compiler, tokenizer: object) -> None:
    """Tokens such as ``"},{"`` end one terminal and start others; they must be allowed mid-document."""
    guide = guide_for(compiler)
    vocabulary = compiler.vocabulary
    state = guide.initial_state
    for token in tokenize_continuation(tokenizer, '[{"a": "x'):
        state = guide.advance(state, token)
    allowed = guide.allowed_tokens(state)
    crossing = [i for i, b in enumerate(vocabulary.token_bytes) if b in (b'"},', b'"}', b'",')]
    assert crossing, "the tokenizer has no boundary-crossing token"
    for token in crossing:
        assert allowed[token], vocabulary.token_bytes[token]
    colon = [i for i, b in enumerate(vocabulary.token_bytes) if b == b'":']
    assert colon and not allowed[colon[0]]  # a value string is not a key
    key_state = guide.feed_bytes(guide.initial_state, b'[{"a')
    assert key_state is not None and guide.allowed_tokens(key_state)[colon[0]]


@pytest.mark.slow
def test_fast_mask_equals_token_by_token_emulation(compiler: constrain.Compiler, family: str) -> None:
    if family != "smollm2":
        pytest.skip("one family is enough for this slow reference check")
    guide = guide_for(compiler)
    rng = random.Random(3)
    state = guide.initial_state
    for _ in range(12):
        fast = np.setdiff1d(guide.allowed_token_ids(state), sorted(compiler.vocabulary.eos_token_ids))
        assert np.array_equal(fast, guide.reference_allowed(state)), state
        if not fast.size:
            break
        state = guide.advance(state, int(rng.choice(fast)))


def test_protocol_details(compiler: constrain.Compiler) -> None:
    guide = guide_for(compiler)
    vocabulary = compiler.vocabulary
    eos = min(vocabulary.eos_token_ids)
    single = {piece: i for i, piece in enumerate(vocabulary.token_bytes) if piece in (b"1", b"]", b"x", b"[")}
    state = guide.initial_state
    hash(state)
    assert not guide.is_final(state)
    with pytest.raises(constrain.TokenRejected):
        guide.advance(state, eos)
    with pytest.raises(constrain.TokenRejected):
        guide.advance(state, single[b"x"])
    state = guide.advance(state, single[b"["])
    assert not guide.allowed_tokens(state)[eos]
    state = guide.advance(state, single[b"1"])
    assert not guide.is_final(state)
    state = guide.advance(state, single[b"]"])
    assert guide.is_final(state) and guide.allowed_tokens(state)[eos]
    done = guide.advance(state, eos)
    assert guide.is_final(done)
    assert np.flatnonzero(guide.allowed_tokens(done)).tolist() == sorted(vocabulary.eos_token_ids)
    assert guide.advance(done, eos) == done
    with pytest.raises(constrain.TokenRejected):
        guide.advance(done, single[b"1"])
    out = constrain.allocate_bitmask(vocabulary.size)
    guide.fill_bitmask(state, out)
    assert np.array_equal(constrain.bitmask_to_bool(out, vocabulary.size), guide.allowed_tokens(state))


def test_number_then_separator_in_one_token(compiler: constrain.Compiler) -> None:
    """A number is only complete when a following byte ends it: ``1`` then ``,`` or ``]`` in one token."""
    guide = guide_for(compiler)
    vocabulary = compiler.vocabulary
    state = guide.initial_state
    state = guide.feed_bytes(state, b"[1")
    assert state is not None
    mask = guide.allowed_tokens(state)
    for piece in (b",", b"]", b"0", b".", b"e"):
        ids = [i for i, b in enumerate(vocabulary.token_bytes) if b == piece]
        assert ids and mask[ids[0]], piece
    bad = [i for i, b in enumerate(vocabulary.token_bytes) if b == b"-"]
    assert bad and not mask[bad[0]]


def test_cached_masks_equal_masks_computed_afresh(compiler: constrain.Compiler, tokenizer: object, family: str) -> None:
    """Deeply nested documents reuse masks computed at other depths; they must be the exact ones."""
    if family != "smollm2":
        pytest.skip("one family is enough")
    warm = guide_for(compiler)
    fresh = compile_grammar("json", compiler.vocabulary, limits=constrain.Limits(max_cached_masks=1))
    fresh.index.signature_cache_size = 0  # (the exact-state cache keeps the last mask only)
    rng = random.Random(9)

    def nested(depth: int) -> object:
        if depth == 0:
            return rng.choice([1, "s", None, [], {}])
        return rng.choice([[nested(depth - 1), 2], {"k": nested(depth - 1)}, [{"a": nested(depth - 1)}]])

    for doc in [json.dumps(nested(d)) for d in (6, 3, 8, 5, 7)]:
        warm_state, fresh_state = warm.initial_state, fresh.initial_state
        for token in tokenize_continuation(tokenizer, doc):
            assert np.array_equal(warm.allowed_tokens(warm_state), fresh.allowed_tokens(fresh_state)), doc
            warm_state = warm.advance(warm_state, token)
            fresh_state = fresh.advance(fresh_state, token)
        assert warm.is_final(warm_state) and fresh.is_final(fresh_state)
