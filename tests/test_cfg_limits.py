"""Grammar guides under ``Limits``: past each one, a ``LimitExceededError`` that names it.

Every test uses a real grammar: under a small limit it fails with the limit's name
(and the way to raise it) in the error; under the defaults the same grammar works.
"""

from __future__ import annotations

import time

import pytest

import constrain
from constrain import LimitExceededError, Limits
from constrain.cfg import CFGGuide, compile_grammar
from constrain.cfg.grammar import load_grammar_source

LETTERS = 'start: WORD ("," WORD)*\nWORD: /[a-z]{1,40}/'
TREE_SCHEMA = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
        }
    },
    "$ref": "#/$defs/node",
}


@pytest.fixture(scope="module")
def smollm2_compiler(compilers: dict[str, constrain.Compiler], smollm2: object) -> constrain.Compiler:
    """The session's SmolLM2 compiler (the one the ``compiler`` fixture makes), made here if not yet."""
    if "smollm2" not in compilers:
        compilers["smollm2"] = constrain.Compiler(smollm2)
    return compilers["smollm2"]


@pytest.fixture(scope="module")
def vocabulary(smollm2_compiler: constrain.Compiler) -> constrain.Vocabulary:
    return smollm2_compiler.vocabulary


def check(error: pytest.ExceptionInfo[LimitExceededError], limit: str, value: float) -> None:
    assert isinstance(error.value, constrain.ConstrainError)
    assert error.value.limit == limit and error.value.value == value, str(error.value)
    assert f"Limits.{limit}" in str(error.value), str(error.value)


def token_id(vocabulary: constrain.Vocabulary, text: bytes) -> int:
    return vocabulary.token_bytes.index(text)


# ---------------------------------------------------------------------- max_nfa_states


def test_terminal_automaton_size(vocabulary: constrain.Vocabulary) -> None:
    """All terminals together are one NFA; bounded repeats unroll into it (no fixed repeat cap)."""
    grammar = 'start: CODE\nCODE: /[a-z]{1500}/'
    with pytest.raises(LimitExceededError) as error:
        compile_grammar(grammar, vocabulary, limits=Limits(max_nfa_states=2_000))
    check(error, "max_nfa_states", 2_000)
    assert "CODE" in str(error.value)
    guide = compile_grammar(grammar, vocabulary)
    state = guide.feed_bytes(guide.initial_state, b"q" * 1500)
    assert state is not None and guide.is_final(state)


def test_nested_repeats_are_refused_before_they_are_built(vocabulary: constrain.Vocabulary) -> None:
    """A million copies (a thousand of a thousand) would take seconds and gigabytes: refused up front."""
    began = time.monotonic()
    with pytest.raises(LimitExceededError) as error:
        compile_grammar('start: X\nX: /(ab{1000}){1000}/', vocabulary)
    check(error, "max_nfa_states", Limits().max_nfa_states)
    assert time.monotonic() - began < 10


# ---------------------------------------------------------------------- max_dfa_states


def test_lexer_states(vocabulary: constrain.Vocabulary) -> None:
    """Lexer states are made lazily, so the limit is met where they are: computing a mask, advancing."""
    guide = compile_grammar(LETTERS, vocabulary)
    limit = guide.grammar.lexer.num_states + 2  # the context starts fit; a word's 40 letters do not
    small = compile_grammar(LETTERS, vocabulary, limits=Limits(max_dfa_states=limit))
    with pytest.raises(LimitExceededError) as error:
        small.allowed_tokens(small.initial_state)
    check(error, "max_dfa_states", limit)
    with pytest.raises(LimitExceededError):
        small.feed_bytes(small.initial_state, b"abcdefghij")
    assert guide.allowed_tokens(guide.initial_state)[token_id(vocabulary, b"abc")]
    state = guide.feed_bytes(guide.initial_state, b"a" * 40 + b",b")
    assert state is not None and guide.is_final(state)


# ---------------------------------------------------------------------- max_index_entries


def test_cached_walk_entries(vocabulary: constrain.Vocabulary) -> None:
    """The first mask walks the vocabulary from the start state: thousands of tokens held."""
    small = compile_grammar("json", vocabulary, limits=Limits(max_index_entries=1_000))
    with pytest.raises(LimitExceededError) as error:
        small.allowed_tokens(small.initial_state)
    check(error, "max_index_entries", 1_000)
    with pytest.raises(LimitExceededError):
        small.precompute()
    guide = compile_grammar("json", vocabulary)
    assert guide.allowed_tokens(guide.initial_state)[token_id(vocabulary, b"{")]
    assert 0 < guide.index.entries <= len(vocabulary.token_bytes) * guide.index.nodes_built


# ---------------------------------------------------------------------- timeout_s


def test_compile_time(vocabulary: constrain.Vocabulary) -> None:
    """Lark's table construction cannot be interrupted; the deadline is checked as soon as it returns.
    A bundled grammar builds no lark tables (they are shipped), and its later phases keep the deadline."""
    not_bundled = load_grammar_source("json")[0] + "// a text no shipped table names: lark builds it\n"
    with pytest.raises(LimitExceededError) as error:
        compile_grammar(not_bundled, vocabulary, limits=Limits(timeout_s=0.0))
    check(error, "timeout_s", 0.0)
    assert "lark" in str(error.value)
    with pytest.raises(LimitExceededError) as error:
        compile_grammar("json", vocabulary, limits=Limits(timeout_s=0.0))
    check(error, "timeout_s", 0.0)
    assert "lark" not in str(error.value)
    assert compile_grammar("json", vocabulary).grammar.limits == Limits()


def test_unrolled_terminals_check_the_deadline_while_they_grow(vocabulary: constrain.Vocabulary) -> None:
    """A bounded repeat of a repeat unrolls into hundreds of thousands of NFA states, well inside
    max_nfa_states, and 2-4 s of building on an idle machine; the deadline was first checked after
    all of it (the grammar fuzzer: 14 s under timeout_s=5). Now every few thousand states are
    followed by a check. The bound leaves a second for garbage collections and for freeing the
    half-built automaton on a busy machine; the fuzzer holds the issue's 10 % + 100 ms. (Thirty
    to thirty-five copies built in just under a second on a faster machine, and then the test
    saw no limit: sixty to seventy stay well past it while the copies are made.)"""
    for pattern in (r"(?:\w{0,40}\t){60,70}", r"(?:\D{0,40}\t.|\w\t{4,12}){60,70}"):
        began = time.monotonic()
        with pytest.raises(LimitExceededError) as error:
            compile_grammar(f"start: T\nT: /{pattern}/\n", vocabulary, limits=Limits(timeout_s=1.0))
        check(error, "timeout_s", 1.0)
        assert time.monotonic() - began < 1.0 * 1.1 + 0.1 + 1.0, pattern


def test_precompute_time(vocabulary: constrain.Vocabulary) -> None:
    guide = compile_grammar("json", vocabulary)
    with pytest.raises(LimitExceededError) as error:
        guide.precompute(timeout_s=0.0)
    check(error, "timeout_s", 0.0)
    assert guide.precompute() > 0


#: A fuzzed terminal (the grammar fuzzer, seed 5 at 80dced6) whose lexer states after ``\x00`` each hold
#: thousands of threads: a 17-byte text built 442 of them in 25 s on its first mask.
FAT_LEXER_TERMINAL = (
    r"\x00(?s:|\s*(?P<n1>.{1,3}|.{10}|Z}..{2,}){7,}.{1}[\u0107-\u013f\x51-\U00000069\u0039-\U000245c9]"
    r"|([^\N{LATIN SMALL LETTER K}]{1}[^6-\U00000063\D\U000e0542-\U000e0544]{0,}?)){20,25}\([\D\xb5]"
)


def test_a_first_visit_mask_ends_on_time(smollm2_compiler: constrain.Compiler, smollm2: object) -> None:
    """A first-visit mask builds lexer states as the vocabulary walk reaches them, and nothing
    bounded its time (the fuzzer's hang guard fired after 120 s under timeout_s=5). Now it runs on
    a first visit's clock, checked before each lexer state, and ends in the limit; the guide stays
    usable (the states built so far are kept)."""
    limits = Limits(timeout_s=2.0)
    guide = smollm2_compiler.grammar(f"start: T\nT: /{FAT_LEXER_TERMINAL}/\n", limits=limits)
    ids = smollm2.encode("\x00" + "x" * 14 + "(1", add_special_tokens=False)  # type: ignore[attr-defined]
    state = guide.initial_state
    began = time.monotonic()
    with pytest.raises(LimitExceededError) as error:
        for token in ids:
            guide.allowed_tokens(state)
            state = guide.advance(state, token)
    check(error, "timeout_s", 2.0)
    assert time.monotonic() - began < 2.0 * 1.1 + 0.1 + 1.0
    assert guide.allowed_tokens(guide.initial_state).any()


# ---------------------------------------------------------------------- max_parser_stack


def test_parser_stack_depth(vocabulary: constrain.Vocabulary) -> None:
    """Nesting is the one growth the generated text drives: it raises while guiding, not at compile time."""
    bracket = token_id(vocabulary, b"[")
    small = compile_grammar("json", vocabulary, limits=Limits(max_parser_stack=20))
    state = small.initial_state
    with pytest.raises(LimitExceededError) as error:
        for _ in range(30):
            state = small.advance(state, bracket)
    check(error, "max_parser_stack", 20)
    assert len(small.grammar.stacks.states(state[0])) <= 20
    guide = compile_grammar("json", vocabulary)
    state = guide.initial_state
    for _ in range(30):
        state = guide.advance(state, bracket)
    state = guide.feed_bytes(state, b"]" * 30)
    assert state is not None and guide.is_final(state)


# ---------------------------------------------------------------------- the compiler's entry points


def test_compiler_passes_limits(smollm2_compiler: constrain.Compiler) -> None:
    compiler = smollm2_compiler
    with pytest.raises(LimitExceededError) as error:
        compiler.grammar(LETTERS, limits=Limits(max_nfa_states=50))
    check(error, "max_nfa_states", 50)
    guide = compiler.grammar(LETTERS)
    assert guide.grammar.limits == compiler.limits
    assert compiler.grammar(LETTERS, limits=compiler.limits).grammar is guide.grammar  # the tables shared
    other = compiler.grammar(LETTERS, limits=Limits(max_parser_stack=5))
    assert other.grammar is not guide.grammar and other.grammar.limits.max_parser_stack == 5

    with pytest.raises(LimitExceededError) as error:
        compiler.sql({"orders": ["id", "total"]}, limits=Limits(timeout_s=0.0))
    check(error, "timeout_s", 0.0)

    with pytest.raises(LimitExceededError) as error:
        compiler.json_schema(TREE_SCHEMA, limits=Limits(max_nfa_states=50))
    check(error, "max_nfa_states", 50)
    tree: CFGGuide = compiler.json_schema(TREE_SCHEMA)  # type: ignore[assignment]
    assert tree.backend == "cfg" and tree.grammar.limits == compiler.limits


@pytest.mark.slow  # SQL compiles in seconds
def test_compiler_sql_under_defaults(smollm2_compiler: constrain.Compiler) -> None:
    guide = smollm2_compiler.sql({"orders": ["id", "total"]})
    assert guide.grammar.limits == smollm2_compiler.limits
    state = guide.feed_bytes(guide.initial_state, b"SELECT total FROM orders")
    assert state is not None and guide.is_final(state)
