"""The grammar guide: the :class:`~constrain.Guide` protocol over lark's LALR tables.

A state is ``(stack, lexer_state, last_match, pending)``:

* ``stack`` — an interned LALR stack id (:class:`~constrain.cfg.grammar.Stacks`);
* ``lexer_state`` — the lexer DFA's state inside the lexeme being read (a start
  state between lexemes; which one depends on the stack's top, as lark picks its
  lexer by parser state);
* ``last_match`` — the emission of the match lark's ``re.match`` would return if the
  lexeme stopped growing now (-1: none yet), and ``pending`` — the bytes read since
  that match. When the lexer DFA dies, the guide hands that match to the parser and
  re-lexes ``pending`` in the next context, as lark does.

All four are ints or bytes, so a state is immutable, hashable and cheap to keep
per beam. :data:`FINISHED` is the state after EOS. The guide is the engine under
:class:`~constrain.core.shell.GuideShell`, which owns EOS, the finished state, the
messages and the mask cache.

``advance`` and ``is_final`` run the exact byte-by-byte emulation; the mask comes
from :class:`~constrain.cfg.index.MaskIndex`, which computes the same answer for
the whole vocabulary at once (tests compare the two).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, cast

import numpy as np
from numpy.typing import NDArray

from ..core.shell import GuideShell
from ..errors import InvalidStateError, LimitExceededError
from ..vocabulary import Vocabulary
from .grammar import CompiledGrammar, Deadline
from .index import MaskIndex
from .lexer import DEAD

__all__ = ["CFGGuide", "FINISHED", "GrammarTables", "State", "TerminalInfo"]

State = tuple[int, int, int, bytes]

#: After EOS: final, and only EOS is allowed again.
FINISHED: State = (-2, -1, -1, b"")


@dataclass(frozen=True)
class TerminalInfo:
    """One terminal of a grammar guide's lexer (see :meth:`CFGGuide.tables`)."""

    name: str
    #: The text of a literal, lark's regex for a regex terminal, "" for an automaton-backed one.
    pattern: str
    #: "string" (a literal), "regex", or "automaton": a part of a recursive schema or a GBNF
    #: grammar compiled by the regex backend, which lark only sees as the placeholder ``"<NAME>"``.
    kind: str
    #: Its states in the lexer's NFA (an automaton's: those visited so far, as they are built lazily).
    nfa_states: int
    #: ``%ignore``d: skipped between lexemes.
    ignored: bool


@dataclass(frozen=True)
class GrammarTables:
    """What a grammar guide was compiled to, for debugging (``constrain explain``).

    The lexer DFA, the parser stacks and the vocabulary walks grow lazily while masks are
    computed, so their counts are those built so far.
    """

    label: str
    start: str  # the start rule
    rules: tuple[str, ...]  # rule names in lark's order (lark's own, for EBNF repeats, begin with "__")
    productions: int  # alternatives of all rules, as lark's LALR table reduces them
    parser_states: int  # states of lark's LALR(1) parse table
    lexer_contexts: int  # distinct terminal sets lark's contextual lexer picks by parser state
    terminals: tuple[TerminalInfo, ...]  # in lark's order
    nfa_states: int  # the terminals' NFA, all together
    lexer_states: int  # the lexer DFA over all contexts, built so far
    stacks: int  # interned parser stacks so far
    index_entries: int  # tokens held by the cached vocabulary walks (``Limits.max_index_entries``)


class CFGGuide(GuideShell[State]):
    """Guides generation to text that ``lark.Lark(grammar, parser="lalr").parse`` accepts.

    Built by :func:`constrain.cfg.compile_grammar`. The guide holds compiled tables and
    caches only; sequences keep their own states, so one guide serves a whole batch.
    ``mask_cache_size`` bounds the number of masks cached by exact state (packed int32);
    None: the grammar's ``Limits.max_cached_masks``.
    """

    backend = "cfg"

    def __init__(
        self, grammar: CompiledGrammar, vocabulary: Vocabulary, *, mask_cache_size: int | None = None
    ) -> None:
        size = grammar.limits.max_cached_masks if mask_cache_size is None else mask_cache_size
        super().__init__(vocabulary, FINISHED, mask_cache_size=size)
        self.grammar = grammar
        self.source = grammar.text
        self.index = MaskIndex(self)
        self._initial: State = (0, grammar.start_of(0), -1, b"")

    def __repr__(self) -> str:
        return (
            f"CFGGuide({self.grammar.label!r}, lexer_states={self.grammar.lexer.num_states}, "
            f"stacks={len(self.grammar.stacks)}, masks={len(self._masks)})"
        )

    # ------------------------------------------------------------------ the engine

    @property
    def initial_state(self) -> State:
        return self._initial

    def _check_state(self, state: object) -> State:
        """``state``, if it is one this guide's grammar can hand out (else :class:`InvalidStateError`)."""
        if type(state) is tuple and len(state) == 4:  # the sampler's case first, without the generic checks
            stack, q, last, pending = state
            if (
                type(stack) is int and type(q) is int and type(last) is int and type(pending) is bytes
                and 0 <= stack < len(self.grammar.stacks) and 0 <= q < self.grammar.lexer.num_states
            ):  # fmt: skip
                return cast(State, state)
        if state == FINISHED:
            return FINISHED
        if (
            isinstance(state, tuple) and len(state) == 4 and isinstance(state[3], bytes)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in state[:3])
            and 0 <= state[0] < len(self.grammar.stacks) and 0 <= state[1] < self.grammar.lexer.num_states
        ):  # fmt: skip
            return cast(State, state)
        raise InvalidStateError(
            f"{state!r} is not a state of this guide: states are what its initial_state and advance hand out"
        )

    def _text_mask(self, state: State) -> NDArray[np.int32]:
        return self.index.allowed_packed(state).view("<i4").astype(np.int32)

    def _step(self, state: State, token_id: int) -> State | None:
        """lark's lexer and parser over the token's bytes; None where lark fails or the lexeme dead-ends."""
        text = self._text_of(token_id)
        if not text:
            return None
        new = self.feed_bytes(state, text)
        return new if new is not None and self.viable(new) else None

    def _rejection(self, state: State, text: bytes) -> str:
        return f"{text!r} cannot continue text of grammar {self.grammar.label!r}"

    def forced_bytes(self, state: State, limit: int = 256) -> bytes:
        """The bytes every continuation from ``state`` must start with (for fast-forward).

        Read off the masks: while the text may not end and every allowed token starts with
        the same bytes, those bytes are forced; they are fed and the next mask is asked.
        (The mask may keep a token that dead-ends later, never drop one that can finish,
        so what all allowed tokens share is shared by every real continuation.) Costs a
        mask per step of the way, from the guide's cache when the state was seen before.
        """
        self._check_state(state)
        out = bytearray()
        current: Optional[State] = state
        while current is not None and current != FINISHED and len(out) < limit and not self._can_end(current):
            shared = self.vocabulary.common_prefix(self.allowed_token_ids(current))
            if not shared:
                break
            shared = shared[: limit - len(out)]
            out += shared
            current = self.feed_bytes(current, shared)
        return bytes(out)

    # ------------------------------------------------------------------ emulation

    def emit(self, stack: int, emission: int) -> int:
        """The stack after lark hands the lexeme of ``emission`` to the parser (ignored ones: unchanged)."""
        emits = self.grammar.emits
        if emits.ignored[emission]:
            return stack
        return self.grammar.feed(stack, emits.final_name[emission])

    def feed_bytes(self, state: State, data: bytes) -> Optional[State]:
        """Run lark's contextual lexer and LALR parser over ``data``; None where lark would fail."""
        g = self.grammar
        lexer = g.lexer
        stack, q, last, pending = state
        buf = bytearray(data)
        pos = 0
        while pos < len(buf):
            byte = buf[pos]
            nq = lexer.step(q, byte)
            if nq != DEAD:
                pos += 1
                emission = int(lexer.emit[nq])
                if emission >= 0:
                    if lexer.final_only[nq]:  # nothing can extend it: the lexeme ends here
                        stack = self.emit(stack, emission)
                        if stack < 0:
                            return None
                        q, last, pending = g.start_after(stack, emission), -1, b""
                        continue
                    last, pending = emission, b""
                elif last >= 0:
                    pending += bytes((byte,))
                q = nq
                continue
            if last < 0:
                return None
            stack = self.emit(stack, last)
            if stack < 0:
                return None
            buf[pos:pos] = pending  # re-lex what followed the match, in the next context
            q, last, pending = g.start_after(stack, last), -1, b""
        return (stack, q, last, pending)

    def _can_end(self, state: State) -> bool:
        """Whether lark would accept the text if it ended here."""
        g = self.grammar
        current: Optional[State] = state
        while current is not None:
            stack, q, last, pending = current
            if g.lexer.is_start[q]:
                return g.accepts_end(stack)
            if last < 0:
                return False
            stack = self.emit(stack, last)
            if stack < 0:
                return False
            current = self.feed_bytes((stack, g.start_after(stack, last), -1, b""), pending)
        return False

    def viable(self, state: State) -> bool:
        """Whether the lexeme in progress can still become a terminal the parser takes.

        It can: one of the terminals still alive in the lexer state is one the parser
        takes next, or the last match (which lark falls back on) is. An
        over-approximation (it looks one terminal ahead, not at whole continuations):
        it may keep a state that later dead-ends in a contrived grammar, never drop one
        that can finish.
        """
        stack, q, last, _pending = state
        lexer = self.grammar.lexer
        if lexer.is_start[q]:
            return True
        if self.grammar.can_take(stack, lexer.possible_sets[int(lexer.possible[q])]):
            return True
        return last >= 0 and self.emit(stack, last) >= 0

    # ------------------------------------------------------------------ precomputing

    def precompute(self, timeout_s: float | None = None) -> int:
        """Walk the vocabulary from every lexer context's start now instead of on first use.

        Masks are computed lazily; the first visit of a lexer context costs a walk of
        the whole vocabulary (milliseconds). Calling this once after compiling moves
        those walks out of generation. Returns the number of walks built. Raises the
        ``timeout_s`` limit after ``timeout_s`` seconds (default: the guide's
        ``Limits.timeout_s``); the walks built so far stay cached.
        """
        deadline = Deadline(self.grammar.limits.timeout_s if timeout_s is None else timeout_s)
        built = 0
        for q in sorted(set(self.grammar.start_of_state)):
            deadline.check("in precompute (a vocabulary walk from each lexer context)")
            before = self.index.nodes_built
            self.index.root(q)
            built += self.index.nodes_built - before
        return built

    # ------------------------------------------------------------------ introspection

    def tables(self) -> GrammarTables:
        """Counts and terminals of the compiled grammar (see :class:`GrammarTables`)."""
        g = self.grammar
        owned = Counter(g.nfa.owner)
        terminals = []
        for i, name in enumerate(g.names):
            spec = g.terminals[name]
            if spec.is_string and spec.value == f"<{name}>":  # the placeholder of an automaton-backed terminal
                terminals.append(TerminalInfo(name, "", "automaton", owned[i], name in g.ignore_names))
            else:
                kind, text = ("string", spec.value) if spec.is_string else ("regex", spec.regexp)
                terminals.append(TerminalInfo(name, text, kind, owned[i], name in g.ignore_names))
        rules = tuple(dict.fromkeys(rule.origin for rule in g.rule_specs))
        return GrammarTables(
            label=g.label, start=g.start, rules=rules, productions=len(g.rule_specs),
            parser_states=g.num_states, lexer_contexts=g.num_contexts, terminals=tuple(terminals),
            nfa_states=len(g.nfa.owner), lexer_states=g.lexer.num_states, stacks=len(g.stacks),
            index_entries=self.index.entries,
        )  # fmt: skip

    def parser_stack(self, state: State) -> tuple[int, ...]:
        """The LALR states on ``state``'s parser stack, bottom first (empty after EOS)."""
        self._check_state(state)
        return () if state == FINISHED else tuple(self.grammar.stacks.states(state[0]))

    def expected_terminals(self, state: State) -> tuple[str, ...]:
        """The terminals that may come next at ``state``, sorted (``%ignore``d ones left out).

        Between lexemes: those the parser takes next. Inside a lexeme: those of them it may
        still become, and where what was read already matches a terminal (so the lexeme may
        end here), also those the parser takes after it. For messages (``constrain explain``);
        empty after EOS.
        """
        self._check_state(state)
        if state == FINISHED:
            return ()
        lexer = self.grammar.lexer
        stack, q, last, pending = state
        names = set(self._takes(stack))
        if not lexer.is_start[q]:
            names &= lexer.possible_sets[int(lexer.possible[q])]
            if last >= 0 and not pending:
                try:
                    after = self.emit(stack, last)
                except LimitExceededError:
                    after = -1
                if after >= 0:
                    names.update(self._takes(after))
        return tuple(sorted(names))

    def _takes(self, stack: int) -> list[str]:
        """The terminals (not ``%ignore``d) the parser takes next with ``stack``."""
        g = self.grammar
        found = []
        for name in sorted(g.action_terminals[g.stacks.top[stack]] - g.ignore_names):
            try:
                if g.feed(stack, name) >= 0:
                    found.append(name)
            except LimitExceededError:  # taking it would nest past Limits.max_parser_stack
                continue
        return found

    def reference_allowed(self, state: State) -> NDArray[np.int32]:
        """The allowed text tokens computed one token at a time (slow; for tests)."""
        ids = []
        for token_id, text in enumerate(self.vocabulary.token_bytes):
            if not text:
                continue
            new = self.feed_bytes(state, text)
            if new is not None and self.viable(new):
                ids.append(token_id)
        return np.array(ids, dtype=np.int32)

