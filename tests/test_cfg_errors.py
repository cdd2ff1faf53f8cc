"""Grammar problems are reported at compile time as GrammarError, naming the rule or terminal."""

from __future__ import annotations

import pytest

import constrain
from constrain.cfg import GrammarError, bundled_grammars, compile_grammar


@pytest.fixture(scope="module")
def vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


@pytest.mark.parametrize(
    ("grammar", "rule", "terminal", "words"),
    [
        ('start: a | b\na: X\nb: X\nX: "x"', "a", "$END", "LALR"),
        ("start: foo", "foo", None, "undefined rule"),
        ('start: "a" BAR "b"', None, "BAR", "undefined terminal"),
        ("start: A\nA: /a(?=b)/", None, "A", "lookaround"),
        ("start: A\nA: /(?<!x)a/", None, "A", "lookaround"),
        ("start: A\nA: /(a)\\1/", None, "A", "backreference"),
        ("start: A\nA: /^a/", None, "A", "anchor"),
        ("start: A\nA: /a\\b/", None, "A", "anchor"),
        ("start: A\nA: /a*/", None, "A", "zero-width"),
        ('start: a\na: "x" a', "start", None, "cannot produce any string"),
        ('start: "y" | b\nb: "x" b', "b", None, "never finish"),
        ("start: (", None, None, "invalid grammar"),
    ],
)
def test_grammar_errors_name_the_culprit(
    vocabulary: constrain.Vocabulary, grammar: str, rule: str | None, terminal: str | None, words: str
) -> None:
    with pytest.raises(GrammarError) as caught:
        compile_grammar(grammar, vocabulary)
    error = caught.value
    assert isinstance(error, constrain.ConstrainError) and isinstance(error, ValueError)
    assert words.lower() in str(error).lower(), str(error)
    assert error.rule == rule, str(error)
    assert error.terminal == terminal, str(error)


def test_unknown_bundled_name(vocabulary: constrain.Vocabulary) -> None:
    assert {"json", "sql"} <= set(bundled_grammars())
    with pytest.raises(GrammarError, match="no bundled grammar named 'yaml'"):
        compile_grammar("yaml", vocabulary)


def test_shift_reduce_conflicts_follow_lark(vocabulary: constrain.Vocabulary) -> None:
    """Lark resolves shift/reduce conflicts as shifts without complaint; so does the guide."""
    guide = compile_grammar('start: "if" X [ "else" X ]\nX: "x"\n%ignore " "', vocabulary)
    state = guide.feed_bytes(guide.initial_state, b"if x else x")
    assert state is not None and guide.is_final(state)
