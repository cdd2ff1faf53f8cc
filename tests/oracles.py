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


#: What ECMA-262 means by the escapes and the dot Python's ``re`` reads otherwise (outside a class,
#: and inside one): ``.`` stops at every line terminator, ``\d``/``\w`` are ASCII.
_ECMA_OUTSIDE = {".": "[^\n\r\u2028\u2029]", "\\d": "[0-9]", "\\D": "[^0-9]", "\\w": "[A-Za-z0-9_]",
                 "\\W": "[^A-Za-z0-9_]", "$": "\\Z"}
_ECMA_INSIDE = {"\\d": "0-9", "\\w": "A-Za-z0-9_"}


def ecma_as_python(pattern: str) -> str:
    r"""``pattern`` (ECMA-262, as JSON Schema reads it) as a Python regex with the same matches.

    Written apart from the library's own ECMA reading (``parse_regex(..., ecma=True)``), for the
    constructs the fuzzers generate: the dot, ``$`` at the very end only, ASCII ``\d``/``\w``
    (and their negations outside classes). jsonschema searches with Python's ``re``, whose dot
    takes a carriage return and whose ``$`` also matches before a final newline.
    """
    out, i, in_class = [], 0, False
    while i < len(pattern):
        two, one = pattern[i:i + 2], pattern[i]
        table = _ECMA_INSIDE if in_class else _ECMA_OUTSIDE
        if two in table:
            out.append(table[two])
            i += 2
        elif one == "\\":
            out.append(two)
            i += 2
        elif in_class:
            out.append(one)
            in_class = one != "]" or pattern[i - 1] == "["
            i += 1
        elif one == "[":
            out.append(one)
            in_class, i = True, i + 1
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
        else:
            out.append(table.get(one, one))
            i += 1
    return "".join(out)


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    import re

    if isinstance(instance, str) and not re.search(ecma_as_python(pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r} (ECMA-262)")


#: Draft 2020-12 validation as the jsonschema library does it, with multipleOf exact and patterns
#: read as ECMA-262 (the specification's dialect, which constrain follows).
ExactValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"multipleOf": _exact_multiple_of, "pattern": _ecma_pattern}
)


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
