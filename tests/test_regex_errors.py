"""Bad patterns and exhausted limits end in clear errors, never in hangs or dead ends."""

from __future__ import annotations

import pytest

import constrain
from constrain.regex.parse import parse_regex
from constrain.testing import accepts, random_walk, token_text


@pytest.fixture(scope="module")
def compiler(smollm2: object) -> constrain.Compiler:
    return constrain.Compiler(smollm2)


@pytest.mark.parametrize(
    ("pattern", "position"), [("ab(c", 2), ("[a-", 0), ("a{2,1}", 2), ("x**", 2)]
)
def test_invalid_syntax_names_the_position(compiler: constrain.Compiler, pattern: str, position: int) -> None:
    with pytest.raises(constrain.InvalidPatternError) as info:
        compiler.regex(pattern)
    assert info.value.position == position
    assert f"position {position}" in str(info.value)


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [(r"a(?=b)", "lookahead"), (r"(?<!x)a", "lookbehind"), (r"(a)\1", "backreference"), (r"a^b", "anchor")],
)
def test_non_regular_features_are_named(compiler: constrain.Compiler, pattern: str, feature: str) -> None:
    with pytest.raises(constrain.NonRegularPatternError, match=feature):
        compiler.regex(pattern)


def test_errors_share_one_root_and_value_error(compiler: constrain.Compiler) -> None:
    for bad in ("(", r"(?=a)"):
        with pytest.raises(constrain.ConstrainError):
            compiler.regex(bad)
        with pytest.raises(ValueError):
            compiler.regex(bad)


def test_anchors_at_the_ends_and_unicode_escapes_are_accepted(compiler: constrain.Compiler) -> None:
    vocabulary = compiler.vocabulary
    ids = {piece: i for i, piece in enumerate(vocabulary.token_bytes) if piece in (b"1", b"2", b"$")}
    assert accepts(compiler.regex(r"^\d+$"), [ids[b"1"], ids[b"2"]])
    assert accepts(compiler.regex(r"\d\$"), [ids[b"1"], ids[b"$"]])
    guide = compiler.regex(r"[\u4e00-\u9fff]")
    text = token_text(vocabulary, random_walk(guide, vocabulary, __import__("random").Random(0))[0])
    assert "\u4e00" <= text.decode() <= "\u9fff"


def test_empty_language_fails_at_compile_time(compiler: constrain.Compiler) -> None:
    with pytest.raises(constrain.EmptyLanguageError):
        compiler.regex(r"[^\x00-\U0010FFFF]")
    with pytest.raises(constrain.EmptyLanguageError):
        compiler.regex("\x04")  # SmolLM2 has no token containing this byte


def test_vocabulary_that_needs_token_level_pruning(smollm2: object) -> None:
    """'q' exists only inside longer tokens here, so a pattern ending on a lone 'q' must be pruned."""
    full = constrain.Vocabulary.from_tokenizer(smollm2)
    pieces = tuple(None if piece == b"q" else piece for piece in full.token_bytes)
    vocabulary = constrain.Vocabulary(pieces, full.eos_token_ids, full.size)
    assert not vocabulary.spells_every_byte_alone
    compiler = constrain.Compiler(vocabulary)
    with pytest.raises(constrain.EmptyLanguageError, match="vocabulary"):
        compiler.regex("q")
    guide = compiler.regex("q|qu")
    for state in guide.index.explore():
        assert guide.allowed_tokens(state).any()
    ids, finished = random_walk(guide, vocabulary, __import__("random").Random(1))
    assert finished and token_text(vocabulary, ids) == b"qu"


def test_state_limit_is_named(compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"[a-z]{1,500}", limits=constrain.Limits(max_dfa_states=50))
    with pytest.raises(constrain.LimitExceededError, match="max_dfa_states") as info:
        guide.precompute()
    assert info.value.limit == "max_dfa_states"


def test_nfa_limit_is_named(compiler: constrain.Compiler) -> None:
    options = [f"option-{i}" for i in range(5000)]
    with pytest.raises(constrain.LimitExceededError, match="max_nfa_states"):
        compiler.choice(options, limits=constrain.Limits(max_nfa_states=1_000))


def test_compile_time_limit_is_named(compiler: constrain.Compiler) -> None:
    # 50k alternatives take 50k+ automaton states to build: past a zero time budget at the first check.
    options = [f"option-{i}" for i in range(50_000)]
    with pytest.raises(constrain.LimitExceededError, match="timeout_s") as info:
        compiler.choice(options, limits=constrain.Limits(timeout_s=0.0))
    assert info.value.limit == "timeout_s"
    assert compiler.choice(options[:10], limits=constrain.Limits(timeout_s=0.0)).initial_state >= 0


def test_long_bounded_repeats_use_counters_not_copies(compiler: constrain.Compiler) -> None:
    guide = compiler.regex(r"(ab|cd){2,100000}x")
    assert len(guide.index.dfa.nfa) < 100
    vocabulary = compiler.vocabulary
    ids = {piece: i for i, piece in enumerate(vocabulary.token_bytes) if piece in (b"ab", b"cd", b"x", b"a", b"b")}
    assert accepts(guide, [ids[b"ab"], ids[b"cd"], ids[b"x"]])
    assert not accepts(guide, [ids[b"ab"], ids[b"x"]])
    assert accepts(guide, [ids[b"a"], ids[b"b"]] * 50 + [ids[b"x"]])


def test_choice_needs_options(compiler: constrain.Compiler) -> None:
    with pytest.raises(constrain.PatternError):
        compiler.choice([])


@pytest.mark.parametrize("pattern", [r"\d{4}+", r"a*+a", r"b[^]a]", r"x?a{}", r"[]a]+"])
def test_syntax_the_parser_would_misread_is_refused(pattern: str) -> None:
    """Each of these once compiled to a language other than Python's (weaker for the first four)."""
    with pytest.raises(constrain.PatternError):
        parse_regex(pattern)
