"""JSON Schema and Pydantic models → regex (the regex backend's schema front end)."""

from .to_regex import WHITESPACE, RecursiveSchemaError, SchemaError, UnsupportedSchemaError, load_schema, to_regex

__all__ = ["to_regex", "load_schema", "WHITESPACE", "SchemaError", "UnsupportedSchemaError", "RecursiveSchemaError"]
