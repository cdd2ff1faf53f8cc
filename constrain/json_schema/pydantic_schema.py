"""A Pydantic class's JSON Schema, as strict as the class itself where Pydantic's own is looser or stricter.

A guide built from a class should produce exactly what the class validates, but
the schema Pydantic writes for a few types says something else:

- ``Decimal`` becomes ``number`` or *any* string, yet the class refuses ``"abc"``:
  followed literally, generation would end in a validation error. Here the string
  side takes decimal literals only (JSON number syntax: a subset of what Pydantic
  reads), and the number side finite floats (Pydantic reads it as a float, and refuses
  ``1e999``). With bounds or ``multiple_of`` only the number side stays (a string side
  cannot carry them); with ``max_digits``/``decimal_places`` only a string side spelling
  them out (:func:`decimal_text`; no number keyword carries them), and with both, an error.
- ``set``/``frozenset`` become ``uniqueItems: true``, yet the class accepts repeated
  items (it drops them). ``uniqueItems`` over strings is no regular language, so the
  schema's reading refuses ``set[str]``; the class's reading needs no such keyword.

The overrides go through :class:`pydantic.json_schema.GenerateJsonSchema`, Pydantic's
documented extension point (its ``decimal_schema`` and ``*set_schema`` methods).
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from .to_regex import UnsupportedSchemaError

__all__ = ["ClassSchema", "class_schema"]

#: A decimal written as a JSON number: every such string is a Decimal the class accepts.
DECIMAL_TEXT = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$"


class ClassSchema(GenerateJsonSchema):
    """Pydantic's schema generator, with the types above written as the class validates them."""

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        generated = super().decimal_schema(schema)
        bounded = any(schema.get(k) is not None for k in ("le", "ge", "lt", "gt", "multiple_of"))
        digits, places = schema.get("max_digits"), schema.get("decimal_places")
        if digits is not None or places is not None:  # only a string can spell them out
            if bounded:
                raise UnsupportedSchemaError(
                    "max_digits" if digits is not None else "decimal_places", "#",
                    "a Decimal with digit limits and bounds: no JSON Schema carries both",
                )
            return {"type": "string", "pattern": decimal_text(digits, places)}
        if self.mode != "validation":
            return {"type": "string", "pattern": DECIMAL_TEXT}
        number = _finite(generated["anyOf"][0])
        return number if bounded else {"anyOf": [number, {"type": "string", "pattern": DECIMAL_TEXT}]}

    def set_schema(self, schema: core_schema.SetSchema) -> JsonSchemaValue:
        return _without_unique_items(super().set_schema(schema))

    def frozenset_schema(self, schema: core_schema.FrozenSetSchema) -> JsonSchemaValue:
        return _without_unique_items(super().frozenset_schema(schema))


def decimal_text(digits: int | None, places: int | None) -> str:
    """Decimal literals within ``max_digits``/``decimal_places`` as Pydantic counts them: leading
    zeros and a fraction's trailing zeros are not digits, so ``"0012.30"`` has three."""
    if digits is None:
        return rf"^-?(?:0|[1-9][0-9]*){_fraction(places)}$"
    whole = digits if places is None else max(digits - places, 0)
    options = []
    for i in range(whole + 1):  # i digits before the point ("0" for none)
        left = digits - i if places is None else min(places, digits - i)
        fraction = _fraction(left)
        if i == 0 and whole == 0:  # a bare "0" is one whole digit to Pydantic, "0.0" none
            fraction = fraction.removesuffix("?")
        options.append(("0" if i == 0 else f"0*[1-9][0-9]{{{i - 1}}}") + fraction)
    return rf"^-?0*(?:{'|'.join(options)})$"


def _fraction(places: int | None) -> str:
    if places is None:
        return r"(?:\.[0-9]+)?"
    return r"(?:\.0+)?" if places == 0 else rf"(?:\.[0-9]{{1,{places}}}0*)?"


def _finite(number: JsonSchemaValue) -> JsonSchemaValue:
    """A JSON number Pydantic reads as a finite float (it reads a Decimal's number through a float,
    and ``1e999`` is infinite, which a Decimal refuses): within ±1e308."""
    number = dict(number)
    if "maximum" not in number and "exclusiveMaximum" not in number:
        number["maximum"] = 1e308
    if "minimum" not in number and "exclusiveMinimum" not in number:
        number["minimum"] = -1e308
    return number


def _without_unique_items(generated: JsonSchemaValue) -> JsonSchemaValue:
    return {k: v for k, v in generated.items() if k != "uniqueItems"}


def class_schema(cls: Any) -> dict[str, Any]:
    """The JSON Schema of a Pydantic model class (validation mode), through :class:`ClassSchema`."""
    generated: dict[str, Any] = cls.model_json_schema(schema_generator=ClassSchema)
    return generated
