"""Regex syntax tree → byte-level NFA → deterministic byte automaton, built lazily.

Why not ``interegular``'s ``to_fsm()``: it builds the whole character-level DFA
eagerly through pairwise products, which took seconds to minutes on the regexes
that real JSON schemas produce. Here the tree becomes a Thompson NFA over
*bytes* in linear time (each character set expands to its UTF-8 byte-range
sequences), and DFA states — sets of NFA states — are created on first visit
only. Generation visits a few hundred states even when the full DFA would have
millions, so compile time is proportional to the pattern, not to its DFA.

Dead states are pruned as they are discovered: an NFA state that cannot reach
the accepting state is dropped from every set, so every DFA state this module
hands out can still complete a match (a set that becomes empty is the dead
state, ``DEAD``).
"""

from __future__ import annotations

import bisect
import heapq
import operator
import threading
import time
from collections import deque
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import lru_cache, reduce
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..core.sharing import Shared
from ..errors import LimitExceededError
from .inclusion import contained
from .algebra import DEAD, Automaton, EndsWithDFA, ProductDFA, Run, add_run, runs_of, visit_deadline
from .nested import HOLE, NestedDFA
from .tree import (
    Alt, CharSet, Concat, Difference, EndsWith, Intersect, Length, Literals, Members, MemberSet, Multiple, Nested, Node,
    NOTHING, Repeat, Tick, alt,
)
from ..core.limits import Limits
from ..core.utf8 import add_utf8_trie, byte_runs, clip_to_runs

__all__ = ["DEAD", "ByteNFA", "LazyDFA", "surely_nonempty"]


class ByteNFA(Shared):
    """A Thompson NFA over bytes: epsilon edges plus byte-range edges.

    ``alphabet[b]`` says whether byte ``b`` can be generated at all (see
    :attr:`Vocabulary.byte_alphabet`); edges on other bytes are left out.

    ``edges[q]`` lists ``(low, high, target)`` byte ranges; ``epsilon[q]`` lists
    targets reached without input. ``live[q]`` says whether the accepting state is
    reachable from ``q``.

    Large parts are built on first visit. A real schema's automaton is mostly parts a
    walk never enters (the members of a Kubernetes object the instance leaves out, the
    branches it does not take), and building them all made compiles of many seconds.
    A part of at least ``_DEFER_STATES`` estimated states whose language is surely not
    empty (``_nonempty``) becomes a *stub*: an entry state, ``deferred`` until the DFA
    first reaches it, and an exit. Reaching it (:meth:`build_deferred`, from
    ``LazyDFA._closure``) appends the part's states after all others and links them in
    (a *fragment*); a counter's scope and each state's liveness then carry over from
    the stub, so counted loops and member sets work across the seam as inside one
    build. A part whose emptiness is unsure (a product, a contradiction) is built at
    once, so every state handed out can still complete a match.
    """

    def __init__(
        self, tree: Node, limits: Limits, alphabet: bytes = b"\x01" * 256, *, deadline: float | None = None,
        parts: "dict[tuple[str, Node, bytes, bool | None], Automaton] | None" = None, subtracted: bool = False,
    ) -> None:
        self.limits = limits
        #: Whether this automaton's language is subtracted (an odd number of differences deep):
        #: its products then keep the tuples a budgeted search could not settle (``ProductDFA``).
        self.subtracted = subtracted
        #: The products and their parts built so far, by node *value*, shared with the automata
        #: built inside them: a ``oneOf`` subtracts each branch from every other, so one branch
        #: is a part of n - 1 differences but built once, and the same difference written in
        #: several places (each copy of a ``$ref``'d object with a ``not``) is searched once.
        self._parts: dict[tuple[str, Node, bytes, bool | None], Automaton] = {} if parts is None else parts
        self._deadline = time.monotonic() + limits.timeout_s if deadline is None else deadline
        self._alphabet = alphabet
        self._runs = byte_runs(alphabet)
        self.edges: list[list[tuple[int, int, int]]] = []
        self.epsilon: list[list[int]] = []
        #: Counter operations of the states that implement counted repeats (see ``_counted``).
        self.ops: dict[int, tuple[Any, ...]] = {}
        #: loop state → (body entry, body exit, first and past-last state of the body).
        self._loops: dict[int, tuple[int, int, int, int]] = {}
        self._templates: dict[int, tuple[int, int, int, int]] = {}
        #: Embedded automata (intersections, differences): the state that stands for one,
        #: whose last counter is the embedded automaton's own state (see ``_embed``).
        self.embedded: dict[int, Automaton] = {}
        #: Stub entry → its part, for every stub (copies of a built one included), and the
        #: stubs not built yet; fragments as (first state, past-last state, stub entry).
        self._stubs: dict[int, Node] = {}
        self.deferred: dict[int, Node] = {}
        self._fragments: list[tuple[int, int, int]] = []
        #: State inside a bounded ``Length`` body → (its marker loop, fewest characters from there to
        #: the body's end); marker → the most of those (see ``_length``).
        self.lengths: dict[int, tuple[int, int]] = {}
        #: Those of the states in ``lengths`` that are plain otherwise (no operation, stub or embedded
        #: automaton), once a closure met them: ``(slot, cap)``, doomed where the count at that slot is
        #: concrete and past ``cap`` (``doomed``). The compiled closure walks them (``plain_closure``).
        self.caps: dict[int, tuple[int, int]] = {}
        self._slack: dict[int, int] = {}
        self._eager = 0  # inside a Length body: no part is deferred (its pruning reads the whole body)
        self._nonempty_memo: dict[int, bool] = {}
        self._nests_memo: dict[int, bool] = {}
        self._lock = threading.RLock()
        self._tree = tree  # keeps every node alive, so the caches keyed by node identity stay right
        self.start, self.accept = self._build(tree, defer=False)
        self.live = self._coreachable(0, self.accept)
        self._unbounded: bool | None = None
        self._scopes: dict[int, tuple[int, ...]] = {}
        self._length_slots: dict[int, int] = {}
        self._strides: dict[int, tuple[int, int, int] | None] = {}

    def __len__(self) -> int:
        return len(self.edges)

    @property
    def unbounded(self) -> bool:
        """Whether an embedded automaton, built or deferred, has no finite state count (see ``ProductDFA``).

        Only a product over this automaton asks, so it is worked out then: walking every
        deferred part's tree at build time was a quarter of a typical schema's compile.
        Every stub's part counts, built or not (a built one's automata came from that part).
        """
        if self._unbounded is None:
            nests: dict[int, bool] = {}  # one memo for all stubs: they share subtrees
            self._unbounded = any(getattr(a, "unbounded", False) for a in self.embedded.values()) or any(
                _nests(node, nests) for node in self._stubs.values()
            )
        return self._unbounded

    def __getstate__(self) -> dict[str, Any]:
        """Caches keyed by node identity do not travel: in another process the nodes are new objects."""
        state = super().__getstate__()
        state.update(_templates={}, _nonempty_memo={}, _nests_memo={}, _parts={})
        return state

    def undecided(self) -> bool:
        """Whether a product's liveness search ran out of ``max_search_states`` and counted a
        tuple dead that it could not prove dead (see ``ProductDFA``)."""
        return any(getattr(part, "gave_up", False) for part in self._parts.values())

    def loop_scope(self, q: int) -> tuple[int, ...]:
        """The counted loops whose body holds ``q``, outermost first.

        A virtual state's counter stack has one count per enclosing counted loop, so
        ``counters[i]`` belongs to ``loop_scope(q)[i]``. A fragment's states lie past
        every loop around its stub, so they take the stub's scope, then their own loops.
        """
        scope = self._scopes.get(q)
        if scope is None:
            outer: tuple[int, ...] = ()
            at = bisect.bisect_right(self._fragments, (q, _AFTER_ALL)) - 1
            if at >= 0 and q < self._fragments[at][1]:
                outer = self.loop_scope(self._fragments[at][2])
            holders = [(top - base, loop) for loop, (_, _, base, top) in self._loops.items() if base <= q < top]
            scope = outer + tuple(loop for _, loop in sorted(holders, reverse=True))
            self._scopes[q] = scope
        return scope

    def build_deferred(self, stub: int) -> None:
        """Build the part a stub stands for, now that a walk reached it (see the class docstring)."""
        with self._lock:
            node = self.deferred.get(stub)
            if node is None:
                return  # another caller built it first
            base = len(self.edges)
            try:
                with visit_deadline(self.limits.timeout_s) as deadline:  # a first visit's clock, shared
                    self._deadline = deadline
                    entry, exit_ = self._build(node, defer=False)
            except BaseException:  # a limit: the states built so far stay unreachable, and dead
                self.live += bytearray(len(self.edges) - len(self.live))
                raise
            self.epsilon[exit_].append(stub + 1)
            self._fragments.append((base, len(self.edges), stub))
            self.live += self._coreachable(base, exit_)
            self.epsilon[stub].append(entry)
            del self.deferred[stub]

    def free_range(self, loop: int) -> tuple[int, int, int] | None:
        """``(first, high, step)``: counts from ``first`` on that ``loop``'s guards can't tell apart.

        A count ``c >= first`` passes every guard (``c >= low``, ``c < high``, and
        ``c != 0`` for separated loops) for as long as it stays below ``high``, and
        each iteration of the body reads at least ``step`` bytes, so reading ``n``
        bytes adds at most ``1 + (n - 1) // step`` to it. Two counts that stay below
        ``high`` for that many more iterations behave alike while a token of ``n``
        bytes is read (see :meth:`LazyDFA.shared`). Unbounded loops saturate their
        count instead, and a body that can match nothing counts without input: None.
        """
        if loop in self._strides:
            return self._strides[loop]
        kind, low, high = self.ops[loop][:3]
        result: tuple[int, int, int] | None = None
        if kind == "length" and high is not None:  # one tick per character, each at least one byte
            result = (low, high - self._slack[loop], 1)
        elif high is not None and kind in ("loop", "loop_sep"):
            step = self._shortest_body(loop)
            if step > 0:  # a separated loop also tells count 0 (no separator yet) apart
                result = (max(low, 1) if kind == "loop_sep" else low, high, step)
        self._strides[loop] = result
        return result

    def _shortest_body(self, loop: int) -> int:
        """Fewest bytes from the body's entry to its end (0-1 BFS; inner guards ignored, so a lower bound)."""
        entry, end, base, top = self._loops[loop]
        distance = {entry: 0}
        queue = deque([entry])
        while queue:
            q = queue.popleft()
            d = distance[q]
            if q == end:
                return d
            for t in self.epsilon[q] + ([q + 1] if q in self._stubs else []):  # a stub: at least nothing
                if base <= t < top and distance.get(t, d + 1) > d:
                    distance[t] = d
                    queue.appendleft(t)
            for _, _, t in self.edges[q]:
                if base <= t < top and distance.get(t, d + 2) > d + 1:
                    distance[t] = d + 1
                    queue.append(t)
        return 0  # the body's end is unreachable: the loop never counts, nothing to share

    def _state(self) -> int:
        if len(self.edges) >= self.limits.max_nfa_states:
            self._state_limit()
        if len(self.edges) % 4096 == 4095:  # a clock read per 4096 states: negligible
            self._check_time()
        self.edges.append([])
        self.epsilon.append([])
        return len(self.edges) - 1

    def _check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise LimitExceededError(
                "timeout_s", self.limits.timeout_s,
                "building the pattern's automaton took too long; raise Limits.timeout_s or simplify the pattern",
            )  # fmt: skip

    def _state_limit(self) -> None:
        raise LimitExceededError(
            "max_nfa_states", self.limits.max_nfa_states,
            "the pattern's automaton is too large (long bounded repeats or huge alternations); "
            "raise Limits.max_nfa_states or simplify the pattern",
        )  # fmt: skip

    def _build(self, node: Node, *, defer: bool = True) -> tuple[int, int]:
        """Return (entry, exit) states of a fresh fragment that matches ``node``.

        A node built before (the same object: a repeated body, a shared schema
        fragment) is copied from its first build instead of rebuilt: its states are
        contiguous, so the copy is a re-based slice of the edge lists.
        """
        if defer and not self._eager and self._estimate(node) >= _DEFER_STATES and self._nonempty(node):
            entry, exit_ = self._state(), self._state()
            self._stubs[entry] = self.deferred[entry] = node
            return entry, exit_
        key = id(node)
        template = self._templates.get(key)
        if template is not None:
            return self._instantiate(template)
        base = len(self.edges)
        entry, exit_ = self._build_fresh(node)
        self._templates[key] = (base, len(self.edges), entry, exit_)
        return entry, exit_

    def _instantiate(self, template: tuple[int, int, int, int]) -> tuple[int, int]:
        base, top, entry, exit_ = template
        size = top - base
        offset = len(self.edges) - base
        if len(self.edges) + size > self.limits.max_nfa_states:
            self._state_limit()
        if (len(self.edges) + size) // 4096 != len(self.edges) // 4096:
            self._check_time()
        # Edges leaving the slice were added by the first build's parents: not part of the node.
        if kernel.compiled is not None:
            kernel.compiled.relocate(self.edges, self.epsilon, base, top, offset)
        else:
            for q in range(base, top):
                self.edges.append([(lo, hi, t + offset) for lo, hi, t in self.edges[q] if base <= t < top])
                self.epsilon.append([t + offset for t in self.epsilon[q] if base <= t < top])
        for q in range(base, top):
            if q in self.ops:
                self.ops[q + offset] = self.ops[q]
            if q in self._loops:
                self._loops[q + offset] = tuple(x + offset for x in self._loops[q])  # type: ignore[assignment]
            if q in self.embedded:
                self.embedded[q + offset] = self.embedded[q]
            if q in self.lengths and base <= self.lengths[q][0] < top:  # (a node first built inside a
                # Length's body and copied outside it is outside it: that Length sets its own entries)
                marker, fewest = self.lengths[q]
                self.lengths[q + offset] = (marker + offset, fewest)
            if q in self._slack:
                self._slack[q + offset] = self._slack[q]
            if q in self._stubs:  # built there or not, the copy starts unbuilt: its link left the slice
                self._stubs[q + offset] = self.deferred[q + offset] = self._stubs[q]
        return entry + offset, exit_ + offset

    def _estimate(self, node: Node) -> int:
        """About how many NFA states building ``node`` makes (an upper bound is not needed).

        The answer depends on the node alone, so it is kept on the node: a recursive schema's
        grammar builds one automaton per terminal, and their trees share most subtrees.
        """
        memo = getattr(node, "__dict__", None)  # an absent separator is None: nothing to keep
        known: int | None = None if memo is None else memo.get("_estimate")
        if known is not None:
            return known
        size: int
        if isinstance(node, CharSet):
            size = 2 + 3 * len(node.ranges)
        elif isinstance(node, Literals):
            size = 2 + sum(len(option) for option in node.options)
        elif isinstance(node, (Concat, Alt)):
            size = 2 + sum(self._estimate(part) for part in (node.parts if isinstance(node, Concat) else node.options))
        elif isinstance(node, Repeat):
            body = self._estimate(node.node)
            if node.separator is not None:
                size = body + self._estimate(node.separator) + 5
            else:
                copies = node.low if node.high is None else node.high
                size = body + 5 if copies > 2 and body * copies > _COPY_BUDGET else body * (copies + 1) + 2
        elif isinstance(node, Members):
            size = 2 * len(node.items) + 3 + sum(
                self._estimate(item) + self._estimate(node.separator) for item, _ in node.items
            ) + (self._estimate(node.extra) + self._estimate(node.separator) if node.extra is not None else 0)
        elif isinstance(node, MemberSet):
            parts = [*node.items, node.separator, *([node.extra] if node.extra is not None else []),
                     *node.extra_groups, *(n for pair in node.checked_groups for n in pair)]
            size = 6 + 2 * len(parts) + sum(self._estimate(part) for part in parts)
            size += sum(self._estimate(again) + 1 for _, again in node.repeats)
        elif isinstance(node, Multiple):
            size = 4 + node.step * (node.scale + 2)
        elif isinstance(node, Length):
            size = self._estimate(node.node) + 5
        elif isinstance(node, Tick):
            size = 1
        else:  # Nested, Intersect, Difference, EndsWith: one embedded state
            size = 3
        if memo is not None:
            object.__setattr__(node, "_estimate", size)
        return size

    def _nonempty(self, node: Node) -> bool:
        """Whether ``node`` surely matches some text of the alphabet (see :func:`surely_nonempty`)."""
        return surely_nonempty(node, self._alphabet, self._nonempty_memo)

    def _build_fresh(self, node: Node) -> tuple[int, int]:
        if isinstance(node, CharSet):
            return self._charset(node)
        if isinstance(node, Literals):
            return self._literals(node.options)
        if isinstance(node, Concat):
            entry = current = self._state()
            for part in node.parts:
                start, end = self._build(part)
                self.epsilon[current].append(start)
                current = end
            return entry, current
        if isinstance(node, Alt):
            entry, exit_ = self._state(), self._state()
            for option in node.options:
                start, end = self._build(option)
                self.epsilon[entry].append(start)
                self.epsilon[end].append(exit_)
            return entry, exit_
        if isinstance(node, Repeat):
            return self._repeat(node)
        if isinstance(node, Length):
            return self._length(node)
        if isinstance(node, Tick):
            tick = self._state()
            self.ops[tick] = ("tick", node.units, None)
            return tick, tick
        if isinstance(node, Members):
            return self._members(node)
        if isinstance(node, MemberSet):
            return self._member_set(node)
        if isinstance(node, Multiple):
            return self._multiple(node.step, node.scale)
        if isinstance(node, Nested):
            # The level reads the vocabulary's bytes, as every other part does, and its holes
            # (0x00 edges, a byte JSON text never holds raw). With every byte, a product that
            # holds a free-form value proved tuples live by texts no token spells (a key of
            # U+40000 where SmolLM2 has no byte 0xF1), and the guide let a model write a prefix
            # it could never complete.
            level_alphabet = b"\x01" + self._alphabet[1:]
            level = LazyDFA(ByteNFA(node.level, self.limits, level_alphabet, deadline=self._deadline, parts=self._parts,
                                    subtracted=self.subtracted))  # fmt: skip
            return self._embed(NestedDFA(level, max_states=self.limits.max_dfa_states,
                                         max_depth=self.limits.max_parser_stack))  # fmt: skip
        if isinstance(node, EndsWith):
            tagged = ("ends with", node, self._alphabet, self._polarity(node))
            known = self._parts.get(tagged)
            if known is None:
                known = self._parts[tagged] = EndsWithDFA(
                    self._part(node.node, self.subtracted), _byte_mask(node.last), _byte_mask(node.skip), node.none,
                    max_states=self.limits.max_dfa_states,
                )  # fmt: skip
            return self._embed(known)
        if isinstance(node, (Intersect, Difference)):
            simpler = narrowed(node)
            if isinstance(simpler, (Intersect, Difference)):
                return self._embed(self._product(simpler, self.subtracted))
            return self._build(simpler)
        raise TypeError(f"unknown regex node {node!r}")

    def _product(self, node: "Intersect | Difference", subtracted: bool) -> ProductDFA:
        """The product automaton of an intersection or difference (built once per value and polarity).

        A difference's base keeps the polarity of the difference, its subtracted parts take
        the other one: what ``not`` takes away from a ``not`` is kept.
        """
        key = ("product", node, self._alphabet, self._polarity(node, subtracted))
        product = self._parts.get(key)
        if product is None:
            parts = node.parts if isinstance(node, Intersect) else (node.base, *node.minus)
            polarities = [subtracted] * len(parts) if isinstance(node, Intersect) else [
                subtracted, *[not subtracted] * len(node.minus)]  # fmt: skip
            product = self._parts[key] = ProductDFA(
                [self._part(part, p) for part, p in zip(parts, polarities)], subtract=isinstance(node, Difference),
                max_states=self.limits.max_dfa_states, timeout_s=self.limits.timeout_s,
                search_budget=self.limits.max_search_states, deadline=self._deadline, subtracted=subtracted,
            )  # fmt: skip
        return cast(ProductDFA, product)

    def _part(self, node: Node, subtracted: bool) -> Automaton:
        """The automaton of one part of an intersection or difference (built once per value and polarity).

        A part that is itself a product is that product: wrapped in a lazy DFA of its own it
        would be the same automaton state for state, at the price of a subset state, a closure
        and a row copy per product state (a quarter of the parts of a nested ``not``/``anyOf``).
        """
        if isinstance(node, (Intersect, Difference)):
            node = narrowed(node)
            if isinstance(node, (Intersect, Difference)):
                return self._product(node, subtracted)
        key = ("part", node, self._alphabet, self._polarity(node, subtracted))
        known = self._parts.get(key)
        if known is None:
            known = self._parts[key] = LazyDFA(ByteNFA(
                node, self.limits, self._alphabet, deadline=self._deadline, parts=self._parts, subtracted=subtracted,
            ))  # fmt: skip
        return cast(LazyDFA, known)  # "part" keys hold the parts' LazyDFAs only

    def _polarity(self, node: Node, subtracted: bool | None = None) -> bool | None:
        """The polarity a cached part of ``node`` is built for, or None where both build the same.

        Only a search over a part nested without bound runs out of budget, and only there does
        the polarity change a row (see ``ProductDFA``): other parts, most of a ``oneOf``'s
        branches among them, are built once for both sides of their differences.
        """
        if not _nests(node, self._nests_memo):
            return None
        return self.subtracted if subtracted is None else subtracted

    def _embed(self, automaton: Automaton) -> tuple[int, int]:
        """One state that runs ``automaton``: its state rides on the counter stack.

        ``enter`` pushes the automaton's start; the embedded state ``inside`` reads
        bytes through the automaton's rows (``LazyDFA._expand_one``) and may leave to
        ``exit`` whenever the automaton accepts (``LazyDFA._closure``). To the
        counter machinery it is a loop of its own, never shared (``free_range`` None).
        """
        enter, inside, exit_ = self._state(), self._state(), self._state()
        if automaton.start == DEAD:
            return enter, exit_  # an empty language: no way from enter to exit
        self.embedded[inside] = automaton
        self.ops[enter] = ("enter", automaton.start, None)
        self.ops[inside] = ("embedded", 0, None)
        self._loops[inside] = (inside, inside, inside, inside + 1)
        self.epsilon[enter].append(inside)
        self.epsilon[inside].append(exit_)
        return enter, exit_

    def _repeat(self, node: Repeat) -> tuple[int, int]:
        if node.high is not None and node.high < node.low:  # contradictory bounds (minLength 1, maxLength 0)
            entry, exit_ = self._state(), self._state()
            return entry, exit_  # an empty language: no way from entry to exit
        if node.separator is not None:
            return self._separated(node)
        copies = node.low if node.high is None else node.high
        if copies > 2:
            base = len(self.edges)
            body = self._build(node.node)
            if (len(self.edges) - base) * copies > _COPY_BUDGET:
                return self._counted(node, body, base)
        entry = current = self._state()
        for _ in range(node.low):
            start, end = self._build(node.node)
            self.epsilon[current].append(start)
            current = end
        if node.high is None:
            loop = self._state()
            self.epsilon[current].append(loop)
            start, end = self._build(node.node)
            self.epsilon[loop].append(start)
            self.epsilon[end].append(loop)
            return entry, loop
        # Optional copies nest as (x(x(x)?)?)?: every copy may exit straight to the end,
        # so each epsilon closure stays O(1) instead of O(high - low).
        exit_ = self._state()
        for _ in range(node.high - node.low):
            self.epsilon[current].append(exit_)
            start, end = self._build(node.node)
            self.epsilon[current].append(start)
            current = end
        self.epsilon[current].append(exit_)
        return entry, exit_

    def _length(self, node: Length) -> tuple[int, int]:
        """The body once, with one counter for the characters its ``Tick`` states count (see ``Length``).

        ``push`` starts the count, each tick adds its characters (a walk past ``high``
        dies there), and the end passes once the count reaches ``low``. For a bound
        above, each body state also keeps the fewest characters from it to the end
        (``_fewest_ticks``): a walk whose count plus that exceeds ``high`` can never
        finish, so the closure drops it at once instead of handing out a dead end.
        ``free_range`` then knows how far a count may be from ``high`` for any state
        to live: the most of those fewest counts (``_slack``) below it. A counted repeat
        inside that must reach a lower bound makes the fewest depend on its count too:
        then the product (``Length.product``) is built instead, and the body left unreachable.
        """
        base = len(self.edges)
        self._eager += 1
        try:
            entry, end = self._build(node.node)
        finally:
            self._eager -= 1
        top = len(self.edges)
        if any(base <= loop < top and self.ops[loop][0] in ("loop", "loop_sep") and self.ops[loop][1]
               for loop in self._loops):  # fmt: skip
            return self._build(node.product)  # a counter that must reach its low: the fewest would depend on it
        push, marker, check, pop, exit_ = (self._state() for _ in range(5))
        self._loops[marker] = (entry, end, base, top)  # only a scope: no edge leads to the marker
        self.ops[push] = ("push", node.low, node.high)
        self.ops[marker] = ("length", node.low, node.high)
        self.ops[check] = ("length_end", node.low, node.high)
        self.ops[pop] = ("pop", node.low, node.high)
        fewest = self._fewest_ticks(base, top, end) if node.high is not None else {}
        if node.high is None or fewest.get(entry, node.high + 1) <= node.high:
            self.epsilon[push].append(entry)  # (else no text of the body is short enough: it stays
            # unreachable, so liveness sees the whole Length empty and no state leads into it)
        self.epsilon[end].append(check)
        self.epsilon[check].append(pop)
        self.epsilon[pop].append(exit_)
        if node.high is not None:
            for q, ticks in fewest.items():
                self.lengths[q] = (marker, ticks)
            self._slack[marker] = max(fewest.values(), default=0)
        return push, exit_

    def _fewest_ticks(self, base: int, top: int, end: int) -> dict[int, int]:
        """Fewest characters counted on a way from each state of ``[base, top)`` to ``end``
        (Dijkstra backwards; the guards of inner counted loops are ignored, which is exact
        when each of them may stop at any count: ``Length``'s condition)."""
        reverse: dict[int, list[int]] = {}
        for q in range(base, top):
            for t in [t for _, _, t in self.edges[q]] + self.epsilon[q]:
                if base <= t < top or t == end:
                    reverse.setdefault(t, []).append(q)
        # A body that ends in a Tick ends *on* it (a Tick is its own entry and exit), and a state's
        # characters count from the state on, its own tick included: so does the end's.
        op = self.ops.get(end)
        last = op[1] if op is not None and op[0] == "tick" else 0
        fewest = {end: last}
        heap = [(last, end)]
        while heap:
            ticks, t = heapq.heappop(heap)
            if ticks > fewest.get(t, ticks):
                continue
            for q in reverse.get(t, ()):
                op = self.ops.get(q)
                cost = ticks + (op[1] if op is not None and op[0] == "tick" else 0)
                if cost < fewest.get(q, cost + 1):
                    fewest[q] = cost
                    heapq.heappush(heap, (cost, q))
        return {q: ticks for q, ticks in fewest.items() if base <= q < top}

    def length_slot(self, q: int) -> int:
        """Where the count of the innermost ``Length`` around ``q`` sits in its counter stack."""
        slot = self._length_slots.get(q)
        if slot is None:
            scope = self.loop_scope(q)
            slot = max(i for i, loop in enumerate(scope) if self.ops[loop][0] == "length")
            self._length_slots[q] = slot
        return slot

    def tick(self, q: int, counters: tuple[int, ...]) -> list[VirtualState]:
        """The successors of tick state ``q``: its characters counted, or none past ``high``."""
        slot = self.length_slot(q)
        _, low, high = self.ops[self.loop_scope(q)[slot]][:3]
        count = counters[slot] + self.ops[q][1]
        if count - self.ops[q][1] < FREE:  # symbolic counts stay inside the free range (``shared``)
            if high is None:
                count = min(count, max(low, 1))  # past low, more characters change nothing
            elif count > high:
                return []
        counted = counters[:slot] + (count,) + counters[slot + 1 :]
        return [(t, counted) for t in self.epsilon[q]]

    def doomed(self, q: int, counters: tuple[int, ...]) -> bool:
        """Whether a walk at ``q`` has too few characters left in its ``Length`` to reach the end."""
        marker, fewest = self.lengths[q]
        count = counters[self.length_slot(q)]
        return count < FREE and count + fewest > self.ops[marker][2]

    def cap(self, q: int) -> tuple[int, int]:
        """``(slot, cap)`` of a state in ``lengths``: ``doomed`` exactly when the count at ``slot``
        is concrete and past ``cap`` (the most characters its ``Length`` allows before ``q``)."""
        marker, fewest = self.lengths[q]
        return self.length_slot(q), self.ops[marker][2] - fewest

    def _separated(self, node: Repeat) -> tuple[int, int]:
        """Items with a separator between them, the item built once (see ``Repeat``).

        Without an upper bound and with at most one required item, a plain loop does;
        otherwise a counted loop whose count also says whether a separator comes first.
        """
        if node.high == 0:
            entry = self._state()
            return entry, entry
        base = len(self.edges)
        item_entry, item_end = self._build(node.node)
        sep_entry, sep_end = self._build(node.separator)  # type: ignore[arg-type]
        top = len(self.edges)
        self.epsilon[sep_end].append(item_entry)
        if node.high is None and node.low <= 1:
            entry, after, exit_ = self._state(), self._state(), self._state()
            self.epsilon[entry].append(item_entry)
            self.epsilon[item_end].append(after)
            self.epsilon[after] += [sep_entry, exit_]
            if node.low == 0:
                self.epsilon[entry].append(exit_)
            return entry, exit_
        push, loop, next_, pop, exit_ = (self._state() for _ in range(5))
        self._loops[loop] = (item_entry, item_end, base, top)
        for state, kind in ((push, "push"), (loop, "loop_sep"), (next_, "next"), (pop, "pop")):
            self.ops[state] = (kind, node.low, node.high)
        self.epsilon[push].append(loop)
        self.epsilon[loop] += [item_entry, sep_entry, pop]  # first item / a later one / leave
        self.epsilon[item_end].append(next_)
        self.epsilon[next_].append(loop)
        self.epsilon[pop].append(exit_)
        return push, exit_

    def _counted(self, node: Repeat, body: tuple[int, int], base: int) -> tuple[int, int]:
        """``x{low,high}`` with one copy of ``x`` and an iteration counter.

        Copying the body ``high`` times made a 100-item array of objects with 200-character
        strings a million NFA states. Here the NFA holds the body once; the *virtual*
        state the DFA works on is a template state plus a stack of counters, one per
        enclosing counted repeat, so only the (state, count) pairs a walk reaches exist.
        ``push`` starts a count at 0, ``loop`` may enter the body (count < high) or leave
        (count ≥ low), ``next`` counts a finished body, ``pop`` drops the count.
        """
        top = len(self.edges)
        push, loop, next_, pop, exit_ = (self._state() for _ in range(5))
        entry, end = body
        self._loops[loop] = (entry, end, base, top)
        self.ops[push] = ("push", node.low, node.high)
        self.ops[loop] = ("loop", node.low, node.high)
        self.ops[next_] = ("next", node.low, node.high)
        self.ops[pop] = ("pop", node.low, node.high)
        self.epsilon[push].append(loop)
        self.epsilon[loop] += [entry, pop]  # guarded: enter while count < high, leave once count ≥ low
        self.epsilon[end].append(next_)
        self.epsilon[next_].append(loop)
        self.epsilon[pop].append(exit_)
        return push, exit_

    def _members(self, node: Members) -> tuple[int, int]:
        """Ordered optional items with separators, each item built once.

        ``first[i]``: nothing emitted yet, item i may start directly; ``later[i]``:
        something emitted, so item i needs a separator first. Both enter the same copy
        of item i, whose end always leads to ``later[i + 1]`` — linear in the items,
        where the regex text is quadratic.
        """
        n = len(node.items)
        first = [self._state() for _ in range(n + 1)]
        later = [self._state() for _ in range(n + 1)]
        for i, (item, required) in enumerate(node.items):
            self._enter_item(item, node.separator, first[i], later[i], later[i + 1])
            if not required:
                self.epsilon[first[i]].append(first[i + 1])
                self.epsilon[later[i]].append(later[i + 1])
        exit_ = self._state()
        self.epsilon[first[n]].append(exit_)
        self.epsilon[later[n]].append(exit_)
        if node.extra is not None:  # any number of extra items, looping on later[n]
            self._enter_item(node.extra, node.separator, first[n], later[n], later[n])
        return first[0], exit_

    def _multiple(self, step: int, scale: int) -> tuple[int, int]:
        """Numbers whose value times ``10**scale`` is divisible by ``step``: one state per remainder
        of the digits read so far, per fraction digit read (up to ``scale``; later ones are zeros)."""
        if len(self.edges) + step * (scale + 1) + 4 > self.limits.max_nfa_states:
            self._state_limit()
        entry, signed, zero, exit_ = self._state(), self._state(), self._state(), self._state()
        whole = [self._state() for _ in range(step)]
        fraction = [[self._state() for _ in range(step)] for _ in range(scale)]
        self._add_edge(entry, 0x2D, 0x2D, signed)  # "-"
        self.epsilon[entry].append(signed)
        self._add_edge(signed, 0x30, 0x30, zero)  # "0" (and "-0"): remainder 0
        self.epsilon[zero].append(exit_)
        for digit in range(1, 10):
            self._add_edge(signed, 0x30 + digit, 0x30 + digit, whole[digit % step])
        for r, state in enumerate(whole):
            for digit in range(10):
                self._add_edge(state, 0x30 + digit, 0x30 + digit, whole[(10 * r + digit) % step])
            if r * 10**scale % step == 0:
                self.epsilon[state].append(exit_)
        if scale:
            for source, r in [(zero, 0)] + [(state, r) for r, state in enumerate(whole)]:
                dot = self._state()
                self._add_edge(source, 0x2E, 0x2E, dot)  # "."
                for digit in range(10):
                    self._add_edge(dot, 0x30 + digit, 0x30 + digit, fraction[0][(10 * r + digit) % step])
        for j, row in enumerate(fraction, start=1):  # j fraction digits read
            for r, state in enumerate(row):
                if r * 10 ** (scale - j) % step == 0:
                    self.epsilon[state].append(exit_)
                if j < scale:
                    for digit in range(10):
                        self._add_edge(state, 0x30 + digit, 0x30 + digit, fraction[j][(10 * r + digit) % step])
                else:
                    self._add_edge(state, 0x30, 0x30, state)  # digits past the scale: zeros only
        return entry, exit_

    def _member_set(self, node: MemberSet) -> tuple[int, int]:
        """Members in any order: a hub that knows, from its counter, which items were seen.

        The counter holds a bit per item and, above those bits, the member count
        (saturated where no guard can tell larger counts apart). ``hub``: a separator
        first unless nothing was emitted yet, or leave when the object may end;
        ``choose``: enter an unseen item (or an extra) while the count allows one more;
        ``mark_i``: set item i's bit, count one member, back to the hub. The body's
        states lie in one range, like a counted loop's, so states inside items see
        the set's counter at its place in the stack (``loop_scope``).
        """
        n = len(node.items)
        if len(node.required) > (node.max_count if node.max_count is not None else n) or (
            node.extra is None and not node.checked_groups and node.min_count > n + len(node.extra_groups)
        ) or (node.max_count is not None and node.min_count > node.max_count):
            entry, exit_ = self._state(), self._state()
            return entry, exit_  # the bounds exclude every object: no way through
        if node.ordered and node.repeats:
            raise TypeError("an ordered member set cannot repeat keys")
        base = len(self.edges)
        items = [self._build(item) for item in node.items]
        sep_entry, sep_end = self._build(node.separator)
        extra = [self._build(node.extra)] if node.extra is not None else []
        extra += [self._build(group) for group in node.extra_groups]
        extra += [self._build(member) for pair in node.checked_groups for member in pair]  # checked, then any
        repeats = [self._build(again) for _, again in node.repeats]
        top = len(self.edges)
        never = self._impossible_items(items, node.dependencies, base)
        condition = tuple((present, absent) for present, absent in node.condition if not present & never)
        possible = n - bin(never).count("1") + len(node.extra_groups)
        if (sum(1 << i for i in node.required) & never or node.condition and not condition
                or node.extra is None and not node.checked_groups and node.min_count > possible):
            entry, exit_ = self._state(), self._state()
            return entry, exit_  # a member the object needs matches nothing: no way through
        push, hub, choose, pop, exit_ = (self._state() for _ in range(5))
        cap = max(1, node.min_count, node.max_count or 0)
        dependencies = tuple((1 << i, sum(1 << j for j in others)) for i, others in node.dependencies)
        # a repeat's bit (above the items') needs its item, like a dependency
        dependencies += tuple((1 << (n + j), 1 << i) for j, (i, _) in enumerate(node.repeats))
        spec = _SetSpec(n, sum(1 << i for i in node.required), node.min_count, node.max_count, cap, dependencies,
                        node.ordered, node.extra is not None, tuple(i for i, _ in node.repeats),
                        condition, len(node.extra_groups), len(node.checked_groups), never)  # fmt: skip
        self._loops[hub] = (choose, hub, base, top)
        self.ops[push] = ("set_push", 0, None)
        self.ops[hub] = ("set_hub", 0, None, spec)
        self.ops[choose] = ("set_choose", 0, None, spec)
        self.ops[pop] = ("pop", 0, None)
        self.epsilon[push].append(hub)
        self.epsilon[hub] += [sep_entry, choose, pop]
        self.epsilon[sep_end].append(choose)
        for i, (start, end) in enumerate(items + extra + repeats):
            self.epsilon[choose].append(start)
            mark = self._state()
            self.ops[mark] = ("set_mark", i, None, spec)
            self.epsilon[end].append(mark)
            self.epsilon[mark].append(hub)
        self.epsilon[pop].append(exit_)
        return push, exit_

    def _impossible_items(
        self, items: list[tuple[int, int]], dependencies: tuple[tuple[int, tuple[int, ...]], ...], first: int,
    ) -> int:
        """The bits of a member set's items that match nothing, and of those that need one.

        A member whose value is an empty product (a ``contains`` no element can meet, a
        contradiction a product search proved) has no path from its entry to its exit, but
        the set's guards count on every item: an object that needs it, or a condition that
        names it, would be opened and then allow nothing (a dead end, found by the schema
        fuzzer). Items are built from state ``first`` on, so a search from each item's entry
        stays inside the set's fragment; counted loops whose body matches nothing never leave.
        """
        blocked = self._blocked_loops(first)
        never = sum(1 << i for i, (entry, end) in enumerate(items) if not self._passes(entry, end, blocked))
        changed = bool(never)
        while changed:  # an item that needs an impossible one is impossible too
            changed = False
            for i, needs in dependencies:
                if not never >> i & 1 and any(never >> j & 1 for j in needs):
                    never |= 1 << i
                    changed = True
        return never

    def _enter_item(self, item: Node, separator: Node, bare: int, after_separator: int, done: int) -> None:
        start, end = self._build(item)
        sep_start, sep_end = self._build(separator)
        self.epsilon[bare].append(start)
        self.epsilon[after_separator].append(sep_start)
        self.epsilon[sep_end].append(start)
        self.epsilon[end].append(done)

    def _charset(self, node: CharSet) -> tuple[int, int]:
        """One code point of the set, as a trie of UTF-8 byte-range sequences.

        The trie depends on the ranges and the alphabet only, and the same few sets
        (a string's characters, a key's characters but one) come back thousands of
        times in a large schema: their tries are worked out once (``_charset_shape``)
        and each use copies the edges.
        """
        size, edges = _charset_shape(node.ranges, self._alphabet)
        base = len(self.edges)
        for _ in range(size):
            self._state()
        for q, low, high, target in edges:
            self.edges[base + q].append((low, high, base + target))
        return base, base + 1

    def _literals(self, options: tuple[bytes, ...]) -> tuple[int, int]:
        """A byte trie of literal strings: deterministic by construction, shared prefixes once."""
        entry, exit_ = self._state(), self._state()
        children: dict[tuple[int, int], int] = {}
        for option in options:
            current = entry
            for byte in option:
                key = (current, byte)
                if key not in children:
                    children[key] = self._state()
                    self._add_edge(current, byte, byte, children[key])
                current = children[key]
            self.epsilon[current].append(exit_)
        return entry, exit_

    def _add_edge(self, state: int, low: int, high: int, target: int) -> None:
        """Add ``low..high`` minus the bytes outside the alphabet (no token could spell them)."""
        self.edges[state] += [(lo, hi, target) for lo, hi in clip_to_runs(low, high, self._runs)]

    def _coreachable(self, first: int, target: int) -> bytearray:
        """Mark the states from ``first`` on from which ``target`` can be reached (backwards search).

        The whole automaton at build time (``target``: the accepting state); a fragment when
        its stub is built (``target``: the fragment's exit, which leads to the stub's exit).
        An unbuilt stub passes straight to its exit: its part surely matches something.
        The compiled ``coreachable`` does the same (150 dev schemas' first walks: 0.43 → 0.12 s).
        """
        blocked = self._blocked_loops(first)
        if kernel.compiled is not None:
            live: bytearray = kernel.compiled.coreachable(
                self.edges, self.epsilon, first, target, self.deferred, blocked)
            return live
        reverse: list[list[int]] = [[] for _ in range(first, len(self.edges))]
        for q in range(first, len(self.edges)):
            for _, _, t in self.edges[q]:
                reverse[t - first].append(q)
            for t in self.epsilon[q]:
                if t >= first:
                    reverse[t - first].append(q)
            if q in self.deferred:
                reverse[q + 1 - first].append(q)
        # A counted loop with low > 0 leaves only after its body ran, so when the body
        # cannot get from its entry to its exit the loop never leaves: drop that edge.
        for q in blocked:
            reverse[self.epsilon[q][-1] - first].remove(q)
        live = bytearray(len(self.edges) - first)
        live[target - first] = 1
        stack = [target]
        while stack:
            for q in reverse[stack.pop() - first]:
                if not live[q - first]:
                    live[q - first] = 1
                    stack.append(q)
        return live

    def _blocked_loops(self, first: int) -> set[int]:
        """Counted loops (from state ``first`` on) with low > 0 whose body matches nothing (inner loops first)."""
        blocked: set[int] = set()
        for loop, (entry, end, base, top) in self._loops.items():  # built inner-first
            if self.ops[loop][0] not in ("loop", "loop_sep") or self.ops[loop][1] == 0 or base < first:
                continue
            if not self._passes(entry, end, blocked, (base, top)):
                blocked.add(loop)
        return blocked

    def _passes(self, entry: int, end: int, blocked: set[int], within: tuple[int, int] | None = None) -> bool:
        """Whether some path leads from ``entry`` to ``end`` (inside the states ``within``, if
        given), where a blocked loop never leaves its body and an unbuilt stub passes."""
        seen, stack = {entry}, [entry]
        while stack and end not in seen:
            q = stack.pop()
            targets = [t for _, _, t in self.edges[q]] + self.epsilon[q] + ([q + 1] if q in self.deferred else [])
            if q in blocked:
                targets = targets[:-1]  # only back into its own body, never out
            for t in targets:
                if t not in seen and (within is None or within[0] <= t < within[1] or t == end):
                    seen.add(t)
                    stack.append(t)
        return end in seen


def surely_nonempty(node: Node, alphabet: bytes = b"\x01" * 256, memo: dict[int, bool] | None = None) -> bool:
    """Whether ``node`` surely matches some text of the alphabet, judged from the tree alone.

    False means unsure: a product (only its search can tell), a character set with no
    ASCII character in the alphabet, bounds that may exclude everything. Such a part
    is built at once, where its emptiness shows in the liveness search. ``memo`` is keyed
    by node identity, so it must not outlive the tree.
    """
    memo = {} if memo is None else memo
    known = memo.get(id(node))
    if known is not None:
        return known

    def sure(part: Node) -> bool:
        return surely_nonempty(part, alphabet, memo)

    result: bool
    if isinstance(node, CharSet):
        result = any(alphabet[c] for lo, hi in node.ranges for c in range(lo, min(hi, 0x7F) + 1))
    elif isinstance(node, Literals):
        result = any(all(alphabet[b] for b in option) for option in node.options)
    elif isinstance(node, Concat):
        result = all(sure(part) for part in node.parts)
    elif isinstance(node, Alt):
        result = any(sure(option) for option in node.options)
    elif isinstance(node, Repeat):
        result = (node.high is None or node.high >= node.low) and (
            node.low == 0 or sure(node.node) and (node.low == 1 or node.separator is None or sure(node.separator)))
    elif isinstance(node, Members):
        result = sure(node.separator) and all(sure(item) for item, required in node.items if required)
    elif isinstance(node, MemberSet):
        required = len(node.required)
        result = (
            not node.dependencies and not node.condition and not (node.ordered and node.repeats)
            and node.min_count <= required and (node.max_count is None or node.max_count >= required)
            and sure(node.separator) and all(sure(node.items[i]) for i in node.required)
        )  # fmt: skip
    elif isinstance(node, Multiple):
        result = bool(alphabet[0x30])  # "0" is a multiple of everything
    elif isinstance(node, Tick):
        result = True
    else:  # a product, a nested level, a counted length (its bounds may exclude everything): unsure
        result = False
    memo[id(node)] = result
    return result


def _nests(node: Node, memo: dict[int, bool]) -> bool:
    """Whether ``node`` holds a :class:`Nested` level anywhere (products' parts included).

    The answer depends on the node alone, so it is kept on the node (as ``_estimate`` is): a
    schema's member values are checked for emptiness one automaton each, and a large value
    (a ``format: regex`` string) was walked again for every one of them.
    """
    own = getattr(node, "__dict__", None)
    known = memo.get(id(node)) if own is None else own.get("_nests")
    if known is None:
        known = isinstance(node, Nested) or any(_nests(c, memo) for c in _children(node))
        if own is None:
            memo[id(node)] = known
        else:
            object.__setattr__(node, "_nests", known)
    return known


def _children(node: Node) -> list[Node]:
    """The nodes directly inside ``node``, whatever its kind."""
    children: list[Any] = []
    for name in ("parts", "options", "items", "node", "separator", "extra", "extra_groups",
                 "checked_groups", "base", "minus", "repeats", "level"):
        value = getattr(node, name, None)
        children += value if isinstance(value, tuple) else [value]
    # Members' items are (node, required), a member set's repeats (item, node)
    flat = [x for c in children for x in (c if isinstance(c, tuple) else (c,))]
    return [c for c in flat if isinstance(c, _NODE_TYPES)]


def _holds_hole(node: Node, memo: dict[int, bool]) -> bool:
    """Whether ``node`` may read the byte ``HOLE`` (see :mod:`.nested`) anywhere."""
    known = memo.get(id(node))
    if known is None:
        if isinstance(node, CharSet):
            known = any(low <= HOLE <= high for low, high in node.ranges)
        elif isinstance(node, Literals):
            known = any(HOLE in option for option in node.options)
        else:
            known = any(_holds_hole(c, memo) for c in _children(node))
        memo[id(node)] = known
    return known


#: Every byte may start the text, and the empty text is possible: what ``_first`` says when unsure.
_ANY_FIRST = ((1 << 256) - 1, True)
_BRACKETS = (1 << ord("[")) | (1 << ord("{"))


def _first(node: Node) -> tuple[int, bool]:
    """A superset of the bytes a nonempty text of ``node`` starts with (bit ``b`` of the int: byte
    ``b``), and whether ``node`` may match the empty text (True where unsure).

    Kept on the node where it has a ``__dict__`` (as ``_nests`` is): trees share subtrees.
    """
    own = getattr(node, "__dict__", None)
    known = None if own is None else own.get("_first")
    if known is not None:
        return cast("tuple[int, bool]", known)
    result: tuple[int, bool]
    if isinstance(node, CharSet):
        mask = 0
        for low, high in node.ranges:
            if low < 0x80:
                mask |= ((1 << (min(high, 0x7F) + 1)) - 1) & ~((1 << low) - 1)
            if high >= 0x80:  # a lead byte of a multi-byte character: all of them, coarsely
                mask |= ((1 << 0x100) - 1) & ~((1 << 0xC0) - 1)
        result = (mask, False)
    elif isinstance(node, Literals):
        result = (sum(1 << b for b in {o[0] for o in node.options if o}), any(not o for o in node.options))
    elif isinstance(node, Concat):
        mask, empty = 0, True
        for part in node.parts:
            part_mask, part_empty = _first(part)
            mask |= part_mask
            if not part_empty:
                empty = False
                break
        result = (mask, empty)
    elif isinstance(node, Alt):
        firsts = [_first(option) for option in node.options]
        result = (reduce(operator.or_, (m for m, _ in firsts), 0), any(e for _, e in firsts))
    elif isinstance(node, Repeat):
        mask, empty = _first(node.node)
        result = (mask, empty or node.low == 0)
    elif isinstance(node, Length):  # the empty text has no characters
        mask, empty = _first(node.node)
        result = (mask, empty and node.low == 0)
    elif isinstance(node, Multiple):
        result = (sum(1 << b for b in b"-0123456789"), False)
    elif isinstance(node, Intersect):
        firsts = [_first(part) for part in node.parts]
        result = (reduce(operator.and_, (m for m, _ in firsts)), all(e for _, e in firsts))
    elif isinstance(node, Difference):
        result = _first(node.base)
    elif isinstance(node, EndsWith):
        result = _first(node.node)
    elif isinstance(node, Tick):
        result = (0, True)
    elif isinstance(node, Nested):  # its own level, where a hole first would be a bracket
        mask, empty = _first(node.level)
        result = (mask | _BRACKETS if mask & (1 << HOLE) else mask, empty)
    else:  # members, a rule: unsure
        result = _ANY_FIRST
    if own is not None:
        object.__setattr__(node, "_first", result)
    return result


def narrowed(node: Node) -> Node:
    """``node`` with the parts of its products that cannot meet left out: the same language.

    A JSON value's first byte tells its type, so ``not: {pattern: ...}`` beside ``type:
    string`` subtracts a free-form value (objects and arrays nested without bound) of which
    only the strings can ever meet the base. Left in, every liveness search of the product
    runs through the free-form part's states and is budgeted as unbounded (allany23: nots of
    anyOfs of allOfs of patterns, 3.3 s). A difference keeps of each subtracted part only
    what starts as its base may start; an intersection keeps of each part what starts as
    all of them may. The narrowed parts' own products narrow theirs when they are built.
    Kept on the node, as ``_first`` is.
    """
    known = node.__dict__.get("_narrowed") if isinstance(node, (Intersect, Difference)) else node
    if known is None:
        known = _narrow(node)
        if known == node:
            known = node
        elif isinstance(known, (Intersect, Difference)):
            object.__setattr__(known, "_narrowed", known)  # narrowed once is enough
        object.__setattr__(node, "_narrowed", known)
    return cast(Node, known)


def _narrow(node: Node) -> Node:
    if isinstance(node, Difference):
        base, minus = node.base, list(node.minus)
        while isinstance(base, Difference):  # (a - b) - c = a - b - c
            minus[:0] = base.minus
            base = base.base
        groups = _first_byte_groups(base)
        if len(groups) > 1:
            # (x | y) - m = (x - m) | (y - m): where the base's options start with bytes apart
            # (a typeless branch: objects, arrays, strings, numbers...), each becomes a product
            # of its own, narrowed to the parts that start as it does. Kept whole, a liveness
            # search from the start wanders through free-form arrays that base and subtracted
            # part both hold, where no witness can lie, and spends its budget there before it
            # reaches the object that tells them apart (Snowplow sp_336: a oneOf of two closed
            # objects without "type", whose valid instances were refused).
            return alt(*(narrowed(Difference(group, tuple(minus))) for group in groups))
        first = _first(base)
        kept: list[Node] = []
        for part in minus:
            part = _starting(part, first)
            # a - (b | c) = a - b - c: each alternative a part of the product itself, where as one
            # part it would be a lazy DFA whose states are the sets of its options' product states
            kept += part.options if isinstance(part, Alt) else [part] if part != NOTHING else []
        kept = list(dict.fromkeys(kept))
        if any(contained(base, part) for part in kept):
            # empty, shown by the trees: the product's search could only run out of budget here
            # where a part nests without bound (see ``inclusion``)
            return NOTHING
        # a subtracted part inside another takes nothing away that the other does not
        kept = [part for i, part in enumerate(kept)
                if not any(j != i and contained(part, other) and not (j > i and contained(other, part))
                           for j, other in enumerate(kept))]  # fmt: skip
        return Difference(base, tuple(kept)) if kept else base
    if isinstance(node, Intersect):
        first = _first(node)
        parts: list[Node] = []
        for part in node.parts:
            part = _starting(part, first)
            parts += part.parts if isinstance(part, Intersect) else [part]  # a & (b & c) = a & b & c
        return NOTHING if NOTHING in parts else Intersect(tuple(dict.fromkeys(parts)))
    return node


def _first_byte_groups(node: Node) -> list[Node]:
    """``node``'s options gathered into groups whose first bytes are apart from every other
    group's (one group where an option may be empty or ``node`` is no alternation)."""
    if not isinstance(node, Alt) or len(node.options) < 2:
        return [node]
    groups: list[tuple[int, list[Node]]] = []
    for option in node.options:
        mask, empty = _first(option)
        if empty:
            return [node]
        joined = [g for g in groups if g[0] & mask]
        for g in joined:
            mask |= g[0]
        merged = [o for g in joined for o in g[1]] + [option]
        groups = [g for g in groups if not g[0] & mask] + [(mask, merged)]
    return [alt(*options) for _, options in groups] if len(groups) > 1 else [node]


def _starting(node: Node, first: tuple[int, bool]) -> Node:
    """A sublanguage of ``node`` that holds every one of its texts that starts with a byte of
    ``first`` (or is empty, where ``first`` allows that): options of alternations that start
    otherwise are left out, through intersections and the bases of differences."""
    mask, empty = _first(node)
    if not mask & first[0] and not (empty and first[1]):
        return NOTHING
    if isinstance(node, Alt):
        kept = [o for o in (_starting(o, first) for o in node.options) if o != NOTHING]
        return alt(*kept) if kept else NOTHING
    if isinstance(node, Intersect):
        parts = tuple(_starting(part, first) for part in node.parts)
        return NOTHING if NOTHING in parts else Intersect(parts)
    if isinstance(node, Difference):
        base = _starting(node.base, first)
        return NOTHING if base == NOTHING else Difference(base, node.minus)
    if isinstance(node, Nested) and isinstance(node.level, Alt):
        # a free-form value of which only scalars may start so (a string's not, a number's
        # anyOf): those scalars, which hold no hole and so no nesting
        scalars = _starting(node.level, first)
        if not _holds_hole(scalars, {}):
            return scalars
    return node


def _byte_mask(ranges: tuple[tuple[int, int], ...]) -> NDArray[np.bool_]:
    mask = np.zeros(256, dtype=bool)
    for low, high in ranges:
        mask[low : high + 1] = True
    return mask


@lru_cache(maxsize=1024)
def _charset_shape(ranges: tuple[tuple[int, int], ...], alphabet: bytes) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
    """The UTF-8 trie of a character set over ``alphabet``: its state count (entry 0, exit 1)
    and its edges ``(state, low, high, target)``, bytes outside the alphabet left out."""
    runs = byte_runs(alphabet)
    edges: list[tuple[int, int, int, int]] = []
    count = 2

    def new_state() -> int:
        nonlocal count
        count += 1
        return count - 1

    def add_edge(state: int, low: int, high: int, target: int) -> None:
        edges.extend((state, lo, hi, target) for lo, hi in clip_to_runs(low, high, runs))

    add_utf8_trie(ranges, 0, 1, new_state, add_edge)
    return count, tuple(edges)


#: A repeat whose copies would exceed this many NFA states uses a counter instead.
_COPY_BUDGET = 256
_NODE_TYPES = (Alt, CharSet, Concat, Difference, EndsWith, Intersect, Length, Literals, Members, MemberSet, Multiple, Nested, Repeat)
#: Estimated NFA states from which a part is built on first visit (see ``ByteNFA``).
_DEFER_STATES = 1024
#: Sorts after every fragment that starts at the same state (``ByteNFA.loop_scope``).
_AFTER_ALL = 1 << 62

#: An NFA state plus the iteration counts of the counted repeats around it.
VirtualState = tuple[int, tuple[int, ...]]

#: Counts from here up are symbolic: ``FREE + k`` is "k more than a count inside the
#: loop's free range" (``ByteNFA.free_range``), for which every guard holds.
FREE = 1 << 40


@dataclass(frozen=True)
class _SetSpec:
    """What the guards of an unordered member set read (see ``ByteNFA._member_set``)."""

    items: int
    required: int  # bit mask
    min_count: int
    max_count: int | None
    cap: int  # counts saturate here
    dependencies: tuple[tuple[int, int], ...]  # (bit of an item, bits it requires)
    ordered: bool  # item i only while no item from i on was seen

    has_extra: bool
    repeats: tuple[int, ...] = ()  # per repeat, its item: bit items + j, and no member counted
    condition: tuple[tuple[int, int], ...] = ()  # (present, absent) bit masks, one pair must hold at the end
    groups: int = 0  # extras split by their key's last byte (MemberSet.extra_groups): a bit per group
    checked: int = 0  # a superset's checked groups (MemberSet.checked_groups): a "pending" bit per group
    never: int = 0  # bit mask of the items that match nothing (``ByteNFA._impossible_items``)

    #: ``choices`` by (seen, count), kept: closures through a wide object's hub ask it again for
    #: every new counter stack around the same set (o19343's walk: 19,768 calls, 1,564 distinct
    #: pairs, each a ``viable`` check per item). No part of equality or hash.
    _choices: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @property
    def width(self) -> int:
        """The bits of ``seen``: one per item, then one per repeat, then one per extra group or checked group."""
        return self.items + len(self.repeats) + self.groups + self.checked

    @property
    def extras(self) -> int:
        """How many extra items follow the items in ``choices``: the groups, two per checked group
        (its value checked, then any value), or one plain extra."""
        return self.groups or 2 * self.checked or int(self.has_extra)

    @property
    def pending(self) -> int:
        """The bits of the checked groups whose last member held a value outside the schema."""
        return ((1 << self.checked) - 1) << (self.items + len(self.repeats))

    def group_bit(self, group: int) -> int:
        return 1 << (self.items + len(self.repeats) + group)

    def distinct(self, seen: int, count: int) -> int:
        """The members ``min_count`` reads: all of them, or with extra groups the items seen and
        the groups seen (extras of one group may share a key: they count once)."""
        if not self.groups:
            return count
        return bin(seen & ((1 << self.items) - 1)).count("1") + bin(seen >> (self.items + len(self.repeats))).count("1")

    def may_end(self, seen: int, count: int) -> bool:
        return (
            seen & self.required == self.required
            and not seen & self.pending
            and self.distinct(seen, count) >= self.min_count
            and all(seen & needs == needs for bit, needs in self.dependencies if seen & bit)
            and (not self.condition or any(seen & present == present and not seen & absent
                                           for present, absent in self.condition))  # fmt: skip
        )

    def viable(self, seen: int, count: int) -> bool:
        """Whether the object can still end after this member: what it still needs can still come.

        Guards alone would let a walk pick a member after which nothing can finish
        the object (an ordered item past a required one, one member too many for
        ``maxProperties``): a dead end. This keeps such choices out.
        """
        if seen & self.never:
            return False
        needed = self.required & ~seen
        for bit, needs in self.dependencies:
            if seen & bit:
                needed |= needs & ~seen
        if self.condition:  # some pair must stay reachable: its absent items unseen, ever
            return any(self._viable(seen, count, self._closed(seen, needed | present & ~seen), absent)
                       for present, absent in self.condition if not seen & absent)  # fmt: skip
        return self._viable(seen, count, needed, 0)

    def _closed(self, seen: int, needed: int) -> int:
        """``needed`` with what each needed or seen item's dependencies need, to a fixpoint."""
        while True:
            more = needed
            for bit, needs in self.dependencies:
                if (seen | more) & bit:
                    more |= needs & ~seen
            if more == needed:
                return needed
            needed = more

    def _viable(self, seen: int, count: int, needed: int, absent: int) -> bool:
        absent |= self.never  # an item that matches nothing is absent for good
        if needed & absent:
            return False
        if self.ordered and needed and (needed & -needed).bit_length() <= seen.bit_length():
            return False  # a needed item lies before one already written
        total = count + bin(needed).count("1")
        if self.max_count is not None and total > self.max_count:
            return False
        distinct = self.distinct(seen, count)
        if distinct + bin(needed).count("1") >= self.min_count or self.has_extra or self.checked:
            return True
        items = seen & ((1 << self.items) - 1)
        free = self.items - items.bit_length() if self.ordered else self.items - bin(items).count("1")
        free += self.groups - bin(seen >> (self.items + len(self.repeats))).count("1")  # each unseen group: one more
        gone = absent & ~seen  # in order, items before the last one seen are no longer free anyway
        free -= bin(gone >> items.bit_length() if self.ordered else gone).count("1")
        if self.max_count is not None:  # each member to come adds one distinct at most
            free = min(free, self.max_count - count)
        return distinct + free >= self.min_count

    def choices(self, seen: int, count: int) -> tuple[int, ...]:
        """The items (and ``items`` for an extra) that may come next."""
        known = self._choices.get((seen, count))
        if known is None:
            known = self._choices[seen, count] = tuple(self._choose(seen, count))
        return known

    def _choose(self, seen: int, count: int) -> list[int]:
        if self.max_count is not None and count >= self.max_count:
            return []
        out = []
        for i in range(self.items):
            unseen = not seen >> i if self.ordered else not seen >> i & 1
            if unseen and self.viable(seen | 1 << i, count + 1):
                out.append(i)
        if self.has_extra and not self.groups and self.viable(seen, count + 1):
            out.append(self.items)
        for group in range(self.groups):  # a group may come again: its key may differ from the last one's
            if self.viable(seen | self.group_bit(group), count + 1):
                out.append(self.items + group)
        if self.checked and self.viable(seen, count + 1):  # a pending bit never stops the object: a checked member clears it
            out += range(self.items, self.items + 2 * self.checked)
        for j, i in enumerate(self.repeats):  # an earlier copy of item i's key: only before item i
            if not seen >> i & 1 and self.viable(seen | 1 << (self.items + j), count):
                out.append(self.items + self.extras + j)
        return out


def _member_set(op: tuple[Any, ...], targets: list[int], counters: tuple[int, ...]) -> list[VirtualState]:
    """The epsilon successors of an unordered member set's states (see ``ByteNFA._member_set``)."""
    kind, spec = op[0], op[3]
    value = counters[-1]
    seen, count = value & ((1 << spec.width) - 1), value >> spec.width
    if kind == "set_hub":
        separator, choose, leave = targets
        out = [(separator if count or seen else choose, counters)] if spec.choices(seen, count) else []
        return out + [(leave, counters)] if spec.may_end(seen, count) else out
    if kind == "set_choose":
        return [(targets[i], counters) for i in spec.choices(seen, count)]
    # "set_mark": item op[1] was read, or past the items an extra, or past that a repeat
    i = op[1]
    if i >= spec.items + spec.extras:  # a repeated key: its bit, and no new member
        seen |= 1 << (i - spec.extras)
    else:
        if spec.checked and i >= spec.items:  # a checked group's member: its value checked (even) or any (odd)
            bit = 1 << (spec.items + len(spec.repeats) + (i - spec.items) // 2)
            seen = seen | bit if (i - spec.items) % 2 else seen & ~bit
        else:
            seen |= 1 << i if i < spec.items else spec.group_bit(i - spec.items) if spec.groups else 0
        count = min(count + 1, spec.cap)
        if spec.groups and spec.distinct(seen, count) >= spec.min_count:  # enough: which groups no longer matters
            seen |= spec.group_bit(spec.groups) - spec.group_bit(0)
    return [(targets[0], counters[:-1] + (seen | count << spec.width,))]


def _apply(op: tuple[Any, ...], targets: list[int], counters: tuple[int, ...]) -> list[VirtualState]:
    """The epsilon successors of a counter state (see ``ByteNFA._counted``)."""
    kind, low, high = op[:3]
    if kind.startswith("set_") and kind != "set_push":
        return _member_set(op, targets, counters)
    if kind == "set_push":
        return [(targets[0], counters + (0,))]
    if kind == "push":
        return [(targets[0], counters + (0,))]
    if kind == "enter":  # an embedded automaton starts in its start state (``low``)
        return [(targets[0], counters + (low,))]
    if kind == "pop":
        return [(targets[0], counters[:-1])]
    if kind == "length_end":  # a symbolic count lies past low
        return [(targets[0], counters)] if counters[-1] >= low else []
    count = counters[-1]
    if kind == "next":  # without an upper bound, counting past max(low, 1) changes nothing
        count = count + 1 if high is not None else min(count + 1, max(low, 1))
        return [(targets[0], counters[:-1] + (count,))]
    out = []
    below_high = high is None or count < high or count >= FREE
    if kind == "loop":
        body, leave = targets
        if below_high:
            out.append((body, counters))
    else:  # "loop_sep": the first item comes bare, later ones after the separator
        body, separator, leave = targets
        if below_high:
            out.append((body if count == 0 else separator, counters))
    if count >= low:
        out.append((leave, counters))
    return out


def pending_cell(code: int) -> int:
    """The table cell that stands for the pending move ``code`` of a :class:`LazyDFA` (below ``DEAD``)."""
    return DEAD - 1 - code


def pending_code(cell: int) -> int:
    """The pending move a table cell below ``DEAD`` stands for (the inverse of ``pending_cell``)."""
    return DEAD - 1 - cell


def plain_closure(
    q: int, seen: set[int], epsilon: list[list[int]], edges: list[list[tuple[int, int, int]]], live: bytearray,
    accept: int, special: tuple[dict[int, Any], ...], caps: dict[int, tuple[int, int]],
    counters: tuple[int, ...], free: int,
) -> tuple[list[int], list[int]]:
    """The plain part of an epsilon closure from ``q``: the live states that read a byte or accept,
    and the special states met (held by a dict of ``special``), not entered; ``seen`` is read and
    extended. A state of ``caps`` (a bounded ``Length``'s plain state, ``ByteNFA.caps``) is plain
    unless doomed: its ``(slot, cap)`` says it is when ``counters[slot]`` is concrete (below
    ``free``) and past ``cap``. The Python path of the compiled ``closure`` (``_kernel.c``), with
    the same result."""
    reading: list[int] = []
    met: list[int] = []
    stack = [q]
    while stack:
        s = stack.pop()
        cap = caps.get(s)
        if cap is not None:
            count = counters[cap[0]]
            if count < free and count > cap[1]:
                continue
        elif any(s in table for table in special):
            met.append(s)
            continue
        if not live[s]:
            continue
        if edges[s] or s == accept:
            reading.append(s)
        for t in epsilon[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return reading, met


def sweep_runs(
    moves: list[tuple[int, int, VirtualState]],
) -> list[tuple[int, int, "VirtualState | frozenset[VirtualState]"]]:
    """A state's moves ``(low, high, target)``, sorted, cut into runs of bytes with one set of
    targets: the one target where a single distinct one covers the run, else their frozenset.

    With ``LazyDFA._place``, the Python path of the compiled ``expand`` (``_kernel.c``), with
    the same result. Nearly every state's moves are disjoint ranges (a key's next letter, a
    string character's ``[^"\\]`` as a few runs), each then a run of its own; where they
    overlap (the states of several branches at a string's interior), moves over the same
    range open and close together, so the cut between two boundaries touches groups, not moves.
    """
    if all(a[1] < b[0] for a, b in zip(moves, moves[1:])):
        return [(lo, hi, move) for lo, hi, move in moves]
    groups: dict[tuple[int, int], list[VirtualState]] = {}
    for lo, hi, move in moves:
        groups.setdefault((lo, hi), []).append(move)
    bounds: dict[int, list[tuple[bool, tuple[int, int]]]] = {}
    for span in groups:
        bounds.setdefault(span[0], []).append((True, span))
        bounds.setdefault(span[1] + 1, []).append((False, span))
    active: set[tuple[int, int]] = set()
    cuts = sorted(bounds)
    runs: list[tuple[int, int, VirtualState | frozenset[VirtualState]]] = []
    for at, until in zip(cuts, cuts[1:]):
        for opens, span in bounds[at]:
            if opens:
                active.add(span)
            else:
                active.discard(span)
        if active:
            targets = frozenset(move for span in active for move in groups[span])
            runs.append((at, until - 1, next(iter(targets)) if len(targets) == 1 else targets))
    return runs


class LazyDFA(Shared):
    """Subset construction on demand: a DFA state is created when first reached.

    ``table[s, b]`` is the successor of state ``s`` on byte ``b`` (``DEAD`` when
    none); a row is valid only after :meth:`expand` ran for ``s``, and a cell below
    ``DEAD`` is a successor not built yet (``pending_cell``): :meth:`row` builds a
    whole row, :meth:`resolve` the cells a token walk reads. The table is a
    numpy array so a token index can walk thousands of tokens through it in one
    vectorized step. Expansion takes a lock: a guide (and so this DFA) is shared by
    every sequence that uses it, possibly from several threads.
    """

    def __init__(self, nfa: ByteNFA) -> None:
        self.nfa = nfa
        self.limits = nfa.limits
        self._closures: dict[VirtualState, frozenset[VirtualState]] = {}
        self._ids: dict[frozenset[VirtualState], int] = {}
        #: A byte run's NFA targets → the DFA state they close into, for every expanded state: many
        #: states move to the same targets (each character of a string interior), and the
        #: closure of a set of targets is the union of its members' closures, built once here.
        self._moves: dict[VirtualState | frozenset[VirtualState], int] = {}
        #: An embedded automaton's row as runs of bytes with one successor, by (state, its state):
        #: rows never change once built, and a product state recurs in many subset states.
        self._embedded_runs: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        #: Each expanded state's row as runs of bytes with one cell: a successor, ``DEAD`` or pending.
        self._placed: dict[int, list[Run]] = {}
        #: Each complete state's row as runs of bytes with one live successor (see ``runs_of``).
        self._runs: dict[int, list[Run]] = {}
        #: Moves whose successor is not built yet (see ``_expand_one``): the table cell
        #: ``pending_cell(k)`` stands for ``_pending[k]`` = (state, low, high, targets), None once built.
        self._pending: list[tuple[int, int, int, VirtualState | frozenset[VirtualState]] | None] = []
        #: The codes of each expanded state's moves that may still be pending.
        self._unresolved: dict[int, list[int]] = {}
        self.sets: list[frozenset[VirtualState]] = []
        self.finals: list[bool] = []
        self.expanded = np.zeros(64, dtype=bool)
        self.table: NDArray[np.int32] = np.full((64, 256), DEAD, dtype=np.int32)
        self._lock = threading.RLock()
        #: The NFA's tables of special states a closure reads (the same objects for the NFA's life:
        #: they grow in place).
        self._special = (nfa.deferred, nfa.lengths, nfa.embedded, nfa.ops)
        start = self._closure_of([(nfa.start, ())])
        self.start = DEAD if not start else self._intern(start)

    @property
    def num_states(self) -> int:
        return len(self.sets)

    @property
    def unbounded(self) -> bool:
        return self.nfa.unbounded

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """Held while states are added or expanded: whoever reads ``table`` and ``expanded``
        together holds it too (adding a state may replace both arrays)."""
        return self._lock

    def is_final(self, state: int) -> bool:
        return self.finals[state]

    def row(self, state: int) -> NDArray[np.int32]:
        """Successors of ``state`` on each of the 256 bytes (expanding it first if needed)."""
        if not self.expanded[state] or state in self._unresolved:
            self._complete(state)
        row: NDArray[np.int32] = self.table[state]
        return row

    def successor(self, state: int, byte: int) -> int:
        """The successor of ``state`` on ``byte``, building that one alone where it is pending
        (a product's probe reads a few bytes of each state, not whole rows)."""
        with self._lock:
            if not self.expanded[state]:
                self._expand_one(state)
            cell = int(self.table[state, byte])
            if cell < DEAD:
                self._resolve(pending_code(cell))
                cell = int(self.table[state, byte])
        return cell

    def successors(self, state: int, data: NDArray[np.intp]) -> list[int]:
        """The successors of ``state`` on each byte of ``data``, building those alone where they
        are pending: a product's probe reads a hundred bytes of each state it settles, and one
        call per byte (``successor``) was a fifth of o19343's first walk."""
        with self._lock:
            if not self.expanded[state]:
                self._expand_one(state)
            cells = self.table[state, data]
            pending = cells < DEAD
            if pending.any():
                for cell in dict.fromkeys(cells[pending].tolist()):  # in ``data``'s order, as one by one
                    self._resolve(pending_code(cell))
                cells = self.table[state, data]  # (resolving may grow the table: read it again)
            found: list[int] = cells.tolist()
        return found

    def runs(self, state: int) -> list[Run]:
        """The row of ``state`` as runs of bytes with one live successor (see ``runs_of``)."""
        runs = self._runs.get(state)
        if runs is None:
            self._complete(state)
            runs = []
            for low, high, _ in self._placed[state]:
                successor = int(self.table[state, low])
                if successor != DEAD:
                    add_run(runs, low, high, successor)
            self._runs[state] = runs
        return runs

    def resolve(self, states: NDArray[np.int32], data: NDArray[np.uint8]) -> None:
        """Build the successors of ``states[i]`` on byte ``data[i]`` that are still pending
        (each state expanded): what a token walk reads, and nothing more (see ``_expand_one``)."""
        with self._lock:
            cells = self.table[states, data]
            for cell in set(cells[cells < DEAD].tolist()):  # (np.unique costs tens of µs a call)
                self._resolve(pending_code(cell))

    def _complete(self, state: int) -> None:
        """Expand ``state`` and build every successor of its row."""
        with self._lock:
            if not self.expanded[state]:
                self._expand_one(state)
            for code in self._unresolved.get(state, ()):
                self._resolve(code)
            self._unresolved.pop(state, None)  # (last: ``row`` reads this without the lock)

    def _resolve(self, code: int) -> None:
        entry = self._pending[code]
        if entry is not None:
            state, low, high, targets = entry
            successor = self._successor(targets)  # (may grow the table: read it after)
            self.table[state, low : high + 1] = successor
            self._pending[code] = None

    def matches(self, data: bytes) -> bool:
        """Whether the automaton accepts ``data`` in full (used to filter ``enum`` values)."""
        state = self.start
        for byte in data:
            if state == DEAD:
                return False
            state = int(self.row(state)[byte])
        return state != DEAD and self.is_final(state)

    def expand(self, states: "list[int] | NDArray[np.int32]") -> None:
        """Compute the table rows of ``states`` that are not computed yet."""
        with self._lock:
            for state in states:
                state = int(state)
                if not self.expanded[state]:
                    self._expand_one(state)

    def explore(self, deadline: float | None = None) -> int:
        """Expand every reachable state (for ``explain`` and tests); returns the state count."""
        frontier = 0
        while frontier < self.num_states:
            if deadline is not None and time.monotonic() > deadline:
                raise LimitExceededError("timeout_s", self.limits.timeout_s, "exploring the whole DFA")
            self._complete(frontier)
            frontier += 1
        return self.num_states

    def shared(self, state: int, reach: int) -> tuple[int, dict[int, int]] | None:
        """A symbolic stand-in for ``state`` that behaves alike over any ``reach`` bytes.

        Inside a ``maxLength: 200`` string every character is a new count and so a new
        state, but a token read at count 7 and at count 8 does the same thing, shifted
        by one; so does the 3rd vs the 4th item of an array of objects. Counts that
        stay inside their loop's free range while ``reach`` more bytes are read
        (``ByteNFA.free_range``) are replaced by ``FREE + (count - base)``, one
        ``base`` per loop (the smallest such count); the guards treat ``FREE + k`` as
        "inside the free range".
        A token index can then build one row for the stand-in and translate its
        successors back with :meth:`concrete` (symbolic counts are exactly the ones that
        descend from the shifted counts; pushed counts stay concrete). Returns None
        when no count can be shifted.
        """
        members = self.sets[state]
        counts: dict[int, list[int]] = {}
        for q, counters in members:
            for loop, count in zip(self.nfa.loop_scope(q), counters):
                counts.setdefault(loop, []).append(count)
        bases: dict[int, int] = {}
        for loop, values in counts.items():
            free = self.nfa.free_range(loop)
            if free is not None and all(free[0] <= c and c + 1 + (reach - 1) // free[2] < free[1] for c in values):
                bases[loop] = min(values)
        if not bases:
            return None
        stand_in = frozenset(
            (q, tuple(FREE + c - bases[loop] if loop in bases else c for loop, c in zip(self.nfa.loop_scope(q), counters)))
            for q, counters in members
        )  # fmt: skip
        with self._lock:
            return self._intern(stand_in), bases

    def concrete(self, state: int, bases: dict[int, int]) -> int:
        """The real state a symbolic one stands for, with the counts ``shared`` shifted (see there).

        Only the loops of ``bases`` hold symbolic counts: a member set's value (its seen bits, then
        its count) passes ``FREE`` once the set has 40 items, and stays what it is.
        """
        members = frozenset(
            (q, tuple(bases[loop] + c - FREE if loop in bases and c >= FREE else c
                      for loop, c in zip(self.nfa.loop_scope(q), counters)))
            for q, counters in self.sets[state]
        )  # fmt: skip
        with self._lock:
            return self._intern(members)

    # ------------------------------------------------------------------ construction

    def _expand_one(self, state: int) -> None:
        """Fill the state's row: one move per run of bytes that lead to the same NFA targets.

        The moves are cut into runs of bytes with one set of targets (``sweep_runs``; the
        compiled ``expand`` does all of this method's cutting and placing in one call, with no
        move built as a tuple: in Python they were a fifth of a first walk's expansion). A
        run's successor is keyed by its targets (one virtual state, or a frozenset of several),
        so states that move to the same targets share one closure.

        A successor not built before is left *pending* (``_place``): its closure is taken
        when something reads that cell. A token walk reads only the bytes some token
        spells next, and most successors of a wide state are never read (a key's first
        letters where no token goes on). On the first walks of 100 MaskBench dev schemas
        this builds 69k subset states where building every successor built 156k.
        """
        edges, embedded = self.nfa.edges, self.nfa.embedded
        members = self.sets[state]
        extra: list[tuple[int, int, VirtualState]] = []  # an embedded automaton's moves, on its counter
        if embedded:
            for q, counters in members:
                if q in embedded:
                    runs = self._embedded_runs.get((q, counters[-1]))
                    if runs is None:
                        runs = self._embedded_runs[q, counters[-1]] = runs_of(embedded[q], counters[-1])
                    extra += [(lo, hi, (q, counters[:-1] + (inner,))) for lo, hi, inner in runs]
        compiled = kernel.compiled
        if compiled is not None:
            placed, pending = compiled.expand(state, members, edges, extra, self._moves, self._pending, self.table[state])
        else:
            moves = [(lo, hi, (target, counters)) for q, counters in members for lo, hi, target in edges[q]]
            moves += extra
            moves.sort()
            pending, placed = [], []
            for lo, hi, targets in sweep_runs(moves):
                self._place(state, lo, hi, targets, pending, placed)
        if pending:
            self._unresolved[state] = pending
        self._placed[state] = placed
        self.expanded[state] = True

    def _place(
        self, state: int, low: int, high: int, targets: "VirtualState | frozenset[VirtualState]",
        pending: list[int], placed: list[Run],
    ) -> None:
        """Set the cells ``low..high`` of ``state``: the successor if built, else a pending code
        (with ``sweep_runs``, the Python path of the compiled ``expand``)."""
        successor = self._moves.get(targets)
        if successor is None:
            pending.append(len(self._pending))
            successor = pending_cell(len(self._pending))
            self._pending.append((state, low, high, targets))
        if successor != DEAD:
            self.table[state, low : high + 1] = successor
            placed.append((low, high, successor))

    def _successor(self, targets: "VirtualState | frozenset[VirtualState]") -> int:
        """The state the closure of ``targets`` (one virtual state or several) interns to; cached."""
        successor = self._moves.get(targets)
        if successor is None:
            closure = self._closure(targets) if isinstance(targets, tuple) else self._closure_of(list(targets))
            successor = self._moves[targets] = self._intern(closure) if closure else DEAD
        return successor

    def _closure_of(self, states: list[VirtualState]) -> frozenset[VirtualState]:
        if len(states) == 1:
            return self._closure(states[0])
        closures = self._closures  # asked here first: two in five are kept (o19343's walk: 481k of 1.2M)
        result: set[VirtualState] = set()
        for virtual in states:
            closure = closures.get(virtual)
            result |= closure if closure is not None else self._closure(virtual)
        return frozenset(result)

    def _closure(self, start: VirtualState) -> frozenset[VirtualState]:
        """Live byte-consuming (or accepting) virtual states reachable without input.

        A virtual state is an NFA state with the counters of its enclosing counted
        repeats; the counter operations of ``ByteNFA._counted`` apply on the way. Most
        states are plain (no operation, no stub, no embedded automaton): their epsilon
        targets keep the counters, so each run through plain states is walked on state
        numbers alone, by the compiled ``closure`` (or ``plain_closure``), with one seen
        set per counter stack; the special states it meets are handled here.
        """
        cached = self._closures.get(start)
        if cached is not None:
            return cached
        nfa = self.nfa
        special = self._special
        deferred, lengths, embedded_of, ops = special
        edges, epsilon, accept, live = nfa.edges, nfa.epsilon, nfa.accept, nfa.live
        caps = nfa.caps
        plain = kernel.compiled.closure if kernel.compiled is not None else plain_closure
        q, counters = start
        seen: dict[tuple[int, ...], set[int]] = {counters: {q}}
        stack = [start]
        result: list[VirtualState] = []
        if q in caps or not (q in deferred or q in lengths or q in embedded_of or q in ops):
            # A plain start, the common case, walked here; where that walk meets no special
            # state (most closures), the closure is its result, without the loop below.
            reading, met = plain(
                q, seen[counters], epsilon, edges, live, accept, special, caps, counters, FREE
            )
            result = [(s, counters) for s in reading]
            if not met:
                closure = frozenset(result)
                self._closures[start] = closure
                return closure
            stack = [(s, counters) for s in met]
        while stack:
            virtual = stack.pop()
            q, counters = virtual
            if q in caps or not (q in deferred or q in lengths or q in embedded_of or q in ops):
                reading, met = plain(q, seen[counters], epsilon, edges, live, accept, special, caps, counters, FREE)
                result += [(s, counters) for s in reading]
                stack += [(s, counters) for s in met]  # (already seen: the plain walk marked them)
                continue
            if q in lengths and not (q in deferred or q in embedded_of or q in ops):
                caps[q] = nfa.cap(q)  # plain but for its Length's bound: the plain walk takes it from now on
                stack.append(virtual)
                continue
            if q in deferred:
                nfa.build_deferred(q)
            if not live[q] or (q in lengths and nfa.doomed(q, counters)):
                continue
            embedded = embedded_of.get(q)
            if edges[q] or q == accept or embedded is not None:
                result.append(virtual)
            op = ops.get(q)
            if embedded is not None:  # leave once the embedded automaton accepts
                nexts = [(epsilon[q][0], counters[:-1])] if embedded.is_final(counters[-1]) else []
            elif op is None:  # a stub just built, or a length's plain state: counters unchanged
                nexts = [(t, counters) for t in epsilon[q]]
            elif op[0] == "tick":
                nexts = nfa.tick(q, counters)
            else:
                nexts = _apply(op, epsilon[q], counters)
            for t, after in nexts:
                known = seen.setdefault(after, set())
                if t not in known:
                    known.add(t)
                    stack.append((t, after))
        closure = frozenset(result)
        self._closures[start] = closure
        return closure

    def _intern(self, nfa_states: frozenset[VirtualState]) -> int:
        existing = self._ids.get(nfa_states)
        if existing is not None:
            return existing
        if len(self.sets) >= self.limits.max_dfa_states:
            raise LimitExceededError(
                "max_dfa_states", self.limits.max_dfa_states,
                "the pattern needs more deterministic states than allowed; raise Limits.max_dfa_states",
            )  # fmt: skip
        state = len(self.sets)
        self.sets.append(nfa_states)
        self.finals.append((self.nfa.accept, ()) in nfa_states)
        self._ids[nfa_states] = state
        if state >= len(self.expanded):
            grow = len(self.expanded)
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, dtype=bool)])
            self.table = np.concatenate([self.table, np.full((grow, 256), DEAD, dtype=np.int32)])
        return state
