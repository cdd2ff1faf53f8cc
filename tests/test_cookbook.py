"""docs/cookbook.md runs as written, with the real default model, and each recipe's result holds up.

Every ```python block of the page is executed in order in one namespace, as a reader pastes
them into one session. Each test runs the blocks up to its recipe (the ones before run once,
on first need), then checks the result with a tool other than constrain: Pydantic, ``re``,
sqlglot, ``jsonschema``. A recipe that stopped working, or a guide that let through something
the reference tool refuses, fails here instead of in a reader's terminal.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

COOKBOOK = Path(__file__).resolve().parents[1] / "docs" / "cookbook.md"

Namespace = dict[str, Any]


def _sections(text: str) -> list[tuple[str, str, int]]:
    """``(heading, code, line)`` for each ```python block, under the ``## `` heading above it.

    ``line`` is the block's first line in the page (0-based), so a traceback points there.
    """
    sections = []
    heading = ""
    for match in re.finditer(r"^## ([^\n]*)$|^```python\n(.*?)^```", text, re.M | re.S):
        if match.group(1) is not None:
            heading = match.group(1).strip()
        else:
            sections.append((heading, match.group(2), text.count("\n", 0, match.start(2))))
    return sections


SECTIONS = _sections(COOKBOOK.read_text())


@pytest.fixture(scope="module")
def run_through() -> Callable[[str], Namespace]:
    """Run the page's blocks in order up to and including the one under a heading starting with ``prefix``.

    One namespace for the module: a block runs once, however many tests need it, and each
    runs after every block above it, since recipes reuse ``lm`` and earlier classes.
    """
    pytest.importorskip("torch")
    namespace: Namespace = {}
    ran = 0

    def run(prefix: str) -> Namespace:
        nonlocal ran
        wanted = [i for i, (heading, _, _) in enumerate(SECTIONS) if heading.startswith(prefix)]
        assert len(wanted) == 1, f"one python block under a heading starting {prefix!r}, found {len(wanted)}"
        while ran <= wanted[0]:
            _, code, line = SECTIONS[ran]
            ran += 1  # a block that raised is not run again; the blocks after it still run, and one
            # that needs its names fails with a NameError at its own line of the page
            # dont_inherit: not this module's ``from __future__ import annotations``, which would turn
            # the recipes' annotations into strings that a reader's session never has
            exec(compile("\n" * line + code, str(COOKBOOK), "exec", dont_inherit=True), namespace)
        return namespace

    return run


def test_the_page_has_a_setup_and_ten_recipes() -> None:
    """The ten tasks of issue #15 item 7, numbered, each with exactly one block, after the setup."""
    headings = [heading for heading, _, _ in SECTIONS]
    assert headings[0] == "Setup"
    assert [h.split(".")[0] for h in headings[1:]] == [str(n) for n in range(1, 11)], headings


def test_extraction_gives_a_valid_pydantic_instance(run_through: Callable[[str], Namespace]) -> None:
    ns = run_through("1.")
    contact, contact_class = ns["contact"], ns["Contact"]
    assert type(contact) is contact_class
    assert 0 < len(contact.name) <= 30
    assert re.fullmatch(r"[a-z.]+@[a-z]+\.[a-z]{2,3}", contact.email), contact.email
    assert contact_class.model_validate_json(contact.model_dump_json()) == contact


def test_classification_gives_one_of_the_labels(run_through: Callable[[str], Namespace]) -> None:
    ns = run_through("2.")
    assert ns["label"] in typing.get_args(ns["Sentiment"]), ns["label"]


def test_a_tool_call_names_one_tool_with_its_arguments(run_through: Callable[[str], Namespace]) -> None:
    """The call validates as JSON against the union's own schema, and dispatches by its name."""
    jsonschema = pytest.importorskip("jsonschema")
    from pydantic import TypeAdapter

    ns = run_through("3.")
    call = ns["call"]
    assert isinstance(call, (ns["GetWeather"], ns["SendEmail"])), call
    jsonschema.validate(call.model_dump(mode="json"), TypeAdapter(ns["ToolCall"]).json_schema())
    assert call.tool in ns["handlers"]


def test_sql_parses_and_names_only_the_given_tables(run_through: Callable[[str], Namespace]) -> None:
    """sqlglot (PostgreSQL) reads the query, and every table and column in it is the schema's."""
    sqlglot = pytest.importorskip("sqlglot")
    ns = run_through("4.")
    result, tables = ns["result"], ns["tables"]
    assert result.complete, result.text
    ns["sql_guide"].grammar.lark.parse(result.text)  # the guide's exact oracle
    tree = sqlglot.parse_one(result.text.rstrip().rstrip(";"), read="postgres")
    named_tables = {t.name for t in tree.find_all(sqlglot.exp.Table)}
    assert named_tables and named_tables <= set(tables), result.text
    columns = {c for cs in tables.values() for c in cs}
    aliases = {a.alias for a in tree.find_all(sqlglot.exp.Alias)}
    assert {c.name for c in tree.find_all(sqlglot.exp.Column)} <= columns | aliases, result.text


def test_the_date_matches_the_regex(run_through: Callable[[str], Namespace]) -> None:
    ns = run_through("5.")
    assert isinstance(ns["date"], str) and re.fullmatch(ns["DATE"], ns["date"]), ns["date"]


def test_the_gbnf_output_is_a_shopping_list(run_through: Callable[[str], Namespace]) -> None:
    """The grammar's language as a Python regex, written independently of the GBNF text."""
    ns = run_through("6.")
    item = r"- [1-9] [a-z]{1,10}( [a-z]{1,10})?"
    assert re.fullmatch(rf"{item}(\n{item}){{0,2}}", ns["shopping"]), ns["shopping"]
    assert ns["compiler"].gbnf(ns["SHOPPING_LIST"]).backend == "regex"  # no recursion: one automaton


def test_reasoning_then_json_splits_into_text_and_an_answer(run_through: Callable[[str], Namespace]) -> None:
    ns = run_through("7.")
    text, answer = ns["text"], ns["answer"]
    match = re.fullmatch(r"Reasoning: ([^{\n]{1,100})\nAnswer: (\{.*\})", text)
    assert match, text
    assert type(answer) is ns["Answer"] and 0 <= answer.answer <= 1000
    assert ns["Answer"].model_validate_json(match.group(2)) == answer
    assert ns["reasoning"] == "Reasoning: " + match.group(1)


def test_a_batch_gives_one_label_per_prompt(run_through: Callable[[str], Namespace]) -> None:
    ns = run_through("8.")
    labels = ns["labels"]
    assert isinstance(labels, list) and len(labels) == len(ns["reviews"])
    assert set(labels) <= set(typing.get_args(ns["Sentiment"])), labels


def test_the_stream_spells_the_generation(run_through: Callable[[str], Namespace],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The chunks printed are the generation's text, and it is a complete, valid Weather."""
    ns = run_through("9.")
    generation = ns["chunks"].generation
    assert generation is not None and generation.complete, generation
    assert type(generation.value) is ns["Weather"]
    assert -50 <= generation.value.temperature_c <= 50
    assert ns["Weather"].model_validate_json(generation.text) == generation.value
    assert generation.text in capsys.readouterr().out


def test_explain_names_the_keyword_and_the_pointer(run_through: Callable[[str], Namespace]) -> None:
    """The verdict stops at the 0, and names ``minimum`` at ``#/properties/quantity``, as jsonschema does."""
    ns = run_through("10.")
    verdict, rejected = ns["verdict"], ns["rejected"]
    assert not verdict.complete
    assert rejected.startswith(verdict.accepted) and verdict.accepted.endswith(b'"quantity": ')
    assert verdict.allowed_next == "'1'-'9'" and verdict.completion == b"1}", verdict
    assert ("minimum", "#/properties/quantity") in [(k, p) for k, p, _ in verdict.violations], verdict
    assert any("'minimum' at #/properties/quantity" in line for line in verdict.format(rejected))
