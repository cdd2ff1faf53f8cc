"""Lark's lexing rules, reproduced exactly: first-match alternation, priorities, keyword renames,
lazy repeats, backtracking to the last match, ``%ignore`` — on small grammars built to expose them.

The oracle is always ``lark.Lark(grammar, parser="lalr").parse``. Texts come from
hypothesis over each grammar's alphabet; they are checked byte by byte (the exact
emulation), as real tokens of a real tokenizer (tokens that cross terminal
boundaries), and split at arbitrary points (incremental states compose).
"""

from __future__ import annotations

import random

import lark
import numpy as np
import oracles
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import byte_accepts

import constrain
from constrain.cfg import CFGGuide, compile_grammar
from constrain.testing import accepts, random_walk, token_text, tokenize_continuation

GRAMMARS = {
    # INT sorts before FLOAT (same priority, same max width, longer pattern text), and
    # Python's alternation is first-match: "1.5" lexes as INT then fails. Max munch would accept.
    "first_match": (
        r"""
        start: FLOAT | INT | INT "+" INT
        INT: /(?:[0-9]|[0-9])+/
        FLOAT: /[0-9]+\.[0-9]+/
        """,
        "0123456789.+",
    ),
    # A higher priority wins even when another terminal would match more.
    "priority": (
        r"""
        start: (A | B | C)+
        A.2: /ab?/
        B: /b+c/
        C: "c"
        """,
        "abc",
    ),
    # Keywords are renamed identifiers where both are expected, identifiers elsewhere;
    # case-insensitive keyword, comments and whitespace ignored.
    "keywords": (
        r"""
        start: stmt+
        stmt: SELECT NAME ";" | NAME "=" NAME ";" | "let" NAME ";"
        SELECT: "select"i
        NAME: /[a-z_]+/i
        COMMENT: /#[^\n]*/
        %ignore /[ \n]+/
        %ignore COMMENT
        """,
        "selctSELECTl=; #\n_",
    ),
    # Alternation order and a lazy repeat inside one terminal.
    "lazy": (
        r"""
        start: (X | Y)+
        X: /a|ab/
        Y: /b+?c/
        """,
        "abc",
    ),
    # Backtracking: "1." may still become "1.5"; if it does not, lark re-lexes "." after "1".
    "backtrack": (
        r"""
        start: (NUM | DOT | E | SIGN)+
        NUM: /[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?/
        DOT: "."
        E: "e"
        SIGN: "+" | "-"
        """,
        "12.e+-",
    ),
}

_GUIDES: dict[tuple[int, str], CFGGuide] = {}
_LARKS = {name: lark.Lark(text, parser="lalr") for name, (text, _) in GRAMMARS.items()}
HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKEN_HYPOTHESIS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def guide_for(vocabulary: constrain.Vocabulary, name: str) -> CFGGuide:
    key = (id(vocabulary), name)
    if key not in _GUIDES:
        _GUIDES[key] = compile_grammar(GRAMMARS[name][0], vocabulary)
    return _GUIDES[key]


def lark_accepts(name: str, text: str) -> bool:
    return oracles.lark_accepts(_LARKS[name], text)


@pytest.fixture(scope="module")
def smollm2_compiler(smollm2: object) -> constrain.Compiler:
    return constrain.Compiler(smollm2)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_byte_level_emulation_equals_lark(smollm2_compiler: constrain.Compiler, name: str) -> None:
    guide = guide_for(smollm2_compiler.vocabulary, name)

    @HYPOTHESIS
    @given(st.text(alphabet=GRAMMARS[name][1], max_size=10))
    def check(text: str) -> None:
        assert byte_accepts(guide, text.encode()) == lark_accepts(name, text), text

    check()


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("first_match", "1.5", False),  # INT wins the alternation, then "." is unexpected
        ("first_match", "15", True),
        ("first_match", "1+2", True),
        ("priority", "abc", True),  # A.2 takes "ab" (not "a" then B "bc"), then C
        ("priority", "bbc", True),
        ("keywords", "select x;", True),
        ("keywords", "SeLeCt x;", True),
        ("keywords", "selection = x;", True),
        ("keywords", "select = x;", False),  # "select" is the keyword where a statement starts
        ("keywords", "let select;", True),  # …but a plain name after "let", where no keyword fits
        ("keywords", "x = y; # done", True),
        ("lazy", "abc", True),
        ("lazy", "abbbc", True),
        ("backtrack", "1.e", True),  # NUM "1", then DOT, E after backtracking
        ("backtrack", "1.5e+3", True),
        ("backtrack", "1e+", True),  # NUM "1", E, SIGN
    ],
)
def test_known_corner_cases(smollm2_compiler: constrain.Compiler, name: str, text: str, expected: bool) -> None:
    assert lark_accepts(name, text) == expected, "the oracle changed"
    guide = guide_for(smollm2_compiler.vocabulary, name)
    assert byte_accepts(guide, text.encode()) == lark_accepts(name, text)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_real_tokens_follow_lark(compiler: constrain.Compiler, tokenizer: object, name: str) -> None:
    guide = guide_for(compiler.vocabulary, name)

    @TOKEN_HYPOTHESIS
    @given(st.text(alphabet=GRAMMARS[name][1], min_size=1, max_size=12))
    def check(text: str) -> None:
        ids = tokenize_continuation(tokenizer, text)
        if token_text(compiler.vocabulary, ids) != text.encode():
            return
        assert accepts(guide, ids) == lark_accepts(name, text), (text, ids)

    check()


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_split_anywhere_composes(smollm2_compiler: constrain.Compiler, name: str) -> None:
    """Feeding a text in arbitrary chunks gives the same state as feeding it at once."""
    guide = guide_for(smollm2_compiler.vocabulary, name)

    @HYPOTHESIS
    @given(st.text(alphabet=GRAMMARS[name][1], max_size=12), st.lists(st.integers(0, 12), max_size=4))
    def check(text: str, cuts: list[int]) -> None:
        data = text.encode()
        whole = guide.feed_bytes(guide.initial_state, data)
        state = guide.initial_state
        start = 0
        for cut in sorted({min(c, len(data)) for c in cuts}) + [len(data)]:
            if state is None:
                break
            state = guide.feed_bytes(state, data[start:cut])
            start = cut
        assert state == whole

    check()


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_random_walks_parse(smollm2_compiler: constrain.Compiler, name: str) -> None:
    vocabulary = smollm2_compiler.vocabulary
    guide = guide_for(vocabulary, name)
    rng = random.Random(name)
    ended = 0
    for _ in range(15):
        ids, finished = random_walk(guide, vocabulary, rng, max_tokens=20, eos_probability=0.4)
        if finished:
            ended += 1
            text = token_text(vocabulary, ids).decode("utf-8")
            assert lark_accepts(name, text), text
    # Uniform sampling over ~49k identifier tokens rarely picks ";": no end is required there,
    # only no dead end (random_walk raises on one) and no wrong ending.
    assert ended > 3 or name == "keywords"


@pytest.mark.parametrize("name", ["keywords", "backtrack"])
def test_fast_mask_equals_reference(smollm2_compiler: constrain.Compiler, name: str) -> None:
    vocabulary = smollm2_compiler.vocabulary
    guide = guide_for(vocabulary, name)
    eos = sorted(vocabulary.eos_token_ids)
    for prefix in (b"", b"sel", b"select", b"x = y", b"1", b"1.", b"12e", b"let x;#"):
        state = guide.feed_bytes(guide.initial_state, prefix)
        if state is None or not guide.viable(state):
            continue
        fast = np.setdiff1d(guide.allowed_token_ids(state), eos)
        assert np.array_equal(fast, guide.reference_allowed(state)), prefix


@pytest.mark.slow
def test_the_cased_characters_are_those_case_mapping_changes() -> None:
    """IGNORECASE classes test only the characters some case mapping touches; the table of them
    skips whole blocks that mapping leaves alone (a per-character loop cost seconds, past
    timeout_s on a busy machine). It must hold every character a per-character loop finds."""
    from constrain.cfg import pyregex

    found = set()
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        low, up = char.lower(), char.upper()
        if low != char or up != char:
            found.update([code] + [ord(other) for other in (low, up) if len(other) == 1])
    assert pyregex._cased() == tuple(sorted(found))
    assert pyregex._all_characters() == "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_wide_lexer_states_split_their_bytes_as_narrow_ones_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lexer state's targets by byte, in thread order: the numpy split of wide states (past
    ``_WIDE_EDGES`` edges) gives the byte loop's lists on random threads (overlapping ranges,
    repeated targets, bytes no edge covers)."""
    from constrain.cfg import lexer

    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(1, 200)
        edges = []
        for _ in range(n):
            ranges = []
            for _ in range(rng.choice((0, 1, 1, 2, 3))):
                lo = rng.randrange(256)
                ranges.append((lo, min(255, lo + rng.choice((0, 0, 1, 5, 40, 255))), rng.randrange(50)))
            edges.append(ranges)
        states = rng.sample(range(n), rng.randrange(1, n + 1))
        monkeypatch.setattr(lexer, "_WIDE_EDGES", 10**9)
        narrow = lexer._targets_by_byte(states, edges)
        monkeypatch.setattr(lexer, "_WIDE_EDGES", 0)
        assert lexer._targets_by_byte(states, edges) == narrow
