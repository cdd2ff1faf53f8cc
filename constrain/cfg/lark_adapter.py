"""Everything constrain reads from lark, in one module, handed on as plain data.

The CFG backend re-executes lark's own LALR table and contextual lexer, so it has to
read objects lark builds for itself and does not document as API: the parse table,
the per-state lexers, their terminal order and "unless" renames. Every such read is
here, each with a comment naming what it relies on and since which lark version
(the pin is ``lark>=1.3,<2``, checked on 1.1.0 - 1.3.1; ``tests/test_lark_versions.py`` runs this module's
tests against the oldest and the newest lark it allows). The rest of the package
sees lark only through :class:`LarkTables` and the plain records below, and through
:class:`constrain.GrammarError` for everything lark refuses.

Nothing of lark is patched. Where lark offers an extension point, it is used:
:class:`WordBoundary` is a ``lark.lark.PostLex`` (documented: postlexers, and their
``always_accept``).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import lark

# Public: lark documents its exception hierarchy (lark.exceptions: the same classes 1.1.0 - 1.3.1).
from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError, LexError

# Public: the documented postlexer base class (lark.lark.PostLex, an ABC in 1.1.0 - 1.3.1).
from lark.lark import PostLex

# Public: the token class (postlexers see a stream of them) and the pattern class of a literal
# terminal (``"..."`` in a grammar; lark.lexer, 1.1.0 - 1.3.1).
from lark.lexer import PatternStr, Token

# Internal: the class of the "unless" callbacks BasicLexer installs for string terminals a
# regex terminal also matches (``lark.lexer._create_unless``); unchanged 1.1.0 - 1.3.1.
from lark.lexer import UnlessCallback

# Internal: the marker of shift actions in lark's parse table (``(Shift, state)``; a reduce is
# ``(Reduce, rule)``); lark.parsers.lalr_analysis, unchanged 1.1.0 - 1.3.1.
from lark.parsers.lalr_analysis import Shift

from ..errors import LimitExceededError
from .errors import GrammarError

__all__ = [
    "LARK_VERSION",
    "LarkParser",
    "LarkTables",
    "LarkRecord",
    "TerminalSpec",
    "RuleSpec",
    "Reduction",
    "ParseTable",
    "LexerContextSpec",
    "WordBoundary",
    "lark_parser",
    "build_lark_within",
]

#: The type of the lark parser a guide reproduces (the oracle; ``CompiledGrammar.lark``).
LarkParser = lark.Lark

#: The installed lark's version (public ``lark.__version__``): stored tables name the lark
#: that built them, and are used only under that same lark.
LARK_VERSION: str = str(lark.__version__)


@dataclass(frozen=True)
class TerminalSpec:
    """One of lark's terminal definitions (public ``Lark.terminals``: ``TerminalDef``)."""

    name: str
    #: The Python regex lark matches it with (``Pattern.to_regexp()``: a literal comes escaped).
    regexp: str
    #: A literal (``"..."``, lark's ``PatternStr``) rather than a regex (``PatternRE``).
    is_string: bool
    #: The literal's text, or the regex as written. (Priorities matter only through the
    #: order lark's scanners try terminals in: ``LarkTables.lexer_order``.)
    value: str


@dataclass(frozen=True)
class RuleSpec:
    """One production of the compiled grammar (public ``Lark.rules``): origin → symbols."""

    origin: str
    #: ``(name, is_terminal)`` for each symbol, in order.
    expansion: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class Reduction:
    """What a reduce action does: pop ``size`` entries, then take the goto on ``origin``."""

    origin: str
    size: int


@dataclass(frozen=True)
class ParseTable:
    """lark's LALR(1) table as plain data."""

    #: state → symbol (terminal or rule name) → ``(True, next state)`` for a shift or a goto,
    #: ``(False, reduction number)`` for a reduce (an index into ``reductions``).
    actions: dict[int, dict[str, tuple[bool, int]]]
    #: The reductions, numbered in the order the table is first read (stable for one table).
    reductions: tuple[Reduction, ...]
    start_state: int
    end_state: int


@dataclass(frozen=True)
class LexerContextSpec:
    """One of the contextual lexer's per-state lexers, by terminal name.

    ``order`` is the order its scanner tries the terminals in (lark's alternation is
    first-match, so the order decides); ``unless`` pairs each regex terminal with the
    literals lark renames its match to when the match equals one (``"select"`` read by
    ``NAME`` becomes ``SELECT``), in lark's order.
    """

    order: tuple[str, ...]
    unless: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class LarkRecord:
    """Everything a compiled grammar reads of one lark parser, as plain data.

    :class:`LarkTables` reads it from a parser lark has just built; :mod:`constrain.cfg.shipped`
    ships it for the bundled grammars, so that compiling one needs no lark build (lark's
    LALR construction and scanners are most of a SQL compile: about 0.7 of 0.8 s). It answers
    the same questions as :class:`LarkTables`, so :class:`~.grammar.CompiledGrammar` reads
    either the same way.
    """

    #: lark's version when the tables were read: another lark may build other tables.
    lark_version: str
    start: str
    terminals: tuple[TerminalSpec, ...]
    ignore: tuple[str, ...]
    regex_flags: int
    rules: tuple[RuleSpec, ...]
    lexer_order: tuple[str, ...]
    table: ParseTable
    #: parser state → lexer context number (states without a lexer left out).
    context_of_state: tuple[tuple[int, int], ...]
    contexts: tuple[LexerContextSpec, ...]

    def parse_table(self, start: str) -> ParseTable:
        if start != self.start:
            raise GrammarError(f"these tables were read for the start rule {self.start!r}, not {start!r}")
        return self.table

    def lexer_contexts(
        self, num_states: int, check: Callable[[str], None]
    ) -> tuple[dict[int, int], tuple[LexerContextSpec, ...]]:
        del num_states, check  # read whole when the tables were stored
        return dict(self.context_of_state), self.contexts


class WordBoundary(PostLex):
    """A lark postlexer that changes no token; it only keeps terminals in every lexer context.

    Lark's contextual lexer only tries the terminals the parser state expects. Where
    only keywords are expected (``ORDER`` must be followed by ``BY``), nothing marks
    the end of a word, so ``orderby`` reads as ``ORDER BY`` and ``select2`` as
    ``SELECT 2``. With the identifier terminal always tried, such a word is read whole
    as an identifier (renamed to a keyword only when it *is* one), so it is rejected
    there, as SQL would. Keywords always tried are *reserved*: lark renames a word
    that equals one, so it is never an identifier. Pass it to lark as
    ``postlex=WordBoundary(("NAME", ...))``; ``always_accept`` is PostLex's own
    (documented) hook for exactly this.
    """

    def __init__(self, always_accept: tuple[str, ...]) -> None:
        self.always_accept = tuple(always_accept)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


def lark_parser(text: str, *, start: str = "start", always_accept: tuple[str, ...] = ()) -> lark.Lark:
    """The lark parser whose language a guide reproduces (the oracle for tests)."""
    options: dict[str, Any] = {"parser": "lalr", "lexer": "contextual", "start": start}
    if always_accept:
        options["postlex"] = WordBoundary(always_accept)
    return lark.Lark(text, **options)


class LarkTables:
    """What a guide needs of one lark parser, read once into plain data.

    Reads the parser's public attributes (``terminals``, ``rules``, ``ignore_tokens``,
    ``options``) and, through the internals commented below, its LALR table and its
    contextual lexer. The lexer contexts are read on demand (:meth:`lexer_contexts`):
    lark compiles their scanners lazily, and a scanner that cannot compile is an error
    the caller should meet only after its own checks of the terminals.
    """

    def __init__(self, parser: lark.Lark) -> None:
        frontend = parser.parser
        # Internal: ``Lark.parser`` is a ParsingFrontend whose ``lexer`` is the ContextualLexer
        # itself, or a PostLexConnector holding it as ``.lexer`` when a postlexer is given
        # (lark.parser_frontends, 1.1.0 - 1.3.1).
        lexer = getattr(frontend, "lexer", None)
        if parser.options.postlex is not None:
            lexer = getattr(lexer, "lexer", None)
        # Internal: ContextualLexer.lexers, parser state → the BasicLexer of that state, shared
        # between states that expect the same terminals (1.1.0 - 1.3.1).
        if lexer is None or not hasattr(lexer, "lexers"):
            raise GrammarError(
                "only lark's contextual lexer (the LALR default) is supported; drop the postlexer"
            )
        self._lexer = lexer
        # Internal: ParsingFrontend.parser (LALR_Parser) .parser (_Parser) .parse_table, an
        # IntParseTable with ``states`` (state → symbol → action), ``start_states`` and
        # ``end_states`` (start symbol → state) (lark.parsers.lalr_parser, 1.1.0 - 1.3.1).
        table = getattr(getattr(frontend.parser, "parser", None), "parse_table", None)
        if table is None:  # pragma: no cover - lark layout changed
            raise GrammarError("this lark version exposes no LALR parse table")
        self._table = table

        # Public: TerminalDef.name / .pattern, Pattern.value / .to_regexp(), and the
        # PatternStr class (lark.lexer; 1.1.0 - 1.3.1).
        self.terminals: tuple[TerminalSpec, ...] = tuple(
            TerminalSpec(
                str(t.name), t.pattern.to_regexp(), isinstance(t.pattern, PatternStr),
                t.pattern.value,
            )
            for t in parser.terminals
        )  # fmt: skip
        self.ignore: tuple[str, ...] = tuple(str(name) for name in parser.ignore_tokens)
        #: lark's global regex flags (the public option ``g_regex_flags``).
        self.regex_flags = int(getattr(parser.options, "g_regex_flags", 0) or 0)
        # Public: Rule.origin.name and Rule.expansion's symbols' .name / .is_term (lark.grammar).
        self.rules: tuple[RuleSpec, ...] = tuple(
            RuleSpec(str(rule.origin.name), tuple((str(s.name), bool(s.is_term)) for s in rule.expansion))
            for rule in parser.rules
        )
        # Internal: ContextualLexer.root_lexer, the BasicLexer over all terminals, whose
        # ``terminals`` BasicLexer.__init__ sorts into the order its scanner tries them
        # (priority, max width, pattern length, name) (1.1.0 - 1.3.1).
        self.lexer_order: tuple[str, ...] = tuple(str(t.name) for t in lexer.root_lexer.terminals)

    def parse_table(self, start: str) -> ParseTable:
        """The LALR table, as plain data, entered and left through the rule ``start``."""
        actions: dict[int, dict[str, tuple[bool, int]]] = {}
        reductions: list[Reduction] = []
        numbers: dict[int, int] = {}
        for state, acts in self._table.states.items():
            out = actions[int(state)] = {}
            for symbol, (action, arg) in acts.items():
                if action is Shift:
                    out[str(symbol)] = (True, int(arg))
                    continue
                # A reduce's argument is a lark.grammar.Rule (public: .origin.name, .expansion);
                # rules are numbered by identity, as the table shares one object per rule.
                number = numbers.get(id(arg))
                if number is None:
                    number = numbers[id(arg)] = len(reductions)
                    reductions.append(Reduction(str(arg.origin.name), len(arg.expansion)))
                out[str(symbol)] = (False, number)
        return ParseTable(
            actions, tuple(reductions), int(self._table.start_states[start]), int(self._table.end_states[start])
        )

    def lexer_contexts(
        self, num_states: int, check: Callable[[str], None]
    ) -> tuple[dict[int, int], tuple[LexerContextSpec, ...]]:
        """``(parser state → context number, the contexts)``: one context per distinct lexer.

        ``check(stage)`` runs before each new context is read (the caller's deadline).
        Raises :class:`GrammarError` when lark's scanner for a context cannot compile
        (lark would then fail on every text).
        """
        contexts: list[LexerContextSpec] = []
        by_lexer: dict[int, int] = {}
        of_state: dict[int, int] = {}
        for state in range(num_states):
            basic = self._lexer.lexers.get(state)
            if basic is None:
                continue
            number = by_lexer.get(id(basic))
            if number is None:
                check("while reading lark's lexer contexts")
                number = by_lexer[id(basic)] = len(contexts)
                contexts.append(_context_spec(basic))
            of_state[state] = number
        return of_state, tuple(contexts)

    def record(self, start: str, check: Callable[[str], None] = lambda stage: None) -> LarkRecord:
        """All of it as one :class:`LarkRecord` (the parse table entered through ``start``)."""
        table = self.parse_table(start)
        of_state, contexts = self.lexer_contexts(max(table.actions) + 1, check)
        return LarkRecord(
            LARK_VERSION, start, self.terminals, self.ignore, self.regex_flags, self.rules,
            self.lexer_order, table, tuple(sorted(of_state.items())), contexts,
        )  # fmt: skip


def _context_spec(basic: Any) -> LexerContextSpec:
    try:
        # Internal: BasicLexer.scanner, a property that compiles the lexer on first use and
        # sets BasicLexer.callback (terminal name → UnlessCallback) as it does (1.1.0 - 1.3.1). Its
        # Scanner's ``terminals`` are in the order its alternation tries them.
        scanner = basic.scanner
    except re.error as exc:  # lark compiles its lexer lazily, so its own parse would fail on every text
        raise GrammarError(
            f"no lexer can be built for this grammar: {exc}", terminal=_unlexable(basic.terminals)
        ) from None
    order = tuple(str(t.name) for t in scanner.terminals)
    unless = []
    for name, callback in sorted(basic.callback.items()):
        if not isinstance(callback, UnlessCallback):
            raise GrammarError("lexer callbacks are not supported", terminal=name)
        # Internal: UnlessCallback.scanner, the Scanner over the literals it renames to; a whole
        # match of one renames the token (1.3.1: ``fullmatch``; 1.1.0: a
        # ``$``-anchored match, which also takes the literal plus one trailing newline).
        unless.append((str(name), tuple(str(t.name) for t in callback.scanner.terminals)))
    return LexerContextSpec(order, tuple(unless))


def _unlexable(terminals: Iterable[Any]) -> str | None:
    """The first terminal whose regex fails inside the named group lark's scanner puts it in
    (inline global flags not at the start, a group named like the terminal)."""
    for terminal in terminals:
        try:
            re.compile(f"(?P<{terminal.name}>{terminal.pattern.to_regexp()})")
        except re.error:
            return str(terminal.name)
    return None


# ---------------------------------------------------------------------- building, and lark's refusals


def build_lark_within(text: str, start: str, always_accept: tuple[str, ...], timeout_s: float) -> lark.Lark:
    """lark's parser, or ``LimitExceededError("timeout_s")`` once ``timeout_s`` has passed.

    lark's LALR construction cannot be interrupted and grows steeply with some grammar
    shapes (minutes for a few hundred mutually recursive alternatives), so it runs in a
    daemon thread and the caller stops waiting at the deadline; the abandoned
    construction finishes in the background and is discarded. What lark refuses is
    raised as :class:`GrammarError` (see :func:`_build`).
    """
    outcome: list[lark.Lark | BaseException] = []

    def build() -> None:
        try:
            outcome.append(_build(text, start, always_accept))
        except BaseException as exc:  # handed to the waiting caller below
            outcome.append(exc)

    worker = threading.Thread(target=build, name="constrain-lark-build", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise LimitExceededError(
            "timeout_s", timeout_s,
            "lark's LALR table construction is still running (it goes on in the background and is "
            "discarded); simplify the grammar or raise Limits.timeout_s",
        )  # fmt: skip
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


# lark's GrammarError carries no structured data: which rule or terminal is at fault is only
# in its message. These patterns read it, and tests/test_lark_adapter.py pins each one on the
# oldest and the newest lark the pin allows, so a change of wording fails there.
#: "Rule 'foo' used but not defined (in rule start)" (GrammarBuilder.validate) and "Using an
#: undefined rule: NonTerminal('foo')" (GrammarAnalyzer, an undefined start), 1.1.0 - 1.3.1.
_UNDEFINED = re.compile(r"undefined rule: NonTerminal\('([^']+)'\)|Rule '([^']+)' used but not defined")
#: "Reduce/Reduce collision in Terminal('X') between the following rules: - <a : X> ...", 1.1.0 - 1.3.1.
_COLLISION = re.compile(r"Reduce/Reduce collision in Terminal\('([^']+)'\)")
_RULE_IN_COLLISION = re.compile(r"-\s*<([^:>\s]+)\s*:")
#: LexError's "Cannot compile token A: ..." and "... zero-width terminals. (A: ...)", 1.1.0 - 1.3.1.
_LEX_TERMINAL = (re.compile(r"\(([A-Z_][A-Z_0-9]*):"), re.compile(r"token ([A-Z_][A-Z_0-9]*)"))
#: A terminal definition (``NAME: ...`` or ``NAME.2: ...``) whose line holds a regex comment.
_COMMENTED_TERMINAL = re.compile(r"^\s*([A-Z_][A-Z_0-9]*)(?:\.-?\d+)?\s*:.*\(\?#", re.M)
#: Internal: the module whose LALR_Analyzer raises lark's GrammarError for a conflict, the
#: only GrammarError it raises (lark.parsers.lalr_analysis, 1.1.0 - 1.3.1; the strict mode of newer
#: releases adds shift/reduce conflicts there, which constrain does not turn on).
_LALR_ANALYSIS = "lark.parsers.lalr_analysis"


def _raised_in(exc: BaseException) -> str | None:
    """The module of the innermost frame of ``exc``'s traceback: where lark raised it."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_globals.get("__name__")
    return name if isinstance(name, str) else None


def _build(text: str, start: str, always_accept: tuple[str, ...] = ()) -> lark.Lark:
    """:func:`lark_parser`, with what lark raises turned into :class:`GrammarError`.

    The cause is told by the exception's type (lark's GrammarError, LexError, its other
    errors, and the non-lark exceptions lark lets through) and, for a GrammarError, by
    where lark raised it (an LALR conflict comes from the table construction); only the
    names at fault are read from the message.
    """
    try:
        return lark_parser(text, start=start, always_accept=always_accept)
    except LarkGrammarError as exc:
        message = str(exc)
        if _raised_in(exc) == _LALR_ANALYSIS:
            collision = _COLLISION.search(message)
            rules = _RULE_IN_COLLISION.findall(message)
            raise GrammarError(
                f"the grammar is not LALR(1): {message.strip()}",
                rule=min(rules) if rules else None,
                terminal=collision.group(1) if collision else None,
            ) from None
        undefined = _UNDEFINED.search(message)
        if undefined:
            name = undefined.group(1) or undefined.group(2)
            if name.lstrip("_")[:1].isupper():  # lark names terminals in upper case
                raise GrammarError(f"undefined terminal: {message}", terminal=name) from None
            raise GrammarError(f"undefined rule: {message}", rule=name) from None
        raise GrammarError(f"invalid grammar: {message}") from None
    except LexError as exc:  # a terminal lark's lexer cannot compile, or one matching ""
        message = str(exc)
        match = _LEX_TERMINAL[0].search(message) or _LEX_TERMINAL[1].search(message)
        raise GrammarError(f"invalid grammar: {message}", terminal=match.group(1) if match else None) from None
    except LarkError as exc:  # ConfigurationError and the rest: nothing names a terminal
        raise GrammarError(f"invalid grammar: {exc}") from None
    except (FileNotFoundError, OSError) as exc:  # %import of a grammar lark cannot find
        raise GrammarError(f"invalid grammar: an %import names no grammar lark can find ({exc})") from None
    except (KeyError, IndexError, TypeError, ValueError, AssertionError, OverflowError, RecursionError) as exc:
        # what lark lets through on some inputs: a repeat like ~99999999999 (OverflowError),
        # thousands of nested groups (RecursionError)
        raise GrammarError(f"invalid grammar: {type(exc).__name__}: {exc}") from None
    except AttributeError as exc:
        # lark's terminal-collision check (newer than 1.1.0, when interegular is installed;
        # 1.3.1 has it) hands every
        # pattern to interegular, whose parser crashes on some valid Python syntax (a regex
        # comment, ``(?#...)``): lark itself cannot build such a grammar, so neither can a guide
        # that reproduces it
        commented = _COMMENTED_TERMINAL.search(text)
        raise GrammarError(
            f"lark cannot build this grammar: its terminal-collision check (interegular) failed on a "
            f"terminal's pattern ({type(exc).__name__}: {exc}); regex comments (?#...) cause this, "
            "remove them",
            terminal=commented.group(1) if commented else None,
        ) from None
