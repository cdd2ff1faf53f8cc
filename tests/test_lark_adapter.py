"""The lark adapter's plain data is lark's own, and lark's refusals are told apart as the adapter expects.

``constrain/cfg/lark_adapter.py`` reads lark internals (the parse table, the contextual
lexer's per-state lexers, the "unless" renames) and reads the rule or terminal at fault
from lark's messages. These tests check each of those reads against lark's public
behaviour (``Lark.parse``, ``Lark.lex``, the interactive parser), so that
``tests/test_lark_versions.py``, which runs this file on the oldest and the newest lark
the pin allows, fails on any lark release that changes what the adapter relies on.
No tokenizer is needed: this file runs in seconds.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import lark
import pytest

from constrain.cfg import GrammarError
from constrain.cfg.lark_adapter import LarkTables, ParseTable, WordBoundary, build_lark_within, lark_parser

PACKAGE = Path(__file__).resolve().parent.parent / "constrain"

ARITHMETIC = r"""
start: expr
expr: expr "+" term | term
term: term "*" factor | factor
factor: NUMBER | NAME | "(" expr ")" | NAME "(" [expr ("," expr)*] ")"
NUMBER: /[0-9]+/
NAME: /[a-z]+/
%ignore " "
"""

KEYWORDS = r"""
start: stmt+
stmt: SELECT NAME ";" | NAME "=" NAME ";"
SELECT: "select"
NAME: /[a-z_]+/
%ignore " "
"""


def _importers(library: str) -> list[str]:
    """The package's modules that import ``library`` (read with ``ast``, nothing imported)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name == library or name.startswith(library + ".") for name in names):
                found.append(str(path.relative_to(PACKAGE.parent)))
                break
    return found


def test_each_library_sits_behind_one_module() -> None:
    assert _importers("lark") == ["constrain/cfg/lark_adapter.py"]
    assert _importers("interegular") == ["constrain/regex/parse.py"]


# ---------------------------------------------------------------------- the parse table


def _table_accepts(table: ParseTable, symbols: list[str]) -> bool:
    """Run the adapter's plain table on terminal names as lark's LALR parser does."""
    stack = [table.start_state]
    for symbol in symbols:
        while True:
            action = table.actions[stack[-1]].get(symbol)
            if action is None:
                return False
            is_shift, arg = action
            if is_shift:
                stack.append(arg)
                break
            reduction = table.reductions[arg]
            if reduction.size:
                del stack[-reduction.size :]
            stack.append(table.actions[stack[-1]][reduction.origin][1])
    while True:  # end of input: reduce until the goto lands in the end state
        action = table.actions[stack[-1]].get("$END")
        if action is None or action[0]:
            return False
        reduction = table.reductions[action[1]]
        if reduction.size:
            del stack[-reduction.size :]
        stack.append(table.actions[stack[-1]][reduction.origin][1])
        if stack[-1] == table.end_state:
            return True


def _expression(rng: random.Random, depth: int = 0) -> str:
    """A random sentence of ARITHMETIC."""
    roll = rng.random() if depth < 3 else 0.0
    if roll < 0.4:
        return rng.choice(["1", "23", "x"])
    if roll < 0.6:
        return f"({_expression(rng, depth + 1)})"
    if roll < 0.75:
        return f"f({', '.join(_expression(rng, depth + 1) for _ in range(rng.randint(0, 2)))})"
    return f"{_expression(rng, depth + 1)}{rng.choice('+*')}{_expression(rng, depth + 1)}"


def _sentences(rng: random.Random, count: int) -> list[str]:
    """Sentences, and near misses: each with one character dropped or inserted."""
    out = []
    for _ in range(count):
        text = _expression(rng)
        out.append(text)
        at = rng.randrange(len(text) + 1)
        out.append(text[:at] + rng.choice("1x+*(),") + text[at:])
        out.append(text[:at] + text[at + 1 :])
    return out


def test_the_table_parses_what_lark_parses() -> None:
    """The adapter's plain table, driven on lark's own tokens, accepts exactly what ``Lark.parse``
    accepts (this grammar lexes the same in every context, so ``Lark.lex`` gives those tokens)."""
    parser = lark_parser(ARITHMETIC)
    table = LarkTables(parser).parse_table("start")
    fixed = ["1", "1+2*3", "(1+x)*f(1,2)", "f()", "f(1,)", "1+", "()", "((1))", "1 2", "x(1)(2)"]
    accepted = 0
    for text in fixed + _sentences(random.Random(12), 150):
        try:
            symbols = [token.type for token in parser.lex(text)]
        except lark.exceptions.LarkError:
            continue
        try:
            parser.parse(text)
            expected = True
        except lark.exceptions.LarkError:
            expected = False
        accepted += expected
        assert _table_accepts(table, symbols) is expected, text
    assert 150 <= accepted <= 400  # both verdicts are well represented


def test_the_table_is_the_interactive_parsers() -> None:
    """At every step, the actions the adapter read for the current state are the ones lark's
    interactive parser (its public stepping API) offers there."""
    parser = lark_parser(ARITHMETIC)
    table = LarkTables(parser).parse_table("start")
    for text in ["(1+x)*f(1,2)", "f()", "1"]:
        interactive = parser.parse_interactive(text)
        for token in parser.lex(text):
            state = interactive.parser_state.position
            assert set(interactive.choices()) == set(table.actions[state]), (text, token)
            interactive.feed_token(token)
    assert table.actions[table.start_state]  # the start state is a state of the table


# ---------------------------------------------------------------------- terminals and lexer contexts


def test_terminals_are_lark_terminals() -> None:
    parser = lark_parser(KEYWORDS)
    tables = LarkTables(parser)
    by_name = {t.name: t for t in tables.terminals}
    assert [t.name for t in tables.terminals] == [t.name for t in parser.terminals]
    assert by_name["SELECT"].is_string and by_name["SELECT"].value == "select"
    assert not by_name["NAME"].is_string and by_name["NAME"].regexp == "[a-z_]+"
    assert set(tables.ignore) == set(parser.ignore_tokens) and len(tables.ignore) == 1
    assert {"start", "stmt"} <= {rule.origin for rule in tables.rules}
    assert ("SELECT", True) in {symbol for rule in tables.rules for symbol in rule.expansion}


def test_lexer_order_is_lark_documented_order() -> None:
    """lark tries terminals by priority, then longest possible match, then pattern length,
    then name (its lexer docs); the order the adapter reads from the root lexer is that one."""
    parser = lark_parser('start: A | B | C | D\nA.2: /ab?/\nB: /b+c/\nC: "c"\nD: "cc"')
    order = LarkTables(parser).lexer_order

    def rank(t: lark.lexer.TerminalDef) -> tuple[int, int, int, str]:
        return (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)

    assert list(order) == [t.name for t in sorted(parser.terminals, key=rank)]
    assert order[0] == "A"


def test_unless_renames_a_keyword_read_by_its_identifier() -> None:
    """Where both may come (the start of a statement), NAME's match "select" becomes SELECT:
    the adapter reports that rename, and lark's own parse agrees."""
    parser = lark_parser(KEYWORDS)
    tables = LarkTables(parser)
    states = len(tables.parse_table("start").actions)
    of_state, contexts = tables.lexer_contexts(states, lambda stage: None)
    start = of_state[tables.parse_table("start").start_state]
    assert dict(contexts[start].unless) == {"NAME": ("SELECT",)}
    assert "SELECT" not in contexts[start].order  # embedded in NAME: only reached by the rename
    parser.parse("select x; a = b;")
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse("select = b;")  # "select" is always the keyword here


def test_an_unless_rename_takes_a_whole_match() -> None:
    """The guide renames only a whole match, as lark does from 1.3.0 (the pin's floor): before,
    lark also took the keyword plus one trailing newline (a ``$`` anchor), so a guide reproducing
    the older lark would let ``select\\n`` through where only a NAME may come (docs/cfg.md)."""
    parser = lark_parser('start: (NAME | SELECT)+\nSELECT: "select"\nNAME: /[a-z\\n]+/')
    (token,) = parser.parse("select\n").children
    assert token.type == "NAME"


def test_contexts_only_hold_what_the_state_expects() -> None:
    parser = lark_parser(ARITHMETIC)
    tables = LarkTables(parser)
    table = tables.parse_table("start")
    of_state, contexts = tables.lexer_contexts(len(table.actions), lambda stage: None)
    assert set(of_state) == set(table.actions)
    for state, context in of_state.items():
        expected = {s for s in table.actions[state] if s.isupper()} - {"$END"}
        assert set(contexts[context].order) == expected | set(tables.ignore), state


def test_word_boundary_is_lark_postlexer() -> None:
    """``WordBoundary`` uses lark's documented hook: its ``always_accept`` reaches every context."""
    parser = lark_parser(KEYWORDS, always_accept=("NAME",))
    assert isinstance(parser.options.postlex, lark.lark.PostLex)
    assert isinstance(parser.options.postlex, WordBoundary)
    tables = LarkTables(parser)
    of_state, contexts = tables.lexer_contexts(len(tables.parse_table("start").actions), lambda stage: None)
    assert all("NAME" in contexts[c].order for c in of_state.values())


def test_the_deadline_is_checked_per_context() -> None:
    parser = lark_parser(ARITHMETIC)
    tables = LarkTables(parser)
    stages: list[str] = []
    _, contexts = tables.lexer_contexts(len(tables.parse_table("start").actions), stages.append)
    assert len(stages) == len(contexts) > 1


# ---------------------------------------------------------------------- lark's refusals


@pytest.mark.parametrize(
    ("grammar", "start", "rule", "terminal", "words"),
    [
        # raised from lark.parsers.lalr_analysis: a conflict, whatever the message says
        ('start: a | b\na: X\nb: X\nX: "x"', "start", "a", "$END", "not LALR(1)"),
        ('start: a "y" | b "y"\na: "x"\nb: "x"', "start", "a", "Y", "not LALR(1)"),
        # lark's messages name the rule or terminal at fault
        ("start: foo", "start", "foo", None, "undefined rule"),
        ('start: "a" BAR "b"', "start", None, "BAR", "undefined terminal"),
        ('start: "a"', "nope", "nope", None, "undefined rule"),
        ("start: A\nA: /[/", "start", None, "A", "cannot compile token"),
        # syntax errors and the rest: lark's GrammarError with nothing to name
        ("start: (", "start", None, None, "invalid grammar"),
        ('start: x\nx: "a"\nx: "b"', "start", None, None, "defined more than once"),
        ('start: "a"\n%import nope.X', "start", None, None, "%import"),
    ],
)
def test_lark_refusals_are_classified(
    grammar: str, start: str, rule: str | None, terminal: str | None, words: str
) -> None:
    with pytest.raises(GrammarError) as caught:
        build_lark_within(grammar, start, (), 30.0)
    error = caught.value
    assert words.lower() in str(error).lower(), str(error)
    assert (error.rule, error.terminal) == (rule, terminal), str(error)


def test_a_grammar_lark_builds_is_built() -> None:
    parser = build_lark_within(ARITHMETIC, "start", (), 30.0)
    assert isinstance(parser, lark.Lark)
    parser.parse("1+2")


def test_a_scanner_lark_cannot_compile_names_its_terminal() -> None:
    """lark builds this grammar and compiles each context's scanner only when first used; the
    adapter compiles them while reading the contexts, and names the terminal."""
    parser = lark_parser("start: T\nT: /(?i)a/")
    tables = LarkTables(parser)
    with pytest.raises(GrammarError) as caught:
        tables.lexer_contexts(len(tables.parse_table("start").actions), lambda stage: None)
    assert caught.value.terminal == "T"


def test_a_regex_comment_is_refused_where_lark_refuses_it() -> None:
    """Newer lark (1.3.1, not 1.1.0) checks terminal collisions with interegular, which crashes
    on ``(?#...)``; older lark builds the grammar. Either way the adapter does what lark does, and names T."""
    grammar = "start: T\nT: /a(?#c)b/"
    try:
        lark.Lark(grammar, parser="lalr")
    except AttributeError:
        with pytest.raises(GrammarError) as caught:
            build_lark_within(grammar, "start", (), 30.0)
        assert caught.value.terminal == "T"
    else:
        build_lark_within(grammar, "start", (), 30.0)
