"""DFA state × vocabulary → which tokens are allowed and where each one leads.

For a state, every token is walked through the byte DFA at once, over the
vocabulary's byte trie (:class:`~constrain.vocabulary.TokenTrie`): one numpy
gather per depth advances every live prefix, so a prefix shared by many tokens is
walked once, and a prefix dies with all its tokens as soon as it hits ``DEAD``. In
a restrictive state (a digit, a quote) only a few hundred nodes are touched.

Rows are built on first visit and cached (lazy), because generation visits a
tiny fraction of the states of a large pattern (``docs/design.md`` has the
eager-vs-lazy measurements). States that differ only in the count of a bounded
repeat far from its bounds (the 37th vs the 38th character of a ``maxLength: 200``
string) share one row, built for a symbolic stand-in (:meth:`LazyDFA.shared`);
each then pays only for translating the row's few distinct successors back.

When the vocabulary cannot spell every byte of its alphabet on its own,
byte-level liveness no longer implies token-level liveness, so the index explores
every state once and removes transitions into states from which no token
sequence reaches a final state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import EmptyLanguageError, LimitExceededError
from ..vocabulary import TokenTrie, Vocabulary
from .automaton import DEAD, LazyDFA

__all__ = ["TokenIndex", "Row"]

#: Tokens up to this many bytes share rows across repeat counts (see ``LazyDFA.shared``);
#: 99% of the tokens of the vocabularies seen are this short. Longer ones are walked per state.
SHARED_REACH = 16

_NO_TOKENS = np.zeros(0, dtype=np.int32)


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
        self._trie = vocabulary.token_trie()
        self._rows: dict[int, Row] = {}
        #: Rows of symbolic stand-ins, shared by the real states they stand for.
        self._shared_rows: dict[tuple[int, int], tuple[NDArray[np.int32], list[int], NDArray[np.intp]]] = {}
        self._longest = len(self._trie.levels)
        self._short = vocabulary.token_trie(max_length=SHARED_REACH)
        self._long = vocabulary.token_trie(min_length=SHARED_REACH + 1)
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
        # Share a row over every token when the counts stay free for the longest one;
        # otherwise over the short tokens only, and walk the few long ones for real.
        for trie, reach, rest in ((self._trie, self._longest, None), (self._short, SHARED_REACH, self._long)):
            shared = self.dfa.shared(state, reach)
            if shared is not None:
                break
        else:
            return self._walk_row(state, self._trie)
        stand_in, bases = shared
        key = (stand_in, reach)
        entry = self._shared_rows.get(key)
        if entry is None:
            row = self._walk_row(stand_in, trie)
            successors, inverse = np.unique(row.next_states, return_inverse=True)
            entry = self._shared_rows[key] = (row.token_ids, successors.tolist(), inverse.reshape(-1))
            self._entries += len(row.token_ids)
        token_ids, successors, inverse = entry
        concrete = np.array([self.dfa.concrete(s, bases) for s in successors], dtype=np.int32)
        next_states = concrete[inverse]
        if rest is None or not rest.levels:
            return Row(token_ids, next_states)
        long = self._walk_row(state, rest)
        at = np.searchsorted(token_ids, long.token_ids)
        return Row(np.insert(token_ids, at, long.token_ids), np.insert(next_states, at, long.next_states))

    def _walk_row(self, state: int, trie: TokenTrie) -> Row:
        """Walk every token of ``trie`` from ``state`` through the byte DFA, one depth at a time."""
        dfa = self.dfa
        first = dfa.row(state)
        level = trie.levels[0] if trie.levels else None
        if level is None:
            return Row(_NO_TOKENS, _NO_TOKENS)
        states = first[level.byte]
        nodes = np.flatnonzero(states != DEAD)
        states = states[nodes]
        found_ids: list[NDArray[np.int32]] = []
        found_states: list[NDArray[np.int32]] = []
        for depth in range(len(trie.levels)):
            ends = level.token[nodes]
            spelled = ends >= 0
            found_ids.append(ends[spelled])
            found_states.append(states[spelled])
            if depth + 1 == len(trie.levels):
                break
            starts = level.child_start[nodes]
            counts = level.child_start[nodes + 1] - starts
            inner = counts > 0
            if not inner.any():
                break
            unexpanded = ~dfa.expanded[states[inner]]
            if unexpanded.any():  # first visit of some states: build their rows of 256
                dfa.expand(np.unique(states[inner][unexpanded]))
            children = _concatenated_ranges(starts, counts)
            level = trie.levels[depth + 1]
            states = dfa.table[np.repeat(states, counts), level.byte[children]]
            alive = states != DEAD
            nodes, states = children[alive], states[alive]
        token_ids = np.concatenate(found_ids)
        next_states = np.concatenate(found_states)
        if trie.duplicates:
            token_ids, next_states = _with_duplicates(token_ids, next_states, trie.duplicates)
        if token_ids.size < 4096:
            order = np.argsort(token_ids, kind="stable")
            return Row(token_ids[order], next_states[order])
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


def _concatenated_ranges(starts: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without the Python loop."""
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return shift + np.arange(shift.size)


def _with_duplicates(
    token_ids: NDArray[np.int32], next_states: NDArray[np.int32], duplicates: tuple[tuple[int, int], ...]
) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """Add the tokens that spell the same bytes as an allowed token, leading to the same state."""
    copies, originals = np.array(duplicates, dtype=np.int32).T
    order = np.argsort(token_ids)
    at = np.minimum(np.searchsorted(token_ids, originals, sorter=order), max(token_ids.size - 1, 0))
    if token_ids.size == 0:
        return token_ids, next_states
    hit = token_ids[order[at]] == originals
    return (
        np.concatenate([token_ids, copies[hit]]),
        np.concatenate([next_states, next_states[order[at[hit]]]]),
    )
