"""Values that nest without bound: a one-level automaton whose *holes* are values again.

A free-form JSON value (``{}``, ``true``, an object's undeclared members under the
specification's semantics) may nest arrays and objects to any depth, which no finite
automaton can follow. It takes one stack of bracket contexts, and nothing more: JSON
values delimit themselves. :class:`NestedDFA` is that deterministic pushdown automaton,
built lazily like every other automaton here. Its *level* automaton reads one value in
which each nested array or object is a hole (the byte ``HOLE``, which JSON text never
holds); a state is the stack of level states, outermost first. Reading ``[`` or ``{``
where the top state has a hole pushes a fresh level (the top moves past the hole), and
a level that has read its closing bracket is popped: after ``]`` or ``}`` a nested
value has nothing more to read, so popping at once keeps the automaton deterministic.

To everything around it (the ``ByteNFA`` that embeds it, products, token indexes) it
is an :class:`~constrain.regex.algebra.Automaton`: a start, rows of 256 successors,
finality. Every state can still be completed (close what is open), so every state it
hands out is live. The depth is bounded by ``Limits.max_parser_stack`` and the number
of distinct stacks by ``Limits.max_dfa_states``; past either, a clear error.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.typing import NDArray

from ..core.sharing import Shared
from ..errors import LimitExceededError
from .algebra import DEAD, Automaton

__all__ = ["HOLE", "NestedDFA"]

#: The byte that stands for a nested array or object in the level automaton (never in JSON text).
HOLE = 0x00
_OPENERS = (ord("["), ord("{"))


class NestedDFA(Shared):
    """A value of ``level`` whose holes are values of ``level`` again, to any depth."""

    #: The stack grows with the text: no finite state count (products budget their searches).
    unbounded = True

    def __init__(self, level: Automaton, *, max_states: int, max_depth: int) -> None:
        self.level = level
        self.max_states = max_states
        self.max_depth = max_depth
        self._ids: dict[tuple[int, ...], int] = {}
        self._stacks: list[tuple[int, ...]] = []
        self._rows: dict[int, NDArray[np.int32]] = {}
        self._lock = threading.RLock()
        self.start = DEAD if level.start == DEAD else self._intern((level.start,))

    @property
    def num_states(self) -> int:
        return len(self._stacks)

    def is_final(self, state: int) -> bool:
        stack = self._stacks[state]
        return len(stack) == 1 and self.level.is_final(stack[0])

    def row(self, state: int) -> NDArray[np.int32]:
        row = self._rows.get(state)
        if row is not None:
            return row
        with self._lock:
            stack = self._stacks[state]
            below, top = stack[:-1], stack[-1]
            level_row = self.level.row(top)
            row = np.full(256, DEAD, dtype=np.int32)
            after_hole = int(level_row[HOLE])
            made: dict[int, int] = {}
            for byte in np.flatnonzero(level_row != DEAD).tolist():
                if byte == HOLE:
                    continue
                target = int(level_row[byte])
                if target not in made:
                    made[target] = self._intern(self._settle(below + (target,)))
                row[byte] = made[target]
            if after_hole != DEAD:
                start_row = self.level.row(self.level.start)
                for byte in _OPENERS:
                    inner = int(start_row[byte])
                    if inner != DEAD:
                        if len(stack) >= self.max_depth:
                            raise LimitExceededError(
                                "max_parser_stack", self.max_depth,
                                "a free-form value nests deeper than allowed; raise Limits.max_parser_stack",
                            )  # fmt: skip
                        row[byte] = self._intern(below + (after_hole, inner))
            self._rows[state] = row
        return row

    def _settle(self, stack: tuple[int, ...]) -> tuple[int, ...]:
        """Pop the nested levels that are complete (they read their closing bracket)."""
        while len(stack) > 1 and self.level.is_final(stack[-1]):
            stack = stack[:-1]
        return stack

    def _intern(self, stack: tuple[int, ...]) -> int:
        found = self._ids.get(stack)
        if found is not None:
            return found
        if len(self._stacks) >= self.max_states:
            raise LimitExceededError(
                "max_dfa_states", self.max_states,
                "a free-form value needs more automaton states than allowed; raise Limits.max_dfa_states",
            )  # fmt: skip
        self._ids[stack] = len(self._stacks)
        self._stacks.append(stack)
        return len(self._stacks) - 1
