"""DFA state × vocabulary → which tokens are allowed and where each one leads.

For a state, every token is walked through the byte DFA at once: the vocabulary
is a byte matrix (:class:`~constrain.vocabulary.WalkTables`), rows grouped by
first byte, so one numpy gather per byte position advances all surviving tokens,
and a state's row of 256 successors picks the candidate rows before any work is
done. Tokens die as soon as they hit ``DEAD``; in a restrictive state (a digit,
a quote) only a few hundred rows are ever touched.

Rows are built on first visit and cached (lazy), because generation visits a
tiny fraction of the states of a large pattern. ``docs/design.md`` has the
eager-vs-lazy measurements behind that choice. When the vocabulary cannot spell
every byte of its alphabet on its own, byte-level liveness no longer implies token-level
liveness, so the index explores every state once and removes transitions into
states from which no token sequence reaches a final state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import EmptyLanguageError, LimitExceededError
from ..vocabulary import Vocabulary
from .automaton import DEAD, LazyDFA

__all__ = ["TokenIndex", "Row"]


@dataclass(frozen=True)
class Row:
    """Allowed token ids of one state (sorted) and the state each one leads to."""

    token_ids: NDArray[np.int32]
    next_states: NDArray[np.int32]


class TokenIndex:
    """Token-level transitions of a :class:`LazyDFA` over one :class:`Vocabulary`."""

    def __init__(self, dfa: LazyDFA, vocabulary: Vocabulary) -> None:
        self.dfa = dfa
        self.vocabulary = vocabulary
        self.limits = dfa.limits
        self._walk = vocabulary.walk_tables()
        self._rows: dict[int, Row] = {}
        self._entries = 0
        self._lock = threading.RLock()
        if dfa.start == DEAD:
            raise EmptyLanguageError("the pattern matches no string at all")
        if not vocabulary.spells_every_byte_alone:
            self._prune_token_dead_ends()

    def row(self, state: int) -> Row:
        cached = self._rows.get(state)
        if cached is not None:
            return cached
        with self._lock:
            if state not in self._rows:
                row = self._build_row(state)
                self._entries += len(row.token_ids)
                if self._entries > self.limits.max_index_entries:
                    raise LimitExceededError(
                        "max_index_entries", self.limits.max_index_entries,
                        "the token index would take too much memory; raise Limits.max_index_entries",
                    )  # fmt: skip
                self._rows[state] = row
            return self._rows[state]

    @property
    def num_built_rows(self) -> int:
        return len(self._rows)

    def explore(self, deadline: float | None = None) -> list[int]:
        """Build the rows of every state reachable by tokens from the start; returns them in BFS order."""
        order = [self.dfa.start]
        seen = {self.dfa.start}
        for state in order:
            if deadline is not None and time.monotonic() > deadline:
                raise LimitExceededError("timeout_s", self.limits.timeout_s, "building the whole token index")
            for successor in np.unique(self.row(state).next_states).tolist():
                if successor not in seen:
                    seen.add(successor)
                    order.append(successor)
        return order

    # ------------------------------------------------------------------ construction

    def _build_row(self, state: int) -> Row:
        walk, dfa = self._walk, self.dfa
        first = dfa.row(state)
        starts = walk.first_byte_start
        allowed_bytes = np.flatnonzero(first != DEAD)
        if allowed_bytes.size == 0:
            empty = np.zeros(0, dtype=np.int32)
            return Row(empty, empty)
        rows = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in allowed_bytes.tolist()])
        states = first[walk.matrix[rows, 0]]
        done_rows: list[NDArray[np.int64]] = []
        done_states: list[NDArray[np.int32]] = []
        position = 1
        while rows.size:
            ends = walk.lengths[rows] == position
            done_rows.append(rows[ends])
            done_states.append(states[ends])
            rows, states = rows[~ends], states[~ends]
            if not rows.size:
                break
            unexpanded = ~dfa.expanded[states]
            if unexpanded.any():  # first visit of some states: build their rows of 256
                dfa.expand(np.unique(states[unexpanded]))
            states = dfa.table[states, walk.matrix[rows, position]]
            alive = states != DEAD
            rows, states = rows[alive], states[alive]
            position += 1
        token_ids = walk.ids[np.concatenate(done_rows)]
        next_states = np.concatenate(done_states).astype(np.int32)
        if token_ids.size < 4096:
            order = np.argsort(token_ids, kind="stable")
            return Row(token_ids[order].astype(np.int32), next_states[order])
        # Large rows: scatter into a dense id → state array instead of sorting.
        dense = np.full(self.vocabulary.size, DEAD, dtype=np.int32)
        dense[token_ids] = next_states
        ids = np.flatnonzero(dense != DEAD).astype(np.int32)
        return Row(ids, dense[ids])

    def _prune_token_dead_ends(self) -> None:
        """Drop transitions into states from which no token sequence reaches a final state."""
        deadline = time.monotonic() + self.limits.timeout_s
        states = self.explore(deadline)
        predecessors: dict[int, set[int]] = {s: set() for s in states}
        for s in states:
            for successor in np.unique(self._rows[s].next_states).tolist():
                predecessors[successor].add(s)
        live = {s for s in states if self.dfa.is_final(s)}
        stack = list(live)
        while stack:
            for p in predecessors[stack.pop()]:
                if p not in live:
                    live.add(p)
                    stack.append(p)
        if self.dfa.start not in live:
            raise EmptyLanguageError(
                "no sequence of this vocabulary's tokens spells a string the pattern matches"
            )
        live_array = np.array(sorted(live), dtype=np.int32)
        for s in states:
            row = self._rows[s]
            keep = np.isin(row.next_states, live_array)
            self._rows[s] = Row(row.token_ids[keep], row.next_states[keep])
