"""The regex guide: the engine under :class:`~constrain.core.shell.GuideShell` over a :class:`TokenIndex`.

States are plain ints: a DFA state id, or :data:`FINISHED` once EOS was taken. The shell
owns EOS, the finished state, the messages and the mask cache; this module owns the
token index's rows and the byte DFA.
"""

from __future__ import annotations

import time
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from ..core.shell import GuideShell
from ..errors import InvalidStateError
from .automaton import DEAD
from .index import TokenIndex
from .tree import Node, render

__all__ = ["RegexGuide", "FINISHED"]

#: The state after EOS: final, and only EOS is allowed (padding for finished batch rows).
FINISHED = -2


class RegexGuide(GuideShell[int]):
    """Guides generation to a string matched in full by a regular expression.

    Built by :meth:`constrain.Compiler.regex` or :meth:`~constrain.Compiler.choice`;
    shares the compiler's vocabulary tables and caches its own per-state masks.
    """

    backend = "regex"

    def __init__(self, index: TokenIndex, source: str, tree: Node) -> None:
        # A cache per state of up to ``max_dfa_states`` states would hold gigabytes on a 128k vocabulary.
        super().__init__(index.vocabulary, FINISHED, mask_cache_size=index.dfa.limits.max_cached_masks)
        self.index = index
        self.source = source
        self.tree = tree

    def __repr__(self) -> str:
        source = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        return f"RegexGuide({source!r}, states_built={self.index.num_built_rows})"

    @cached_property
    def regex(self) -> str:
        """The guide's language as Python regex text (rendered from its tree).

        Intersections, differences and unordered member sets have no such text; they
        show as a note (the automaton is built from the tree, not from this text).
        """
        try:
            return render(self.tree)
        except TypeError as exc:
            return f"(no regex text: {exc})"

    @property
    def initial_state(self) -> int:
        return self.index.dfa.start

    def forced_bytes(self, state: int, limit: int = 256) -> bytes:
        """The bytes every continuation from ``state`` must start with (for fast-forward).

        Follows the byte DFA while exactly one byte is possible and the text may not
        end yet: ``{"name": "`` after ``{`` in a schema with one required first key.
        """
        if state == FINISHED:
            return b""
        dfa, out = self.index.dfa, bytearray()
        while len(out) < limit and not dfa.is_final(state):
            live = np.flatnonzero(dfa.row(state) != DEAD)
            if live.size != 1:
                break
            out.append(int(live[0]))
            state = int(dfa.row(state)[live[0]])
        return bytes(out)

    def precompute(self) -> int:
        """Build every reachable state's row now (eager); returns the number of states."""
        deadline = time.monotonic() + self.index.limits.timeout_s
        return len(self.index.explore(deadline))

    # ------------------------------------------------------------------ the engine

    def _check_state(self, state: object) -> int:
        """``state`` as an int, if it is one this guide handed out (else :class:`InvalidStateError`)."""
        if type(state) is int and 0 <= state < self.index.dfa.num_states:  # the sampler's case, first
            return state
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            if state == FINISHED or 0 <= state < self.index.dfa.num_states:
                return int(state)
        raise InvalidStateError(
            f"{state!r} is not a state of this guide: states are the ints its initial_state and advance hand out"
        )

    def _can_end(self, state: int) -> bool:
        return self.index.dfa.is_final(state)

    def _text_mask(self, state: int) -> NDArray[np.int32]:
        return self.index.row(state).mask(self.vocab_size)

    def _step(self, state: int, token_id: int) -> int | None:
        """The successor in the state's row (a binary search), or None for a token not in it."""
        return self.index.row(state).find(token_id) if 0 <= token_id < 2**31 else None

    def _rejection(self, state: int, text: bytes) -> str:
        return f"its bytes {text!r} do not continue a match of {self.source[:80]!r}"
