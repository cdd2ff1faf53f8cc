"""Constrained generation with the real default model (SmolLM2-135M-Instruct), loaded once."""

from __future__ import annotations

import re

import pytest

import constrain
from constrain.sampling import generate

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("pattern", "prompt"),
    [
        (r"\(\d{3}\) \d{3}-\d{4}", "Give me a US phone number."),
        (r"(yes|no)", "Is the sky blue? Answer yes or no."),
        (r"[A-Z][a-z]{2,12}(, [A-Z][a-z]{2,12}){2}", "Name three European capitals."),
    ],
)
def test_greedy_generation_fits_the_pattern(
    model_and_tokenizer: tuple[object, object], model_compiler: constrain.Compiler, pattern: str, prompt: str
) -> None:
    model, tokenizer = model_and_tokenizer
    result = generate(model, tokenizer, prompt, model_compiler.regex(pattern), model_compiler.vocabulary,
                      max_new_tokens=40)  # fmt: skip
    assert result.complete
    assert re.fullmatch(pattern, result.text, flags=re.ASCII), result.text


def test_sampling_with_seed_is_valid_and_reproducible(
    model_and_tokenizer: tuple[object, object], model_compiler: constrain.Compiler
) -> None:
    model, tokenizer = model_and_tokenizer
    guide = model_compiler.regex(r"[a-z]{3,8}( [a-z]{3,8}){1,3}")
    runs = [
        generate(model, tokenizer, "Write some words.", guide, model_compiler.vocabulary,
                 temperature=1.0, top_k=50, seed=7, max_new_tokens=40)  # fmt: skip
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and runs[0].complete
    assert re.fullmatch(r"[a-z]{3,8}( [a-z]{3,8}){1,3}", runs[0].text)


def test_cut_output_is_reported_incomplete(
    model_and_tokenizer: tuple[object, object], model_compiler: constrain.Compiler
) -> None:
    model, tokenizer = model_and_tokenizer
    result = generate(model, tokenizer, "Count.", model_compiler.regex(r"\d{50}"), model_compiler.vocabulary,
                      max_new_tokens=5)  # fmt: skip
    assert not result.complete and len(result.token_ids) == 5


@pytest.mark.parametrize(
    ("pattern", "prompt"),
    [(r"(Zürich|東京|Kraków), (Schweiz|日本|Polska)", "Name a city and its country."),
     (r"[a-z]{3,8}( [a-z]{3,8}){1,3}", "Write some words.")],
)  # fmt: skip
def test_streaming_hands_out_whole_characters_as_they_come(
    model_and_tokenizer: tuple[object, object], model_compiler: constrain.Compiler, pattern: str, prompt: str
) -> None:
    """The chunks join to the text generate returns; each chunk is whole characters (a token
    that ends inside a multi-byte character waits for the next); nothing runs before iteration."""
    from constrain.sampling import stream

    model, tokenizer = model_and_tokenizer
    guide = model_compiler.regex(pattern)
    chunks = stream(model, tokenizer, prompt, guide, model_compiler.vocabulary, max_new_tokens=30)
    assert chunks.generation is None
    pieces = list(chunks)
    whole = generate(model, tokenizer, prompt, guide, model_compiler.vocabulary, max_new_tokens=30)
    assert chunks.generation == whole and whole.complete
    assert "".join(pieces) == whole.text and len(pieces) > 1
    assert all("\ufffd" not in piece for piece in pieces), pieces
    assert re.fullmatch(pattern, whole.text), whole.text


def test_the_cli_streams_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    from constrain.cli import main

    assert main(["generate", "--regex", "(yes|no), because [a-z ]{5,40}\\.", "--prompt", "Is water wet?"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"(yes|no), because [a-z ]{5,40}\.\n", out), out
