"""The limits every phase of every backend honours, in one object both backends read."""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterator

from ..errors import ConfigurationError, LimitExceededError

__all__ = ["Limits", "visit_deadline", "check_visit_deadline"]


@dataclass(frozen=True)
class Limits:
    """Compilation limits; exceeding one raises :class:`~constrain.LimitExceededError` naming it.

    The regex and the grammar backend read the same object:

    ``max_nfa_states``
        States of the nondeterministic automaton: the pattern's, or all of a
        grammar's terminal patterns together. Memory grows with it.
    ``max_dfa_states``
        Deterministic states created while guiding (a pattern's DFA, a grammar's
        lexer automaton); each holds a row of transitions.
    ``max_index_entries``
        Stored (state, token) entries: token index rows, or the tokens held by a
        grammar guide's cached vocabulary walks. Memory grows with it.
    ``timeout_s``
        Time spent compiling: building a pattern's automaton, ``precompute()``, and
        building a grammar's tables (lark's own LALR construction included). A part
        built on first visit (see :class:`ByteNFA`), a product's liveness search
        on a first visit and a grammar guide's first-visit mask (its vocabulary walk
        and the lexer states it builds) each get this long again (``visit_deadline``).
    ``max_parser_stack``
        Grammar guides only, and the one limit set by the generated text rather
        than by the pattern: the deepest LALR parser stack a sequence may reach
        (JSON takes one entry per array level, four per ``{"key": [`` level); also
        how deep a free-form value may nest.
    ``max_schema_depth``
        How deeply the JSON Schema walker may descend into nested subschemas (each
        ``items``, ``properties`` member, ``allOf`` branch or ``$ref`` is a level). The
        walk recurses, so past this a schema is refused by name instead of running
        into Python's recursion limit.
    ``max_memo_entries``
        Grammar guides only: entries kept by each of the parser's memo tables (what
        the parser does with a terminal on a stack, whether it takes one of a set,
        whether it accepts the end; and how deep into the stack a mask looked). Each
        is a pure function of its key, so past this the oldest entries are dropped
        and recomputed, equal, when asked again: nothing raises.
    ``max_cached_masks``
        Packed masks a guide keeps by state (a 128k vocabulary's mask is 16 KB), the most
        recently stored first; a grammar guide also keeps twice as many by stack
        signature. An evicted mask is computed again, equal: nothing raises.
    ``max_search_states``
        Tuples one liveness search of an intersection or difference may visit where a
        part nests without bound (a free-form value), so that the search can end: past
        it the tuple counts as dead (stricter, never weaker), and a pattern whose start
        is judged so raises instead of calling itself empty.
    ``max_interned_stacks``
        Grammar guides only: distinct parser stacks a guide has met. A state names
        its stack by id, so stacks are kept for the guide's life, not evicted; the
        stack that would pass this raises. Text that repeats a shape meets the same
        stacks again; only ever new nesting keeps adding them.

    Which limit bounds which cache that grows while guiding: the regex backend's DFA
    rows, product and nested-value states by ``max_dfa_states``, its token index rows
    by ``max_index_entries``; a grammar's lexer states by ``max_dfa_states``, its
    vocabulary walks by ``max_index_entries``, its parser memos by
    ``max_memo_entries``, its stack store by ``max_interned_stacks`` (and each
    stack's depth by ``max_parser_stack``); the packed masks every guide keeps by
    ``max_cached_masks``.
    """

    max_nfa_states: int = 2_000_000
    max_dfa_states: int = 200_000
    max_index_entries: int = 200_000_000
    timeout_s: float = 60.0
    max_parser_stack: int = 10_000
    max_schema_depth: int = 100
    max_memo_entries: int = 200_000
    max_cached_masks: int = 4096
    max_interned_stacks: int = 1_000_000
    max_search_states: int = 8192

    def __post_init__(self) -> None:
        # A bad limit would surface far from where it was set (a cache that refuses a size
        # of 0 deep inside a grammar, a comparison with a string mid-walk): refuse it here.
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "timeout_s":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                    raise ConfigurationError(f"Limits.timeout_s must be a number of seconds ≥ 0, not {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Limits.{spec.name} must be an integer ≥ 1, not {value!r}")


_VISIT = threading.local()


@contextmanager
def visit_deadline(timeout_s: float) -> Iterator[float]:
    """The deadline of the first visit under way on this thread, or a new one ``timeout_s`` away.

    A first visit can build a deferred part, whose products search their parts, whose rows
    build deferred parts of their own: each given a fresh ``timeout_s``, a chain of them ran
    for minutes. The outermost one sets the clock; everything it sets off shares it.
    """
    outer = getattr(_VISIT, "deadline", None)
    if outer is None:
        _VISIT.deadline = time.monotonic() + timeout_s
        _VISIT.timeout_s = timeout_s
    try:
        yield _VISIT.deadline
    finally:
        if outer is None:
            _VISIT.deadline = None


def check_visit_deadline(stage: str) -> None:
    """Raise the ``timeout_s`` limit where the first visit under way on this thread is past its
    deadline (nothing where none is under way: a compile keeps its own clock)."""
    deadline = getattr(_VISIT, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise LimitExceededError("timeout_s", _VISIT.timeout_s, f"time ran out {stage}; raise Limits.timeout_s")
