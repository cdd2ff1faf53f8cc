"""The compiler's cache shares compiled tables, never a guide's per-call metadata."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

import constrain


class City(BaseModel):
    name: str = Field(max_length=20)
    population_millions: int = Field(ge=0, le=40)


@pytest.fixture(scope="module")
def smollm2_compiler(smollm2: object) -> constrain.Compiler:
    return constrain.Compiler(smollm2)


def test_same_schema_twice_keeps_each_calls_model_class(smollm2_compiler: constrain.Compiler) -> None:
    from_class = smollm2_compiler.json_schema(City)
    from_dict = smollm2_compiler.json_schema(City.model_json_schema())
    assert from_class is not from_dict
    assert from_class.model_class is City  # was overwritten with None by the second call
    assert from_dict.model_class is None
    assert from_class.index is from_dict.index  # the compiled tables are shared, not rebuilt


def test_grammar_guide_does_not_carry_another_calls_schema(smollm2_compiler: constrain.Compiler) -> None:
    recursive = {"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}},
                 "$ref": "#/$defs/n"}
    schema_guide = smollm2_compiler.json_schema(recursive)
    assert schema_guide.backend == "cfg" and schema_guide.schema == recursive
    plain = smollm2_compiler.grammar(schema_guide.source)
    assert plain.schema is None and plain.model_class is None
    assert schema_guide.schema == recursive


def test_copies_share_masks(smollm2_compiler: constrain.Compiler) -> None:
    a = smollm2_compiler.regex(r"[a-c]{2,4}")
    b = smollm2_compiler.regex(r"[a-c]{2,4}")
    assert a is not b
    state = a.advance(a.initial_state, smollm2_compiler.vocabulary.token_bytes.index(b"a"))
    assert (a.allowed_tokens(state) == b.allowed_tokens(state)).all()


def test_fill_bitmask_refuses_buffers_it_would_fill_wrongly(smollm2_compiler: constrain.Compiler) -> None:
    import numpy as np

    guide = smollm2_compiler.regex(r"[a-c]{2,4}")
    words = constrain.bitmask_size(guide.vocab_size)
    for bad in (np.zeros(words, dtype=np.float32), np.zeros((2, words), dtype=np.int32),
                np.zeros(words + 1, dtype=np.int32), np.zeros(words * 2, dtype=np.int32)[::2]):  # fmt: skip
        with pytest.raises(constrain.BitmaskError):
            guide.fill_bitmask(guide.initial_state, bad)
    rows = constrain.allocate_bitmask(guide.vocab_size, batch_size=2)
    guide.fill_bitmask(guide.initial_state, rows[1])  # a row of a batch is fine
    assert rows[1].any() and not rows[0].any()
