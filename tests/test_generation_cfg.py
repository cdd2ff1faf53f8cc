"""The real model through the CFG backend: a recursive schema (the model is loaded once per session)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from constrain.sampling import generate

torch = pytest.importorskip("torch")

LIST = {
    "type": "object",
    "properties": {"item": {"type": "string", "maxLength": 12}, "next": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
    "required": ["item", "next"],
}


def test_recursive_schema_generation(model_and_tokenizer, model_compiler) -> None:
    model, tokenizer = model_and_tokenizer
    guide = model_compiler.json_schema(LIST)
    assert guide.backend == "cfg"
    prompt = 'Repeat exactly this JSON and nothing else: {"item": "apple", "next": null}'
    result = generate(model, tokenizer, prompt, guide, model_compiler.vocabulary, max_new_tokens=60)
    assert result.complete, result.text
    jsonschema.validate(json.loads(result.text), LIST)
