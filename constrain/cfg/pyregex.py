"""Python regexes → one byte-level NFA that keeps *match priority*.

Lark's lexer is ``re.match`` on an alternation of its terminals, and Python's
``re`` is a backtracking engine: it returns the first match in priority order
(earlier alternative first, greedy repeats try one more iteration first, lazy ones
one fewer), not the longest. To decide token boundaries exactly as lark does, the
automaton has to know that order, so this module does not reuse the regex
backend's tree (its ``Alt`` is a set, and it drops laziness): it reads the
pattern with the standard library's own parser (``re._parser``, ``sre_parse``
before 3.11), which is the structure ``re`` itself compiles, and builds a
Thompson NFA whose epsilon edges are *ordered*. A DFA over ordered thread lists
(``lexer.py``) then reproduces backtracking's choice (RE2's "leftmost-first").

Character sets follow ``re``'s ``str`` semantics: ``\\d``, ``\\w`` and ``\\s``
are Unicode classes unless the ASCII flag is set, and case-insensitive sets are
closed over the characters that ``re`` itself matches case-insensitively (found
by asking ``re``, once per set). Each set becomes UTF-8 byte-range sequences,
because guides work on bytes.

One-character lookbehinds (``(?<!\\\\)``, ``(?<=[a-z])``) are supported where the
character they look at lies inside the same lexeme, as in lark's
``common.ESCAPED_STRING`` (``".*?(?<!\\\\)(\\\\\\\\)*?"``): the terminal's NFA is
rebuilt as its product with "the class of the last character read" (see
:meth:`PriorityNFA._fold_lookbehinds`), and the assertion becomes an epsilon edge
that only the copies whose last character passes keep. A lookbehind that could be
reached before the terminal has read a character would look at the previous
lexeme, which the lexer does not track, and stays :class:`NotRegular`; so do
lookaheads, longer lookbehinds, anchors and backreferences.
"""

from __future__ import annotations

import bisect
import re
import sys
from functools import lru_cache
from typing import Any, Callable, Iterable, cast

import numpy as np

from ..errors import LimitExceededError
from ..core.limits import Limits
from ..core.utf8 import MAX_CODEPOINT, add_utf8_trie, byte_runs, clip_to_runs, complement_ranges

if sys.version_info >= (3, 11):
    from re import _constants as sre_c
    from re import _parser as sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants as sre_c
    import sre_parse

__all__ = ["NotRegular", "PriorityNFA"]

_I = sre_c.SRE_FLAG_IGNORECASE
_S = sre_c.SRE_FLAG_DOTALL
_A = sre_c.SRE_FLAG_ASCII
_MAXREPEAT = sre_c.MAXREPEAT

Ranges = tuple[tuple[int, int], ...]


#: States built or read between two deadline checks (see ``PriorityNFA._check``).
_CHECK_EVERY = 4096


class NotRegular(Exception):
    """The pattern uses a feature no finite automaton can emulate; ``feature`` says which."""

    def __init__(self, feature: str) -> None:
        super().__init__(feature)
        self.feature = feature


class PriorityNFA:
    """A byte NFA with ordered epsilon edges, shared by all terminals of a grammar.

    Every state is exactly one of: a *split* (``eps[q]``: targets in priority
    order), a *consumer* (``edges[q]``: ``(low, high, target)`` byte ranges, which
    are disjoint so no order is needed) or an *accept* state (``accept[q]`` is the
    terminal index, else -1). ``owner[q]`` is the terminal whose fragment holds
    ``q``. ``alphabet`` drops bytes no token contains.

    Bounded repeats are unrolled, one copy of the body per count, so the state
    count is what ``limits.max_nfa_states`` bounds (for all terminals together);
    a repeat whose copies would pass it is refused before they are built.

    A terminal may also be a ready-made deterministic automaton (:meth:`add_automaton`:
    the JSON Schema front end hands over each non-recursive subschema compiled by the
    regex backend). Its states become consumer states here *on first visit*: ``pending``
    holds those whose edges are not filled in yet, and :meth:`materialize` fills them,
    so a large subschema costs only the states a text actually reaches.
    """

    #: (A class default too: a grammar read from a disk cache written before this attribute has none.)
    _check: Callable[[str], None] | None = None

    def __init__(
        self, alphabet: bytes = b"\x01" * 256, limits: Limits | None = None,
        check: Callable[[str], None] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        #: Raises once ``limits.timeout_s`` is past (the compile's deadline, ``Deadline.check``):
        #: called every ``_CHECK_EVERY`` states built or read, as bounded repeats unroll into
        #: hundreds of thousands of states well inside ``max_nfa_states`` (a fuzzed terminal took
        #: 14 s under ``timeout_s=5`` before the first check after it).
        self._check = check
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.accept: list[int] = []
        self.owner: list[int] = []
        self._runs = byte_runs(alphabet)
        self._owner = -1
        self._name = ""
        self.live: bytearray = bytearray()
        #: Automaton-backed states whose edges are not filled in yet (see :meth:`materialize`).
        self.pending: set[int] = set()
        #: automaton-backed state → (automaton, its state, the terminal's accept state).
        self._foreign: dict[int, tuple[Any, int, int]] = {}
        self._foreign_ids: dict[tuple[int, int], int] = {}
        # Lookbehinds of the terminal being built (see _fold_lookbehinds): the distinct
        # one-character sets they test, the class of each character-set exit (an index
        # into _classes: which of those sets the character read there belongs to), and
        # each assertion state's (set index, negated).
        self._behind: list[Ranges] = []
        self._classes: list[tuple[bool, ...]] = []
        self._class_of: dict[int, int] = {}
        self._asserts: dict[int, tuple[int, bool]] = {}
        #: entry state of each fragment built by _copies (and of its clones) → its state count.
        self._sizes: dict[int, int] = {}

    def add_terminal(self, index: int, pattern: str, flags: int = 0, *, name: str = "") -> tuple[int, int]:
        """Build ``pattern`` as terminal ``index`` (``name`` is for messages); returns (entry, accept) states.

        Raises :class:`NotRegular` for lookaheads, lookbehinds other than one character
        read inside the lexeme (see the module docstring), anchors, backreferences,
        atomic groups and possessive repeats, ``re.error`` for bad syntax, and
        :class:`~constrain.LimitExceededError` past ``limits.max_nfa_states``.
        """
        parsed = sre_parse.parse(pattern, flags)
        self._owner = index
        self._name = name or f"#{index}"
        self._behind, self._classes, self._class_of, self._asserts = [], [], {}, {}
        # A SubPattern iterates through __getitem__ (its items), which the 3.10 stubs don't model.
        items = cast("Iterable[tuple[Any, Any]]", parsed)
        self._scan_lookbehinds(list(items), parsed.state.flags)
        base = len(self.eps)
        try:
            entry, exit_ = self._seq(list(items), parsed.state.flags)
            accept = self._state()
            self.accept[accept] = index
            self.eps[exit_].append(accept)
            if self._behind:
                entry, accept = self._fold_lookbehinds(base, entry, accept)
        finally:
            self._behind, self._classes, self._class_of, self._asserts = [], [], {}, {}
        return entry, accept

    def add_automaton(self, index: int, automaton: Any, *, name: str = "") -> tuple[int, int]:
        """Terminal ``index`` as a deterministic ``automaton``; returns (entry, accept) states.

        ``automaton`` has ``start`` (-1: the empty language), ``row(state)`` (256 successors,
        -1 for none) and ``is_final(state)``, and hands out live states only (a regex
        backend ``LazyDFA``). Each of its states becomes one consumer state whose epsilon
        edge to the accept state comes *after* its byte edges: the lexeme is as long as
        the automaton allows, as a greedy Python repeat would make it.
        """
        self._owner = index
        self._name = name or f"#{index}"
        accept = self._state()
        self.accept[accept] = index
        if automaton.start < 0:
            return self._state(), accept  # no edges, no epsilon: never live
        return self._foreign_state(automaton, automaton.start, accept), accept

    def materialize(self, q: int) -> None:
        """Fill in the byte edges of an automaton-backed state (one row of its automaton)."""
        automaton, state, accept = self._foreign[q]
        row = automaton.row(state).tolist()
        owner, self._owner = self._owner, self.owner[q]
        try:
            edges: list[tuple[int, int, int]] = []
            low = 0
            for byte in range(1, 257):
                if byte == 256 or row[byte] != row[low]:
                    target = int(row[low])
                    if target >= 0:
                        edges.append((low, byte - 1, self._foreign_state(automaton, target, accept)))
                    low = byte
            self.edges[q] = edges
        finally:
            self._owner = owner
        self.pending.discard(q)

    def _foreign_state(self, automaton: Any, state: int, accept: int) -> int:
        key = (id(automaton), state)
        q = self._foreign_ids.get(key)
        if q is None:
            q = self._state()
            self._foreign_ids[key] = q
            self._foreign[q] = (automaton, state, accept)
            self.pending.add(q)
            if automaton.is_final(state):
                self.eps[q].append(accept)
            if self.live:  # finish() ran: states made since are live (the automaton's are)
                self.live.extend(b"\x01" * (len(self.eps) - len(self.live)))
        return q

    def finish(self) -> None:
        """Compute which states can still reach an accept state (after all terminals are added)."""
        reverse: list[list[int]] = []
        for q in range(len(self.eps)):  # (not one comprehension: its garbage collections alone took
            if not q % _CHECK_EVERY:  # seconds over 255k states, between two checks)
                self._tick("while finding the terminals' live states")
            reverse.append([])
        for q in range(len(self.eps)):
            if not q % _CHECK_EVERY:
                self._tick("while finding the terminals' live states")
            for t in self.eps[q]:
                reverse[t].append(q)
            for _, _, t in self.edges[q]:
                reverse[t].append(q)
        live = bytearray(len(self.eps))
        stack = [q for q in range(len(self.eps)) if self.accept[q] >= 0]
        for q in stack:
            live[q] = 1
        for q in self._foreign:  # automata hand out live states only
            live[q] = 1
        popped = 0
        while stack:
            popped += 1
            if not popped % _CHECK_EVERY:
                self._tick("while finding the terminals' live states")
            for p in reverse[stack.pop()]:
                if not live[p]:
                    live[p] = 1
                    stack.append(p)
        self.live = live

    def drop_deadline(self) -> None:
        """Forget the compile's deadline once its terminals are built: a compiled grammar holds
        no clock (it is shared, and written to the disk cache), and states built on first
        visits come under the lexer's own limits."""
        self._check = None

    # ------------------------------------------------------------------ construction

    def _tick(self, stage: str) -> None:
        if self._check is not None:
            self._check(stage)

    def _state(self) -> int:
        self._reserve(1)
        if not len(self.eps) % _CHECK_EVERY:
            self._tick("while building the terminals' automaton")
        self.eps.append([])
        self.edges.append([])
        self.accept.append(-1)
        self.owner.append(self._owner)
        return len(self.eps) - 1

    def _reserve(self, count: int) -> None:
        """Refuse before ``count`` more states would pass ``limits.max_nfa_states``."""
        limit = self.limits.max_nfa_states
        if len(self.eps) + count > limit:
            raise LimitExceededError(
                "max_nfa_states", limit,
                f"the grammar's terminal patterns need more automaton states than allowed (at terminal "
                f"{self._name}: bounded repeats are unrolled, large Unicode classes take many states); "
                "raise Limits.max_nfa_states or simplify the pattern",
            )  # fmt: skip

    def _scan_lookbehinds(self, items: list[tuple[Any, Any]], flags: int) -> None:
        """Collect the sets of the pattern's one-character lookbehinds into ``_behind``.

        They must be known before any character set is built: each set is split by
        membership in them, so its exits tell which class of character was read.
        """
        for op, av in items:
            if op is sre_c.BRANCH:
                for option in av[1]:
                    self._scan_lookbehinds(list(option), flags)
            elif op is sre_c.SUBPATTERN:
                self._scan_lookbehinds(list(av[3]), (flags | av[1]) & ~av[2])
            elif op is sre_c.MAX_REPEAT or op is sre_c.MIN_REPEAT:
                self._scan_lookbehinds(list(av[2]), flags)
            elif (op is sre_c.ASSERT or op is sre_c.ASSERT_NOT) and av[0] < 0:
                ranges = _single_char_set(list(av[1]), flags)
                if ranges not in self._behind:
                    self._behind.append(ranges)

    def _fold_lookbehinds(self, base: int, entry: int, accept: int) -> tuple[int, int]:
        """Rebuild the terminal's states ``base..`` as their product with the last character's class.

        A product state is (state, class of the last character this terminal read; -1
        before the first). Reading a character sets the class: character sets are built
        with one exit per class (:meth:`_charset`). An assertion state keeps its epsilon
        edge only in the copies whose class passes it, so a path dies exactly where
        backtracking would fail the assertion; every path of the old automaton maps to
        one path of the new one with its order kept, so leftmost-first priority is
        unchanged. An assertion reachable with class -1 would read the previous lexeme:
        :class:`NotRegular`. The accept state stays one state (it has no edges).
        """
        old_eps, old_edges = self.eps[base:], self.edges[base:]
        del self.eps[base:], self.edges[base:], self.accept[base:], self.owner[base:]
        class_of, asserts, classes = self._class_of, self._asserts, self._classes
        ids: dict[tuple[int, int], int] = {}
        queue: list[tuple[int, int, int]] = []
        new_accept = -1

        def get(q: int, cls: int) -> int:
            nonlocal new_accept
            cls = class_of.get(q, cls)
            if q == accept:
                if new_accept < 0:
                    new_accept = self._state()
                    self.accept[new_accept] = self._owner
                return new_accept
            found = ids.get((q, cls))
            if found is None:
                found = ids[(q, cls)] = self._state()
                queue.append((q, cls, found))
            return found

        new_entry = get(entry, -1)
        while queue:
            q, cls, n = queue.pop()
            test = asserts.get(q)
            if test is None:
                self.eps[n] = [get(t, cls) for t in old_eps[q - base]]
            else:
                which, negated = test
                if cls < 0:
                    raise NotRegular(
                        "a lookbehind (lookaround) that can look before the terminal's first character, "
                        "into the previous lexeme"
                    )
                if classes[cls][which] != negated:
                    self.eps[n] = [get(t, cls) for t in old_eps[q - base]]
            self.edges[n] = [(lo, hi, get(t, cls)) for lo, hi, t in old_edges[q - base]]
        if new_accept < 0:  # the assertions cut every path: a terminal that never matches
            new_accept = self._state()
            self.accept[new_accept] = self._owner
        return new_entry, new_accept

    def _seq(self, items: list[tuple[Any, Any]], flags: int) -> tuple[int, int]:
        entry = current = self._state()
        for op, av in items:
            start, end = self._node(op, av, flags)
            self.eps[current].append(start)
            current = end
        return entry, current

    def _node(self, op: Any, av: Any, flags: int) -> tuple[int, int]:
        if op is sre_c.LITERAL:
            return self._charset(_literal_set(av, flags))
        if op is sre_c.NOT_LITERAL:
            return self._charset(complement_ranges(_literal_set(av, flags)))
        if op is sre_c.ANY:
            return self._charset(((0, MAX_CODEPOINT),) if flags & _S else complement_ranges(((10, 10),)))
        if op is sre_c.IN:
            return self._charset(_class_set(tuple(av), flags))
        if op is sre_c.BRANCH:
            entry, exit_ = self._state(), self._state()
            for option in av[1]:
                start, end = self._seq(list(option), flags)
                self.eps[entry].append(start)
                self.eps[end].append(exit_)
            return entry, exit_
        if op is sre_c.SUBPATTERN:
            _group, add, remove, body = av
            return self._seq(list(body), (flags | add) & ~remove)
        if op is sre_c.MAX_REPEAT or op is sre_c.MIN_REPEAT:
            low, high, body = av
            high = None if high == _MAXREPEAT else high
            return self._repeat(list(body), low, high, op is sre_c.MAX_REPEAT, flags)
        if op is sre_c.AT:
            raise NotRegular(f"the anchor {str(av).lower()}")
        if op is sre_c.ASSERT or op is sre_c.ASSERT_NOT:
            if av[0] >= 0:
                raise NotRegular("a lookahead (lookaround)")
            entry, exit_ = self._state(), self._state()
            self.eps[entry].append(exit_)
            which = self._behind.index(_single_char_set(list(av[1]), flags))
            self._asserts[entry] = (which, op is sre_c.ASSERT_NOT)
            return entry, exit_
        if op in (sre_c.GROUPREF, sre_c.GROUPREF_EXISTS):
            raise NotRegular("a backreference")
        raise NotRegular(f"the regex construct {str(op).lower()} (atomic or possessive matching)")

    def _repeat(
        self, body: list[tuple[Any, Any]], low: int, high: int | None, greedy: bool, flags: int
    ) -> tuple[int, int]:
        """One copy of the body per count: ``low`` required ones, then ``high - low``
        optional ones, or a single looping one.

        sre ends a repeat after an *optional* iteration that matched empty: it tries
        another one only where the text moved on since the last one began (its
        zero-width protection), and otherwise goes on with what follows the repeat.
        So ``re.match("(|.)*b", "bb")`` is ``"b"``: the empty branch comes first, ends
        the loop, and ``b`` matches. A Pike VM would drop that thread as a repeat visit
        of the loop and let ``.`` take the first byte. Where the body can match empty,
        each optional copy is therefore entered through a *shadow* of itself (see
        :meth:`_shadow`) whose exit leads out of the repeat: only a path that has read
        a byte crosses into the real copy and may loop.
        """
        optional = 1 if high is None else high - low
        fragments = self._copies(body, flags, low + optional)
        exit_ = self._state()
        looped = fragments[low:]
        # (where to enter an optional copy, the copy): shadows are cloned before any wiring
        starts = [(start, (start, end)) for start, end in looped]
        if looped and self._nullable(*looped[0]):
            shadows = self._clones(fragments[0], optional)
            starts = [(self._shadow(copy, shadow, exit_), copy) for shadow, copy in zip(shadows, looped)]
        entry = current = self._state()
        for start, end in fragments[:low]:
            self.eps[current].append(start)
            current = end
        if high is None:
            loop = self._state()
            start, (_, end) = starts[0]
            self.eps[current].append(loop)
            self.eps[loop].extend([start, exit_] if greedy else [exit_, start])
            self.eps[end].append(loop)
            return entry, exit_
        for start, (_, end) in starts:
            self.eps[current].extend([start, exit_] if greedy else [exit_, start])
            current = end
        self.eps[current].append(exit_)
        return entry, exit_

    def _nullable(self, entry: int, exit_: int) -> bool:
        """Whether a fragment matches the empty string (its exit is reachable by epsilon edges)."""
        seen, stack = {entry}, [entry]
        while stack:
            for q in self.eps[stack.pop()]:
                if q == exit_:
                    return True
                if q not in seen:
                    seen.add(q)
                    stack.append(q)
        return False

    def _shadow(self, fragment: tuple[int, int], shadow: tuple[int, int], leave: int) -> int:
        """Turn ``shadow``, a clone of ``fragment``, into its not-yet-read-a-byte half.

        Every byte edge of the shadow crosses into the same state of ``fragment`` (both
        are clones of one build, so a state's twin is at a fixed offset), and its exit
        goes to ``leave``; returns the shadow's entry.
        """
        offset = fragment[0] - shadow[0]
        for q in range(shadow[0], shadow[0] + self._sizes[shadow[0]]):
            if self.edges[q]:
                self.edges[q] = [(lo, hi, t + offset) for lo, hi, t in self.edges[q]]
        self.eps[shadow[1]].append(leave)
        return shadow[0]

    def _copies(self, body: list[tuple[Any, Any]], flags: int, count: int) -> list[tuple[int, int]]:
        """``count`` unconnected fragments matching ``body``: one built, the others copies of it.

        A fresh fragment only has edges among its own states, so a copy is its slice
        of the tables shifted by an offset, much cheaper than building it again (a
        ``\\w`` is hundreds of UTF-8 trie states). The first fragment's size also
        tells what the copies will take, so ``(x{1000}){1000}`` is refused before a
        million of them are made.
        """
        self._reserve(count)
        if not count:
            return []
        base = len(self.eps)
        entry, exit_ = self._seq(body, flags)
        if entry != base:  # pragma: no cover - _seq makes its entry first
            raise RuntimeError("a fragment must start with its entry state")
        self._sizes[base] = len(self.eps) - base
        return [(entry, exit_), *self._clones((entry, exit_), count - 1)]

    def _clones(self, fragment: tuple[int, int], count: int) -> list[tuple[int, int]]:
        """``count`` copies of a fragment made by :meth:`_copies`, as slices of its tables."""
        entry, exit_ = fragment
        size = self._sizes[entry]
        self._reserve(size * count)
        base, top = entry, entry + size
        fragments = []
        for _ in range(count):
            self._tick("while copying the body of a bounded repeat")
            offset = len(self.eps) - base
            for q in range(base, top):
                if not q % _CHECK_EVERY:
                    self._tick("while copying the body of a bounded repeat")
                self.eps.append([t + offset for t in self.eps[q]])
                self.edges.append([(lo, hi, t + offset) for lo, hi, t in self.edges[q]])
            self.accept += self.accept[base:top]
            self.owner += self.owner[base:top]
            # state -> its class, or its assertion: copied as they are
            mark_tables: tuple[dict[int, Any], ...] = (self._class_of, self._asserts)
            for marks in mark_tables:
                if marks:
                    marks.update({q + offset: v for q, v in marks.items() if base <= q < top})
            self._sizes[entry + offset] = size
            fragments.append((entry + offset, exit_ + offset))
        return fragments

    def _charset(self, ranges: Ranges) -> tuple[int, int]:
        """One code point of ``ranges`` as a trie of UTF-8 byte ranges (deterministic).

        In a terminal with lookbehinds, ``ranges`` is split by membership in their sets,
        one trie and one exit per class (marked in ``_class_of``); the parts are disjoint,
        so at most one of them reads a given character and their order does not matter.
        """
        entry, exit_ = self._state(), self._state()
        if not self._behind:
            consumer = self._state()
            self.eps[entry].append(consumer)
            add_utf8_trie(ranges, consumer, exit_, self._state, self._add_edge)
            return entry, exit_
        parts: list[tuple[Ranges, tuple[bool, ...]]] = [(ranges, ())]
        for tested in self._behind:
            split = []
            for part, key in parts:
                inside, outside = _intersect(part, tested), _intersect(part, complement_ranges(tested))
                split += [(p, key + (flag,)) for p, flag in ((inside, True), (outside, False)) if p]
            parts = split
        for part, key in parts:
            if key not in self._classes:
                self._classes.append(key)
            consumer, last = self._state(), self._state()
            self.eps[entry].append(consumer)
            add_utf8_trie(part, consumer, last, self._state, self._add_edge)
            self._class_of[last] = self._classes.index(key)
            self.eps[last].append(exit_)
        return entry, exit_

    def _add_edge(self, state: int, low: int, high: int, target: int) -> None:
        self.edges[state] += [(lo, hi, target) for lo, hi in clip_to_runs(low, high, self._runs)]


# ---------------------------------------------------------------------- character sets


def _merge(ranges: list[tuple[int, int]]) -> Ranges:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    """The code points in both sorted, disjoint range lists."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _single_char_set(body: list[tuple[Any, Any]], flags: int) -> Ranges:
    """The code points a lookbehind's body matches, when it is exactly one character; else NotRegular."""
    while len(body) == 1 and body[0][0] is sre_c.SUBPATTERN:
        _group, add, remove, inner = body[0][1]
        body, flags = list(inner), (flags | add) & ~remove
    if len(body) == 1:
        op, av = body[0]
        if op is sre_c.LITERAL:
            return _literal_set(av, flags)
        if op is sre_c.NOT_LITERAL:
            return complement_ranges(_literal_set(av, flags))
        if op is sre_c.ANY:
            return ((0, MAX_CODEPOINT),) if flags & _S else complement_ranges(((10, 10),))
        if op is sre_c.IN:
            return _class_set(tuple(av), flags)
    raise NotRegular("a lookbehind (lookaround) that is not a single character")


def _contains(ranges: Ranges, code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


@lru_cache(maxsize=None)
def _cased() -> tuple[int, ...]:
    """Code points that take part in some case mapping: the only ones re.IGNORECASE can add or drop.

    Blocks of 256 characters that case mapping leaves alone as a whole are skipped (most of
    the code space: CJK, private use, unassigned); a ``str.lower`` per character over all of
    it took over a second."""
    chars = _all_characters()
    found = set()
    for start in range(0, len(chars), 256):
        block = chars[start : start + 256]
        if block.lower() == block and block.upper() == block:
            continue
        for char in block:
            low, up = char.lower(), char.upper()
            if low != char or up != char:
                found.add(ord(char))
                for other in (low, up):
                    if len(other) == 1:
                        found.add(ord(other))
    return tuple(sorted(found))


@lru_cache(maxsize=1)
def _all_characters() -> str:
    """Every code point but the surrogates, in order (decoded from UTF-32 in one step)."""
    codes = np.concatenate([np.arange(0xD800), np.arange(0xE000, MAX_CODEPOINT + 1)]).astype("<u4")
    return codes.tobytes().decode("utf-32-le")


_ASCII_FOLD_CANDIDATES = tuple(range(ord("A"), ord("Z") + 1)) + tuple(range(ord("a"), ord("z") + 1)) + (
    0x130,
    0x131,
    0x17F,
    0x212A,
)


def _render(ranges: Ranges) -> str:
    return "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges
    )


def _fold(ranges: Ranges, negated: bool, ascii_only: bool) -> Ranges:
    """The code points ``[ranges]`` (or ``[^ranges]``) matches under IGNORECASE, asked from ``re`` itself.

    Case-insensitivity only changes the verdict for cased characters, so those are
    tested one by one against the rendered class; the rest keep their plain verdict.
    """
    body = _render(ranges)
    if not body:
        return complement_ranges(()) if negated else ()
    flags = re.IGNORECASE | (re.ASCII if ascii_only else 0)
    matcher = re.compile(("[^" if negated else "[") + body + "]", flags)
    plain = complement_ranges(ranges) if negated else ranges
    # An ASCII set can only gain ASCII letters and the four non-ASCII characters whose
    # lowercase (or special fold) is ASCII: İ ı ſ and the Kelvin sign; other sets may
    # gain or lose any cased character.
    candidates = _ASCII_FOLD_CANDIDATES if not negated and ranges[-1][1] < 0x80 else _cased()
    result: list[tuple[int, int]] = [(c, c) for c in candidates if matcher.fullmatch(chr(c))]
    for lo, hi in plain:  # plain verdict, minus the candidates decided above
        start = lo
        for c in _between(candidates, lo, hi):
            if c > start:
                result.append((start, c - 1))
            start = c + 1
        if start <= hi:
            result.append((start, hi))
    return _merge(result)


def _between(sorted_codes: tuple[int, ...], lo: int, hi: int) -> tuple[int, ...]:
    return sorted_codes[bisect.bisect_left(sorted_codes, lo) : bisect.bisect_right(sorted_codes, hi)]


def _cased_between(lo: int, hi: int) -> tuple[int, ...]:
    return _between(_cased(), lo, hi)


@lru_cache(maxsize=None)
def _category(name: str, ascii_only: bool) -> Ranges:
    """Code points of ``\\d``/``\\w``/``\\s`` (or their negations) exactly as ``re`` matches them."""
    base = {"DIGIT": r"\d", "WORD": r"\w", "SPACE": r"\s"}
    negated = name.startswith("NOT_")
    key = name[4:] if negated else name
    if key not in base:
        raise NotRegular(f"the character category {name.lower()}")
    if ascii_only:
        chars = [c for c in range(128) if re.fullmatch(base[key], chr(c), re.ASCII)]
        ranges = _merge([(c, c) for c in chars])
    else:
        ranges = _unicode_category(base[key])
    return complement_ranges(ranges) if negated else ranges


@lru_cache(maxsize=None)
def _unicode_category(regex: str) -> Ranges:
    text = _all_characters()
    offset_after_gap = 0xDFFF - 0xD800 + 1
    spans = []
    for match in re.finditer(regex + "+", text):
        lo, hi = match.start(), match.end() - 1
        spans.append((_unskip(lo, offset_after_gap), _unskip(hi, offset_after_gap)))
    return _merge(spans)


def _unskip(index: int, gap: int) -> int:
    return index if index < 0xD800 else index + gap


def _may_fold(lo: int, hi: int) -> bool:
    if hi < 0x80:
        return bool(_between(_ASCII_FOLD_CANDIDATES, lo, hi))
    return bool(_cased_between(lo, hi))


def _literal_set(code: int, flags: int) -> Ranges:
    return _simple_set(((code, code),), False, flags)


@lru_cache(maxsize=4096)
def _simple_set(ranges: Ranges, negated: bool, flags: int) -> Ranges:
    if flags & _I and any(_may_fold(lo, hi) for lo, hi in ranges):
        return _fold(ranges, negated, bool(flags & _A))
    return complement_ranges(ranges) if negated else ranges


def _class_set(items: tuple[tuple[Any, Any], ...], flags: int) -> Ranges:
    negated = bool(items) and items[0][0] is sre_c.NEGATE
    parts: list[tuple[int, int]] = []
    for op, av in items[1:] if negated else items:
        if op is sre_c.LITERAL:
            parts.append((av, av))
        elif op is sre_c.RANGE:
            parts.append((av[0], av[1]))
        elif op is sre_c.CATEGORY:
            parts.extend(_category(str(av).removeprefix("CATEGORY_"), bool(flags & _A)))
        else:
            raise NotRegular(f"the class item {str(op).lower()}")
    return _simple_set(_merge(parts), negated, flags)

