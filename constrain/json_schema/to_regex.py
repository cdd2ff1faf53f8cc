"""JSON Schema (or a Pydantic model) → one regular expression, one walker method per keyword group.

The walker follows the documented Outlines path — one regex per schema node, local
``$ref``s inlined — with one rule the peers break: a keyword the regex cannot
enforce is never dropped silently. It raises :class:`UnsupportedSchemaError`
naming the keyword and its JSON pointer, unless ``lenient=True``, which drops it,
records it in ``dropped`` and warns.

Two choices that make the language *smaller* than the schema's, never larger
(over-constrained, not under-constrained), are documented in ``docs/json_schema.md``:
an object without ``additionalProperties`` admits only its declared properties,
and properties appear in definition order.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConstrainError
from .patterns import BOOLEAN, FORMATS, INTEGER, NULL, NUMBER, STRING, STRING_CHAR, integer_range

__all__ = ["UnsupportedSchemaError", "SchemaError", "RecursiveSchemaError", "to_regex", "schema_walk", "load_schema", "WHITESPACE"]

#: Whitespace presets: between tokens of the JSON text.
WHITESPACE = {
    # compact JSON and json.dumps' default separators (", " and ": "), nothing longer
    "default": r"[ ]?",
    # everything RFC 8259 allows, in runs of at most 8 characters (no runaway whitespace)
    "any": r"[ \t\n\r]{0,8}",
    "none": "",
}

# Keywords that only annotate; they constrain nothing, so ignoring them is exact.
_ANNOTATIONS = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$anchor", "contentMediaType", "contentEncoding", "discriminator",
}  # fmt: skip
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


class SchemaError(ConstrainError, ValueError):
    """The schema itself is malformed (not JSON, a dangling ``$ref``, a bad keyword value)."""


class UnsupportedSchemaError(SchemaError):
    """A keyword the regex cannot enforce; ``keyword`` and ``pointer`` say which and where."""

    def __init__(self, keyword: str, pointer: str, reason: str) -> None:
        super().__init__(
            f"{keyword!r} at {pointer or '#'} cannot be enforced: {reason}; "
            "pass lenient=True to drop it (the guide then lists it in .dropped)"
        )
        self.keyword = keyword
        self.pointer = pointer or "#"


class RecursiveSchemaError(UnsupportedSchemaError):
    """A ``$ref`` cycle: a regex can only unroll it to a fixed depth."""


def load_schema(schema: Any) -> dict[str, Any] | bool:
    """Accept a dict, a bool, JSON text or a Pydantic model class."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema text is not JSON: {exc}") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise SchemaError(f"a schema must be a dict, bool, JSON text or Pydantic model, not {type(schema).__name__}")


def to_regex(
    schema: Any,
    *,
    whitespace: str = "default",
    lenient: bool = False,
    max_recursion_depth: int | None = None,
) -> str:
    """The regex whose matches are JSON texts valid under ``schema``.

    ``whitespace`` is a preset name of :data:`WHITESPACE` or a regex of its own.
    """
    return schema_walk(load_schema(schema), whitespace=whitespace, lenient=lenient,
                       max_recursion_depth=max_recursion_depth).regex


def schema_walk(
    schema: Any, *, whitespace: str = "default", lenient: bool = False, max_recursion_depth: int | None = None
) -> "WalkResult":
    """:func:`to_regex` plus the list of (keyword, pointer) pairs lenient mode dropped."""
    return _Walker(schema, whitespace, lenient, max_recursion_depth).run()


@dataclass
class WalkResult:
    regex: str
    dropped: list[tuple[str, str]] = field(default_factory=list)


class _Walker:
    def __init__(self, root: Any, whitespace: str, lenient: bool, max_depth: int | None) -> None:
        self.root = root
        self.ws = WHITESPACE.get(whitespace, whitespace)
        self.lenient = lenient
        self.max_depth = max_depth
        self.dropped: list[tuple[str, str]] = []
        self._ref_stack: list[str] = []

    def run(self) -> WalkResult:
        regex = self.node(self.root, "#")
        if self.dropped:
            listed = ", ".join(f"{k} at {p}" for k, p in self.dropped)
            warnings.warn(f"lenient mode dropped keywords the regex cannot enforce: {listed}", stacklevel=3)
        return WalkResult(regex, self.dropped)

    # ------------------------------------------------------------------ helpers

    def unsupported(self, keyword: str, pointer: str, reason: str) -> None:
        if not self.lenient:
            raise UnsupportedSchemaError(keyword, pointer, reason)
        self.dropped.append((keyword, pointer or "#"))

    def resolve(self, ref: str, pointer: str) -> Any:
        if not ref.startswith("#"):
            self.unsupported("$ref", pointer, f"only local references are supported, not {ref!r}")
            return True
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} at {pointer} does not resolve")
        return target

    # ------------------------------------------------------------------ nodes

    def node(self, schema: Any, pointer: str) -> str:
        if schema is True:
            return self.any_value(pointer)
        if schema is False:
            return r"[^\x00-\U0010FFFF]"
        if not isinstance(schema, dict):
            raise SchemaError(f"schema at {pointer} must be an object or a boolean")
        schema = dict(schema)
        for keyword in list(schema):
            if keyword in _ANNOTATIONS or keyword in ("$defs", "definitions"):
                schema.pop(keyword)
        if "$ref" in schema:
            return self.ref(schema, pointer)
        if "allOf" in schema:
            return self.node(self.merge_all_of(schema, pointer), pointer)
        if "const" in schema:
            return self.literals([schema.pop("const")], schema, pointer, "const")
        if "enum" in schema:
            values = schema.pop("enum")
            if not isinstance(values, list) or not values:
                raise SchemaError(f"enum at {pointer} must be a non-empty list")
            return self.literals(values, schema, pointer, "enum")
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                return self.any_of(schema, keyword, pointer)
        types = schema.pop("type", None)
        if types is None:
            types = self.infer_types(schema)
        if isinstance(types, str):
            types = [types]
        for t in types:
            if t not in _TYPES:
                raise SchemaError(f"unknown type {t!r} at {pointer}/type")
        # Each type reads its own keywords from a copy (``minimum`` binds integer and number
        # alike); a keyword that no type consumed is one this backend does not know.
        options, unused = [], set(schema)
        for t in types:
            own = dict(schema)
            options.append(self.typed(t, own, pointer))
            unused &= set(own)
        for key in sorted(unused):
            self.unsupported(key, f"{pointer}/{key}", "the regex backend does not implement it")
        return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"

    def ref(self, schema: dict[str, Any], pointer: str) -> str:
        ref = schema.pop("$ref")
        if schema:
            schema = {"allOf": [{"$ref": ref}, schema]}
            return self.node(schema, pointer)
        depth = self._ref_stack.count(ref)
        if depth:
            if self.max_depth is None:
                cycle = " → ".join(self._ref_stack[self._ref_stack.index(ref):] + [ref])
                raise RecursiveSchemaError(
                    "$ref", pointer,
                    f"the schema is recursive ({cycle}); pass max_recursion_depth=k to unroll it k levels "
                    "into the regex, or use the grammar backend for unbounded depth",
                )  # fmt: skip
            if depth > self.max_depth:
                return r"[^\x00-\U0010FFFF]"  # deeper nesting is cut off: over-constrained, never invalid
        self._ref_stack.append(ref)
        try:
            return self.node(self.resolve(ref, pointer), ref)
        finally:
            self._ref_stack.pop()

    def merge_all_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        """Merge ``allOf`` branches when no keyword appears twice (then the merge is exact)."""
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for i, branch in enumerate(schema["allOf"]):
            if isinstance(branch, dict) and "$ref" in branch and len(branch) == 1:
                branch = self.resolve(branch["$ref"], f"{pointer}/allOf/{i}")
            if branch is True:
                continue
            if not isinstance(branch, dict):
                return {"not": {}} if branch is False else merged
            for key, value in branch.items():
                if key in _ANNOTATIONS:
                    continue
                if key in merged and merged[key] != value:
                    if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                        overlap = set(merged[key]) & set(value)
                        if not overlap:
                            merged[key] = {**merged[key], **value}
                            continue
                    if key == "required":
                        merged[key] = list(dict.fromkeys(merged[key] + value))
                        continue
                    self.unsupported("allOf", f"{pointer}/allOf/{i}/{key}", f"{key!r} appears in several branches")
                    continue
                merged[key] = value
        return merged

    def any_of(self, schema: dict[str, Any], keyword: str, pointer: str) -> str:
        branches = schema.pop(keyword)
        if schema:
            extra = [k for k in schema if k not in ("type",)]
            if extra:
                self.unsupported(extra[0], f"{pointer}/{extra[0]}", f"combining {keyword} with sibling keywords")
        options = [self.node(b, f"{pointer}/{keyword}/{i}") for i, b in enumerate(branches)]
        if keyword == "oneOf" and len(options) > 1 and not self.disjoint(branches):
            self.unsupported("oneOf", f"{pointer}/oneOf", "a regex cannot forbid a value that matches two branches")
        return "(?:" + "|".join(options) + ")"

    def disjoint(self, branches: list[Any]) -> bool:
        """True when branches are known not to overlap: distinct single types, or distinct consts."""
        types = []
        for b in branches:
            if not isinstance(b, dict):
                return False
            if "$ref" in b and len(b) == 1:
                b = self.resolve(b["$ref"], "#")
            t = b.get("type")
            if not isinstance(t, str) or t in ("number", "integer"):
                return False
            types.append(t)
        return len(set(types)) == len(types)

    def literals(self, values: list[Any], rest: dict[str, Any], pointer: str, keyword: str) -> str:
        rest.pop("type", None)
        for key in rest:
            self.unsupported(key, f"{pointer}/{key}", f"combined with {keyword}")
        options = []
        for value in values:
            compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            if isinstance(value, (dict, list)):
                spaced = json.dumps(value, ensure_ascii=False)
                options.append(re.escape(compact) if compact == spaced else self.literal_value(value))
            else:
                options.append(re.escape(compact))
        return "(?:" + "|".join(options) + ")"

    def literal_value(self, value: Any) -> str:
        """An object/array constant with the configured whitespace between its tokens."""
        ws = self.ws
        if isinstance(value, dict):
            items = [f"{re.escape(json.dumps(k, ensure_ascii=False))}{ws}:{ws}{self.literal_value(v)}"
                     for k, v in value.items()]  # fmt: skip
            return r"\{" + ws + f"{ws},{ws}".join(items) + ws + r"\}"
        if isinstance(value, list):
            return r"\[" + ws + f"{ws},{ws}".join(self.literal_value(v) for v in value) + ws + r"\]"
        return re.escape(json.dumps(value, ensure_ascii=False))

    def infer_types(self, schema: dict[str, Any]) -> list[str]:
        hints = {
            "object": ("properties", "required", "additionalProperties"),
            "array": ("items", "prefixItems", "minItems", "maxItems"),
            "string": ("minLength", "maxLength", "pattern", "format"),
            "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        }
        found = [t for t, keys in hints.items() if any(k in schema for k in keys)]
        return found or list(_TYPES)

    # ------------------------------------------------------------------ typed values

    def typed(self, t: str, schema: dict[str, Any], pointer: str) -> str:
        return getattr(self, f"type_{t}")(schema, pointer)

    def type_null(self, schema: dict[str, Any], pointer: str) -> str:
        return NULL

    def type_boolean(self, schema: dict[str, Any], pointer: str) -> str:
        return BOOLEAN

    def type_integer(self, schema: dict[str, Any], pointer: str) -> str:
        low, high = None, None
        for key, bound in (("minimum", 0), ("exclusiveMinimum", 1), ("maximum", 0), ("exclusiveMaximum", -1)):
            if key not in schema:
                continue
            value = schema.pop(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise SchemaError(f"{key} at {pointer} must be a number")
            if key.endswith("inimum"):
                candidate = math.ceil(value) if bound == 0 else math.floor(value) + 1
                low = candidate if low is None else max(low, candidate)
            else:
                candidate = math.floor(value) if bound == 0 else math.ceil(value) - 1
                high = candidate if high is None else min(high, candidate)
        if "multipleOf" in schema:
            self.unsupported("multipleOf", f"{pointer}/multipleOf", "divisibility is not expressible compactly")
            schema.pop("multipleOf")
        return INTEGER if low is None and high is None else integer_range(low, high)

    def type_number(self, schema: dict[str, Any], pointer: str) -> str:
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if key in schema:
                self.unsupported(key, f"{pointer}/{key}", "bounds on non-integer numbers are not implemented")
                schema.pop(key)
        return NUMBER

    def type_string(self, schema: dict[str, Any], pointer: str) -> str:
        low, high = schema.pop("minLength", 0), schema.pop("maxLength", None)
        pattern, fmt = schema.pop("pattern", None), schema.pop("format", None)
        if pattern is not None:
            if low or high is not None:
                self.unsupported("minLength", pointer, "length limits combined with pattern")
            if not (pattern.startswith("^") and pattern.endswith("$")):
                self.unsupported("pattern", f"{pointer}/pattern", "unanchored patterns match substrings")
            body = pattern[1:-1] if pattern.startswith("^") and pattern.endswith("$") else pattern
            return f'"(?:{body})"'
        if fmt is not None:
            if fmt in FORMATS:
                if low or high is not None:
                    self.unsupported("minLength", pointer, "length limits combined with format")
                return f'"(?:{FORMATS[fmt]})"'
            self.unsupported("format", f"{pointer}/format", f"the format {fmt!r} is not implemented")
        if low == 0 and high is None:
            return STRING
        return f'"{STRING_CHAR}{{{low},{"" if high is None else high}}}"'

    def type_array(self, schema: dict[str, Any], pointer: str) -> str:
        ws, sep = self.ws, f"{self.ws},{self.ws}"
        prefix = [self.node(s, f"{pointer}/prefixItems/{i}") for i, s in enumerate(schema.pop("prefixItems", []))]
        items = schema.pop("items", True)
        item = None if items is False else self.node(items, f"{pointer}/items")
        low, high = schema.pop("minItems", 0), schema.pop("maxItems", None)
        if schema.get("uniqueItems") is False:
            schema.pop("uniqueItems")
        for key in ("uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"):
            if key in schema:
                self.unsupported(key, f"{pointer}/{key}", "not expressible by the regex backend")
                schema.pop(key)
        if item is None:
            high = len(prefix) if high is None else min(high, len(prefix))
        if high is not None and low > high:
            return r"[^\x00-\U0010FFFF]"

        def element(i: int) -> str:
            return prefix[i] if i < len(prefix) else item  # type: ignore[return-value]

        def optional_from(i: int) -> str:
            """Elements i, i+1, ... each optional and each after a separator."""
            if high is not None and i >= high:
                return ""
            if i >= len(prefix):
                return f"(?:{sep}{item})" + ("*" if high is None else f"{{0,{high - i}}}")
            return f"(?:{sep}{prefix[i]}{optional_from(i + 1)})?"

        if low:
            body = sep.join(element(i) for i in range(low)) + optional_from(low)
        elif high == 0:
            body = ""
        else:
            body = f"(?:{element(0)}{optional_from(1)})?"
        return rf"\[{ws}{body}{ws}\]"

    def type_object(self, schema: dict[str, Any], pointer: str) -> str:
        ws = self.ws
        properties: dict[str, Any] = schema.pop("properties", {})
        required = set(schema.pop("required", []))
        additional = schema.pop("additionalProperties", None)
        for key in ("minProperties", "maxProperties", "patternProperties", "propertyNames",
                    "dependentRequired", "dependentSchemas", "unevaluatedProperties"):  # fmt: skip
            if key in schema:
                self.unsupported(key, f"{pointer}/{key}", "not expressible by the regex backend")
                schema.pop(key)
        missing = required - set(properties)
        if missing and additional is False:
            return r"[^\x00-\U0010FFFF]"
        for name in sorted(missing):
            properties[name] = True
        members = []
        for name, sub in properties.items():
            key = re.escape(json.dumps(name, ensure_ascii=False))
            value = self.node(sub, f"{pointer}/properties/{_escape_pointer(name)}")
            members.append((f"{key}{ws}:{ws}{value}", name in required))
        sep = f"{ws},{ws}"
        body = _ordered_members(members, sep)
        if additional not in (None, False):
            value = self.node(additional, f"{pointer}/additionalProperties")
            # extra keys must differ from declared ones; that needs a complement regex, so we only
            # allow them when no property is declared.
            if properties:
                self.unsupported("additionalProperties", f"{pointer}/additionalProperties",
                                 "extra keys beside declared properties are not implemented")  # fmt: skip
            else:
                member = f"{STRING}{ws}:{ws}{value}"
                body = f"(?:{member}(?:{sep}{member})*)?"
        return rf"\{{{ws}{body}{ws}\}}"

    def any_value(self, pointer: str) -> str:
        """Any JSON value — bounded to depth 2, since a regex cannot nest without limit."""
        ws, sep = self.ws, f"{self.ws},{self.ws}"
        scalar = f"(?:{STRING}|{NUMBER}|{BOOLEAN}|{NULL})"
        level = scalar
        for _ in range(2):
            array = rf"\[{ws}(?:{level}(?:{sep}{level})*)?{ws}\]"
            member = f"{STRING}{ws}:{ws}{level}"
            obj = rf"\{{{ws}(?:{member}(?:{sep}{member})*)?{ws}\}}"
            level = f"(?:{scalar}|{array}|{obj})"
        return level


def _ordered_members(members: list[tuple[str, bool]], sep: str) -> str:
    """Members in definition order; required ones always present, optional ones maybe.

    With a required member to anchor on, the regex is linear in the member count:
    optional members before it carry a trailing separator, those after it a leading
    one. Without any, the first present member has no separator and the choice of
    which one it is makes the regex quadratic — acceptable for the object sizes
    where every property is optional.
    """
    if not members:
        return ""
    anchor = next((i for i, (_, req) in enumerate(members) if req), None)
    if anchor is not None:
        before = "".join(f"{m}{sep}" if req else f"(?:{m}{sep})?" for m, req in members[:anchor])
        after = "".join(f"{sep}{m}" if req else f"(?:{sep}{m})?" for m, req in members[anchor + 1 :])
        return before + members[anchor][0] + after
    options = []
    for i, (member, _) in enumerate(members):
        rest = "".join(f"(?:{sep}{m})?" for m, _ in members[i + 1 :])
        options.append(member + rest)
    return "(?:" + "|".join(options) + ")?"


def _escape_pointer(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
