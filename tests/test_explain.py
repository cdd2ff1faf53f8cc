"""The debugging stages (API and CLI) on a real schema and tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import constrain
from constrain.cli import main
from constrain.explain import explain, judge
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


@pytest.mark.slow
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


@pytest.mark.slow  # the fast tier keeps test_cli_explains_a_grammar
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


def test_the_verdict_takes_text_as_str_too(smollm2: object) -> None:
    """What a user types is a str: the same verdict as on its UTF-8 bytes; anything else a named error."""
    guide = constrain.Compiler(smollm2).json_schema({"type": "object", "properties": {"q": {"minimum": 1}}})
    assert judge(guide, '{"q": 0, "é": 1}') == judge(guide, '{"q": 0, "é": 1}'.encode())
    assert judge(guide, '{"q": 0}').violations[0][:2] == ("minimum", "#/properties/q")
    with pytest.raises(constrain.ConstrainError, match="str or bytes"):
        judge(guide, 5)  # type: ignore[arg-type]


@pytest.mark.slow  # the fast tier keeps test_cli_explains_a_grammar
def test_grammar_guides_get_a_verdict_too(smollm2: object, capsys: pytest.CaptureFixture[str]) -> None:
    """The grammar backend: the same byte walk through its lexer and parser (feed_bytes), the bytes
    allowed where the text fails, and a shortest finish that json.loads accepts."""
    guide = constrain.Compiler(smollm2).grammar("json")
    text = b'{"a": [1, 2,]}'
    verdict = judge(guide, text)
    assert not verdict.complete and verdict.accepted == b'{"a": [1, 2,' and "'0'-'9'" in verdict.allowed_next
    assert verdict.completion is not None and json.loads(verdict.accepted + verdict.completion)
    assert judge(guide, b'{"a": [1, 2]}').complete
    assert main(["explain", "--grammar", "json", "--text", '{"a": [1, 2,]}']) == 1
    assert "leaves the constraint at byte 12" in capsys.readouterr().out
    assert main(["explain", "--grammar", "json", "--text", "[1]"]) == 0


# ---------------------------------------------------------------------- the CFG analogues of the stages

NESTED = 'start: "(" start ")" | NUMBER\n%import common.NUMBER\n'
TREE = {
    "$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
        "required": ["name"]}},
    "$ref": "#/$defs/node",
}  # fmt: skip


def test_grammar_stages(smollm2: object) -> None:
    """A Lark grammar: its rules and start rule, the LALR table, the lexer's terminals and their
    automata, the mask at the start and along the text, and a per-token log naming what the
    parser expected where a token is rejected."""
    from constrain.explain import GrammarExplanation

    guide = constrain.Compiler(smollm2).grammar(NESTED)
    report = explain(guide, text="((12)]", tokenizer=smollm2)
    assert isinstance(report, GrammarExplanation) and report.schema is None and report.grammar == NESTED
    tables = report.tables
    assert (tables.start, tables.rules, tables.productions) == ("start", ("start",), 2)
    assert tables.parser_states == guide.grammar.num_states > 1 and tables.lexer_contexts >= 2
    kinds = {t.name: (t.kind, t.pattern) for t in tables.terminals}
    assert kinds["LPAR"] == ("string", "(") and kinds["RPAR"] == ("string", ")") and kinds["NUMBER"][0] == "regex"
    assert all(t.nfa_states > 0 for t in tables.terminals)
    assert tables.nfa_states == sum(t.nfa_states for t in tables.terminals) and tables.lexer_states > 0
    initial = int(guide.allowed_tokens(guide.initial_state).sum())
    assert report.initial_allowed == initial and 0 < initial < report.vocab_size == 49152
    assert report.sparsity[0] == initial and len(report.sparsity) == len(report.steps)
    *taken, rejected = report.steps
    assert all(step.stack_after is not None for step in taken) and b"".join(s.token or b"" for s in taken) == b"((12"
    assert rejected.stack_after is None and b"]" in (rejected.token or b"") and "cannot continue" in rejected.rejected
    assert rejected.expected == ("RPAR",) and report.final is False
    assert report.dot.startswith("digraph lexer") and "LPAR" in report.dot and report.dot_states > 1
    text = report.format()
    for stage in ("== 1. grammar ==", "start rule 'start'", "1 rule, 2 productions: start", "3 terminals",
                  f"== 2. LALR parser ==\n{tables.parser_states} parser states", "== 3. lexer automaton ==",
                  "== 4. mask sparsity ==", f"initial state allows {initial} of 49152 tokens",
                  "== 5. transition log ==", "REJECTED", "the parser expected: RPAR ')'", "final (may end here): False"):
        assert stage in text, stage  # fmt: skip
    assert "the parser expected there: RPAR ')'" in text  # the verdict, at the byte
    fits = explain(guide, text="((12))", tokenizer=smollm2)
    assert fits.final is True and all(step.stack_after is not None for step in fits.steps)
    assert len(fits.sparsity) == len(fits.steps) + 1  # the state after the last token too


def test_recursive_schema_stages(smollm2: object) -> None:
    """A recursive schema: the schema as received, the Lark skeleton it became (each terminal an
    automaton of the regex backend), and the verdict in the schema's terms."""
    guide = constrain.Compiler(smollm2).json_schema(TREE)
    assert guide.backend == "cfg"
    report = explain(guide, text='{"name": "a", "children": [{"name": 3}]}', tokenizer=smollm2)
    assert report.schema == TREE and "<T0>" in report.grammar and report.tables.start == "start"
    assert report.tables.terminals and all(t.kind == "automaton" for t in report.tables.terminals)
    assert report.tables.parser_states == guide.grammar.num_states
    rejected = report.steps[-1]
    assert rejected.stack_after is None and rejected.token == b"3" and rejected.expected
    assert report.verdict is not None and len(report.verdict.accepted) == 36
    assert ("type", "#/properties/children/items/properties/name") in [(k, p) for k, p, _ in report.verdict.violations]
    text = report.format()
    for stage in ("a recursive schema, as received", "its recursive skeleton, as a Lark grammar", "start rule 'start'",
                  "== 2. LALR parser ==", "(an automaton of the regex backend)", "== 4. mask sparsity ==",
                  "REJECTED", "the parser expected:", "schema: 'type' at #/properties/children/items/properties/name"):
        assert stage in text, stage  # fmt: skip
    assert explain(guide, text='{"name": "a", "children": [{"name": "b"}]}', tokenizer=smollm2).final is True


def test_cli_explains_a_grammar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dot = tmp_path / "lexer.dot"
    assert main(["explain", "--grammar", "json", "--text", '{"a": [1, 2,]}', "--dot", str(dot)]) == 1
    out = capsys.readouterr().out
    for stage in ("leaves the constraint at byte 12", "== 1. grammar ==", "grammar 'json', start rule 'start'",
                  "== 2. LALR parser ==", "== 3. lexer automaton ==", "ignored between lexemes: WS",
                  "== 4. mask sparsity ==", "== 5. transition log ==", "the parser expected: FALSE 'false'"):
        assert stage in out, stage  # fmt: skip
    assert dot.read_text().startswith("digraph lexer")
    assert main(["explain", "--grammar", "json"]) == 0  # no text: the stages alone
    out = capsys.readouterr().out
    assert "== 3. lexer automaton ==" in out and "== 5." not in out
