"""The one-line API (``constrain.Model``) with the real default model: typed values back."""

from __future__ import annotations

import datetime
import enum
import re
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

import constrain

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

pytest.importorskip("torch")


class City(BaseModel):
    name: str = Field(max_length=30)
    population_millions: int = Field(ge=0, le=40)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@pytest.fixture(scope="module")
def lm(model_and_tokenizer: tuple[object, object]) -> constrain.Model:
    return constrain.Model(*model_and_tokenizer)


@pytest.mark.parametrize(
    ("prompt", "output_type", "check"),
    [
        ("Describe Tokyo as JSON.", City, lambda v: isinstance(v, City) and 0 <= v.population_millions <= 40),
        ("Is water wet? Answer yes or no.", Literal["yes", "no"], lambda v: v in ("yes", "no")),
        ("How many legs has a spider?", Annotated[int, Field(ge=0, le=1000)], lambda v: 0 <= v <= 1000),
        ("Is the sky green?", bool, lambda v: type(v) is bool),
        ("Name a color.", Color, lambda v: isinstance(v, Color)),
        ("List three small numbers.", Annotated[list[Annotated[int, Field(ge=0, le=99)]], Field(max_length=5)],
         lambda v: isinstance(v, list) and all(type(x) is int for x in v)),
        ("When did the Berlin wall fall?", datetime.date, lambda v: isinstance(v, datetime.date)),
        ("A US phone number:", constrain.Regex(r"\(\d{3}\) \d{3}-\d{4}"),
         lambda v: re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", v)),
        ("Is water wet?", constrain.Gbnf('root ::= ("yes" | "no") ", because " [a-z ]+ "."'),
         lambda v: re.fullmatch(r"(yes|no), because [a-z ]+\.", v)),
    ],
    ids=lambda x: x if isinstance(x, str) and len(x) < 12 else None,
)  # fmt: skip
def test_a_prompt_and_a_type_give_a_typed_value(lm: constrain.Model, prompt: str, output_type: object,
                                                check: object) -> None:
    value = lm(prompt, output_type, max_new_tokens=80)
    assert check(value), value  # type: ignore[operator]


def test_a_list_of_prompts_is_one_batch(lm: constrain.Model) -> None:
    values = lm(["Is water wet?", "Is fire cold?"], Literal["yes", "no"], max_new_tokens=8)
    assert len(values) == 2 and set(values) <= {"yes", "no"}


def test_streams_and_mistakes_are_clear(lm: constrain.Model) -> None:
    chunks = lm.stream("Describe Tokyo as JSON.", City)
    text = "".join(chunks)
    assert chunks.generation is not None and City.model_validate_json(text) == chunks.generation.value
    with pytest.raises(constrain.ConstrainError, match="max_new_tokens"):
        lm("Count to a hundred.", constrain.Regex(r"\d{40}"), max_new_tokens=3)
    with pytest.raises(constrain.ConstrainError, match="constrain.Regex"):
        lm("Hi.", r"\d+")
    with pytest.raises(constrain.ConstrainError, match="Pydantic can describe"):
        lm("Hi.", object())
