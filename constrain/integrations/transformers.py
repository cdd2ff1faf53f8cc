"""A ``transformers`` logits processor that applies any guide inside ``model.generate``.

``generate`` calls the processor with the whole ``input_ids`` of every row at each
step, rows reordered between steps by beam search. So the processor keeps no row
order: it maps each row's *generated suffix* to a guide state through a cache keyed
by the suffix (the parent's state, advanced by the last token). Immutable states make
that cache safe to share between beams that share a prefix.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence, cast

from ..core.shell import capabilities
from ..errors import ConfigurationError
from ..guide import Guide, allocate_bitmask
from ..sampling import apply_bitmask

__all__ = ["LogitsProcessor"]


class LogitsProcessor:
    """Masks logits through one guide per batch item (``num_beams`` rows each).

    ``guides`` is one guide for every row or a list with one per batch item. The first
    call of a generation fixes the prompt length (all rows of a left-padded batch share
    it), so each row's generated tokens are ``input_ids[row, prompt_length:]``. A call
    that does not continue the last one (a longer or shorter input than one more token,
    or another prompt) starts a new generation by itself: one processor serves one
    ``generate`` call after another. ``num_beams`` is read off the shapes when omitted
    (rows per guide of a list).
    """

    def __init__(
        self, guides: Guide[Hashable] | Sequence[Guide[Hashable]], *, num_beams: int | None = None
    ) -> None:
        self.guides: list[Guide[Hashable]] | None = (
            list(guides) if isinstance(guides, (list, tuple)) else None
        )
        # Anything but a list or a tuple is one guide for every row.
        self.guide: Guide[Hashable] | None = (
            None if self.guides is not None else cast("Guide[Hashable]", guides)
        )
        if self.guides is not None and not self.guides:
            raise ConfigurationError("LogitsProcessor needs a guide, or a non-empty list with one per batch item")
        if num_beams is not None and (not isinstance(num_beams, int) or num_beams < 1):
            raise ConfigurationError(f"num_beams must be a positive int, not {num_beams!r}")
        self._given_beams = num_beams
        self.num_beams = num_beams or 1
        self.prompt_length: int | None = None
        self._prompt: tuple[int, ...] = ()
        self._last_length = -1
        self._states: dict[tuple[int, tuple[int, ...]], Hashable] = {}

    def reset(self) -> None:
        """Forget the prompt and states (a new generation is also detected without it)."""
        self.prompt_length = None
        self._states.clear()

    def _start(self, input_ids: Any) -> None:
        """A new generation: its prompt length, its first row's prompt, and rows per guide."""
        self.reset()
        self.prompt_length = input_ids.shape[1]
        self._prompt = tuple(input_ids[0].tolist())  # all of it: the prompt is the whole input here
        rows = input_ids.shape[0]
        if self.guides is None:
            return
        if self._given_beams is None:
            if rows % len(self.guides):
                raise ConfigurationError(
                    f"{rows} rows for {len(self.guides)} guides: pass one guide per batch item, and "
                    "num_beams=... if each item has several rows"
                )
            self.num_beams = rows // len(self.guides)
        elif rows != len(self.guides) * self.num_beams:
            raise ConfigurationError(
                f"{rows} rows, but {len(self.guides)} guides × num_beams={self.num_beams}: pass one guide per "
                "batch item and the num_beams given to generate (or leave num_beams out)"
            )

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        length = input_ids.shape[1]
        continues = (
            self.prompt_length is not None
            and length == self._last_length + 1
            # beam search reorders rows within a batch item only: row 0 keeps item 0's prompt
            and tuple(input_ids[0, : self.prompt_length].tolist()) == self._prompt
        )
        if not continues:
            self._start(input_ids)
        self._last_length = length
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
            return cast("Guide[Hashable]", self.guide)  # set whenever guides is None
        return self.guides[item]

    def _state(self, key: tuple[int, tuple[int, ...]]) -> Hashable:
        """The parent's state advanced by the last token; after EOS, padding changes nothing."""
        item, suffix = key
        cached = self._states.get(key)
        if cached is not None:
            return cached
        guide = self._guide(item)
        eos = capabilities(guide).eos_token_ids
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
