"""Independent oracles shared by the test modules: jsonschema with exact decimals, lark, byte walks."""

from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Any, Iterator

import jsonschema
import lark


def _exact_multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """``multipleOf`` on the decimals the JSON text wrote: the jsonschema library divides binary
    floats, so it calls 1.2 no multiple of 0.0001 (1.2 / 0.0001 = 11999.999999999998)."""
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        with localcontext(prec=1000):  # exact for any integer a walk writes
            remainder = Decimal(repr(instance)) % Decimal(repr(step))
        if remainder != 0:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step!r}")


#: Draft 2020-12 validation as the jsonschema library does it, with multipleOf exact.
ExactValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"multipleOf": _exact_multiple_of})


def lark_accepts(parser: lark.Lark, text: str) -> bool:
    """Whether lark's own parser accepts ``text``."""
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def byte_accepts(guide: Any, data: bytes) -> bool:
    """Whether a grammar guide takes ``data`` byte by byte and may end there (no tokenizer involved)."""
    state = guide.feed_bytes(guide.initial_state, data)
    return state is not None and guide.is_final(state)
