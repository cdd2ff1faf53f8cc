"""``pattern`` with ``maxLength``/``minLength`` as one counted automaton, checked against the product.

A string's length bound beside a pattern used to be an intersection of two automata.
It is now the pattern's automaton with a character counter (``Length``, ``Tick``):
cheaper, and a token index can share rows between lengths. The product stays the
independent reference here: the same texts accepted, the same token masks along
random walks, and no walk stuck at the bound (where the counter prunes positions
whose shortest way out needs more characters than are left). ``jsonschema`` judges
the texts too, and a pattern outside the exact cases keeps the product.
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import constrain
from constrain.json_schema.to_regex import SchemaOptions, schema_walk
from constrain.regex.automaton import ByteNFA, LazyDFA
from constrain.core.limits import Limits
from constrain.regex.guide import RegexGuide
from constrain.regex.index import TokenIndex
from constrain.regex.tree import Intersect, Length, Node
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

#: (pattern, minLength, maxLength, characters to build test strings from)
CASES = [
    (r"^(?:\S+\s+){0,9}\S+$", 0, 40, "ab \té"),
    (r"^[a-z]+@[a-z]+$", 0, 5, "ab@"),  # long enough for "a@b", and walks that would end stuck at the bound
    (r"^(aa)*$", 1, 5, "a"),  # only even lengths: 5 must not leave a walk stranded at "aaaa"
    (r"ab", 0, 4, "abx"),  # unanchored: a search, with any characters around
    (r'^[é"\\x]{2,}$', 1, 6, 'é"\\x'),  # escapes and a two-byte character count one each
    (r"^\d{3}-\d{4}$", 0, 8, "12-"),
    (r"^[A-Z][a-z]{0,30}$", 1, 12, "Aab"),  # the pattern's own long repeat runs on a counter too
]


def _schema(pattern: str, low: int, high: int) -> dict:
    return {"type": "string", "pattern": pattern, "minLength": low, "maxLength": high}


def _has_length(node: object) -> bool:
    if isinstance(node, Length):
        return True
    children = [getattr(node, name, None) for name in ("parts", "options", "node", "base", "minus")]
    flat = [c for child in children for c in (child if isinstance(child, tuple) else (child,))]
    return any(_has_length(c) for c in flat if c is not None and not isinstance(c, (int, str, bytes)))


def _trees(pattern: str, low: int, high: int) -> tuple[Node, Node]:
    """The counted tree the walker builds, and the product of the pattern and the length bound."""
    counted = schema_walk(_schema(pattern, low, high), SchemaOptions()).tree
    only_pattern = schema_walk({"type": "string", "pattern": pattern}, SchemaOptions()).tree
    only_length = schema_walk({"type": "string", "minLength": low, "maxLength": high}, SchemaOptions()).tree
    return counted, Intersect((only_pattern, only_length))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_counted_length_accepts_what_the_product_accepts(case: tuple[str, int, int, str]) -> None:
    pattern, low, high, alphabet = case
    counted, product = _trees(pattern, low, high)
    assert _has_length(counted), "the walker should count this pattern's length, not build a product"
    mine, reference = LazyDFA(ByteNFA(counted, Limits())), LazyDFA(ByteNFA(product, Limits()))
    validator = jsonschema.Draft202012Validator(_schema(pattern, low, high), format_checker=None)
    rng = random.Random(7)
    texts = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, high + 3))) for _ in range(3000)}
    agreed = 0
    for text in sorted(texts):
        spelled = json.dumps(text, ensure_ascii=False).encode()  # the canonical spelling both guides write
        assert mine.matches(spelled) == reference.matches(spelled) == validator.is_valid(text), text
        agreed += mine.matches(spelled)
    assert agreed, "no sample text was valid: the comparison would prove nothing"


@pytest.mark.parametrize("case", CASES[:4], ids=[c[0] for c in CASES[:4]])
@pytest.mark.slow
def test_counted_length_masks_equal_the_products(compiler: constrain.Compiler, case: tuple[str, int, int, str]) -> None:
    """Token by token, on each tokenizer family: the same allowed tokens, never a dead end."""
    pattern, low, high, _ = case
    counted, product = _trees(pattern, low, high)
    mine = RegexGuide(TokenIndex(LazyDFA(ByteNFA(counted, Limits())), compiler.vocabulary), pattern, counted)
    reference = RegexGuide(TokenIndex(LazyDFA(ByteNFA(product, Limits())), compiler.vocabulary), pattern, product)
    validator = jsonschema.Draft202012Validator(_schema(pattern, low, high))
    rng = random.Random(11)
    finished = 0
    for _ in range(25):
        ids, done = random_walk(mine, compiler.vocabulary, rng, max_tokens=60, eos_probability=0.5)
        state, other = mine.initial_state, reference.initial_state
        for token in ids:
            allowed = mine.allowed_tokens(state)
            assert np.array_equal(allowed, reference.allowed_tokens(other))
            assert allowed.any(), "a dead end"
            state, other = mine.advance(state, token), reference.advance(other, token)
        if done:
            finished += 1
            text = token_text(compiler.vocabulary, ids).decode()
            assert validator.is_valid(json.loads(text)), text
    assert finished


def test_a_repeat_that_must_run_on_a_counter_keeps_the_product(smollm2: object) -> None:
    """``x{3,300}`` runs on its own counter with a lower bound: the fewest characters left would
    depend on it, so the builder makes the product there, and stays exact."""
    schema = _schema(r"^x{3,300}$", 0, 10)
    guide = constrain.Compiler(smollm2).json_schema(schema)
    for text, valid in [('"xxx"', True), ('"' + "x" * 10 + '"', True), ('"' + "x" * 11 + '"', False), ('"xx"', False)]:
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, text


@pytest.mark.slow
def test_a_long_pattern_string_walks_without_a_product(smollm2: object) -> None:
    """A 500-character bound on a word-count pattern (a real schema's summary field): the
    product ran past 200,000 states on random walks; the counted length finishes them."""
    schema = {"type": "string", "pattern": r"^(?:\S+\s+){0,49}\S+$", "maxLength": 500}
    guide = constrain.Compiler(smollm2, limits=constrain.Limits(max_dfa_states=200_000)).json_schema(schema)
    vocabulary = guide.vocabulary
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(3)
    for _ in range(3):
        ids, done = random_walk(guide, vocabulary, rng, max_tokens=80, eos_probability=0.0)
        text = token_text(vocabulary, ids)
        assert text.startswith(b'"') and (not done or validator.is_valid(json.loads(text)))
    text = json.dumps(" ".join(["word"] * 49) + " end")
    assert accepts(guide, tokenize_continuation(smollm2, text)) and validator.is_valid(json.loads(text))
    too_many_words = json.dumps(" ".join(["w"] * 51))
    assert not accepts(guide, tokenize_continuation(smollm2, too_many_words))
