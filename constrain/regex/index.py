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
a state then pays only for translating back the successor of the token it takes.

When the vocabulary cannot spell every byte of its alphabet on its own,
byte-level liveness no longer implies token-level liveness, so the index explores
every state once and removes transitions into states from which no token
sequence reaches a final state.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..core import collector
from ..core.sharing import Shared
from ..errors import EmptyLanguageError, LimitExceededError
from ..guide import bitmask_from_token_ids, bitmask_size
from ..vocabulary import ClassSplit, TokenTrie, Vocabulary
from .automaton import DEAD, LazyDFA

__all__ = ["TokenIndex", "Row"]

#: Tokens up to this many bytes share rows across repeat counts (see ``LazyDFA.shared``);
#: 99% of the tokens of the vocabularies seen are this short. Longer ones are walked per state.
SHARED_REACH = 16
#: Where a row's targets from a second stand-in start (see ``Row``): past any state count.
SECOND = 1 << 30

_NO_TOKENS = np.zeros(0, dtype=np.int32)


class Row:
    """Allowed token ids of one state (sorted) and the state each one leads to.

    ``ids`` and ``targets`` list tokens one by one. A wide state's row (see
    ``TokenIndex._split_row``) holds most of its tokens as ``inside`` instead: a class
    split's tokens that all lead to one loop state, ``inside_target``, kept as the split's
    sorted ids and packed mask, which every row over the vocabulary with that split
    shares. Merged into the row they were 47k entries on SmolLM2 (380 KB a row), and
    merging and re-packing them cost a string's first mask 180 us of its 1.2 ms.

    A row shared between states (see :meth:`LazyDFA.shared`) holds the stand-in's
    successors and translates one only when a token is taken: a mask needs the ids
    alone, and a step takes one token, so translating all of a row's successors
    up front (dozens of state sets to build) would be wasted work. ``targets`` below
    ``DEAD`` are states of the row's own, stored as ``-(state + 2)``; those from
    ``SECOND`` on are a second stand-in's (the long tokens', see ``_build_row``),
    translated by ``translate_second``.
    """

    __slots__ = (
        "ids", "targets", "inside", "inside_target", "_translate", "_translate_second", "_translated",
        "_merged",
    )  # fmt: skip

    def __init__(
        self, ids: NDArray[np.int32], targets: NDArray[np.int32],
        translate: Callable[[int], int] | None = None, translate_second: Callable[[int], int] | None = None,
        *, inside: ClassSplit | None = None, inside_target: int = DEAD,
    ) -> None:
        self.ids = ids
        self.targets = targets
        self.inside = inside
        self.inside_target = inside_target
        self._translate = translate
        self._translate_second = translate_second
        self._translated: dict[int, int] = {}
        self._merged: tuple[NDArray[np.int32], NDArray[np.int32]] | None = None

    @property
    def size(self) -> int:
        """How many tokens the row allows (the two parts never share a token)."""
        return len(self.ids) + (0 if self.inside is None else len(self.inside.inside))

    def find(self, token_id: int) -> int | None:
        """The state ``token_id`` leads to, or None where the row does not allow it."""
        inside = self.inside  # first: inside a string most tokens taken are the split's
        if inside is not None and (token_id >> 5) < len(inside.inside_words):
            if (inside.inside_words.item(token_id >> 5) >> (token_id & 31)) & 1:
                return self._real(self.inside_target)
        ids = self.ids
        # An int32 needle: a Python int would make numpy convert the whole row first. The
        # array's own method: np.searchsorted's dispatch cost 1.4 of a warm step's 4.1 us.
        position = int(ids.searchsorted(np.int32(token_id)))
        if position < len(ids) and ids[position] == token_id:
            return self._real(int(self.targets[position]))
        return None

    def mask(self, vocab_size: int) -> NDArray[np.int32]:
        """The allowed tokens as a fresh packed bitmask."""
        if self.inside is None:
            return bitmask_from_token_ids(self.ids, vocab_size)
        words = self.inside.inside_words.copy()
        if kernel.compiled is not None:
            kernel.compiled.scatter(self.ids, None, words, None)
        else:
            words |= bitmask_from_token_ids(self.ids, vocab_size)
        return words

    @property
    def token_ids(self) -> NDArray[np.int32]:
        """Every allowed token id, sorted (the two parts merged: for exploration, tests, ``explain``)."""
        return self._both()[0]

    @property
    def next_states(self) -> NDArray[np.int32]:
        """Every token's successor, in ``token_ids`` order (translating all of them: for
        exploration, not for stepping)."""
        targets = self._both()[1]
        if self._translate is None:
            return targets
        return np.array([self._real(int(t)) for t in targets.tolist()], dtype=np.int32)

    def _both(self) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        if self.inside is None:
            return self.ids, self.targets
        if self._merged is None:
            inside = self.inside.inside
            ids = np.concatenate([self.ids, inside])
            order = np.argsort(ids, kind="stable")
            targets = np.concatenate([self.targets, np.full(inside.size, self.inside_target, dtype=np.int32)])
            self._merged = (ids[order], targets[order])
        return self._merged

    def _real(self, target: int) -> int:
        """A target as the state it names (translated where the row is a stand-in's)."""
        if self._translate is None:
            return target
        if target < DEAD:
            return -target - 2
        real = self._translated.get(target)
        if real is None:
            if target >= SECOND and self._translate_second is not None:
                real = self._translate_second(target - SECOND)
            else:
                real = self._translate(target)
            self._translated[target] = real
        return real


class TokenIndex(Shared):
    """Token-level transitions of a :class:`LazyDFA` over one :class:`Vocabulary`."""

    def __init__(self, dfa: LazyDFA, vocabulary: Vocabulary) -> None:
        self.dfa = dfa
        self.vocabulary = vocabulary
        self.limits = dfa.limits
        self._trie = vocabulary.token_trie()
        self._rows: dict[int, Row] = {}
        #: Rows of symbolic stand-ins, shared by the real states they stand for.
        self._shared_rows: dict[tuple[int, int], Row] = {}
        self._longest = len(self._trie.levels)
        self._short = vocabulary.token_trie(max_length=SHARED_REACH)
        self._long = vocabulary.token_trie(min_length=SHARED_REACH + 1)
        self._entries = 0
        self._utf8_loops: dict[int, bool] = {}
        self._lock = threading.RLock()
        if dfa.start == DEAD and dfa.nfa.undecided():
            raise LimitExceededError(
                "max_search_states", self.limits.max_search_states,
                "no text of an intersection or difference was found within the liveness search's budget: "
                "the pattern may match nothing, or only texts far from its start; raise Limits.max_search_states",
            )  # fmt: skip
        if dfa.start == DEAD:
            raise EmptyLanguageError("the pattern matches no string at all")
        if not vocabulary.spells_every_byte_alone:
            self._prune_token_dead_ends()

    def row(self, state: int) -> Row:
        cached = self._rows.get(state)
        if cached is not None:
            return cached
        with self._lock, collector.paused():  # (an advance may ask first: see core.collector)
            if state not in self._rows:
                row = self._build_row(state)
                self._entries += row.size
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
        # otherwise over the short tokens only, and walk the few long ones for real. The
        # short tokens win too where they free more counts: a count left concrete makes one
        # stand-in, and one whole-vocabulary walk, per value it takes (a string's length
        # shared but its word count not: 49 stand-ins, each reaching thousands of states).
        whole = self.dfa.shared(state, self._longest)
        short = self.dfa.shared(state, SHARED_REACH)
        if short is None:
            return self._walk_row(state, self._trie)
        if whole is not None and len(whole[1]) == len(short[1]):
            trie, reach, rest, (stand_in, bases) = self._trie, self._longest, None, whole
        else:
            trie, reach, rest, (stand_in, bases) = self._short, SHARED_REACH, self._long, short
        row = self._shared_rows.get((stand_in, reach))
        if row is None:
            row = self._shared_rows[(stand_in, reach)] = self._walk_row(stand_in, trie)
            self._entries += row.size
        token_ids, targets = row.ids, row.targets
        second: Callable[[int], int] | None = None
        if rest is not None and rest.levels:
            if whole is not None:  # the long tokens share the counts they can through a stand-in of their own
                long_in, long_bases = whole
                long = self._shared_rows.get((long_in, -1))
                if long is None:
                    long = self._shared_rows[(long_in, -1)] = self._walk_row(long_in, rest)
                    self._entries += long.size
                moved = np.where(long.targets >= 0, long.targets + SECOND, long.targets)
                second = lambda target: self.dfa.concrete(target, long_bases)  # noqa: E731
            else:
                long = self._walk_row(state, rest)
                moved = -long.targets - 2
            at = np.searchsorted(token_ids, long.ids)  # (short and long rows are walked whole: no split)
            token_ids = np.insert(token_ids, at, long.ids)
            targets = np.insert(targets, at, moved)
        return Row(
            token_ids, targets, lambda target: self.dfa.concrete(target, bases), second, inside=row.inside,
            inside_target=row.inside_target,
        )  # fmt: skip

    def _walk_row(self, state: int, trie: TokenTrie) -> Row:
        """Every token of ``trie`` from ``state``: split by byte classes where the state is wide."""
        if trie is self._trie:  # (a counted state's stand-in never loops: its count moves on)
            split = self._split_row(state)
            if split is not None:
                return split
        return Row(*self._sorted(*self._walk(state, trie)))

    def _split_row(self, state: int) -> Row | None:
        """A wide state's row from the vocabulary's class split (see :meth:`Vocabulary.class_split`).

        Where most bytes lead from ``state`` to one state that loops on most bytes (a
        string's interior, a key's), the tokens that start there and stay in the loop all
        end in it: their ids come precomputed, shared by every guide over the vocabulary.
        Only the suffixes that leave the loop (after a quote, a backslash) are walked, from
        the loop state, and the tokens starting elsewhere as usual. None where no class is wide.
        """
        dfa = self.dfa
        first = dfa.row(state)
        targets = first[first != DEAD]
        if targets.size < _WIDE_CLASS:
            return None
        values, counts = np.unique(targets, return_counts=True)
        loop = int(values[counts.argmax()])
        opens = first == loop
        stays = dfa.row(loop) == loop
        if counts.max() < _WIDE_CLASS or int(stays.sum()) < _WIDE_CLASS:
            return None
        utf8 = self._loops_on_characters(loop)
        split = self.vocabulary.class_split(opens.astype(np.uint8).tobytes(), stays.astype(np.uint8).tobytes(),
                                            utf8=utf8, utf8_first=utf8 and state == loop)  # fmt: skip
        other_ids, other_states = self._walk(state, self._trie, skip_first=split.opened)
        tail_ids, tail_states = self._walk(loop, split.suffixes)
        ids, states = self._sorted(
            np.concatenate([other_ids, tail_ids]), np.concatenate([other_states, tail_states])
        )
        return Row(ids, states, inside=split, inside_target=loop)

    def _loops_on_characters(self, loop: int) -> bool:
        """Whether every whole UTF-8 character of the vocabulary's alphabet leads from ``loop``
        back to it (a string's interior: yes; a pattern that leaves out "é": no). Cached."""
        known = self._utf8_loops.get(loop)
        if known is not None:
            return known
        dfa = self.dfa
        present = np.frombuffer(self.vocabulary.byte_alphabet, dtype=np.uint8).astype(bool)
        after: dict[tuple[int, int, int], frozenset[int]] = {}  # (state, low, high) → states reached

        def step(current: int, lo: int, hi: int) -> frozenset[int]:
            key = (current, lo, hi)
            if key not in after:
                targets = dfa.row(current)[lo : hi + 1][present[lo : hi + 1]] if current != DEAD else [DEAD]
                after[key] = frozenset(np.unique(targets).tolist())
            return after[key]

        result = True
        leads = dfa.row(loop)
        # Lead bytes that go to one state and expect the same continuations read alike: each
        # such group once (a string's 50 lead bytes are 7 groups). A lead byte no token holds
        # starts no character that is ever read.
        groups = dict.fromkeys(
            (int(leads[lead]), size, low, high) for lead, size, low, high in _UTF8_LEADS if present[lead]
        )
        for target, size, low, high in groups:
            frontier = frozenset([target])
            for position in range(1, size):
                lo, hi = (low, high) if position == 1 else (0x80, 0xBF)
                frontier = frozenset().union(*(step(current, lo, hi) for current in frontier))
            if frontier - {loop}:
                result = False
                break
        self._utf8_loops[loop] = result
        return result

    def _walk(
        self, state: int, trie: TokenTrie, skip_first: NDArray[np.bool_] | None = None
    ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """Walk every token of ``trie`` from ``state`` through the byte DFA (those whose first
        byte ``skip_first`` flags left out): token ids and the states they reach.

        The compiled kernel where the package was built with it, numpy otherwise (same result).
        The DFA's lock is held throughout: the table and its ``expanded`` flags are read
        together, and another thread's step may grow (replace) both.
        """
        with self.dfa.lock:
            if kernel.compiled is None:
                token_ids, next_states = self._walk_numpy(state, trie, skip_first)
            else:
                token_ids, next_states = self._walk_compiled(kernel.compiled, state, trie, skip_first)
        if trie.duplicates:
            token_ids, next_states = _with_duplicates(token_ids, next_states, trie.duplicates)
        return token_ids, next_states

    def _walk_compiled(
        self, compiled: ModuleType, state: int, trie: TokenTrie, skip_first: NDArray[np.bool_] | None
    ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """Depth first through the trie in C; a node whose state has no row yet, or a pending
        successor on a byte of its children, comes back pending: the state is expanded and
        those successors built here (subset construction is Python's), and the walk goes on."""
        dfa, flat = self.dfa, trie.flat
        size = len(flat.byte)
        out_ids, out_states = np.empty(size, np.int32), np.empty(size, np.int32)
        pending_nodes, pending_states = np.empty(size, np.int32), np.empty(size, np.int32)
        skip = None if skip_first is None else skip_first.view(np.uint8)
        nodes, states = np.array([flat.root], np.int32), np.array([state], np.int32)
        found_ids: list[NDArray[np.int32]] = []
        found_states: list[NDArray[np.int32]] = []
        while True:
            found, pending = compiled.walk(
                dfa.table, dfa.expanded, flat.byte, flat.token, flat.child_lo, flat.child_hi, flat.root, skip,
                nodes, states, out_ids, out_states, pending_nodes, pending_states,
            )  # fmt: skip
            if found:
                found_ids.append(out_ids[:found].copy())
                found_states.append(out_states[:found].copy())
            if not pending:
                break
            nodes, states = pending_nodes[:pending].copy(), pending_states[:pending].copy()
            dfa.expand(sorted(set(states.tolist())))
            starts = flat.child_lo[nodes].astype(np.int64)
            counts = flat.child_hi[nodes] - starts
            dfa.resolve(np.repeat(states, counts), flat.byte[_concatenated_ranges(starts, counts)])
        if not found_ids:
            return _NO_TOKENS, _NO_TOKENS
        return np.concatenate(found_ids), np.concatenate(found_states)

    def _walk_numpy(
        self, state: int, trie: TokenTrie, skip_first: NDArray[np.bool_] | None
    ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """The walk in numpy: one vectorized step per trie depth over the live prefixes."""
        dfa = self.dfa
        first = dfa.row(state)
        level = trie.levels[0] if trie.levels else None
        if level is None:
            return _NO_TOKENS, _NO_TOKENS
        states = first[level.byte]
        if skip_first is not None:
            states = np.where(skip_first[level.byte], DEAD, states)
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
            sources, data = np.repeat(states, counts), level.byte[children]
            states = dfa.table[sources, data]
            if (states < DEAD).any():  # successors not built yet: build the ones read here
                dfa.resolve(sources, data)
                states = dfa.table[sources, data]
            alive = states != DEAD
            nodes, states = children[alive], states[alive]
        return np.concatenate(found_ids), np.concatenate(found_states)

    def _sorted(
        self, token_ids: NDArray[np.int32], next_states: NDArray[np.int32]
    ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """A row's tokens and targets in id order."""
        if kernel.compiled is not None:  # scattered into a mask and a dense array, read back in id order
            words = np.zeros(bitmask_size(self.vocabulary.size), dtype=np.int32)
            dense = np.empty(self.vocabulary.size, dtype=np.int32)
            kernel.compiled.scatter(
                np.ascontiguousarray(token_ids, np.int32), np.ascontiguousarray(next_states, np.int32), words, dense
            )
            ids, states = np.empty(token_ids.size, np.int32), np.empty(token_ids.size, np.int32)
            found = kernel.compiled.gather(words, dense, ids, states)
            return ids[:found], states[:found]
        if token_ids.size < 4096:
            order = np.argsort(token_ids, kind="stable")
            return token_ids[order], next_states[order]
        # Large rows: scatter into a dense id → state array instead of sorting.
        dense = np.full(self.vocabulary.size, DEAD, dtype=np.int32)
        dense[token_ids] = next_states
        ids = np.flatnonzero(dense != DEAD).astype(np.int32)
        return ids, dense[ids]

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


#: Bytes a class must hold before a state's row is split by it (see ``TokenIndex._split_row``).
_WIDE_CLASS = 64
#: UTF-8 lead bytes: the sequence's length and the range of its second byte (RFC 3629).
_UTF8_LEADS = (
    [(b, 2, 0x80, 0xBF) for b in range(0xC2, 0xE0)]
    + [(0xE0, 3, 0xA0, 0xBF)] + [(b, 3, 0x80, 0xBF) for b in range(0xE1, 0xED)] + [(0xED, 3, 0x80, 0x9F)]
    + [(b, 3, 0x80, 0xBF) for b in (0xEE, 0xEF)]
    + [(0xF0, 4, 0x90, 0xBF)] + [(b, 4, 0x80, 0xBF) for b in (0xF1, 0xF2, 0xF3)] + [(0xF4, 4, 0x80, 0x8F)]
)


def _concatenated_ranges(starts: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without the Python loop."""
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return shift + np.arange(shift.size)


def _with_duplicates(
    token_ids: NDArray[np.int32], next_states: NDArray[np.int32], duplicates: tuple[tuple[int, int], ...]
) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """Add the tokens that spell the same bytes as an allowed token, leading to the same state."""
    if token_ids.size == 0:
        return token_ids, next_states
    copies, originals = np.array(duplicates, dtype=np.int32).T
    order = np.argsort(token_ids)
    at = np.minimum(np.searchsorted(token_ids, originals, sorter=order), token_ids.size - 1)
    hit = token_ids[order[at]] == originals
    return (
        np.concatenate([token_ids, copies[hit]]),
        np.concatenate([next_states, next_states[order[at[hit]]]]),
    )
