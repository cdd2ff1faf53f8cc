"""Real tokenizers, loaded once per test session (conversion is cached on disk)."""

from __future__ import annotations

import os

import pytest

import constrain
from constrain.testing import load_offline_tokenizer

#: The three families the regex backend must handle exactly. ``CONSTRAIN_TEST_FAMILIES``
#: (comma-separated) narrows them: the fast tier (``make test-fast``) runs SmolLM2's alone.
FAMILIES = [name for name in os.environ.get("CONSTRAIN_TEST_FAMILIES", "smollm2,mistral,llama3").split(",") if name]


@pytest.fixture(scope="session")
def tokenizers() -> dict[str, object]:
    return {}


@pytest.fixture(scope="session")
def compilers() -> dict[str, constrain.Compiler]:
    return {}


def _tokenizer(cache: dict[str, object], name: str) -> object:
    if name not in cache:
        cache[name] = load_offline_tokenizer(name)
    return cache[name]


@pytest.fixture(scope="session", params=FAMILIES)
def family(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def tokenizer(tokenizers: dict[str, object], family: str) -> object:
    return _tokenizer(tokenizers, family)


@pytest.fixture(scope="session")
def compiler(compilers: dict[str, constrain.Compiler], tokenizer: object, family: str) -> constrain.Compiler:
    if family not in compilers:
        compilers[family] = constrain.Compiler(tokenizer)
    return compilers[family]


@pytest.fixture(scope="session")
def smollm2(tokenizers: dict[str, object]) -> object:
    return _tokenizer(tokenizers, "smollm2")


@pytest.fixture(scope="session")
def mistral(tokenizers: dict[str, object]) -> object:
    return _tokenizer(tokenizers, "mistral")


# ---------------------------------------------------------------------- the real model, once per session


@pytest.fixture(scope="session")
def model_and_tokenizer() -> tuple[object, object]:
    pytest.importorskip("torch")
    from constrain.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def model_compiler(model_and_tokenizer: tuple[object, object]) -> constrain.Compiler:
    model, tokenizer = model_and_tokenizer
    width = model.get_output_embeddings().weight.shape[0]
    return constrain.Compiler(tokenizer, vocab_size=width, generation_config=model)
