"""Masks inside long counted repeats equal a brute-force oracle, token by token.

Long bounded repeats (``maxLength: 300``, ``{3,150}``) run on a counter, and the
token index shares one row between the counts that no guard can tell apart over a
token's length (``LazyDFA.shared``). Sharing is only right if the shared row is
exactly the row each count would have had, including near the bounds, where a
long token would cross ``high``. The oracle here knows nothing of automata: a
token is allowed after a prefix exactly when the ``regex`` module says the prefix
plus the token's text can still be completed to a full match (``partial=True``),
and EOS exactly when the prefix already matches.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import regex

import constrain
from constrain.testing import tokenize_continuation

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

#: (pattern, a matching text whose length runs close to the upper bound)
CASES = [
    (r'"[^"\\]{0,300}"', '"' + "counted characters, " * 14 + "end" + '"'),
    (r"(ab|c){3,150}d", "ab" * 60 + "c" * 25 + "d"),
    (r"(\[[a-z ]{0,60}\],){1,40}x", "[the quick brown fox jumps over the lazy dog again and agai],[short]," * 3 + "x"),
    (r"[a-z]{40,500}", "abcdefghijklmnopqrstuvwxyz" * 19),
]

#: A JSON Schema whose strings and arrays are long bounded repeats; its regex is the oracle.
SCHEMA = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 60},
        "note": {"type": "string", "minLength": 5, "maxLength": 120},
    },
    "required": ["tags", "note"],
}
INSTANCE = {"tags": [f"tag number {i:02d} with words" for i in range(12)], "note": "n" * 100 + " nearly full"}


def oracle_row(pattern: regex.Pattern[str], prefix: str, vocabulary: constrain.Vocabulary) -> set[int]:
    allowed = set()
    for token_id, spelled in enumerate(vocabulary.token_bytes):
        if not spelled:
            continue
        try:
            text = prefix + spelled.decode("utf-8")
        except UnicodeDecodeError:
            continue  # half a character: the str oracle can't judge it (tests elsewhere cover bytes)
        if pattern.fullmatch(text, partial=True):
            allowed.add(token_id)
    if pattern.fullmatch(prefix):
        allowed |= set(vocabulary.eos_token_ids)
    return allowed


def checked_steps(count: int) -> list[int]:
    """A spread of steps plus the last ones, where counts approach their upper bounds."""
    return sorted(set(np.linspace(0, count, 6, dtype=int).tolist()) | set(range(max(0, count - 4), count + 1)))


def assert_masks_match(guide: object, source: str, text: str, tokenizer: object, vocabulary: constrain.Vocabulary) -> None:
    pattern = regex.compile(source)
    ids = tokenize_continuation(tokenizer, text)
    decodable = np.array([b is not None and _decodes(b) for b in vocabulary.token_bytes])
    states = [guide.initial_state]  # type: ignore[attr-defined]
    for token_id in ids:
        states.append(guide.advance(states[-1], token_id))  # type: ignore[attr-defined]
    spelled = b""
    prefixes = [""]
    for token_id in ids:
        spelled += vocabulary.token_bytes[token_id]
        prefixes.append(spelled.decode("utf-8", errors="replace"))
    for step in checked_steps(len(ids)):
        mask = guide.allowed_tokens(states[step])  # type: ignore[attr-defined]
        eos = np.zeros(mask.shape[0], dtype=bool)
        eos[sorted(vocabulary.eos_token_ids)] = True
        judged = np.zeros(mask.shape[0], dtype=bool)
        judged[: len(decodable)] = decodable
        judged |= eos
        got = set(np.flatnonzero(mask & judged).tolist())
        want = oracle_row(pattern, prefixes[step], vocabulary)
        assert got == want, (
            f"step {step} after {prefixes[step][-30:]!r}: allowed but invalid "
            f"{sorted(got - want)[:5]}, valid but refused {sorted(want - got)[:5]}"
        )
    assert guide.is_final(states[-1])  # type: ignore[attr-defined]


def _decodes(spelled: bytes) -> bool:
    try:
        spelled.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("family", ["smollm2", "mistral"], indirect=True)
@pytest.mark.parametrize(("source", "text"), CASES, ids=[c[0] for c in CASES])
def test_counted_repeat_masks_equal_the_oracle(
    compiler: constrain.Compiler, tokenizer: object, source: str, text: str
) -> None:
    if not regex.fullmatch(source, text):
        raise ValueError(f"the test text does not match {source}")
    guide = compiler.regex(source)
    assert_masks_match(guide, source, text, tokenizer, compiler.vocabulary)


@pytest.mark.parametrize("family", ["smollm2", "mistral"], indirect=True)
def test_schema_with_long_strings_and_arrays_equals_the_oracle(compiler: constrain.Compiler, tokenizer: object) -> None:
    guide = compiler.json_schema(SCHEMA, whitespace="none")
    text = json.dumps(INSTANCE, separators=(",", ":"))
    assert_masks_match(guide, guide.regex, text, tokenizer, compiler.vocabulary)
