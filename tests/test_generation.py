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
