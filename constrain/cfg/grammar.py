"""A lark grammar → the tables the guide runs on: lexer DFAs, LALR actions, a stack store.

Everything is read from lark's own LALR build (the parse table, the terminal
definitions and the per-state lexers of its contextual lexer, whose terminal order
and "unless" renames are exactly what ``Lark.parse`` uses), so the guide cannot
drift from what lark would do: it only re-executes that table incrementally. This
module sees lark only as the plain data :mod:`.lark_adapter` reads from it; that
module holds every import of lark and every reliance on its internals.

Parser stacks are *interned*: a stack is an int id naming (top state, parent id),
so a guide state is a small tuple of ints and bytes, hashing and comparing it is
O(1), and sequences that reach the same stack share it.

Compilation runs under :class:`~constrain.Limits`: ``timeout_s`` from the start
(lark's table construction cannot be interrupted, so it runs in a thread the
compile stops waiting for at the deadline), ``max_nfa_states`` for the terminals, ``max_dfa_states`` for the lexer;
stacks deeper than ``max_parser_stack``, or more of them than ``max_interned_stacks``,
raise while guiding. The parser's memo tables keep at most ``max_memo_entries`` each
(dropping the oldest), so a long generation's memory stays flat.
"""

from __future__ import annotations

import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..core.cache import BoundedCache
from ..core.sharing import Shared
from ..errors import LimitExceededError
from ..core.limits import Limits
from ..vocabulary import Vocabulary
from .errors import GrammarError
from . import shipped
from .lark_adapter import LarkParser, LarkRecord, LarkTables, LexerContextSpec, Reduction, RuleSpec, WordBoundary
from .lark_adapter import build_lark_within, lark_parser
from .lexer import EmitTable, LexerContext, LexerDFA
from .pyregex import NotRegular, PriorityNFA

__all__ = [
    "CompiledGrammar",
    "load_grammar_source",
    "bundled_grammars",
    "lark_parser",
    "WordBoundary",
    "BUNDLED_OPTIONS",
    "END",
    "Deadline",
]

END = "$END"

#: SQL keywords that are never identifiers: PostgreSQL's reserved words among the grammar's
#: keywords, plus those sqlglot cannot read as a name. The rest (date, year, first, key,
#: range...) stay usable as names wherever no keyword fits.
SQL_RESERVED = tuple(
    "ALL AND AS ASC BETWEEN CASE CHECK CONSTRAINT CREATE CROSS DEFAULT DESC DISTINCT ELSE END EXCEPT "
    "FALSE FETCH FOR FOREIGN FROM FULL GROUP HAVING ILIKE IN INNER INSERT INTERSECT INTO IS JOIN LATERAL "
    "LEFT LIKE LIMIT NATURAL NOT NULL OFFSET ON ONLY OR ORDER OUTER PRIMARY REFERENCES RETURNING RIGHT "
    "SELECT TABLE THEN TO TRUE UNION UNIQUE USING VALUES WHEN WHERE WINDOW WITH".split()
)

#: Lark options of the bundled grammars beyond ``parser="lalr"`` (see :class:`WordBoundary`):
#: SQL keeps identifiers and reserved words in every lexer context.
BUNDLED_OPTIONS: dict[str, dict[str, Any]] = {"sql": {"always_accept": ("NAME", *SQL_RESERVED)}}
_BUNDLED_PACKAGE = "constrain.grammars"


# ---------------------------------------------------------------------- bundled grammars


def _grammar_dirs() -> list[Any]:
    """Where bundled ``*.lark`` files live: the installed ``constrain.grammars`` package, else the repo."""
    places: list[Any] = []
    try:
        places.append(resources.files(_BUNDLED_PACKAGE))
    except (ModuleNotFoundError, TypeError):
        pass
    places.append(Path(__file__).resolve().parents[2] / "grammars")
    return places


def bundled_grammars() -> list[str]:
    """Names accepted by :func:`load_grammar_source` (``"json"``, ``"sql"``)."""
    names: set[str] = set()
    for place in _grammar_dirs():
        try:
            names.update(p.name[:-5] for p in place.iterdir() if p.name.endswith(".lark"))
        except (FileNotFoundError, NotADirectoryError, OSError):
            continue
    return sorted(names)


def load_grammar_source(source: str) -> tuple[str, str]:
    """``(grammar text, label)`` for grammar text or the name of a bundled grammar."""
    if not isinstance(source, str):
        raise GrammarError(f"a grammar must be lark text or a bundled name, not {type(source).__name__}")
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", source.strip()):
        name = source.strip()
        for place in _grammar_dirs():
            candidate = place / f"{name}.lark"
            try:
                return candidate.read_text(encoding="utf-8"), name
            except (FileNotFoundError, NotADirectoryError, OSError):
                continue
        raise GrammarError(
            f"no bundled grammar named {name!r} (bundled: {', '.join(bundled_grammars()) or 'none'}); "
            "pass lark grammar text instead"
        )
    return source, "grammar"


# ---------------------------------------------------------------------- parser tables


class Deadline:
    """``timeout_s`` seconds from now; :meth:`check` raises the ``timeout_s`` limit once they are past."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def check(self, stage: str) -> None:
        """Raise if the time is up; ``stage`` says where the work was ("while ...")."""
        if time.monotonic() > self.at:
            message = f"time ran out {stage}; raise Limits.timeout_s"
            raise LimitExceededError("timeout_s", self.timeout_s, message)


class Stacks(Shared):
    """Interned LALR stacks: id → (top state, parent id); id 0 is the start stack.

    A stack is never deeper than ``max_depth`` entries: the push that would make one
    raises the ``max_parser_stack`` limit. Depth follows the text's nesting, so this
    is the one limit the generated text, not the grammar, runs into.

    Guide states name stacks by id, so none can be dropped while a caller may hold a
    state: the store only grows, by each stack never met before, and the push that
    would hold more than ``max_stacks`` raises the ``max_interned_stacks`` limit.
    """

    def __init__(
        self, start_state: int, max_depth: int = Limits.max_parser_stack,
        max_stacks: int = Limits.max_interned_stacks,
    ) -> None:  # fmt: skip
        self.max_depth = max_depth
        self.max_stacks = max_stacks
        self.top: list[int] = [start_state]
        self.parent: list[int] = [-1]
        self.depth: list[int] = [1]
        self._ids: dict[tuple[int, int], int] = {(-1, start_state): 0}
        self._lock = threading.Lock()

    def push(self, parent: int, state: int) -> int:
        key = (parent, state)
        found = self._ids.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._ids.get(key)
            if found is None:
                if self.depth[parent] >= self.max_depth:
                    raise LimitExceededError(
                        "max_parser_stack", self.max_depth,
                        "the text nests deeper than the parser stack may grow; "
                        "raise Limits.max_parser_stack",
                    )  # fmt: skip
                found = len(self.top)
                if found >= self.max_stacks:
                    raise LimitExceededError(
                        "max_interned_stacks", self.max_stacks,
                        "the guide has met more distinct parser stacks than it may keep (states name "
                        "them, so they are never dropped); raise Limits.max_interned_stacks",
                    )  # fmt: skip
                self.top.append(state)
                self.parent.append(parent)
                self.depth.append(self.depth[parent] + 1)
                self._ids[key] = found
            return found

    def states(self, stack: int) -> list[int]:
        """The stack's states, bottom first (for messages and tests)."""
        out = []
        while stack >= 0:
            out.append(self.top[stack])
            stack = self.parent[stack]
        return out[::-1]

    def __len__(self) -> int:
        return len(self.top)


class _FloorTracker:
    """See :meth:`CompiledGrammar.track`; nests (each level keeps its own floor)."""

    def __init__(self, local: threading.local) -> None:
        self._local = local
        self.value = 1 << 30

    def __enter__(self) -> "_FloorTracker":
        floors = self._local.__dict__.setdefault("stack", [])
        floors.append(self.value)
        return self

    def __exit__(self, *exc: object) -> None:
        floors = self._local.__dict__["stack"]
        self.value = floors.pop()
        if not floors:
            del self._local.__dict__["stack"]
        elif self.value < floors[-1]:
            floors[-1] = self.value  # an outer computation depends on what the inner one read


class CompiledGrammar:
    """Lark's LALR parser and contextual lexer for one grammar, as guide-ready tables.

    ``limits`` (default :class:`~constrain.Limits`) bound the build and the guide's
    later growth; see the module docstring.

    ``automata`` maps terminal names to ready-made deterministic automata that replace
    their lark patterns (see :meth:`PriorityNFA.add_automaton`): lark then only needs a
    placeholder for each, and builds its tables over the grammar's skeleton alone.
    """

    #: Dropped on pickling (see ``__getstate__``) and not built where the tables were shipped
    #: (see :mod:`.shipped`): ``lark`` builds it on first use.
    _lark: LarkParser | None

    @property
    def lark(self) -> LarkParser:
        """The exact lark parser this grammar's guides reproduce (rebuilt once after unpickling)."""
        if self._lark is None:
            self._lark = build_lark_within(self.text, self.start, self.always_accept, self.limits.timeout_s)
        return self._lark

    def __getstate__(self) -> dict[str, Any]:
        # lark's objects hold the re module, which does not pickle; the guide's own tables
        # (parse table, lexer automaton, masks) are all it needs to guide. The per-thread
        # floor stacks exist only while a mask is being computed: the copy starts with none.
        return {**self.__dict__, "_lark": None, "_floors": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._floors = threading.local()

    def __init__(
        self,
        text: str,
        vocabulary: Vocabulary,
        *,
        start: str = "start",
        label: str = "grammar",
        always_accept: tuple[str, ...] = (),
        limits: Limits | None = None,
        automata: Mapping[str, Any] | None = None,
        single_ignore: bool = False,
    ) -> None:
        self.text = text
        self.label = label
        #: No ignored lexeme right after another (generated SQL: one space, not a run of them).
        self.single_ignore = single_ignore
        self.start = start
        self.always_accept = tuple(always_accept)
        self.limits = limits or Limits()
        deadline = Deadline(self.limits.timeout_s)
        # What lark builds for this text: shipped with the package for the bundled grammars
        # (see .shipped), else read from the parser lark builds now.
        tables: LarkTables | LarkRecord | None = shipped.load(text, start, self.always_accept, _grammar_dirs())
        self._lark = None
        if tables is None:
            self._lark = build_lark_within(text, start, self.always_accept, self.limits.timeout_s)
            tables = LarkTables(self._lark)

        # Terminals: every one lark knows, indexed.
        #: lark's terminal definitions as plain data (:class:`~.lark_adapter.TerminalSpec`), in lark's order.
        self.terminals = {t.name: t for t in tables.terminals}
        #: The grammar's rules (lark's ``Lark.rules``: origin, expansion), for introspection.
        self.rule_specs: tuple[RuleSpec, ...] = tables.rules
        self.names: list[str] = list(self.terminals)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.ignore = frozenset(self.index[n] for n in tables.ignore if n in self.index)
        self.ignore_names = frozenset(self.names[i] for i in self.ignore)

        # The NFA of all terminals, with lark's global regex flags.
        flags = tables.regex_flags
        self.nfa = PriorityNFA(vocabulary.byte_alphabet, self.limits, deadline.check)
        self.entries: list[int] = []
        for i, name in enumerate(self.names):
            deadline.check("while building the terminals' automaton")
            if automata and name in automata:
                entry, _ = self.nfa.add_automaton(i, automata[name], name=name)
                self.entries.append(entry)
                continue
            pattern = self.terminals[name].regexp
            try:
                entry, _ = self.nfa.add_terminal(i, pattern, flags, name=name)
            except NotRegular as exc:
                raise GrammarError(
                    f"terminal pattern /{pattern}/ uses {exc.feature}, which a finite automaton cannot "
                    "enforce token by token; rewrite it without it",
                    terminal=name,
                ) from None
            except re.error as exc:
                raise GrammarError(f"invalid terminal pattern /{pattern}/: {exc}", terminal=name) from None
            self.entries.append(entry)
        self.nfa.finish()
        self.nfa.drop_deadline()

        # Parser tables.
        table = tables.parse_table(start)
        self.num_states = max(table.actions) + 1
        self.actions: list[dict[str, tuple[bool, int]]] = [{} for _ in range(self.num_states)]
        for state, acts in table.actions.items():
            self.actions[state] = acts
        self.rules: list[Reduction] = list(table.reductions)
        self.action_terminals: list[frozenset[str]] = [
            frozenset(symbol for symbol in acts if symbol in self.index) for acts in self.actions
        ]
        self.start_state = table.start_state
        self.end_state = table.end_state
        self.stacks = Stacks(self.start_state, self.limits.max_parser_stack, self.limits.max_interned_stacks)
        # Memos of pure functions of (interned stack, ...): new stacks keep coming in a long
        # generation, so each keeps the newest max_memo_entries and recomputes the rest.
        memo_size = self.limits.max_memo_entries
        self._feed_memo: BoundedCache[tuple[int, int]] = BoundedCache(memo_size)
        self._floors = threading.local()
        self._can_take: BoundedCache[tuple[bool, int]] = BoundedCache(memo_size)
        self._end_memo: BoundedCache[bool] = BoundedCache(memo_size)

        self._check_productive(tables)

        # Lexer contexts: one per distinct lark lexer, all in one DFA.
        context_of_state, lark_contexts = tables.lexer_contexts(self.num_states, deadline.check)
        specs = [self._context(spec) for spec in lark_contexts]
        pairs: dict[int, set[int]] = {}
        for spec in specs:
            for retok, strings in spec.unless:
                pairs.setdefault(retok, set()).update(strings)
        order = {name: rank for rank, name in enumerate(tables.lexer_order)}
        unless_pairs = {
            retok: tuple(sorted(strings, key=lambda s: order[self.names[s]]))
            for retok, strings in pairs.items()
        }
        self.emits = EmitTable(self.names, self.ignore)
        self.lexer = LexerDFA(self.nfa, self.entries, unless_pairs, self.emits, self.names)
        self.start_of_state: list[int] = [0] * self.num_states
        starts: dict[int, int] = {}
        self.num_contexts = len(specs)
        for state, context in sorted(context_of_state.items()):
            start_state = starts.get(context)
            if start_state is None:
                deadline.check("while building the lexer contexts")
                start_state = self.lexer.add_context(specs[context])
                starts[context] = start_state
            self.start_of_state[state] = start_state
        # With single_ignore, the lexer goes on after an ignored lexeme in the same context
        # minus the ignored terminals: its own start state, so the guide's state tells.
        self.start_after_ignore_of_state = self.start_of_state
        if single_ignore:
            unignored: dict[int, int] = {}
            self.start_after_ignore_of_state = [0] * self.num_states
            for state, context in sorted(context_of_state.items()):
                if context not in unignored:
                    spec = specs[context]
                    kept = tuple(t for t in spec.order if t not in self.ignore)
                    unignored[context] = self.lexer.add_context(LexerContext(kept, spec.unless))
                self.start_after_ignore_of_state[state] = unignored[context]

    def _context(self, spec: LexerContextSpec) -> LexerContext:
        """A lark lexer context by terminal number, as the lexer DFA takes it."""
        index = self.index
        unless = tuple((index[name], tuple(index[s] for s in strings)) for name, strings in spec.unless)
        return LexerContext(tuple(index[name] for name in spec.order), unless)

    # ------------------------------------------------------------------ parsing

    def start_of(self, stack: int) -> int:
        """The lexer's start state in the context of this stack (lark picks it by the top state)."""
        return self.start_of_state[self.stacks.top[stack]]

    def start_after(self, stack: int, emission: int) -> int:
        """The lexer's start state once ``emission`` was handed over and left ``stack``."""
        if self.emits.ignored[emission]:
            return self.start_after_ignore_of_state[self.stacks.top[stack]]
        return self.start_of_state[self.stacks.top[stack]]

    def feed(self, stack: int, terminal: str) -> int:
        """The stack after lark's parser takes ``terminal`` (reductions, then a shift), or -1.

        Also lowers the current *floor* (see :meth:`track`): the deepest stack entry the
        parser looked at, so a caller can tell how much of the stack a result depends on.
        """
        key = (stack, terminal)
        found = self._feed_memo.get(key)
        if found is None:
            found = self._feed_memo.put(key, self._feed(stack, terminal))
        floors = self._floors.__dict__.get("stack")
        if floors is not None and found[1] < floors[-1]:
            floors[-1] = found[1]
        return found[0]

    def _feed(self, stack: int, terminal: str) -> tuple[int, int]:
        stacks, actions, rules = self.stacks, self.actions, self.rules
        depth = stacks.depth
        floor = depth[stack]
        cycle = _ReductionCycle()
        while True:
            action = actions[stacks.top[stack]].get(terminal)
            if action is None:
                return -1, floor
            is_shift, arg = action
            if is_shift:
                return stacks.push(stack, arg), floor
            rule = rules[arg]
            for _ in range(rule.size):
                stack = stacks.parent[stack]
            floor = min(floor, depth[stack])
            goto = actions[stacks.top[stack]].get(rule.origin)
            if goto is None or not goto[0]:  # pragma: no cover - a sound LALR table always has the goto
                return -1, floor
            stack = stacks.push(stack, goto[1])
            if cycle.again(stack):  # lark's parser reduces here forever: it never takes the terminal
                return -1, floor

    def note_floor(self, floor: int) -> None:
        """Record that a result in use depends on the stack down to depth ``floor`` (a cached one)."""
        floors = self._floors.__dict__.get("stack")
        if floors is not None and floor < floors[-1]:
            floors[-1] = floor

    def track(self) -> "_FloorTracker":
        """Context manager measuring how deep into the stack the parser looks meanwhile.

        Inside ``with grammar.track(stack) as floor:``, every :meth:`feed` lowers
        ``floor.value`` to the depth of the deepest entry it read. A result computed
        inside depends only on the stack's entries above that depth, so it may be
        reused for any stack that shares them.
        """
        return _FloorTracker(self._floors)

    def accepts_end(self, stack: int) -> bool:
        """Whether lark's parser accepts end of input with this stack."""
        found = self._end_memo.get(stack)
        if found is not None:
            return found
        stacks, actions, rules = self.stacks, self.actions, self.rules
        result = False
        current = stack
        cycle = _ReductionCycle()
        while True:
            action = actions[stacks.top[current]].get(END)
            if action is None or action[0]:
                break
            rule = rules[action[1]]
            for _ in range(rule.size):
                current = stacks.parent[current]
            goto = actions[stacks.top[current]].get(rule.origin)
            if goto is None or not goto[0]:  # pragma: no cover
                break
            current = stacks.push(current, goto[1])
            if stacks.top[current] == self.end_state:
                result = True
                break
            if cycle.again(current):  # reduces forever: lark never accepts the end here
                break
        return self._end_memo.put(stack, result)

    def can_take(self, stack: int, names: frozenset[str]) -> bool:
        """Whether the parser would shift one of ``names`` next (ignored terminals always count)."""
        if not names.isdisjoint(self.ignore_names):
            return True
        key = (stack, names)
        found = self._can_take.get(key)
        if found is None:
            with self.track() as floor:
                # Only terminals with an action in the top state can be taken; the test reads
                # the top entry, which any caller's floor already covers.
                candidates = names & self.action_terminals[self.stacks.top[stack]]
                result = any(self.feed(stack, name) >= 0 for name in candidates)
                floor.value = min(floor.value, self.stacks.depth[stack])
            found = self._can_take.put(key, (result, floor.value))
        else:
            self.note_floor(found[1])  # what the cached answer read, as if read again
        return found[0]

    # ------------------------------------------------------------------ checks

    def _check_productive(self, tables: LarkTables | LarkRecord) -> None:
        """Raise when the start rule, or a rule it reaches, can derive no string at all."""
        rules = tables.rules
        productive: set[str] = set()
        for i, name in enumerate(self.names):
            if self.nfa.live[self.entries[i]]:
                productive.add(name)
        # A rule finishes once every symbol it uses does. In linear time (a fixed-point loop
        # over all rules is quadratic on long rule chains): each rule counts the symbols it
        # still waits for, and each symbol found productive wakes the rules that use it.
        waiting: list[int] = []
        users: dict[str, list[int]] = {}
        found: list[str] = []
        for number, rule in enumerate(rules):
            needs = {name for name, _ in rule.expansion} - productive
            waiting.append(len(needs))
            for name in needs:
                users.setdefault(name, []).append(number)
            if not needs and rule.origin not in productive:
                productive.add(rule.origin)
                found.append(rule.origin)
        while found:
            for number in users.get(found.pop(), ()):
                waiting[number] -= 1
                origin = rules[number].origin
                if not waiting[number] and origin not in productive:
                    productive.add(origin)
                    found.append(origin)
        reachable: set[str] = set()
        stack = [self.start]
        by_origin: dict[str, list[RuleSpec]] = {}
        for rule in rules:
            by_origin.setdefault(rule.origin, []).append(rule)
        while stack:
            name = stack.pop()
            if name in reachable:
                continue
            reachable.add(name)
            for rule in by_origin.get(name, []):
                stack.extend(name for name, is_term in rule.expansion if not is_term)
        if self.start not in productive:
            stuck = sorted(n for n in reachable - productive if n in by_origin and n != self.start)
            because = f"; these rules never finish: {', '.join(stuck)}" if stuck else ""
            raise GrammarError(f"the grammar cannot produce any string{because}", rule=self.start)
        for name in sorted(reachable - productive):
            if name in by_origin:
                raise GrammarError(
                    "this rule can never finish (every expansion needs itself or another such rule), "
                    "so generation could enter it and never end",
                    rule=name,
                )
        for rule in rules:
            for name, is_term in rule.expansion:
                if is_term and name not in productive and rule.origin in reachable:
                    why = (
                        "this terminal matches no string spellable with the vocabulary's bytes"
                        if name in self.terminals
                        else "this terminal is only %declared: it has no pattern, so it cannot be generated"
                    )
                    raise GrammarError(why, rule=rule.origin, terminal=name)



class _ReductionCycle:
    """Whether a run of reductions came back to a stack it left: then it cycles for ever.

    Reductions are deterministic in the stack (and the lookahead), so a stack met twice in
    one run repeats without end. A cyclic grammar makes such tables: ``?start: start r1``
    beside ``?r1: r1 "a" "a" |`` reduces ``r1`` from nothing and ``start`` back to itself on
    ``"b"`` after ``a a``, and lark's own parser loops there for ever (the grammar fuzzer's seed
    32 at 37ce56b: a first mask ran for minutes under ``timeout_s=5``). The stacks are kept
    only past a few dozen reductions, which a run that ends rarely reaches.
    """

    __slots__ = ("count", "seen")

    def __init__(self) -> None:
        self.count = 0
        self.seen: set[int] | None = None

    def again(self, stack: int) -> bool:
        self.count += 1
        if self.count < _CYCLE_WATCH:
            return False
        if self.seen is None:
            self.seen = set()
        if stack in self.seen:
            return True
        self.seen.add(stack)
        return False


#: Reductions in one run before its stacks are watched for a cycle (``_ReductionCycle``).
_CYCLE_WATCH = 64
