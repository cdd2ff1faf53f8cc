"""Intersection and difference of byte automata, built lazily: the product on first visit.

A regular language is closed under intersection and complement, but a Thompson NFA
(``automaton.ByteNFA``) can only build union, concatenation and repetition. The
schema walker needs the other two — ``pattern`` ∩ ``format`` ∩ ``maxLength``, a key
that matches ``patternProperties`` but is no declared property, ``not``, ``oneOf``
(one branch and none of the others) — so :class:`ProductDFA` runs several
deterministic automata side by side: a product state is the tuple of their states,
created when first reached, as the lazy DFA creates its subset states.

The one thing a product cannot inherit from its parts is liveness. Every state a
part hands out can still reach one of *its* accepting states, but a tuple of live
states may never reach a state where all parts agree (``[a-z]+`` ∩ ``[0-9]+`` is
empty although each part is live). So a product state is handed out only after a
search from it found an accepting tuple (breadth-first: the nearest one); a search
that exhausts its reach marks every tuple it saw as dead. The guide's invariant —
every allowed token keeps the text completable — holds for products too.

The automaton that embeds a product (``ByteNFA``) treats it as one opaque state
that carries the product's state id in its counter stack (see ``LazyDFA``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from typing import Any, Callable, Iterator, Protocol

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..core.limits import visit_deadline
from ..core.sharing import Shared
from ..errors import LimitExceededError

__all__ = ["DEAD", "Automaton", "EndsWithDFA", "ProductDFA", "add_run", "merge_rows", "row_runs", "runs_of", "visit_deadline"]

#: Transition target meaning "no match is possible any more".
DEAD = -1

class Automaton(Protocol):
    """What a product needs of a part: a start, a row of 256 successors, finality.

    Parts hand out live states only (``DEAD`` for everything else).
    """

    @property
    def start(self) -> int: ...

    def row(self, state: int) -> NDArray[np.int32]: ...

    def is_final(self, state: int) -> bool: ...

    # Optional: ``unbounded`` (True when the automaton has no finite state count), and
    # ``runs(state)``, the row as runs of bytes (see ``runs_of``), where the part keeps them.


Run = tuple[int, int, int]


def runs_of(automaton: Automaton, state: int) -> list[Run]:
    """``(low, high, target)`` for each run of bytes with one live successor, in byte order.

    Rows are 256 successors, but a state has a few runs (a letter range, the digits,
    everything but a quote): an automaton that embeds another reads its row a run at a time.
    Automata that build their rows from runs keep them. (A product's successors come from
    whole rows, see ``merge_rows``.)
    """
    runs = getattr(automaton, "runs", None)
    return runs(state) if runs is not None else row_runs(automaton.row(state))


def add_run(runs: list[Run], low: int, high: int, target: int) -> None:
    """Append ``low..high → target`` to ``runs`` (built in byte order), joining it to the last
    run where that one ends just before ``low`` with the same target."""
    if runs and runs[-1][2] == target and runs[-1][1] == low - 1:
        runs[-1] = (runs[-1][0], high, target)
    else:
        runs.append((low, high, target))


def row_runs(row: NDArray[np.int32]) -> list[Run]:
    """The runs of equal live targets in a row of 256 successors (see ``runs_of``)."""
    cuts = np.flatnonzero(np.diff(row)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [256])) - 1
    return [(int(lo), int(hi), int(row[lo])) for lo, hi in zip(starts, ends) if row[lo] != DEAD]


Tuple = tuple[int, ...]


def merge_rows(
    rows: list[NDArray[np.int32] | None], subtract: bool
) -> tuple[list[Tuple], list[Run]]:
    """A product state's successor tuples, each named once in byte order, and the spans
    ``(low, high, index)`` of bytes with one successor, from its parts' rows (None for a dead
    part): the numpy path of the compiled ``merge`` (``_kernel.c``), with the same result.

    A byte leads nowhere where the first part is dead on it or, in an intersection, any part
    is. Stacked, the rows change column where any part changes successor: each stretch
    between two changes has one successor tuple. (A sweep over the parts' runs in Python did
    the same in 28 us a tuple on Handwritten allany4, this in 18, the compiled one in 2.)
    """
    stacked = np.stack([row if row is not None else _DEAD_ROW for row in rows])
    changes = np.flatnonzero((stacked[:, 1:] != stacked[:, :-1]).any(axis=0)) + 1
    lows = [0, *changes.tolist()]
    highs = [low - 1 for low in lows[1:]] + [255]
    successors: list[Tuple] = []
    named: dict[Tuple, int] = {}
    spans: list[Run] = []
    for column, low, high in zip(stacked[:, lows].T.tolist(), lows, highs):
        if column[0] == DEAD or (not subtract and DEAD in column):
            continue
        key = tuple(column)
        k = named.get(key)
        if k is None:
            k = named[key] = len(successors)
            successors.append(key)
        spans.append((low, high, k))
    return successors, spans


_DEAD_ROW = np.full(256, DEAD, dtype=np.int32)




class ProductDFA(Shared):
    """The intersection of ``parts``, or with ``subtract=True`` the first part minus all others.

    In a difference the subtracted parts may be ``DEAD`` (the text left their
    language: good) and a tuple is accepting when the first part accepts and none
    of the others does.

    Rows hold live tuples only, and where a part nests without bound liveness is a budgeted
    search that may end undecided. What an undecided tuple becomes depends on the product's
    polarity, ``subtracted`` (an odd number of differences deep, see ``ByteNFA._product``):
    dead where the language is kept (the guide is stricter), live where it is taken away
    (less would be subtracted otherwise, and the guide weaker).
    """

    def __init__(
        self, parts: list[Automaton], *, subtract: bool, max_states: int, timeout_s: float,
        search_budget: int = 8192, deadline: float | None = None, subtracted: bool = False,
    ) -> None:
        self.parts = parts
        self.subtract = subtract
        #: Whether this product's language is subtracted from another (see ``_is_live``).
        self.subtracted = subtracted
        self.max_states = max_states
        self.timeout_s = timeout_s
        self.search_budget = search_budget
        #: Whether a search ran out of budget and counted a tuple dead unproved (see ``_is_live``).
        self.gave_up = False
        self._ids: dict[Tuple, int] = {}
        self._tuples: list[Tuple] = []
        self._rows: dict[int, NDArray[np.int32]] = {}
        self._runs: dict[int, list[Run]] = {}
        self._raw: dict[Tuple, tuple[list[Tuple], list[Run]]] = {}
        #: Per tuple, what each successor's cheapest byte costs a budgeted search (``_step_costs``):
        #: kept, as the tuple is popped again by every later search that reaches it.
        self._steps: dict[Tuple, list[int]] = {}
        self._live: set[Tuple] = set()
        self._dead: set[Tuple] = set()
        self._accepting: dict[Tuple, bool] = {}
        #: The first part's completions by its state, and the budgets that found none (``_completion``).
        self._completions: dict[int, bytes] = {}
        self._incomplete: dict[int, int] = {}
        self._lock = threading.RLock()
        #: A part without a finite state count (a nested free-form value): searches are budgeted.
        self.unbounded = any(getattr(p, "unbounded", False) for p in parts)
        first = tuple(p.start for p in parts)
        # the first search runs on the compile's clock; later ones (first visits) get timeout_s each
        # The start's search runs at compile, and where a part nests without bound it is often the
        # longest: a short probe goes first (o11666 10.4 -> 4.3 s, o71266 2.7 -> 1.5 s). With a
        # sixteenth of the budget GeoJSON o63308 compiled in 1.5 s instead of 13.5, but a probe
        # that fails builds first-part states for nothing, and Handwritten oneofpr2 took 13 s
        # instead of 5; a sixty-fourth costs oneofpr2 nothing and leaves o63308 as it was. So a
        # sixteenth goes second, with every tuple that products nested in the first part expand
        # counted against it: o63308's completions need up to 384 settled states (the 128 of a
        # sixty-fourth fail, and each start then searched 5,000 tuples before the eighth's probe
        # found them), and oneofpr2's failing one, whose first part embeds products, expanded
        # 30,000 of their tuples on 512 settled states (2.7 s).
        with _starting():
            live = self._alive(first) and (
                self._short_probe(first) or self._short_probe(first, 16, nested=True)
                or self._is_live(first, deadline)
            )  # fmt: skip
        self.start = self._intern(first) if live else DEAD

    @property
    def num_states(self) -> int:
        return len(self._tuples)

    def is_final(self, state: int) -> bool:
        return self._accepts(self._tuples[state])

    def row(self, state: int) -> NDArray[np.int32]:
        row = self._rows.get(state)
        if row is not None:
            return row
        with self._lock:
            successors, spans = self._successors(self._tuples[state])
            ids = [self._intern(t) if self._is_live(t) else DEAD for t in successors]
            row = np.full(256, DEAD, dtype=np.int32)
            runs: list[Run] = []
            for low, high, k in spans:
                if ids[k] != DEAD:
                    row[low : high + 1] = ids[k]
                    add_run(runs, low, high, ids[k])
            self._runs[state] = runs
            self._rows[state] = row
        return row

    def runs(self, state: int) -> list[Run]:
        """The row of ``state`` as runs (see ``runs_of``)."""
        runs = self._runs.get(state)
        if runs is None:
            self.row(state)
            runs = self._runs[state]
        return runs

    # ------------------------------------------------------------------ construction

    def _alive(self, states: Tuple) -> bool:
        """The parts that must match still can: all of them, or the first one of a difference."""
        return states[0] != DEAD if self.subtract else DEAD not in states

    def _free(self, states: Tuple) -> bool:
        """A difference whose subtracted parts are all dead: live exactly when the first part is,
        and the first part hands out live states only. No search needed from here."""
        return self.subtract and states[0] != DEAD and all(s == DEAD for s in states[1:])

    def _accepts(self, states: Tuple) -> bool:
        # Kept per tuple: a search asks once per tuple it pops, and an enclosing product asks
        # again through ``is_final`` for every tuple of its own that holds this state (where
        # products nest, 259k calls for 88k tuples on Handwritten allany4).
        known = self._accepting.get(states)
        if known is not None:
            return known
        if not self._alive(states) or not self.parts[0].is_final(states[0]):
            accepts = False
        elif self.subtract:
            accepts = not any(s != DEAD and p.is_final(s) for p, s in zip(self.parts[1:], states[1:]))
        else:
            accepts = all(p.is_final(s) for p, s in zip(self.parts[1:], states[1:]))
        self._accepting[states] = accepts
        return accepts

    def _successors(self, states: Tuple) -> tuple[list[Tuple], list[Run]]:
        """The successor tuples, and spans ``(low, high, index)`` of bytes with one successor
        tuple (an index into that list). No row of 256: a search needs only these, and most
        tuples it visits never become states."""
        cached = self._raw.get(states)
        if cached is not None:
            return cached
        rows = [self.parts[j].row(s) if s != DEAD else None for j, s in enumerate(states)]
        merge = kernel.compiled.merge if kernel.compiled is not None else merge_rows
        successors, spans = merge(rows, self.subtract)
        self._raw[states] = (successors, spans)
        _WORK.expanded += 1
        if len(self._raw) > self.max_states:
            raise LimitExceededError(
                "max_dfa_states", self.max_states,
                "an intersection or difference of patterns needs more states than allowed",
            )  # fmt: skip
        return successors, spans

    def _is_live(self, states: Tuple, deadline: float | None = None) -> bool:
        """Whether an accepting tuple is reachable; the search marks what it learns on the way."""
        if states in self._live:
            return True
        if states in self._dead:
            return False
        if deadline is None:
            # A first visit: where a part nests without bound, the first part's own completion
            # is nearly always a witness, and a short probe for it goes first. Deep in Aerleon's
            # policy files (a oneOf of open objects around arrays of oneOfs) the budgeted search
            # expanded the branch's states past max_dfa_states at a single step (now both valid
            # instances walk, 30 s in all); GeoJSON o63308's first instance reached 162 of its 606
            # tokens in 200 s, now 605 in 400 s (its second still runs out of states). Not while
            # a product's start is searched at compile (``_starting``): there the parts' tuples
            # are visited by the thousand, most probes fail, and o19343 compiled in 3.85 s, not 2.85.
            with visit_deadline(self.timeout_s) as shared:
                if not getattr(_STARTING, "depth", 0) and self._short_probe(states):
                    return True
                return self._is_live(states, shared)
        parent: dict[Tuple, Tuple | None] = {states: None}
        # Any accepting tuple proves liveness, and an exhausted search is the same set in any
        # order, so the order only decides how soon a witness turns up. A difference is free
        # of search once every subtracted part has died, so its search goes first where the
        # fewest subtracted parts are still alive (a oneOf over overlapping objects: into the
        # member that tells the branches apart, not down the first long string), deepest first
        # among equals. An intersection dives depth first where the parts are finite (breadth
        # first expands every shallow tuple of a wide object first). Where a part nests without
        # bound the search has a budget, and only a search that stays near the surface finds
        # the witnesses a budget leaves time for: cheapest first, where a byte costs 1, a
        # bracket that opens a nested value as much as _OPENING_COST bytes, and whitespace,
        # escapes and multi-byte characters 4 (``_BYTE_COST``: they spread the search over
        # tuples no witness needs; o63308, a oneOf over GeoJSON objects, 2.3 -> 1.8 s). (Breadth
        # first spent the budget on free-form values nested a few levels deep and missed
        # {"a": "x", "c": "abc"}, 19 bytes away in two open objects; fewest brackets first
        # spent it on the member subsets of a wide object before opening the array that a
        # witness had to go through.)
        pending, push, pop = self._frontier(states)
        found: Tuple | None = None
        while pending:
            current, cost = pop()
            if current in self._live or self._accepts(current) or self._free(current):
                found = current
                break
            successors, spans = self._successors(current)
            steps = None
            if self.unbounded:
                steps = self._steps.get(current)
                if steps is None:
                    steps = self._steps[current] = _step_costs(spans, len(successors))
            for k, successor in enumerate(successors):
                if successor not in parent and successor not in self._dead:
                    parent[successor] = current
                    push(successor, cost + (steps[k] if steps is not None else 1))
            if self.unbounded and len(parent) > self.search_budget:
                # Past the budget a part may nest forever without ever agreeing with the others
                # (any value minus arrays, after "["), so the search cannot end by exhaustion.
                # Where this product is subtracted, the tuple counts as live: a subtracted part
                # that died too soon would take less away and let invalid texts through (an
                # object with the dependent key and too few members, where the search over
                # "has the key and fewer than four members" ran out); kept, it only leaves a
                # search above without its shortcut. Elsewhere it counts as dead, unless the
                # probe finds a witness. Over-constrained at worst, never weaker.
                if self.subtracted:
                    self._live.add(states)
                    return True
                if self._probe(states, self.search_budget // 8):
                    return True
                self._dead.add(states)
                self.gave_up = True
                return False
            if len(parent) % 64 == 0 and time.monotonic() > deadline:
                raise LimitExceededError(
                    "timeout_s", self.timeout_s, "deciding whether an intersection or difference can still match",
                )  # fmt: skip
        return _learn(found, parent, self._live, self._dead)

    def _short_probe(self, states: Tuple, share: int = 64, *, nested: bool = False) -> bool:
        """A probe (below) on a ``share`` of the search budget, where it may go first: a part
        nests without bound (elsewhere searches settle), and this product is not subtracted
        (there an undecided tuple counts as live anyway). ``nested`` counts against it the
        tuples that products nested in the first part expand meanwhile."""
        budget = self.search_budget // share
        return self.unbounded and not self.subtracted and self._probe(states, budget, nested)

    def _probe(self, states: Tuple, budget: int, nested: bool = False) -> bool:
        """A witness found the cheap way: a completion of the first part alone, if the product takes it.

        The budgeted search explores every tuple up to a cost, and where a witness lies behind
        long required keys (o27154: ``list_int_input``, ``config_num``) or must close an object
        of many required members in any order (o25692: nine, where a subtracted part with a
        repeatable key stays alive to the closing brace) the tuples of every shorter spelling
        and every subset of members use the budget up. The first part alone has fewer states,
        and any completion of it usually satisfies the others too; every tuple on the way is
        then live. The completion is found depth first, the newest state first among equal
        priorities, each state's bytes in ``_PROBE_ORDER`` (letters, digits, then what closes):
        it writes one member after another, where cheapest first expanded every subset of the
        members before the last one (o25692: out of budget; now found in a few hundred states).
        Whitespace and escapes cost extra (``_PROBE_EXTRA``), other bytes are not tried, and a
        completion opens at most ``_PROBE_DEPTH`` brackets more than it closes: depth first,
        free-form values would nest without end.

        Completions are kept per first-part state (``_completion``), and the trail stops at
        the first tuple known live, so a repeated probe costs a lookup and a few steps. A probe
        settles at most an eighth of the search budget: depth first, every settled state is a
        new one of the first part, and on the full budget o21819's ten probes at its meters'
        start built past ``max_dfa_states`` (and o45306, whose witness lies deeper, is refused
        with an eighth; with a quarter it passes in 66 s, o21819 in 34 s instead of 5). (Probing
        before the search, on a sixteenth of the budget, was tried: GeoJSON o63308 compiled in
        1.7 s instead of 17.7, but failing probes build first-part rows on every search, and
        o21819's first walk ran past ``max_dfa_states`` where it took 4 s.)
        """
        path = self._completion(states[0], budget, nested)
        if path is None:
            return False
        trail = [states]
        for byte in path:  # until the trail meets a tuple known live, or free of its subtracted parts
            current = trail[-1]
            if current in self._live or self._free(current):
                break
            step = tuple(int(p.row(s)[byte]) if s != DEAD else DEAD for p, s in zip(self.parts, current))
            if not self._alive(step) or step in self._dead:
                return False
            trail.append(step)
        else:
            if not self._accepts(trail[-1]):
                return False
        self._live.update(trail)
        return True

    def _completion(self, start: int, budget: int, nested: bool = False) -> bytes | None:
        """A completion of the first part from its state ``start`` (see ``_probe``), or None.

        It depends on the first part's state alone, and many tuples share one: found once, it
        is kept for ``start`` and for every state on its way (each gets its suffix), and a
        failure is kept with its budget, so a later probe retries only with a larger one.
        With ``nested``, the budget also counts the tuples that products nested in the first
        part expand (``_WORK``): where the first part embeds them, a row can cost thousands.
        """
        known = self._completions.get(start)
        if known is not None:
            return known
        if self._incomplete.get(start, -1) >= budget:
            return None
        first = self.parts[0]
        # a lazy DFA builds the successors it is asked for only, all of a state's in one call
        some = getattr(first, "successors", None)
        step: Callable[[int], list[int]] = (
            (lambda state: some(state, _PROBE_BYTES)) if some is not None
            else lambda state: first.row(state)[_PROBE_BYTES].tolist()
        )
        parent: dict[int, tuple[int, int] | None] = {start: None}
        heap, end, tick = [(0, 0, start, 0)], None, itertools.count(1)
        settled: set[int] = set()
        spent = _WORK.expanded if nested else None
        while heap and len(settled) + (_WORK.expanded - spent if spent is not None else 0) < budget:
            cost, _, state, depth = heapq.heappop(heap)
            if state in settled:
                continue
            settled.add(state)
            known = self._completions.get(state)
            if known is not None or first.is_final(state):
                end = state
                break
            claimed = []  # each new successor by its most wanted byte, then pushed with that one first
            for byte, successor in zip(_PROBE_ORDER, step(state)):
                if successor != DEAD and successor not in parent:
                    parent[successor] = (state, byte)
                    claimed.append((successor, byte))
            for successor, byte in reversed(claimed):
                deeper = depth + (byte in _BRACKETS) - (byte in _CLOSERS and depth > 0)
                if deeper <= _PROBE_DEPTH:
                    heapq.heappush(heap, (cost + _PROBE_EXTRA[byte], -next(tick), successor, deeper))
        if end is None:
            self._incomplete[start] = budget
            return None
        path = bytearray(self._completions.get(end, b""))
        on_way = end
        while parent[on_way] is not None:
            on_way, byte = parent[on_way]  # type: ignore[misc]
            path.insert(0, byte)
            self._completions.setdefault(on_way, bytes(path))
        return self._completions.setdefault(start, bytes(path))

    def _frontier(
        self, start: Tuple
    ) -> tuple[Any, Callable[[Tuple, int], None], Callable[[], tuple[Tuple, int]]]:
        """The liveness search's queue: the container, ``push(tuple, cost)`` and ``pop``, in the
        order that ``_is_live`` explains (the cost counts only where a part nests without bound)."""
        tick = itertools.count()
        heap: list[tuple[int, int, int, Tuple, int]] = [(0, 0, 0, start, 0)]
        if self.unbounded:  # cheapest first, then breadth first
            def push(t: Tuple, cost: int) -> None:
                heapq.heappush(heap, (cost, 0, next(tick), t, cost))
        elif self.subtract:  # best first: fewest subtracted parts alive, deepest first
            def push(t: Tuple, cost: int) -> None:
                heapq.heappush(heap, (0, sum(s != DEAD for s in t[1:]), -next(tick), t, cost))
        else:  # depth first
            def push(t: Tuple, cost: int) -> None:
                heapq.heappush(heap, (0, 0, -next(tick), t, cost))
        return heap, push, lambda: heapq.heappop(heap)[3:]

    def _intern(self, states: Tuple) -> int:
        existing = self._ids.get(states)
        if existing is not None:
            return existing
        if len(self._tuples) >= self.max_states:
            raise LimitExceededError(
                "max_dfa_states", self.max_states,
                "an intersection or difference of patterns needs more states than allowed",
            )  # fmt: skip
        self._ids[states] = len(self._tuples)
        self._tuples.append(states)
        return len(self._tuples) - 1


class EndsWithDFA(Shared):
    """The texts of ``inner`` whose last byte outside ``skip`` lies in ``allowed`` (with ``none``,
    also those that hold no byte outside ``skip``).

    A state is an inner state and a tag: no such byte read yet (0), the last one in
    ``allowed`` (1) or not (2). The tag is a function of the text, so two texts with
    different tags differ: that is what splits undeclared keys into groups that surely hold
    different keys (``MemberSet.extra_groups``, ``skip`` the quotes, so the tag reads the key's
    last character byte). An intersection would do the same as a product, searching every
    pair; here liveness is a search over (inner state, tag) pairs of the inner automaton
    alone, which for a key is small and finite (``max_states`` bounds it).
    """

    def __init__(
        self, inner: Automaton, allowed: NDArray[np.bool_], skip: NDArray[np.bool_], none: bool, *,
        max_states: int,
    ) -> None:
        self.inner = inner
        self._accepting = (True, True, False) if none else (False, True, False)  # by tag
        self.max_states = max_states
        self.unbounded = getattr(inner, "unbounded", False)
        # per byte and tag, the tag after it: a skipped byte keeps it
        after = np.where(allowed, 1, 2)[:, None]
        self._next_tag = np.where(skip[:, None], np.arange(3)[None, :], after).astype(np.int8)
        self._ids: dict[tuple[int, int], int] = {}
        self._states: list[tuple[int, int]] = []
        self._rows: dict[int, NDArray[np.int32]] = {}
        self._live: set[tuple[int, int]] = set()
        self._dead: set[tuple[int, int]] = set()
        self._lock = threading.RLock()
        first = (inner.start, 0)
        self.start = self._intern(first) if inner.start != DEAD and self._is_live(first) else DEAD

    @property
    def num_states(self) -> int:
        return len(self._states)

    def is_final(self, state: int) -> bool:
        inner, tag = self._states[state]
        return self._accepting[tag] and self.inner.is_final(inner)

    def row(self, state: int) -> NDArray[np.int32]:
        row = self._rows.get(state)
        if row is not None:
            return row
        with self._lock:
            row = np.full(256, DEAD, dtype=np.int32)
            for successor, byte_mask in self._successors(self._states[state]):
                if self._is_live(successor):
                    row[byte_mask] = self._intern(successor)
            self._rows[state] = row
        return row

    def _successors(self, key: tuple[int, int]) -> list[tuple[tuple[int, int], NDArray[np.bool_]]]:
        inner, tag = key
        targets = self.inner.row(inner)
        tags = self._next_tag[:, tag]
        usable = targets != DEAD
        out = []
        for target, new_tag in {(int(t), int(g)) for t, g in zip(targets[usable], tags[usable])}:
            out.append(((target, new_tag), usable & (targets == target) & (tags == new_tag)))
        return out

    def _is_live(self, key: tuple[int, int]) -> bool:
        """Whether an accepting pair is reachable (a search; what it learns is kept)."""
        if key in self._live:
            return True
        if key in self._dead:
            return False
        parent: dict[tuple[int, int], tuple[int, int] | None] = {key: None}
        pending = [key]
        found = None
        while pending:
            current = pending.pop()
            if current in self._live or (self._accepting[current[1]] and self.inner.is_final(current[0])):
                found = current
                break
            for successor, _ in self._successors(current):
                if successor not in parent and successor not in self._dead:
                    parent[successor] = current
                    pending.append(successor)
            if len(parent) > self.max_states:
                raise LimitExceededError(
                    "max_dfa_states", self.max_states, "telling undeclared keys apart by their last byte",
                )  # fmt: skip
        return _learn(found, parent, self._live, self._dead)

    def _intern(self, key: tuple[int, int]) -> int:
        existing = self._ids.get(key)
        if existing is None:
            existing = self._ids[key] = len(self._states)
            self._states.append(key)
        return existing


class _Work(threading.local):
    """How many product tuples this thread has expanded (``ProductDFA._successors``), in all
    products: a probe's measure of what the rows of a first part with products inside cost."""

    expanded = 0


_WORK = _Work()

#: How many products' start searches (at compile) are under way in this thread: a first
#: visit's probe does not go first inside one (``ProductDFA._is_live``).
_STARTING = threading.local()


@contextlib.contextmanager
def _starting() -> Iterator[None]:
    _STARTING.depth = getattr(_STARTING, "depth", 0) + 1
    try:
        yield
    finally:
        _STARTING.depth -= 1


def _learn(found: Any, parent: dict[Any, Any], live: set[Any], dead: set[Any]) -> bool:
    """What a liveness search learned: the way from its start to ``found`` is live, or, where it
    found nothing, everything it saw is dead. Returns whether the start is live."""
    if found is None:
        dead.update(parent)
        return False
    step = found
    while step is not None:
        live.add(step)
        step = parent[step]
    return True


_BRACKETS = (ord("["), ord("{"))
#: What opening a nested value costs a liveness search, in bytes (see ``_is_live``).
_OPENING_COST = 8
#: What a byte costs a liveness search where a part nests without bound (see ``_is_live``).
#: Witnesses are spelled in printable ASCII: whitespace, a backslash escape or a multi-byte
#: character each add tuples (one per UTF-8 lead byte) that a witness rarely needs, so they
#: cost more, and a cheapest-first search reaches declared keys and short values first.
_BYTE_COST = [
    _OPENING_COST if b in _BRACKETS else 4 if b in b" \t\n\r\\" or b >= 0x80 else 1 for b in range(256)
]


def _step_costs(spans: list[Run], count: int) -> list[int]:
    """Per successor (an index into a ``_successors`` list), the cost of its cheapest byte."""
    costs = [_OPENING_COST] * count
    for low, high, k in spans:
        cheapest = min(_BYTE_COST[low : high + 1])
        if cheapest < costs[k]:
            costs[k] = cheapest
    return costs


#: What a byte adds to a probe's priority (see ``ProductDFA._probe``): nothing for printable
#: ASCII, more for whitespace and escapes. Brackets cost nothing, but a probe opens at most
#: ``_PROBE_DEPTH`` more than it closes: past that, free-form values would nest without end.
_PROBE_EXTRA = [3 if b in b" \t\n\r" else 8 if b == 0x5C else 0 for b in range(256)]
_PROBE_DEPTH = 4
_CLOSERS = (ord("]"), ord("}"))
#: The bytes a probe tries, in order: letters, digits, what closes a value (quotes, brackets,
#: separators), other printable ASCII, whitespace. Nothing else: a completion through control
#: or multi-byte characters is left to the search, and their successors are never built.
_CLOSING = b'"}],:'
_PROBE_ORDER = (
    *range(0x61, 0x7B), *range(0x30, 0x3A), *_CLOSING,
    *(b for b in range(0x20, 0x7F) if b not in _CLOSING and not 0x61 <= b < 0x7B and not 0x30 <= b < 0x3A),
    *b"\t\n\r",
)  # fmt: skip
_PROBE_BYTES = np.array(_PROBE_ORDER, dtype=np.intp)
