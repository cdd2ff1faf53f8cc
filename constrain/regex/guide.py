"""The regex guide: protocol methods over a :class:`TokenIndex`, plus EOS handling.

States are plain ints: a DFA state id, or :data:`FINISHED` once EOS was taken.
"""

from __future__ import annotations

import time
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from ..core.cache import BoundedCache
from ..errors import InvalidStateError, TokenRejected
from ..guide import bitmask_from_token_ids, check_bitmask, check_token
from .automaton import DEAD
from .index import TokenIndex
from .tree import Node, render

__all__ = ["RegexGuide", "FINISHED"]

#: Packed masks a regex guide keeps (6 KB each at 49k tokens, 16 KB at 128k: 24 or 64 MB in all).
_MASK_CACHE_SIZE = 4096

#: The state after EOS: final, and only EOS is allowed (padding for finished batch rows).
FINISHED = -2


class RegexGuide:
    """Guides generation to a string matched in full by a regular expression.

    Built by :meth:`constrain.Compiler.regex` or :meth:`~constrain.Compiler.choice`;
    shares the compiler's vocabulary tables and caches its own per-state masks.
    """

    backend = "regex"

    def __init__(self, index: TokenIndex, source: str, tree: Node) -> None:
        self.index = index
        self.source = source
        self.tree = tree
        self.vocabulary = index.vocabulary
        self.vocab_size = index.vocabulary.size
        self._eos = np.array(sorted(self.vocabulary.eos_token_ids), dtype=np.int32)
        self._eos_set = self.vocabulary.eos_token_ids
        #: Packed masks by DFA state, the most recently stored ``_MASK_CACHE_SIZE`` of them: a cache
        #: per state of up to ``max_dfa_states`` states would hold gigabytes on a 128k vocabulary.
        self._bitmasks: BoundedCache[NDArray[np.int32]] = BoundedCache(_MASK_CACHE_SIZE)
        #: For schema guides: keywords lenient mode dropped, the schema, the Pydantic class.
        self.dropped: tuple[tuple[str, str], ...] = ()
        #: (keyword, JSON pointer) of annotations the schema walk ignored (unknown keywords and formats).
        self.ignored: tuple[tuple[str, str], ...] = ()
        self.schema: object = None
        self.model_class: type | None = None

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

    def is_final(self, state: int) -> bool:
        state = self._check(state)
        return state == FINISHED or self.index.dfa.is_final(state)

    def allowed_token_ids(self, state: int) -> NDArray[np.int32]:
        """Sorted ids of the allowed tokens (EOS included where the state is final)."""
        state = self._check(state)
        if state == FINISHED:
            return self._eos
        ids = self.index.row(state).token_ids
        if self.index.dfa.is_final(state):
            ids = np.union1d(ids, self._eos).astype(np.int32)
        return ids

    def allowed_tokens(self, state: int) -> NDArray[np.bool_]:
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[self.allowed_token_ids(state)] = True
        return mask

    def fill_bitmask(self, state: int, out: NDArray[np.int32]) -> None:
        check_bitmask(out, self.vocab_size)
        bitmask = self._bitmasks.get(state)
        if bitmask is None:
            packed = bitmask_from_token_ids(self.allowed_token_ids(state), self.vocab_size)
            bitmask = self._bitmasks.put(state, packed)
        out[...] = bitmask

    def advance(self, state: int, token_id: int) -> int:
        token_id, state = check_token(token_id), self._check(state)
        if token_id in self._eos_set and self.is_final(state):
            return FINISHED
        if state == FINISHED:
            raise TokenRejected(token_id, state, "the sequence already ended; only EOS may follow")
        row = self.index.row(state)
        # An int32 needle: a Python int would make numpy convert the whole row first.
        position = int(np.searchsorted(row.token_ids, np.int32(token_id))) if 0 <= token_id < 2**31 else 0
        if position == len(row.token_ids) or row.token_ids[position] != token_id:
            raise TokenRejected(token_id, state, self._why_rejected(token_id))
        return row.successor(position)

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

    def _check(self, state: object) -> int:
        """``state`` as an int, if it is one this guide handed out (else :class:`InvalidStateError`)."""
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            if state == FINISHED or 0 <= state < self.index.dfa.num_states:
                return int(state)
        raise InvalidStateError(
            f"{state!r} is not a state of this guide: states are the ints its initial_state and advance hand out"
        )

    def _why_rejected(self, token_id: int) -> str:
        if not 0 <= token_id < self.vocab_size:
            return f"id outside the vocabulary (size {self.vocab_size})"
        text = self.vocabulary.token_bytes[token_id] if token_id < len(self.vocabulary.token_bytes) else None
        if text is None:
            return "a special token that is never generated" if token_id not in self._eos_set else (
                "EOS before the text is complete"
            )
        return f"its bytes {text!r} do not continue a match of {self.source[:80]!r}"
