"""Bad input ends in a named ConstrainError, never a raw Python exception (issue #13's list).

Each case failed with a built-in exception before (``RecursionError``, ``FileNotFoundError``,
``ValueError``, ``UnicodeEncodeError``, ``TypeError``, ``AttributeError``) or silently
answered (``CFGGuide.is_final(None)`` returned False).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import constrain
from constrain.explain import explain


@pytest.fixture(scope="module")
def compiler(smollm2: object) -> constrain.Compiler:
    """One tokenizer family is enough: these are input checks, not vocabulary walks."""
    return constrain.Compiler(smollm2)


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


CASES: dict[str, tuple[Callable[[constrain.Compiler], Any], type[constrain.ConstrainError], str]] = {
    "deep schema": (lambda c: c.json_schema(_nested(300)), constrain.LimitExceededError, "max_schema_depth"),
    "missing lark import": (lambda c: c.grammar("%import nosuchmod.X\nstart: X\n"), constrain.GrammarError,
                            "%import"),
    "properties not an object": (lambda c: c.json_schema({"properties": "ab"}), constrain.SchemaError, "properties"),
    "lone surrogate choice": (lambda c: c.choice(["\ud800"]), constrain.PatternError, "surrogate"),
    "token id None": (lambda c: c.regex("a").advance(c.regex("a").initial_state, None), constrain.InvalidStateError,
                      "token id"),
    "foreign regex state": (lambda c: c.regex("a").advance(("x",), 5), constrain.InvalidStateError, "state"),
    "foreign grammar state": (lambda c: c.grammar("json").is_final(None), constrain.InvalidStateError, "state"),
    "grammar state of another shape": (lambda c: c.grammar("json").advance(7, 5), constrain.InvalidStateError,
                                       "state"),
    "no tokenizer": (lambda c: constrain.Compiler(None), constrain.ConfigurationError, "tokenizer"),
    "limits of another type": (lambda c: constrain.Compiler(c.vocabulary, limits="fast"),
                               constrain.ConfigurationError, "Limits"),
    "explain text without tokenizer": (lambda c: explain(c.regex("a"), text="a"), constrain.ConfigurationError,
                                       "tokenizer"),
    "lone surrogate const": (lambda c: c.json_schema('{"enum": ["\\udfff", 1]}'), constrain.SchemaError,
                             "lone surrogate"),
    "lone surrogate name": (lambda c: c.json_schema('{"required": ["\\ud800"]}'), constrain.SchemaError,
                            "lone surrogate"),
    "EOS id with text bytes": (lambda c: constrain.Vocabulary((b"a", b"b"), frozenset({1}), 2),
                               constrain.VocabularyError, "EOS id 1 also has text"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_a_named_error(compiler: constrain.Compiler, name: str) -> None:
    call, kind, names = CASES[name]
    with pytest.raises(kind, match=names):
        call(compiler)


def test_wrong_kinds_are_also_type_errors(compiler: constrain.Compiler) -> None:
    """Python's convention: a wrong argument type is a TypeError, so ``except TypeError`` still works."""
    with pytest.raises(TypeError):
        compiler.regex("a").advance(compiler.regex("a").initial_state, "7")
    with pytest.raises(TypeError):
        constrain.Compiler(None)


def test_a_schema_below_the_depth_limit_compiles(compiler: constrain.Compiler) -> None:
    guide = compiler.json_schema(_nested(60))
    assert guide.allowed_token_ids(guide.initial_state).size


def test_a_repeat_count_python_cannot_read_is_a_pattern_error(compiler: constrain.Compiler) -> None:
    with pytest.raises(constrain.InvalidPatternError):
        compiler.regex("a{4294967296}")  # was a raw OverflowError


@pytest.mark.parametrize("field, value", [
    ("max_memo_entries", 0), ("max_dfa_states", -5), ("max_parser_stack", True), ("max_nfa_states", "100"),
    ("max_interned_stacks", 2.5), ("timeout_s", -1.0), ("timeout_s", float("nan")), ("timeout_s", "30"),
])  # fmt: skip
def test_a_bad_limit_is_refused_where_it_is_set(field: str, value: object) -> None:
    """Not deep inside a compilation (a cache that refuses size 0 raised a bare ValueError there)."""
    with pytest.raises(constrain.ConfigurationError, match=f"Limits.{field}"):
        constrain.Limits(**{field: value})
    assert constrain.Limits(timeout_s=0.0).timeout_s == 0.0  # "no time at all" is a limit too
