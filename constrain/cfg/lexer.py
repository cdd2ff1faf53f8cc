"""Lark's contextual lexer as lazy byte DFAs, one per lexer context.

In every parser state lark lexes with a ``BasicLexer`` over the terminals that
state accepts (plus the ``%ignore`` ones): ``re.match`` of the alternation
``(?P<T1>r1)|(?P<T2>r2)|...`` in lark's order (priority, then longest possible
width, then pattern length, then name). Python's alternation is *first match*,
not longest match: ``T1`` wins whenever it matches, even if ``T2`` would match
more. And a regex terminal that also matches a string terminal of the same
priority (``NAME`` vs ``"select"``) hides it and renames its own match when the
whole lexeme equals the string (lark's "unless" callback).

:class:`LexerDFA` reproduces both. A state is an *ordered* tuple of NFA
threads (Pike-VM order = backtracking order, once the NFA has sre's rule for
repeats that match empty built in: :meth:`PriorityNFA._repeat`); when a thread reaches its accept
state, every lower-priority thread is cut, because backtracking would never get
to them: what remains are the higher-priority threads that could still produce a
preferred (longer) match. The state also records the match found at this
position, if any. The "unless" strings run alongside as an unordered *shadow*
set, consulted only to rename a match. So walking the bytes of the input through
the DFA and remembering the last match gives exactly lark's token boundaries:
when the DFA dies, the lexeme is the last match.

Per state, ``emit[s]`` is the emission id of the match ending here (-1: none),
``final_only[s]`` says no thread is left (the lexeme is decided at this byte),
and ``possible[s]`` is an over-approximation of the terminals this lexeme can
still become, used to drop tokens whose lexeme the parser could never take.
"""

from __future__ import annotations

import itertools
import threading
from typing import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..core.limits import check_visit_deadline
from ..core.sharing import Shared
from ..errors import LimitExceededError
from .pyregex import PriorityNFA

__all__ = ["DEAD", "UNEXPANDED", "LexerContext", "EmitTable", "LexerDFA"]

#: A lexer state with more NFA edges than this splits its bytes with numpy (``_targets_by_byte``).
_WIDE_EDGES = 64
#: What a first visit was doing when its clock ran out here.
_BUILDING = "while building the lexer states of a first-visit mask"

DEAD = -1
#: Table entry of a state whose row was not computed yet.
UNEXPANDED = -2


@dataclass(frozen=True)
class LexerContext:
    """What one lark ``BasicLexer`` does: its terminals in match order and its "unless" renames."""

    order: tuple[int, ...]
    unless: tuple[tuple[int, tuple[int, ...]], ...]


class EmitTable(Shared):
    """Interned emissions: (terminal the regex matched, terminal after renaming) → small int.

    ``ignored[e]`` follows lark: whether a lexeme is skipped is decided on the
    matched terminal, before renaming.
    """

    def __init__(self, names: list[str], ignore: frozenset[int]) -> None:
        self.names = names
        self.ignore_ids = ignore
        self._ids: dict[tuple[int, int], int] = {}
        self.raw: list[int] = []
        self.final: list[int] = []
        self.ignored: list[bool] = []
        self.final_name: list[str] = []
        self._lock = threading.Lock()

    def get(self, raw: int, final: int) -> int:
        key = (raw, final)
        found = self._ids.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._ids:
                self.raw.append(raw)
                self.final.append(final)
                self.ignored.append(raw in self.ignore_ids)
                self.final_name.append(self.names[final])
                self._ids[key] = len(self.raw) - 1
            return self._ids[key]


class LexerDFA(Shared):
    """All lexer contexts of a grammar as one DFA over bytes, built on first visit.

    States are keyed by global NFA states, so once two contexts have read a prefix
    that leaves the same threads (``" cust"`` after any keyword-free prefix), they are
    in the *same* state and share its table row and every walk cached for it. Only
    start states are per context (:meth:`add_context`).

    ``unless_pairs[r]`` lists, in lark's terminal order, the string terminals that
    regex terminal ``r`` renames its match to. Whether a pair applies depends only on
    the two terminals (same priority, the regex matches the string), never on the
    context, and the shadow set only ever holds strings of the current context, so
    renaming needs no per-context data.

    States are created lazily (mostly while masks are computed), up to the NFA's
    ``limits.max_dfa_states``; the next one raises :class:`~constrain.LimitExceededError`.
    """

    def __init__(
        self,
        nfa: PriorityNFA,
        entries: list[int],
        unless_pairs: dict[int, tuple[int, ...]],
        emits: EmitTable,
        names: list[str],
    ) -> None:
        self.nfa = nfa
        self.limits = nfa.limits
        self.entries = entries
        self.emits = emits
        self.names = names
        self.unless = unless_pairs
        self._has_unless = {t for t, strings in unless_pairs.items() if strings}
        self._lock = threading.RLock()
        self._ids: dict[tuple[tuple[int, ...], int, frozenset[int], int], int] = {}
        self._keys: list[tuple[tuple[int, ...], int, frozenset[int], int]] = []
        self._possible_ids: dict[frozenset[str], int] = {}
        self.possible_sets: list[frozenset[str]] = []
        # Rows not computed yet hold UNEXPANDED, so a vectorised walk finds them with the
        # same ``< 0`` test that finds dead ends, instead of checking a flag per step.
        self.table: NDArray[np.int32] = np.full((16, 256), UNEXPANDED, dtype=np.int32)
        self.expanded = np.zeros(16, dtype=bool)
        self.emit = np.full(16, -1, dtype=np.int32)
        self.final_only = np.zeros(16, dtype=bool)
        self.possible = np.zeros(16, dtype=np.int32)
        self.is_start = np.zeros(16, dtype=bool)

    def add_context(self, context: LexerContext) -> int:
        """The start state of one lark ``BasicLexer`` (shared with identical contexts)."""
        with self._lock:
            entries = self.entries
            seeds = [entries[t] for t in context.order]
            shadow_seeds = sorted({entries[s] for _, strings in context.unless for s in strings})
            main, match = self._closure(seeds)
            shadow, _ = self._shadow_closure(shadow_seeds)
            # The start state gets its own key (match -2): the DFA can come back to the same
            # threads after reading bytes, and "nothing of the lexeme read yet" must stay
            # distinguishable (it is where end of input is allowed). A context may have no
            # terminal at all (a parser state that only takes end of input).
            state = self._intern(main, -2 if match < 0 else match, shadow, start=True)
            self.is_start[state] = True
            return state

    @property
    def num_states(self) -> int:
        return len(self._keys)

    def step(self, state: int, byte: int) -> int:
        if not self.expanded[state]:
            self.expand([state])
        return int(self.table[state, byte])

    def expand(self, states: "list[int] | NDArray[np.int32]") -> None:
        with self._lock:
            for state in states:
                state = int(state)
                if not self.expanded[state]:
                    self._expand_one(state)

    # ------------------------------------------------------------------ construction

    def _closure(self, seeds: list[int]) -> tuple[tuple[int, ...], int]:
        """Threads reachable from ``seeds`` in priority order, cut after the first accept state
        (the compiled ``lexer_closure`` where the package has it, else ``priority_closure``)."""
        nfa = self.nfa
        walk = kernel.compiled.lexer_closure if kernel.compiled is not None else priority_closure
        while True:
            threads, tag = walk(seeds, nfa.live, nfa.pending, nfa.accept, nfa.edges, nfa.eps)
            if threads is not None:
                return threads, tag
            nfa.materialize(tag)  # a state backed by an automaton, met for the first time: again

    def _shadow_closure(self, seeds: list[int]) -> tuple[frozenset[int], None]:
        nfa = self.nfa
        out: set[int] = set()
        seen: set[int] = set()
        stack = list(seeds)
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            if p in nfa.pending:
                nfa.materialize(p)
            if nfa.edges[p] or nfa.accept[p] >= 0:
                out.add(p)
            stack.extend(nfa.eps[p])
        return frozenset(out), None

    def _intern(self, main: tuple[int, ...], match: int, shadow: frozenset[int], start: bool = False) -> int:
        if not main and match < 0 and not start:
            return DEAD
        nfa = self.nfa
        owners = {nfa.owner[p] for p in main}
        shadow_key: frozenset[int]
        if not (owners & self._has_unless):
            shadow_key = frozenset()
        else:
            shadow_key = frozenset(p for p in shadow if nfa.edges[p])
        emit = -1
        final_name = None
        if match >= 0:
            final = match
            accepted = {nfa.accept[p] for p in shadow if nfa.accept[p] >= 0}
            for candidate in self.unless.get(match, ()):
                if candidate in accepted:
                    final = candidate
                    break
            emit = self.emits.get(match, final)
            final_name = self.names[final]
        # The emission is part of the key: the shadow keeps only states that can still
        # read bytes, so two states may differ only in which keyword just matched.
        key = (main, match, shadow_key if main else frozenset(), emit)
        found = self._ids.get(key)
        if found is not None:
            return found
        if len(self._keys) >= self.limits.max_dfa_states:
            raise LimitExceededError(
                "max_dfa_states", self.limits.max_dfa_states,
                "the grammar's lexer needs more automaton states than allowed (long bounded repeats "
                "in terminals, many terminals sharing prefixes); raise Limits.max_dfa_states",
            )  # fmt: skip
        possible = {self.names[t] for t in owners}
        if final_name is not None:
            possible.add(final_name)
            possible.add(self.names[match])
        alive_shadows = {nfa.owner[p] for p in shadow_key}
        for t in owners & self._has_unless:
            possible.update(self.names[s] for s in self.unless[t] if s in alive_shadows)
        frozen = frozenset(possible)
        pid = self._possible_ids.get(frozen)
        if pid is None:
            pid = len(self.possible_sets)
            self.possible_sets.append(frozen)
            self._possible_ids[frozen] = pid
        state = len(self._keys)
        self._keys.append(key)
        self._ids[key] = state
        if state >= len(self.expanded):
            grow = len(self.expanded)
            self.table = np.concatenate([self.table, np.full((grow, 256), UNEXPANDED, dtype=np.int32)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, dtype=bool)])
            self.emit = np.concatenate([self.emit, np.full(grow, -1, dtype=np.int32)])
            self.final_only = np.concatenate([self.final_only, np.zeros(grow, dtype=bool)])
            self.possible = np.concatenate([self.possible, np.zeros(grow, dtype=np.int32)])
            self.is_start = np.concatenate([self.is_start, np.zeros(grow, dtype=bool)])
        self.emit[state] = emit
        self.final_only[state] = not main and not start
        self.possible[state] = pid
        return state

    def _expand_one(self, state: int) -> None:
        # A state of long bounded repeats holds thousands of threads, and a first-visit mask
        # can build hundreds of them (a fuzzed terminal: 442 states, 25 s): its clock is checked
        # before each state and before each successor's closure, as one state alone ran for
        # minutes (a fuzzed terminal's (...){20,25}, timeout_s=5)
        check_visit_deadline(_BUILDING)
        main, _match, shadow, _emit = self._keys[state]
        row = np.full(256, DEAD, dtype=np.int32)
        if main:  # a final-only state has no successors: the lexeme ended here
            edges = self.nfa.edges
            by_byte = _targets_by_byte(main, edges)
            shadow_by_byte = _targets_by_byte(shadow, edges)
            successors: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
            last: tuple[object, object, int] = (None, None, DEAD)
            for byte in range(256):
                targets = by_byte[byte]
                if targets is None:
                    continue
                if targets is last[0] and shadow_by_byte[byte] is last[1]:
                    row[byte] = last[2]  # a stretch of bytes that shares its lists (wide states)
                    continue
                shadow_targets = tuple(sorted(shadow_by_byte[byte] or ()))
                key = (tuple(targets), shadow_targets)
                successor = successors.get(key)
                if successor is None:
                    check_visit_deadline(_BUILDING)
                    new_main, match = self._closure(targets)
                    new_shadow, _ = self._shadow_closure(list(shadow_targets))
                    successor = self._intern(new_main, match, new_shadow)
                    successors[key] = successor
                row[byte] = successor
                last = (targets, shadow_by_byte[byte], successor)
        self.table[state] = row
        self.expanded[state] = True


def priority_closure(
    seeds: list[int], live: bytearray, pending: set[int], accept: list[int],
    edges: list[list[tuple[int, int, int]]], eps: list[list[int]],
) -> tuple[tuple[int, ...] | None, int]:
    """The threads reachable from ``seeds`` (depth first, in priority order) that read a byte,
    cut at the first accepting state, and its tag (-1: none); ``(None, state)`` where the walk
    meets a ``pending`` state, which the caller fills in before it asks again. The Python path
    of the compiled ``lexer_closure`` (``_kernel.c``), with the same result."""
    out: list[int] = []
    seen: set[int] = set()
    stack = seeds[::-1]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if not live[p]:
            continue
        if p in pending:
            return None, p
        tag = accept[p]
        if tag >= 0:
            return tuple(out), tag
        if edges[p]:
            out.append(p)
        if eps[p]:
            stack.extend(eps[p][::-1])
    return tuple(out), -1


def _targets_by_byte(states: Iterable[int], edges: list[list[tuple[int, int, int]]]) -> list[list[int] | None]:
    """For each byte, the NFA targets ``states`` reach on it (None: none), in state order.

    A byte at a time where the state is narrow; past ``_WIDE_EDGES`` edges, one numpy pass per
    stretch of bytes that no edge starts or ends inside (all of its bytes share one list): a
    state of a long bounded repeat holds thousands of threads whose ranges span most bytes,
    and the loop appended to 256 lists per thread.
    """
    flat = [edge for p in states for edge in edges[p]]
    by_byte: list[list[int] | None] = [None] * 256
    if len(flat) <= _WIDE_EDGES:
        for lo, hi, target in flat:
            for byte in range(lo, hi + 1):
                bucket = by_byte[byte]
                if bucket is None:
                    by_byte[byte] = [target]
                else:
                    bucket.append(target)
        return by_byte
    check_visit_deadline(_BUILDING)
    spans = np.fromiter(itertools.chain.from_iterable(flat), dtype=np.int64, count=3 * len(flat))
    lows, highs, targets = spans.reshape(-1, 3).T  # (fromiter: a third faster than np.array on tuples)
    cuts = np.unique(np.concatenate([lows, highs + 1])).tolist()
    for start, end in zip(cuts, cuts[1:]):
        covering = targets[(lows <= start) & (highs >= start)]
        if covering.size:
            shared = covering.tolist()
            for byte in range(start, end):
                by_byte[byte] = shared
    return by_byte
