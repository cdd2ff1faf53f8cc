"""A ``transformers`` logits processor that applies any guide inside ``model.generate``.

``generate`` calls the processor with the whole ``input_ids`` of every row at each
step, rows reordered between steps by beam search. So the processor keeps no row
order: it maps each row's *generated suffix* to a guide state through a cache keyed
by the suffix (the parent's state, advanced by the last token). Immutable states make
that cache safe to share between beams that share a prefix.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from ..guide import Guide, allocate_bitmask
from ..sampling import apply_bitmask

__all__ = ["LogitsProcessor"]


class LogitsProcessor:
    """Masks logits through one guide per batch item (``num_beams`` rows each).

    ``guides`` is one guide for every row or a list with one per batch item. The first
    call fixes the prompt length (all rows of a left-padded batch share it), so each
    row's generated tokens are ``input_ids[row, prompt_length:]``.
    """

    def __init__(self, guides: Guide[Hashable] | Sequence[Guide[Hashable]], *, num_beams: int = 1) -> None:
        self.guides = list(guides) if isinstance(guides, (list, tuple)) else None
        self.guide = None if self.guides is not None else guides
        self.num_beams = num_beams
        self.prompt_length: int | None = None
        self._states: dict[tuple[int, tuple[int, ...]], Hashable] = {}

    def reset(self) -> None:
        """Forget the prompt length and states, to reuse the processor for a new ``generate`` call."""
        self.prompt_length = None
        self._states.clear()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_length is None:
            self.prompt_length = input_ids.shape[1]
        rows = input_ids.shape[0]
        bitmask = allocate_bitmask(self._guide(0).vocab_size, rows)
        current: dict[tuple[int, tuple[int, ...]], Hashable] = {}
        for row, suffix in enumerate(input_ids[:, self.prompt_length :].tolist()):
            item = row // self.num_beams
            key = (item, tuple(suffix))
            state = current[key] = self._state(key)
            self._guide(item).fill_bitmask(state, bitmask[row])
        self._states = current  # the next step's parents are exactly this step's rows
        apply_bitmask(scores, bitmask)
        return scores

    def _guide(self, item: int) -> Guide[Hashable]:
        if self.guides is None:
            return self.guide  # type: ignore[return-value]
        return self.guides[item]

    def _state(self, key: tuple[int, tuple[int, ...]]) -> Hashable:
        """The parent's state advanced by the last token; after EOS, padding changes nothing."""
        item, suffix = key
        cached = self._states.get(key)
        if cached is not None:
            return cached
        guide = self._guide(item)
        eos = getattr(getattr(guide, "vocabulary", None), "eos_token_ids", frozenset())
        if not suffix:
            return guide.initial_state
        parent = self._states.get((item, suffix[:-1]))
        if parent is None:  # not seen last step (a fresh processor): replay the suffix
            parent = guide.initial_state
            for k, token_id in enumerate(suffix[:-1]):
                parent = guide.advance(parent, token_id)
                if token_id in eos:
                    return parent
        if any(t in eos for t in suffix[:-1]):
            return parent  # the row already ended; generate pads it
        return guide.advance(parent, suffix[-1])
