"""Exact token bytes, EOS ids and sizes recovered from real tokenizers of three families."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

import constrain
from constrain.testing import token_text, tokenize_continuation
from constrain.vocabulary import SortedTokens

TEXTS = [
    "Hello, world!",
    '{"name": "Ada", "age": 36}',
    "  leading spaces and\ttabs\n\nnewlines",
    "naïve café — 東京タワー 😀👍🏽",
    "x = [1, 2.5e-3, -7]",
]


@pytest.mark.parametrize("text", TEXTS)
def test_token_bytes_reassemble_the_text(tokenizer: object, compiler: constrain.Compiler, text: str) -> None:
    ids = tokenize_continuation(tokenizer, text)
    assert token_text(compiler.vocabulary, ids) == text.encode("utf-8")


def test_special_tokens_have_no_bytes_and_eos_is_declared(tokenizer: object, compiler: constrain.Compiler) -> None:
    vocabulary = compiler.vocabulary
    assert tokenizer.eos_token_id in vocabulary.eos_token_ids
    for token_id, added in tokenizer.added_tokens_decoder.items():
        if added.special:
            assert vocabulary.token_bytes[token_id] is None, added.content
    assert vocabulary.size == max(tokenizer.get_vocab().values()) + 1


def test_every_byte_of_the_alphabet_is_a_single_token(compiler: constrain.Compiler) -> None:
    # All three families can spell any byte they contain on its own (byte-level BPE,
    # byte fallback); this is what lets the regex backend decide liveness on bytes.
    assert compiler.vocabulary.spells_every_byte_alone
    alphabet = compiler.vocabulary.byte_alphabet
    assert all(alphabet[b] for b in b"azAZ09{}\" \n\t")


@pytest.mark.parametrize("lengths", [(1, None), (1, 16), (17, None)])
def test_token_tries_spell_exactly_the_vocabulary(
    compiler: constrain.Compiler, lengths: tuple[int, int | None]
) -> None:
    """Every trie node's prefix, read back through its parents, is its token's bytes; every token
    of those lengths is in the trie once (a token that spells another's bytes as a duplicate);
    each level is in byte order under each parent; and the alphabet is the bytes tokens hold."""
    vocabulary = compiler.vocabulary
    low, high = lengths
    trie = vocabulary.token_trie(low, high)
    expected = {i: b for i, b in enumerate(vocabulary.token_bytes)
                if b and low <= len(b) and (high is None or len(b) <= high)}  # fmt: skip
    found: dict[int, bytes] = {}
    prefixes: list[bytes] = []  # the previous level's node prefixes
    for depth, level in enumerate(trie.levels):
        spelled = [b""] * len(level.byte)
        for parent in range(len(prefixes) if depth else 1):
            above = trie.levels[depth - 1].child_start if depth else np.array([0, len(level.byte)])
            lo, hi = int(above[parent]), int(above[parent + 1])
            children = level.byte[lo:hi].tolist()
            assert children == sorted(children) and len(set(children)) == len(children)
            for node in range(lo, hi):
                spelled[node] = (prefixes[parent] if depth else b"") + bytes([int(level.byte[node])])
        for node, token in enumerate(level.token.tolist()):
            if token >= 0:
                found[token] = spelled[node]
        prefixes = spelled
    for token, same_as in trie.duplicates:
        found[token] = found[same_as]
    assert found == expected
    alphabet = vocabulary.byte_alphabet
    held = {b for piece in vocabulary.token_bytes if piece for b in piece}
    assert {i for i, flag in enumerate(alphabet) if flag} == held


def test_tokens_sort_by_bytes_then_id_as_python_sorts_them(compiler: constrain.Compiler) -> None:
    """The numpy sort (16-byte prefixes as two words, then length and id, long ties re-sorted)
    against Python's own order of (bytes, id) pairs: on the real vocabulary, and on tokens
    made to tie in their first 16 bytes, hold zero bytes where a shorter token ends, repeat."""
    vocabulary = compiler.vocabulary
    real = [(b, i) for i, b in enumerate(vocabulary.token_bytes) if b]
    rng = random.Random(3)
    made: list[tuple[bytes, int]] = []
    for i in range(4000):
        stem = rng.choice([b"", b"a" * 16, b" " * 15, b"\x00" * 16, b"abcdefgh", bytes(range(20))])
        tail = bytes(rng.choice([0, 0, 1, 97, 98, 255]) for _ in range(rng.randint(0, 20)))
        made.append(((stem + tail) or b"x", rng.randint(0, 50)))
    made += [(b, i + 10_000) for b, i in made[:500]]  # equal bytes under other ids
    def read(sorted_tokens: SortedTokens) -> list[tuple[bytes, int]]:
        text = sorted_tokens.text.tobytes()
        return [(text[a : a + n], int(i)) for a, n, i in
                zip(sorted_tokens.starts.tolist(), sorted_tokens.lengths.tolist(), sorted_tokens.ids)]  # fmt: skip

    for tokens in (real, made, made[::-1]):
        assert read(SortedTokens.of(tokens)) == sorted(tokens)
    # by id, as the vocabulary holds them (None and empty: no token)
    pieces = [b if i % 7 else None for i, (b, _) in enumerate(made)] + [b""] + list(vocabulary.token_bytes)
    expected = sorted((b, i) for i, b in enumerate(pieces) if b)
    assert read(SortedTokens.of_pieces(pieces)) == expected


def test_sentencepiece_byte_fallback_and_space_marker(mistral: object) -> None:
    tokenizer = mistral
    vocabulary = constrain.Vocabulary.from_tokenizer(tokenizer)
    vocab = tokenizer.get_vocab()
    assert vocabulary.token_bytes[vocab["<0xF0>"]] == b"\xf0"
    assert vocabulary.token_bytes[vocab["▁Hello"]] == b" Hello"


def test_byte_level_alphabet(smollm2: object) -> None:
    vocabulary = constrain.Vocabulary.from_tokenizer(smollm2)
    vocab = smollm2.get_vocab()
    assert vocabulary.token_bytes[vocab["Ġ{\""]] == b' {"'
    assert vocabulary.token_bytes[vocab["Ċ"]] == b"\n"


def test_size_follows_the_model_and_rejects_narrower(smollm2: object) -> None:
    assert constrain.Vocabulary.from_tokenizer(smollm2, size=49216).size == 49216
    with pytest.raises(constrain.VocabularyError, match="smaller"):
        constrain.Vocabulary.from_tokenizer(smollm2, size=1000)


def test_generation_config_adds_eos_ids(smollm2: object) -> None:
    class GenerationConfig:
        eos_token_id = [2, 1]

    vocabulary = constrain.Vocabulary.from_tokenizer(smollm2, generation_config=GenerationConfig())
    assert vocabulary.eos_token_ids == {1, 2}


def test_tokenizer_without_eos_needs_an_explicit_one(smollm2: object) -> None:
    tokenizer = copy.deepcopy(smollm2)
    tokenizer.eos_token = None
    with pytest.raises(constrain.VocabularyError, match="eos_token_ids"):
        constrain.Vocabulary.from_tokenizer(tokenizer)
    assert constrain.Vocabulary.from_tokenizer(tokenizer, eos_token_ids=[0]).eos_token_ids == {0}
