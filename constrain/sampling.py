"""One constrained sampling loop for every guide, as plain as nanoGPT's ``generate``.

Each step: run the model on the new tokens (KV cache), mask each row's logits with its
guide's packed bitmask, then sample — greedy, or temperature, top-k and top-p — and
advance each row's guide state. A row stops at EOS, which its guide allows only where
the text is complete, and is then padded with EOS; a row cut by ``max_new_tokens``
is reported incomplete instead of passing a cut text off as valid.

Fast-forward: when a guide says the next bytes are forced (``forced_bytes``), the
longest allowed tokens spelling them are appended in one forward pass instead of
one pass per token. The loop asks a guide for that, and for the class a complete text
validates into, through :func:`~constrain.core.shell.capabilities`: every guide of the
package declares them, and a protocol-only guide gets "nothing forced, no class".

:func:`stream` runs the same loop for one prompt and hands out the text as it is
accepted, a whole UTF-8 character at a time.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any, Generator, Hashable, Iterator, Sequence, cast

import numpy as np

from .core.shell import capabilities
from .errors import ConstrainError
from .guide import Guide, allocate_bitmask
from .vocabulary import Vocabulary

__all__ = ["Generation", "TextStream", "generate", "stream", "apply_bitmask", "sample", "coalesce"]


@dataclass(frozen=True)
class Generation:
    """The generated text and ids, whether the guide ended with EOS, and some counters."""

    text: str
    token_ids: list[int]
    complete: bool
    forward_passes: int = 0
    fast_forwarded: int = 0
    value: Any = field(default=None, compare=False)


def apply_bitmask(logits: Any, bitmask: Any) -> None:
    """Set disallowed logits to -inf in place, for one row or a batch, on the logits' device.

    ``bitmask`` is packed int32 words, a numpy array or a torch tensor. Logits wider than
    the mask (models pad their vocabulary) are disallowed.
    """
    import torch

    words = bitmask if isinstance(bitmask, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(bitmask))
    words = words.to(logits.device)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((words.unsqueeze(-1) >> shifts) & 1).flatten(-2).bool()
    width = logits.shape[-1]
    if allowed.shape[-1] < width:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[-1]))
    logits.masked_fill_(~allowed[..., :width], float("-inf"))


def sample(
    logits: Any, *, temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
    generator: Any = None,
) -> Any:  # fmt: skip
    """Pick one token per row of masked logits (B, V): argmax, or a sample."""
    import torch

    if temperature <= 0:
        return torch.argmax(logits, dim=-1)
    logits = logits / temperature  # scale by temperature
    if top_k is not None:  # keep the top-k
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:  # keep the smallest set whose probability reaches top_p
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    probs = torch.softmax(logits, dim=-1)  # sample
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def coalesce(allowed_ids: np.ndarray, vocabulary: Vocabulary) -> np.ndarray:
    """Keep only the longest of allowed tokens that share a prefix (an opt-in mode).

    A token is dropped when another allowed token starts with its bytes: the model then
    writes ``"name"`` as one token rather than ``"``, ``name``, ``"``. docs/coalescence.md
    measures what this does to the output distribution.
    """
    pieces = [(vocabulary.token_bytes[i] or b"", int(i)) for i in allowed_ids]
    pieces.sort()
    keep = []
    for k, (piece, token_id) in enumerate(pieces):
        following = pieces[k + 1][0] if k + 1 < len(pieces) else None
        if piece and following is not None and following.startswith(piece):
            continue  # a longer allowed token extends this one
        keep.append(token_id)
    return np.array(sorted(keep), dtype=np.int64)


def generate(
    model: Any,
    tokenizer: Any,
    prompts: str | Sequence[str],
    guides: Guide[Hashable] | Sequence[Guide[Hashable]],
    vocabulary: Vocabulary,
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    chat: bool = True,
    fast_forward: bool = True,
    coalescence: bool = False,
) -> Any:
    """Generate constrained continuations: one :class:`Generation`, or a list for a list of prompts.

    Each prompt may have its own guide (pass a list). ``chat`` wraps prompts in the
    tokenizer's chat template. When a guide came from a Pydantic class, a complete
    generation's ``value`` is the validated instance.
    """
    single = isinstance(prompts, str)
    prompt_list = [prompts] if isinstance(prompts, str) else list(prompts)
    steps = _steps(model, tokenizer, prompt_list, guides, vocabulary,
                   max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                   chat=chat, fast_forward=fast_forward, coalescence=coalescence)  # fmt: skip
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            results: list[Generation] = finished.value
            return results[0] if single else results


class TextStream:
    """The text of one constrained generation as it is accepted (see :func:`stream`).

    Iterating yields strings, each ending on a whole UTF-8 character (a token may end
    inside one: its bytes wait for the next token). Once iteration ends, ``generation``
    holds the :class:`Generation`, ``value`` included.
    """

    def __init__(self, steps: Generator[list[list[int]], None, list[Generation]], vocabulary: Vocabulary) -> None:
        self._steps = steps
        self._vocabulary = vocabulary
        self.generation: Generation | None = None

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces = self._vocabulary.token_bytes
        while True:
            try:
                new = next(self._steps)[0]
            except StopIteration as finished:
                self.generation = finished.value[0]
                tail = decoder.decode(b"", final=True)
                if tail:
                    yield tail
                return
            text = decoder.decode(b"".join(pieces[i] or b"" for i in new))
            if text:
                yield text


def stream(
    model: Any,
    tokenizer: Any,
    prompt: str,
    guide: Guide[Hashable],
    vocabulary: Vocabulary,
    **options: Any,
) -> TextStream:
    """:func:`generate` for one prompt, its text handed out as it is accepted.

    ``options`` are :func:`generate`'s. Nothing runs until the stream is iterated:

    >>> chunks = stream(model, tokenizer, "Describe Tokyo as JSON.", guide, vocabulary)
    >>> for chunk in chunks:
    ...     print(chunk, end="", flush=True)
    >>> chunks.generation.complete
    True
    """
    if not isinstance(prompt, str):
        raise ConstrainError("stream takes one prompt (a str); use generate for a batch")
    return TextStream(_steps(model, tokenizer, [prompt], guide, vocabulary, **options), vocabulary)


def _steps(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    guides: Guide[Hashable] | Sequence[Guide[Hashable]],
    vocabulary: Vocabulary,
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    chat: bool = True,
    fast_forward: bool = True,
    coalescence: bool = False,
) -> Generator[list[list[int]], None, list[Generation]]:
    """The sampling loop: yields each step's new text tokens per row, returns the generations."""
    import torch

    prompt_list = list(prompts)
    # Anything but a list or a tuple is one guide, shared by every prompt.
    guide_list: list[Guide[Hashable]] = (
        list(guides) if isinstance(guides, (list, tuple))
        else [cast("Guide[Hashable]", guides)] * len(prompt_list)
    )  # fmt: skip
    if len(guide_list) != len(prompt_list):
        raise ConstrainError(f"{len(guide_list)} guides for {len(prompt_list)} prompts")
    if fast_forward and len(prompt_list) > 1:
        fast_forward = False  # rows would need different numbers of forced tokens
    if chat and getattr(tokenizer, "chat_template", None):
        prompt_list = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompt_list
        ]
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    input_ids, attention = _left_pad([tokenizer.encode(p, add_special_tokens=False) for p in prompt_list], vocabulary)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    batch = len(prompt_list)
    states = [g.initial_state for g in guide_list]
    generated: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    bitmask = allocate_bitmask(vocabulary.size, batch)
    eos = min(vocabulary.eos_token_ids)
    past, passes, forced_total = None, 0, 0
    coalesced: dict[tuple[int, Hashable], np.ndarray] = {}  # (guide, state) → coalesced bitmask
    while any(not d and len(g) < max_new_tokens for d, g in zip(done, generated)):
        with torch.no_grad():  # only around the pass: the caller's code runs between yields
            out, past = _forward(model, input_ids, attention, positions, past)
        passes += 1
        logits = out.logits[:, -1, :].float()
        for row, (guide, state) in enumerate(zip(guide_list, states)):
            guide.fill_bitmask(state, bitmask[row])  # only what the guide allows
            if coalescence and not done[row] and len(generated[row]) < max_new_tokens:
                key = (id(guide), state)
                if key not in coalesced:
                    coalesced[key] = _coalesced_bitmask(guide, state, vocabulary)
                bitmask[row] = coalesced[key]
        apply_bitmask(logits, bitmask)
        chosen = sample(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
        step: list[list[int]] = []
        new: list[list[int]] = [[] for _ in range(batch)]
        for row in range(batch):
            if done[row] or len(generated[row]) >= max_new_tokens:
                step.append([eos])  # padding for a finished (or cut) row; its guide is not consulted
                continue
            token_id = int(chosen[row])
            states[row] = guide_list[row].advance(states[row], token_id)
            if token_id in vocabulary.eos_token_ids:
                done[row] = True
            else:
                generated[row].append(token_id)
                new[row].append(token_id)
            step.append([token_id])
        if fast_forward and not done[0]:  # append forced tokens in the same next pass
            forced = _forced_tokens(guide_list[0], states[0], vocabulary, max_new_tokens - len(generated[0]))
            for token_id in forced:
                states[0] = guide_list[0].advance(states[0], token_id)
            generated[0] += forced
            new[0] += forced
            step[0] += forced
            forced_total += len(forced)
        input_ids = torch.tensor(step)
        attention = torch.cat([attention, torch.ones((batch, input_ids.shape[1]), dtype=attention.dtype)], -1)
        positions = positions[:, -1:] + torch.arange(1, input_ids.shape[1] + 1)
        yield new
    return [_result(guide_list[r], generated[r], done[r], vocabulary, passes, forced_total) for r in range(batch)]


def _forward(model: Any, input_ids: Any, attention: Any, positions: Any, cache: Any) -> tuple[Any, Any]:
    """One forward pass with the KV cache, under either name transformers has used for it."""
    import inspect

    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                **{name: cache})  # fmt: skip
    return out, getattr(out, name)


def _left_pad(rows: list[list[int]], vocabulary: Vocabulary) -> tuple[Any, Any]:
    import torch

    width = max(len(r) for r in rows)
    pad = min(vocabulary.eos_token_ids)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def _forced_tokens(guide: Any, state: Hashable, vocabulary: Vocabulary, budget: int) -> list[int]:
    """Longest allowed tokens that spell the guide's forced bytes, greedily."""
    declared = capabilities(guide)
    remaining = declared.forced_bytes(state)
    tokens: list[int] = []
    while remaining and len(tokens) < budget:
        best, best_len, crosses = None, 0, False
        for token_id in declared.allowed_token_ids(state).tolist():
            piece = vocabulary.token_bytes[token_id] if token_id < len(vocabulary.token_bytes) else None
            if not piece:
                continue
            if len(piece) > len(remaining) and piece.startswith(remaining):
                crosses = True  # the tokenizer would merge the forced end with what follows
            elif len(piece) > best_len and remaining.startswith(piece):
                best, best_len = token_id, len(piece)
        if best is None or (crosses and best_len == len(remaining)):
            break  # leave the last forced bytes to the model, which can spell them with what comes next
        tokens.append(best)
        state = guide.advance(state, best)
        remaining = remaining[best_len:]
    return tokens


def _coalesced_bitmask(guide: Any, state: Hashable, vocabulary: Vocabulary) -> np.ndarray:
    """The state's mask after :func:`coalesce`, EOS kept (computed once per state and call)."""
    from .guide import bitmask_from_token_ids

    allowed = np.flatnonzero(guide.allowed_tokens(state))
    eos = np.array(sorted(vocabulary.eos_token_ids), dtype=np.int64)
    text = np.setdiff1d(allowed, eos)
    kept = np.concatenate([coalesce(text, vocabulary), np.intersect1d(allowed, eos)])
    return bitmask_from_token_ids(kept.astype(np.int64), vocabulary.size)


def _result(
    guide: Any, ids: list[int], complete: bool, vocabulary: Vocabulary, passes: int, forced: int
) -> Generation:
    raw = b"".join(vocabulary.token_bytes[i] or b"" for i in ids)
    text = raw.decode("utf-8", errors="strict" if complete else "replace")
    value = None
    model_class: Any = capabilities(guide).model_class  # a Pydantic class, or None
    if complete and model_class is not None:
        value = model_class.model_validate_json(text)
    return Generation(text, ids, complete, passes, forced, value)
