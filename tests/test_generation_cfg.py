"""The real model through the CFG backend: a recursive schema (the model is loaded once per session)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from constrain.sampling import generate

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

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


def test_schema_aware_sql_generation(model_and_tokenizer, model_compiler) -> None:
    model, tokenizer = model_and_tokenizer
    guide = model_compiler.sql({"customers": ["id", "name", "country"]})
    prompt = "Table customers(id, name, country).\nQuestion: list the names of all customers.\nSQL: "
    result = generate(model, tokenizer, prompt, guide, model_compiler.vocabulary, chat=False, max_new_tokens=30)
    assert ";" in result.text, result.text  # the model goes on with more statements; check the first one
    first = result.text.split(";")[0].strip() + ";"
    guide.grammar.lark.parse(first)  # the guide's exact oracle
    sqlglot = pytest.importorskip("sqlglot")
    tables = {t.name.lower() for t in sqlglot.parse_one(first.rstrip(";")).find_all(sqlglot.exp.Table)}
    assert tables == {"customers"}, first
