"""The limits every phase of every backend honours, in one object both backends read."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


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
        built on first visit (see :class:`ByteNFA`) and a product's liveness search
        on a first visit each get this long again.
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
    """

    max_nfa_states: int = 2_000_000
    max_dfa_states: int = 200_000
    max_index_entries: int = 200_000_000
    timeout_s: float = 60.0
    max_parser_stack: int = 10_000
    max_schema_depth: int = 100
