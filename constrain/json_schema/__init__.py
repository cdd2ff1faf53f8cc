"""JSON Schema and Pydantic models → regex (the regex backend's schema front end)."""

from .to_regex import (
    WHITESPACE,
    RecursiveSchemaError,
    SchemaError,
    SchemaOptions,
    UnsupportedSchemaError,
    WalkResult,
    load_schema,
    schema_walk,
    to_regex,
)

__all__ = [
    "to_regex", "schema_walk", "load_schema", "SchemaOptions", "WalkResult", "WHITESPACE",
    "SchemaError", "UnsupportedSchemaError", "RecursiveSchemaError",
]  # fmt: skip
