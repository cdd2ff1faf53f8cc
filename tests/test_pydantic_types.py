"""The Pydantic types people write, each checked against the class itself.

A guide built from a class must produce what the class validates: every finished
random walk goes through ``model_validate_json`` (the oracle is Pydantic, not the
schema, which says something else for ``Decimal`` and ``set``: see
``constrain.json_schema.pydantic_schema``), and an instance the class writes is
accepted token by token.
"""

from __future__ import annotations

import datetime
import enum
import random
import uuid
from decimal import Decimal
from typing import Annotated, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field, conlist, constr

import constrain
from constrain.testing import accepts, finished_walks, tokenize_continuation


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Collections(BaseModel):
    tags: set[str] = Field(max_length=3)
    ids: frozenset[int]
    picks: conlist(int, min_length=1, max_length=3)  # type: ignore[valid-type]
    colours: set[Colour]


class Numbers(BaseModel):
    price: Decimal
    amount: Annotated[Decimal, Field(max_digits=5, decimal_places=2)]
    ratio: Annotated[float, Field(ge=0.5, le=2.5)]
    count: Annotated[int, Field(ge=0, lt=10)]
    maybe: Optional[int] = None


class Times(BaseModel):
    at: datetime.datetime
    day: datetime.date
    key: uuid.UUID
    code: constr(pattern=r"^[A-Z]{2}-\d{2}$")  # type: ignore[valid-type]
    kind: Literal["a", "b"]
    colour: Colour


class Cat(BaseModel):
    pet: Literal["cat"]
    lives: int = Field(ge=1, le=9)


class Dog(BaseModel):
    pet: Literal["dog"]
    good: bool


class Owner(BaseModel):
    name: str = Field(max_length=12)
    animal: Union[Cat, Dog] = Field(discriminator="pet")


class Tree(BaseModel):
    label: str = Field(max_length=8)
    children: list[Tree] = Field(default_factory=list, max_length=2)


INSTANCES: dict[type[BaseModel], BaseModel] = {
    Collections: Collections(tags={"x", "y"}, ids=frozenset({1, 2}), picks=[3], colours={Colour.RED}),
    Numbers: Numbers(price=Decimal("12.50"), amount=Decimal("123.45"), ratio=1.5, count=9, maybe=None),
    Times: Times(at=datetime.datetime(2024, 2, 29, 23, 59, 58, tzinfo=datetime.timezone.utc),
                 day=datetime.date(1999, 12, 31), key=uuid.UUID(int=12345), code="AB-12", kind="b",
                 colour=Colour.GREEN),  # fmt: skip
    Owner: Owner(name="Ada", animal=Dog(pet="dog", good=True)),
    Tree: Tree(label="root", children=[Tree(label="leaf"), Tree(label="x", children=[Tree(label="y")])]),
}


@pytest.mark.parametrize("cls", list(INSTANCES), ids=lambda c: c.__name__)
@pytest.mark.slow
def test_what_the_guide_writes_the_class_validates(smollm2: object, cls: type[BaseModel]) -> None:
    guide = constrain.Compiler(smollm2).json_schema(cls)
    texts = finished_walks(guide, guide.vocabulary, random.Random(5), count=25, max_tokens=160)
    assert texts, "no walk finished"
    for text in texts:
        cls.model_validate_json(text)  # raises on anything the class refuses


@pytest.mark.parametrize("cls", list(INSTANCES), ids=lambda c: c.__name__)
@pytest.mark.slow
def test_what_the_class_writes_the_guide_accepts(smollm2: object, cls: type[BaseModel]) -> None:
    guide = constrain.Compiler(smollm2).json_schema(cls)
    text = INSTANCES[cls].model_dump_json()
    assert accepts(guide, tokenize_continuation(smollm2, text)), text


def test_sets_take_repeated_items_as_the_class_does(smollm2: object) -> None:
    """Pydantic drops repeated items of a set: so the guide lets them through, not refuses the field."""
    guide = constrain.Compiler(smollm2).json_schema(Collections)
    text = '{"tags": ["x", "x"], "ids": [1, 1], "picks": [1], "colours": ["red", "red"]}'
    assert accepts(guide, tokenize_continuation(smollm2, text))
    assert Collections.model_validate_json(text).tags == {"x"}


@pytest.mark.slow
def test_decimal_strings_are_decimals(smollm2: object) -> None:
    """Pydantic's schema says any string; the class refuses ``"abc"``, and so does the guide."""
    guide = constrain.Compiler(smollm2).json_schema(Numbers)
    head = '{"price": '
    for price, valid in [('"12.5"', True), ("12.5", True), ('"abc"', False), ('"1e3"', True)]:
        text = f'{head}{price}, "amount": "1.5", "ratio": 1.0, "count": 1, "maybe": null}}'
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, price
    for amount, valid in [('"123.45"', True), ('"1234.5"', False), ('"1.234"', False), ('"001.230"', True)]:
        text = f'{head}1, "amount": {amount}, "ratio": 1.0, "count": 1, "maybe": null}}'
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, amount


def test_a_decimal_with_digit_limits_and_bounds_is_refused_by_name(smollm2: object) -> None:
    class Both(BaseModel):
        value: Annotated[Decimal, Field(max_digits=4, ge=0)]

    with pytest.raises(constrain.UnsupportedSchemaError, match="max_digits"):
        constrain.Compiler(smollm2).json_schema(Both)
