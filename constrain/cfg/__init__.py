"""The context-free grammar backend: lark grammars → incremental LALR guides.

>>> from constrain.cfg import compile_grammar
>>> guide = compile_grammar("json", vocabulary)      # or lark grammar text
>>> state = guide.initial_state
>>> state = guide.advance(state, token_id)

A guide accepts exactly the texts ``lark.Lark(grammar, parser="lalr").parse``
accepts: it re-executes lark's own LALR table and contextual lexer (terminal
order, priorities, keyword renames, ``%ignore``) byte by byte. ``docs/cfg.md``
explains the design and its limits.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..core.limits import Limits
from ..vocabulary import Vocabulary
from .errors import GrammarError
from .grammar import BUNDLED_OPTIONS, CompiledGrammar, bundled_grammars, lark_parser, load_grammar_source
from .guide import FINISHED, CFGGuide

__all__ = [
    "compile_grammar",
    "compile_sql",
    "CFGGuide",
    "GrammarError",
    "FINISHED",
    "bundled_grammars",
    "lark_parser",
]


def compile_grammar(
    source: str,
    vocabulary: Any,
    *,
    start: str = "start",
    always_accept: tuple[str, ...] | None = None,
    limits: Limits | None = None,
    automata: Mapping[str, Any] | None = None,
) -> CFGGuide:
    """A guide for the language of a lark grammar (text, or a bundled name: ``"json"``, ``"sql"``).

    ``vocabulary`` is a :class:`~constrain.Vocabulary` or a Hugging Face tokenizer.
    Raises :class:`GrammarError` naming the rule or terminal at fault for grammars
    lark rejects (undefined symbols, reduce/reduce conflicts), terminals that are
    not regular (lookaheads, lookbehinds longer than one character, anchors, backreferences) and grammars that cannot
    produce any string.

    ``limits`` (default :class:`~constrain.Limits`) bound the compilation and the
    guide's growth while guiding: past one, :class:`~constrain.LimitExceededError`
    names it (``docs/cfg.md``, "Limits", says where each applies).

    ``always_accept`` names terminals lark's contextual lexer should try in every
    state (lark's ``postlex.always_accept``; see :class:`~constrain.cfg.lark_adapter.WordBoundary`).
    The bundled SQL grammar uses ``("NAME",)`` so keywords end at word boundaries;
    ``guide.grammar.lark`` is the exact lark parser a guide reproduces.

    ``automata`` replaces the patterns of the named terminals with deterministic
    automata (``start``, ``row(state)``, ``is_final(state)``), matched greedily; the JSON
    Schema front end passes each non-recursive subschema this way.
    """
    vocab = vocabulary if isinstance(vocabulary, Vocabulary) else Vocabulary.from_tokenizer(vocabulary)
    text, label = load_grammar_source(source)
    if always_accept is None:
        always_accept = BUNDLED_OPTIONS.get(label, {}).get("always_accept", ())
    grammar = CompiledGrammar(
        text, vocab, start=start, label=label, always_accept=always_accept, limits=limits, automata=automata
    )
    return CFGGuide(grammar, vocab)


def compile_sql(tables: Mapping[str, Sequence[str]] | None, vocabulary: Any, **options: Any) -> CFGGuide:
    """A SQL guide whose table and column names are restricted to a schema (see :mod:`.sql`)."""
    from .sql import compile_sql as _compile_sql

    return _compile_sql(tables, vocabulary, **options)
