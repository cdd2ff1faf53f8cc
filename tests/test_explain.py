"""The debugging stages (API and CLI) on a real schema and tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import constrain
from constrain.cli import main
from constrain.explain import explain
from constrain.json_schema import to_regex
from constrain.testing import tokenize_continuation

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}


def test_stages(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    guide = compiler.json_schema(SCHEMA)
    report = explain(guide, text='{"name": "Ada", "age": -1}', tokenizer=smollm2, max_states=40)
    assert report.schema == SCHEMA
    assert report.regex == to_regex(SCHEMA)
    assert report.dot.startswith("digraph") and f"start -> {guide.initial_state}" in report.dot
    start_allowed = int(guide.allowed_tokens(guide.initial_state).sum())
    assert report.sparsity[0] == (guide.initial_state, start_allowed) and report.vocab_size == 49152
    rejected = report.steps[-1]
    assert rejected.state_after is None and b"-" in rejected.token and "do not continue" in rejected.rejected
    assert report.final is False
    text = report.format()
    for stage in ("1. schema", "2. regex", "3. byte DFA", "4. token index", "5. transition log", "REJECTED"):
        assert stage in text


def test_accepted_text_ends_final(smollm2: object) -> None:
    guide = constrain.Compiler(smollm2).json_schema(SCHEMA)
    report = explain(guide, token_ids=tokenize_continuation(smollm2, '{"name":"Ada"}'))
    assert report.final is True and all(step.state_after is not None for step in report.steps)


def test_cli_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    dot = tmp_path / "dfa.dot"
    code = main(["explain", "--schema", str(schema), "--text", '{"name": "Ada"}', "--dot", str(dot)])
    out = capsys.readouterr().out
    assert code == 0 and "final (may end here): True" in out
    assert dot.read_text().startswith("digraph")
    assert main(["explain", "--schema", str(schema), "--text", '{"age": 1}']) == 1


def test_cli_reports_unsupported_keyword(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "array", "uniqueItems": True}))
    assert main(["explain", "--schema", str(schema)]) == 2
    assert "uniqueItems" in capsys.readouterr().err


def test_cli_takes_a_gbnf_grammar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grammar = tmp_path / "answer.gbnf"
    grammar.write_text('root ::= ("yes" | "no") "."  # a regular grammar: the regex backend\n')
    assert main(["explain", "--gbnf", str(grammar), "--text", "yes."]) == 0
    assert "final (may end here): True" in capsys.readouterr().out
    assert main(["explain", "--gbnf", str(grammar), "--text", "maybe."]) == 1


def test_the_cli_says_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"constrain {constrain.__version__}"


@pytest.mark.parametrize(
    ("text", "offset", "keyword", "pointer"),
    [('{"age": 3}', 2, "required", "#"), ('{"name": "Ada", "age": -1}', 23, "minimum", "#/properties/age"),
     ('{"name": "Ada Lovelace Byron"}', 20, "maxLength", "#/properties/name")],
)  # fmt: skip
def test_the_verdict_names_the_keyword_and_pointer(smollm2: object, text: str, offset: int, keyword: str,
                                                   pointer: str) -> None:
    """Where the text leaves the language (a byte, not a token), what could come there, the
    shortest finish (which the guide takes), and the reference validator's keyword and pointer."""
    guide = constrain.Compiler(smollm2).json_schema(SCHEMA)
    verdict = explain(guide, text=text, tokenizer=smollm2).verdict
    assert verdict is not None and not verdict.complete
    assert len(verdict.accepted) == offset and text.encode().startswith(verdict.accepted)
    assert verdict.allowed_next and verdict.completion is not None
    finished = json.loads(verdict.accepted + verdict.completion)
    jsonschema.validate(finished, SCHEMA)
    assert (keyword, pointer) in [(k, p) for k, p, _ in verdict.violations], verdict.violations


def test_the_verdict_says_when_the_guide_is_stricter_than_the_schema(smollm2: object) -> None:
    guide = constrain.Compiler(smollm2).json_schema(SCHEMA)  # strict_properties: undeclared members refused
    verdict = explain(guide, text='{"name": "Ada", "pet": "cat"}', tokenizer=smollm2).verdict
    assert verdict is not None and not verdict.violations and "stricter" in verdict.note
    assert explain(guide, text='{"name": "Ada"}', tokenizer=smollm2).verdict.complete  # type: ignore[union-attr]
    assert "the text fits" in explain(guide, text='{"name": "Ada"}', tokenizer=smollm2).format()


def test_grammar_guides_get_a_verdict_too(smollm2: object, capsys: pytest.CaptureFixture[str]) -> None:
    """The grammar backend: the same byte walk through its lexer and parser (feed_bytes), the bytes
    allowed where the text fails, and a shortest finish that json.loads accepts."""
    from constrain.explain import judge

    guide = constrain.Compiler(smollm2).grammar("json")
    text = b'{"a": [1, 2,]}'
    verdict = judge(guide, text)
    assert not verdict.complete and verdict.accepted == b'{"a": [1, 2,' and "'0'-'9'" in verdict.allowed_next
    assert verdict.completion is not None and json.loads(verdict.accepted + verdict.completion)
    assert judge(guide, b'{"a": [1, 2]}').complete
    assert main(["explain", "--grammar", "json", "--text", '{"a": [1, 2,]}']) == 1
    assert "leaves the constraint at byte 12" in capsys.readouterr().out
    assert main(["explain", "--grammar", "json", "--text", "[1]"]) == 0
