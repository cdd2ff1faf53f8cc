"""One constrained sampling loop, as plain as nanoGPT's ``generate``.

Each step: run the model on the new token (KV cache), mask the logits with the
guide's packed bitmask, scale by temperature, keep the top-k, sample (or take the
argmax), advance the guide. The loop stops at EOS — which the guide allows only
where the text is complete — or at ``max_new_tokens``, in which case the result
says it is incomplete rather than passing off a cut text as valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from .guide import Guide, allocate_bitmask
from .vocabulary import Vocabulary

__all__ = ["Generation", "generate", "apply_bitmask"]


@dataclass(frozen=True)
class Generation:
    """The generated text, its token ids, and whether the guide reached a final state with EOS."""

    text: str
    token_ids: list[int]
    complete: bool


def apply_bitmask(logits: Any, bitmask: np.ndarray) -> None:
    """Set disallowed logits to -inf in place; logits wider than the mask are all disallowed."""
    import torch

    words = torch.from_numpy(bitmask).to(logits.device)
    bits = (words.unsqueeze(-1) >> torch.arange(32, device=logits.device, dtype=torch.int32)) & 1
    allowed = bits.flatten(-2).bool()
    width = logits.shape[-1]
    if allowed.shape[-1] < width:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[-1]))
    logits.masked_fill_(~allowed[..., :width], float("-inf"))


def generate(
    model: Any,
    tokenizer: Any,
    prompt: str,
    guide: Guide[Hashable],
    vocabulary: Vocabulary,
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    chat: bool = True,
) -> Generation:
    """Generate one constrained continuation of ``prompt`` (wrapped in the chat template when ``chat``)."""
    import torch

    if chat and getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    input_ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
    bitmask = allocate_bitmask(vocabulary.size)
    state, generated, past = guide.initial_state, [], None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            out = model(input_ids=input_ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1, :].float()
            guide.fill_bitmask(state, bitmask)  # mask: only tokens the guide allows
            apply_bitmask(logits, bitmask)
            if temperature <= 0:
                token_id = int(torch.argmax(logits))
            else:
                logits = logits / temperature  # scale by temperature
                if top_k is not None:  # keep the top-k
                    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[-1]
                    logits[logits < kth] = float("-inf")
                probs = torch.softmax(logits, dim=-1)  # sample
                token_id = int(torch.multinomial(probs, 1, generator=generator))
            state = guide.advance(state, token_id)
            if token_id in vocabulary.eos_token_ids:
                text = b"".join(vocabulary.token_bytes[i] or b"" for i in generated).decode("utf-8")
                return Generation(text, generated, complete=True)
            generated.append(token_id)
            input_ids = torch.tensor([[token_id]])
    text = b"".join(vocabulary.token_bytes[i] or b"" for i in generated).decode("utf-8", errors="replace")
    return Generation(text, generated, complete=False)
