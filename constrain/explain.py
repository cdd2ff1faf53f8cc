"""Why does a constraint behave as it does? The five debugging stages, as data.

1. the schema exactly as received (after loading JSON text or a Pydantic model);
2. the regex the guide enforces (rendered from the tree the automaton is built from);
3. the byte DFA: how many states, and Graphviz DOT of the part explored;
4. token-index sparsity: allowed tokens per state against the vocabulary size;
5. a per-token log of a text: each token's bytes, the state before and after, how
   many tokens were allowed, and at the first rejected token, why.

A grammar guide (the CFG backend: Lark and GBNF grammars, recursive schemas, SQL) gets
their analogues (:class:`GrammarExplanation`): 1. the grammar (the schema too, and the
Lark skeleton it became), its rules and start rule; 2. the LALR parser: lark's parse
table states and lexer contexts; 3. the lexer automaton: each terminal and its NFA
states, and the lexer DFA (DOT of the part reachable from the start); 4. mask
sparsity at the initial state and along the text; 5. the per-token log, with the
parser stack before and after each token and, where one is rejected, the terminals
the parser expected.

Before the stages, a text gets a verdict in the constraint's own terms (:class:`Verdict`):
where the text leaves the language (a byte offset, not a token), what could have come
there instead, the shortest way to finish from there, and for a JSON Schema the keyword
and the JSON pointer at fault, as the ``jsonschema`` library (the reference validator,
if installed) reports them — or, where that library accepts the instance, that the
guide is stricter than the schema and in which documented way.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, overload

import numpy as np

from .core.shell import GuideShell
from .errors import ConfigurationError, ConstrainError, TokenRejected
from .regex.automaton import DEAD
from .regex.guide import RegexGuide
from .unique_items import UniqueItemsGuide

if TYPE_CHECKING:
    from .cfg.guide import CFGGuide, GrammarTables, TerminalInfo

__all__ = [
    "Explanation", "GrammarExplanation", "GrammarStep", "Step", "Verdict", "explain", "judge", "dfa_to_dot",
]


@dataclass(frozen=True)
class Step:
    token_id: int
    token: bytes | None
    state_before: int
    state_after: int | None
    allowed: int
    rejected: str = ""


@dataclass(frozen=True)
class Verdict:
    """A text judged against the constraint, byte by byte (see the module docstring)."""

    accepted: bytes  # the longest prefix the guide takes
    complete: bool  # the whole text was taken and the guide may end there
    allowed_next: str  # the bytes that could follow ``accepted``, as ranges ("" where none)
    completion: bytes | None  # the shortest bytes after ``accepted`` that finish a match
    violations: tuple[tuple[str, str, str], ...] = ()  # (keyword, schema pointer, message)
    note: str = ""

    def format(self, text: bytes) -> list[str]:
        if self.complete:
            return ["the text fits the constraint"]
        lines = []
        if len(self.accepted) < len(text):
            rest = text[len(self.accepted):]
            lines.append(f"the text leaves the constraint at byte {len(self.accepted)}: "
                         f"{_show(self.accepted[-40:])} ✔ then {_show(rest[:20])} ✘")  # fmt: skip
        else:
            lines.append(f"the text stops before the constraint is satisfied (after {_show(self.accepted[-40:])})")
        if self.allowed_next:
            lines.append(f"allowed there: {self.allowed_next}")
        if self.completion is not None:
            lines.append(f"shortest way to finish from there: {_show(self.completion)}")
        for keyword, pointer, message in self.violations:
            lines.append(f"schema: {keyword!r} at {pointer}: {message}")
        if self.note:
            lines.append(self.note)
        return lines


@dataclass
class Explanation:
    schema: Any
    regex: str
    dfa_states: int
    dfa_complete: bool
    dot: str
    vocab_size: int
    sparsity: list[tuple[int, int]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    final: bool | None = None
    dropped: tuple[tuple[str, str], ...] = ()
    text: bytes | None = None
    verdict: Verdict | None = None

    def format(self) -> str:
        """A report for a person: the verdict on the text, then stage by stage."""
        lines = []
        if self.verdict is not None and self.text is not None:
            lines += ["== verdict ==", *self.verdict.format(self.text), ""]
        lines.append("== 1. schema as received ==")
        lines.append(json.dumps(self.schema, indent=2) if self.schema is not None else "(a regex, no schema)")
        if self.dropped:
            lines.append("dropped by lenient mode: " + ", ".join(f"{k} at {p}" for k, p in self.dropped))
        regex = self.regex if len(self.regex) <= 2000 else self.regex[:2000] + f"… ({len(self.regex)} chars)"
        lines += ["", "== 2. regex ==", regex]
        more = "" if self.dfa_complete else "+ (exploration stopped at the limit)"
        lines += ["", "== 3. byte DFA ==", f"{self.dfa_states}{more} states (DOT with --dot FILE)"]
        lines += ["", "== 4. token index sparsity =="]
        if self.sparsity:
            start = self.sparsity[0][1]
            lines.append(f"start state allows {start} of {self.vocab_size} tokens ({100 * start / self.vocab_size:.2f}%)")
            counts = np.array([n for _, n in self.sparsity])
            lines.append(
                f"over {len(counts)} explored states: min {counts.min()}, median {int(np.median(counts))}, "
                f"max {counts.max()} allowed tokens"
            )
        if self.steps:
            lines += ["", "== 5. transition log =="]
            for i, step in enumerate(self.steps):
                after = "REJECTED" if step.state_after is None else step.state_after
                lines.append(f"{i:4d}  token {step.token_id:>7}  {step.token!r:<24} {step.state_before} → {after}"
                             f"  ({step.allowed} allowed)")  # fmt: skip
                if step.rejected:
                    lines.append(f"      why: {step.rejected}")
            lines.append(f"final (may end here): {self.final}")
        return "\n".join(lines)


@dataclass(frozen=True)
class GrammarStep:
    """One token of a text walked through a grammar guide (stage 5 of :class:`GrammarExplanation`)."""

    token_id: int
    token: bytes | None
    allowed: int  # tokens the mask allowed before it (EOS included where the text may end)
    stack_before: tuple[int, ...]  # LALR states on the parser stack before it, bottom first
    stack_after: tuple[int, ...] | None  # after it; None: rejected
    rejected: str = ""  # why it was rejected (the TokenRejected message)
    expected: tuple[str, ...] = ()  # where rejected: the terminals the parser would have taken next


@dataclass
class GrammarExplanation:
    """The CFG analogues of the five stages, for a grammar guide (see the module docstring)."""

    schema: Any  # a recursive schema as received, else None
    grammar: str  # the Lark text the guide runs (for a recursive schema: its skeleton)
    tables: "GrammarTables"
    dot: str  # the lexer DFA from the initial lexer state, as Graphviz DOT
    dot_states: int
    dot_complete: bool
    vocab_size: int
    initial_allowed: int  # tokens allowed at the initial state
    sparsity: list[int] = field(default_factory=list)  # allowed tokens at each state along the text
    steps: list[GrammarStep] = field(default_factory=list)
    final: bool | None = None
    dropped: tuple[tuple[str, str], ...] = ()
    text: bytes | None = None
    verdict: Verdict | None = None

    def format(self) -> str:
        """A report for a person: the verdict on the text, then stage by stage."""
        t = self.tables
        lines: list[str] = []
        if self.verdict is not None and self.text is not None:
            lines += ["== verdict ==", *self.verdict.format(self.text), ""]
        lines.append("== 1. grammar ==")
        if self.schema is not None:
            lines += ["a recursive schema, as received:", json.dumps(self.schema, indent=2)]
            if self.dropped:
                lines.append("dropped by lenient mode: " + ", ".join(f"{k} at {p}" for k, p in self.dropped))
            lines.append("its recursive skeleton, as a Lark grammar (each <T…> terminal is a part of the "
                         "schema without a recursive $ref, compiled by the regex backend):")  # fmt: skip
        grammar = self.grammar.rstrip("\n")
        if len(grammar) > 2000:
            grammar = grammar[:2000] + f"… ({len(grammar)} chars)"
        lines += [grammar, ""]
        own = [r for r in t.rules if not r.startswith("__")]
        more = f" (+{len(t.rules) - len(own)} lark made for repeats)" if len(own) < len(t.rules) else ""
        named = f"grammar {t.label!r}, " if t.label != "grammar" else ""  # a bundled one
        lines.append(f"{named}start rule {t.start!r}")
        lines.append(f"{_count(len(t.rules), 'rule')}, {_count(t.productions, 'production')}: {_names(own)}{more}")
        ignored = [x.name for x in t.terminals if x.ignored]
        lines.append(_count(len(t.terminals), "terminal")
                     + (f", ignored between lexemes: {', '.join(ignored)}" if ignored else ""))  # fmt: skip
        lines += ["", "== 2. LALR parser =="]
        lines.append(f"{t.parser_states} parser states (lark's LALR(1) table), {t.lexer_contexts} lexer contexts "
                     "(the terminal sets lark's contextual lexer picks by parser state)")  # fmt: skip
        lines.append(f"{t.stacks} parser stacks interned so far")
        lines += ["", "== 3. lexer automaton =="]
        more = "" if self.dot_complete else "+ (exploration stopped at the limit)"
        lines.append(f"{_count(len(t.terminals), 'terminal')} in {t.nfa_states} NFA states; the lexer DFA has "
                     f"{t.lexer_states} states built so far, {self.dot_states}{more} reachable from the "
                     "initial lexer state (DOT with --dot FILE)")  # fmt: skip
        width = max((len(x.name) for x in t.terminals), default=0)
        for x in t.terminals:
            note = "  (ignored)" if x.ignored else ""
            lines.append(f"  {x.name:<{width}}  {_terminal(x):<44} {x.nfa_states:>6} NFA states{note}")
        lines += ["", "== 4. mask sparsity =="]
        v = self.vocab_size
        share = 100 * self.initial_allowed / v
        lines.append(f"initial state allows {self.initial_allowed} of {v} tokens ({share:.2f}%)")
        if self.sparsity:
            counts = np.array(self.sparsity)
            lines.append(f"over the {len(counts)} states along the text: min {counts.min()}, "
                         f"median {int(np.median(counts))}, max {counts.max()} allowed tokens")  # fmt: skip
        if self.steps:
            lines += ["", "== 5. transition log ==", "token id, its bytes, the parser stack (top LALR states) "
                      "before → after, tokens allowed before it"]  # fmt: skip
            for i, step in enumerate(self.steps):
                after = "REJECTED" if step.stack_after is None else _stack(step.stack_after)
                lines.append(f"{i:4d}  token {step.token_id:>7}  {step.token!r:<24} {_stack(step.stack_before)} → "
                             f"{after}  ({step.allowed} allowed)")  # fmt: skip
                if step.rejected:
                    lines.append(f"      why: {step.rejected}")
                if step.expected:
                    lines.append(f"      the parser expected: {_expected(t.terminals, step.expected)}")
            lines.append(f"final (may end here): {self.final}")
        return "\n".join(lines)


def _expected(terminals: Sequence["TerminalInfo"], names: Sequence[str], most: int = 12) -> str:
    """Terminal names for a person, each literal one with its text (``RSQB ']'``)."""
    literal = {x.name: x.pattern for x in terminals if x.kind == "string"}
    shown = [f"{name} {literal[name]!r}" if name in literal else name for name in names]
    return _names(shown, most)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(names: Sequence[str], most: int = 12) -> str:
    shown = ", ".join(names[:most])
    return shown + (f", … ({len(names) - most} more)" if len(names) > most else "")


def _terminal(info: "TerminalInfo") -> str:
    if info.kind == "automaton":
        return "(an automaton of the regex backend)"
    text = repr(info.pattern) if info.kind == "string" else f"/{_escape_controls(info.pattern)}/"
    return text if len(text) <= 44 else text[:43] + "…"


def _escape_controls(text: str) -> str:
    """Control characters as escapes (a terminal's regex may hold them raw: tabs, newlines, NUL)."""
    named = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
    return "".join(named.get(c, f"\\x{ord(c):02x}") if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def _stack(states: tuple[int, ...]) -> str:
    """A parser stack for a log line: its depth and top states."""
    shown = " ".join(map(str, states[-3:]))
    return f"[{'… ' if len(states) > 3 else ''}{shown}]"


@overload
def explain(
    guide: RegexGuide, *, text: str | None = None, token_ids: Sequence[int] | None = None,
    tokenizer: Any = None, max_states: int = 500,
) -> Explanation: ...
@overload
def explain(
    guide: "CFGGuide", *, text: str | None = None, token_ids: Sequence[int] | None = None,
    tokenizer: Any = None, max_states: int = 500,
) -> GrammarExplanation: ...
def explain(
    guide: "RegexGuide | CFGGuide",
    *,
    text: str | None = None,
    token_ids: Sequence[int] | None = None,
    tokenizer: Any = None,
    max_states: int = 500,
) -> "Explanation | GrammarExplanation":
    """Collect the five stages for ``guide`` (a grammar guide: their CFG analogues,
    :class:`GrammarExplanation`); ``text`` needs the ``tokenizer`` that spells it. A
    :class:`~constrain.UniqueItemsGuide` is explained by its inner guide (the automaton), whose
    verdict the schema check beside it completes with the repeats."""
    judged: Any = guide
    if isinstance(guide, UniqueItemsGuide):
        inner = copy.copy(guide.inner)  # with the caller's metadata: the schema, what was dropped
        inner.schema, inner.dropped, inner.ignored = guide.schema, guide.dropped, guide.ignored
        guide = inner
    if text is not None and token_ids is None:
        if tokenizer is None:
            raise ConfigurationError("explain(text=...) needs the tokenizer that spells the text: pass tokenizer=...")
        from .vocabulary import tokenize_continuation

        token_ids = tokenize_continuation(tokenizer, text)
    vocabulary = guide.vocabulary
    data = None
    if token_ids is not None:
        data = text.encode("utf-8") if text is not None else b"".join(
            vocabulary.token_bytes[i] or b"" for i in token_ids if i not in vocabulary.eos_token_ids)
    if not isinstance(guide, RegexGuide):
        return _explain_grammar(guide, token_ids, data, max_states)
    dfa, index = guide.index.dfa, guide.index
    explored = _explore(guide, max_states)
    sparsity = [(s, int(index.row(s).size + (len(vocabulary.eos_token_ids) if dfa.is_final(s) else 0)))
                for s in explored]  # fmt: skip
    steps, final = _log(guide, token_ids) if token_ids is not None else ([], None)
    return Explanation(
        schema=guide.schema,
        regex=guide.regex,
        dfa_states=dfa.num_states,
        dfa_complete=len(explored) < max_states,
        dot=dfa_to_dot(guide, explored),
        vocab_size=vocabulary.size,
        sparsity=sparsity,
        steps=steps,
        final=final,
        dropped=guide.dropped,
        text=data,
        verdict=None if data is None else judge(judged, data),
    )


def _explain_grammar(
    guide: "CFGGuide", token_ids: Sequence[int] | None, data: bytes | None, max_states: int
) -> GrammarExplanation:
    steps: list[GrammarStep] = []
    final: bool | None = None
    sparsity: list[int] = []
    if token_ids is not None:
        state = guide.initial_state
        final = False
        for token_id in token_ids:
            allowed = int(guide.allowed_tokens(state).sum())
            sparsity.append(allowed)
            pieces = guide.vocabulary.token_bytes
            piece = pieces[token_id] if 0 <= token_id < len(pieces) else None
            before = guide.parser_stack(state)
            try:
                after = guide.advance(state, token_id)
            except TokenRejected as exc:
                steps.append(GrammarStep(token_id, piece, allowed, before, None, str(exc),
                                         guide.expected_terminals(_furthest(guide, state, piece))))  # fmt: skip
                break
            steps.append(GrammarStep(token_id, piece, allowed, before, guide.parser_stack(after)))
            state = after
        else:
            sparsity.append(int(guide.allowed_tokens(state).sum()))
            final = guide.is_final(state)
    initial_allowed = int(guide.allowed_tokens(guide.initial_state).sum())
    dot, explored, complete = _lexer_dot(guide, max_states)
    return GrammarExplanation(
        schema=guide.schema,
        grammar=guide.source,
        tables=guide.tables(),  # after the walks above: the lazy parts' counts include them
        dot=dot,
        dot_states=explored,
        dot_complete=complete,
        vocab_size=guide.vocab_size,
        initial_allowed=initial_allowed,
        sparsity=sparsity,
        steps=steps,
        final=final,
        dropped=guide.dropped,
        text=data,
        verdict=None if data is None else judge(guide, data),
    )


def _furthest(guide: "CFGGuide", state: Any, piece: bytes | None) -> Any:
    """The state after the longest prefix of a rejected token's bytes the guide takes."""
    for byte in piece or b"":
        after = guide.feed_bytes(state, bytes((byte,)))
        if after is None or not guide.viable(after):
            break
        state = after
    return state


def _lexer_dot(guide: "CFGGuide", max_states: int) -> tuple[str, int, bool]:
    """Graphviz DOT of the lexer DFA from the initial lexer state (at most ``max_states``),
    a state where a lexeme is matched labelled with its terminal; the count, and whether all."""
    lexer, emits = guide.grammar.lexer, guide.grammar.emits
    start = guide.initial_state[1]
    order, seen = [start], {start}
    rows: dict[int, list[int]] = {}
    for q in order:
        rows[q] = row = [lexer.step(q, byte) for byte in range(256)]
        for successor in sorted(set(row)):
            if successor != DEAD and successor not in seen and len(order) < max_states:
                seen.add(successor)
                order.append(successor)
    complete = all(t == DEAD or t in seen for row in rows.values() for t in row)
    lines = ["digraph lexer {", "  rankdir=LR;", "  node [shape=circle, fontsize=10];", "  start [shape=point];"]
    lines.append(f"  start -> {start};")
    for q in order:
        emission = int(lexer.emit[q])
        if emission >= 0:
            lines.append(f'  {q} [shape=doublecircle, label="{q}\\n{emits.final_name[emission]}"];')
        values = np.array(rows[q])
        for target in sorted(set(rows[q])):
            if target == DEAD:
                continue
            label = _byte_ranges(np.flatnonzero(values == target).tolist())
            dest = target if target in seen else f'"{target}…"'
            lines.append(f'  {q} -> {dest} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines), len(order), complete


def judge(guide: Any, text: bytes | str) -> Verdict:
    """The :class:`Verdict` on ``text`` (a str is read as its UTF-8 bytes), walked byte by byte:
    through a regex guide's DFA, or a grammar guide's lexer and parser (``feed_bytes``, one byte
    at a time)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    elif not isinstance(text, (bytes, bytearray)):
        raise ConstrainError(f"judge takes the text as str or bytes, not {type(text).__name__}")
    text = bytes(text)
    step, final, state = _byte_walker(guide)
    taken = 0
    for byte in text:
        after = step(state, byte)
        if after is None:
            break
        state, taken = after, taken + 1
    if taken == len(text) and final(state):
        return Verdict(text, True, "", b"")
    allowed = _readable_ranges([b for b in range(256) if step(state, b) is not None])
    schema = guide.schema if isinstance(guide, GuideShell) else None
    violations, note = _schema_verdict(schema, text) if schema is not None else ((), "")
    from .cfg.guide import CFGGuide  # here, as the compiler imports it: only a grammar needs lark

    if schema is None and isinstance(guide, CFGGuide):  # a grammar: in its own terms
        expected = guide.expected_terminals(state)
        if expected:
            note = f"the parser expected there: {_expected(guide.tables().terminals, expected)}"
    return Verdict(text[:taken], False, allowed, _shortest_completion(step, final, state), violations, note)


def _byte_walker(guide: Any) -> tuple[Callable[[Any, int], Any], Callable[[Any], bool], Any]:
    """``(step, final, start)`` over single bytes, for either backend (``step`` gives None at a dead end),
    and for a :class:`~constrain.UniqueItemsGuide` its inner guide's beside its scan."""
    if isinstance(guide, UniqueItemsGuide):
        inner_step, inner_final, inner_start = _byte_walker(guide.inner)

        def paired(state: Any, byte: int) -> Any:
            after, scan = inner_step(state[0], byte), guide.scan(state[1], bytes((byte,)))
            return None if after is None or scan is None else (after, scan)

        return paired, lambda state: bool(inner_final(state[0])), (inner_start, guide.initial_state[1])
    if isinstance(guide, RegexGuide):
        dfa = guide.index.dfa

        def step(state: Any, byte: int) -> Any:
            after = int(dfa.row(state)[byte])
            return None if after == DEAD else after

        return step, dfa.is_final, dfa.start
    return (lambda state, byte: guide.feed_bytes(state, bytes((byte,)))), guide.is_final, guide.initial_state


def _schema_verdict(schema: Any, text: bytes) -> tuple[tuple[tuple[str, str, str], ...], str]:
    """What the reference validator says of the text as an instance, and a note."""
    try:
        instance = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return (), f"not (yet) a JSON document: {exc}"
    try:
        import jsonschema
    except ImportError:
        return (), "pip install jsonschema to have the keyword and schema location at fault named"
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.schema_path))
    except jsonschema.exceptions.SchemaError as exc:
        return (), f"jsonschema cannot read the schema: {exc.message}"
    found = tuple(
        (str(e.validator), "#" + "".join(f"/{p}" for p in list(e.schema_path)[:-1]), e.message) for e in errors[:8]
    )
    if found:
        return found, ""
    return (), ("the schema accepts this instance, so the guide is stricter here, as documented in "
                "docs/json_schema.md: undeclared properties are refused unless strict_properties=False, "
                "members come in definition order unless property_order='any', and keys are spelled as "
                "json.dumps spells them")  # fmt: skip


def _shortest_completion(
    step: Callable[[Any, int], Any], final: Callable[[Any], bool], state: Any, budget: int = 4096
) -> bytes | None:
    """The shortest bytes from ``state`` to a final state (printable ASCII tried first), breadth first."""
    order = [*range(0x20, 0x7F), *range(0x20), *range(0x7F, 0x100)]
    parent: dict[Any, tuple[Any, int] | None] = {state: None}
    frontier = [state]
    while frontier and len(parent) < budget:
        following = []
        for current in frontier:
            if final(current):
                path = []
                while parent[current] is not None:
                    current, byte = parent[current]  # type: ignore[misc]
                    path.append(byte)
                return bytes(reversed(path))
            for byte in order:
                nxt = step(current, byte)
                if nxt is not None and nxt not in parent:
                    parent[nxt] = (current, byte)
                    following.append(nxt)
        frontier = following
    return None


def _readable_ranges(values: list[int]) -> str:
    """Bytes for a person: printable ones quoted (``'a'-'z'``), others in hex."""

    def show(b: int) -> str:
        return repr(chr(b)) if 0x20 <= b < 0x7F else f"0x{b:02x}"

    return " ".join(show(a) if a == b else f"{show(a)}-{show(b)}" for a, b in _runs(values))


def _show(data: bytes) -> str:
    return repr(data.decode("utf-8", errors="replace"))


def _explore(guide: RegexGuide, max_states: int) -> list[int]:
    """States reachable by bytes from the start, breadth first, at most ``max_states``."""
    dfa = guide.index.dfa
    order, seen = [dfa.start], {dfa.start}
    for state in order:
        for successor in np.unique(dfa.row(state)).tolist():
            if successor != DEAD and successor not in seen and len(order) < max_states:
                seen.add(successor)
                order.append(successor)
    return order


def _log(guide: RegexGuide, token_ids: Sequence[int]) -> tuple[list[Step], bool]:
    state = guide.initial_state
    steps = []
    vocabulary = guide.vocabulary
    for token_id in token_ids:
        allowed = int(guide.allowed_tokens(state).sum())
        piece = vocabulary.token_bytes[token_id] if token_id < len(vocabulary.token_bytes) else None
        try:
            after = guide.advance(state, token_id)
        except TokenRejected as exc:
            steps.append(Step(token_id, piece, state, None, allowed, str(exc)))
            return steps, False
        steps.append(Step(token_id, piece, state, after, allowed))
        state = after
    return steps, guide.is_final(state)


def dfa_to_dot(guide: RegexGuide, states: Sequence[int]) -> str:
    """Graphviz DOT of the byte DFA restricted to ``states``; edges labelled with byte ranges."""
    dfa = guide.index.dfa
    shown = set(states)
    lines = ["digraph dfa {", "  rankdir=LR;", '  node [shape=circle, fontsize=10];', '  start [shape=point];']
    lines.append(f"  start -> {dfa.start};")
    for s in states:
        if dfa.is_final(s):
            lines.append(f"  {s} [shape=doublecircle];")
        row = dfa.row(s)
        for target in np.unique(row).tolist():
            if target == DEAD:
                continue
            label = _byte_ranges(np.flatnonzero(row == target).tolist())
            dest = target if target in shown else f'"{target}…"'
            lines.append(f'  {s} -> {dest} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines)


def _runs(values: list[int]) -> list[list[int]]:
    """Ascending byte values as ``[first, last]`` runs of consecutive ones."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return runs


def _byte_ranges(values: list[int]) -> str:
    def show(b: int) -> str:
        c = chr(b)
        return c if 0x21 <= b < 0x7F and c not in '"\\' else f"\\\\x{b:02x}"

    return ",".join(show(a) if a == b else f"{show(a)}-{show(b)}" for a, b in _runs(values))

