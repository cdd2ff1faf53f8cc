"""Schema-aware SQL: the bundled SQL grammar with table and column names taken from a schema.

``compile_sql(tables={"orders": ["id", "total"], ...}, vocabulary)`` rewrites the
positions of the bundled grammar that name a table (``FROM``/``JOIN`` targets,
``INSERT INTO``, ``UPDATE``, ``DELETE FROM``) and a column (column references,
``SET`` targets, ``INSERT`` column lists) so they only accept the schema's names:

* an unqualified column is any column of any table;
* ``table.column`` with a schema table name only accepts that table's columns;
* ``alias.column`` (any other qualifier: an alias bound in ``FROM``) accepts any column.
  Which alias means which table is context-sensitive, beyond a context-free grammar.

Names are matched case-insensitively, as SQL does for unquoted identifiers; names
that are not plain identifiers are written quoted (``"Order Items"``). A name that
is also a keyword of the grammar (``date``) uses the keyword itself.

Why table positions also accept ``schema.table``: lark's lexer has no notion of a
word boundary. Where only the schema's names were expected, a lexeme would end as
soon as a name was complete, so ``FROM ordersx`` would read as the table
``orders`` aliased ``x``. Keeping a free identifier acceptable there (as a schema
qualifier, which must be followed by ``.`` and a schema table) makes the lexer
read the whole word, as SQL does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.limits import Limits
from ..vocabulary import Vocabulary
from .errors import GrammarError
from .grammar import BUNDLED_OPTIONS, CompiledGrammar, lark_parser, load_grammar_source
from .guide import CFGGuide

__all__ = ["canonical_spelling", "compile_sql", "sql_grammar", "sql_parser", "without_comments"]

SQL_ALWAYS_ACCEPT: tuple[str, ...] = BUNDLED_OPTIONS["sql"]["always_accept"]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_KEYWORD = re.compile(r'^([A-Z_]+): "([a-z_]+)"i$', re.MULTILINE)


_COMMENTS = ("%ignore COMMENT\n", "%ignore BLOCK_COMMENT\n")


def without_comments(text: str) -> str:
    """The SQL grammar text without its comments (``-- …``, ``/* … */``).

    A comment may stand between any two tokens and hold any text, so a small model
    that starts one can stay in it (the README's example wrote ``--`` lines until it ran
    out of tokens): generated SQL leaves them out unless asked (``comments=True``).
    Texts without comments parse the same either way.
    """
    for line in _COMMENTS:
        if line not in text:
            raise GrammarError(f"the bundled SQL grammar no longer has {line.strip()!r}")
        text = text.replace(line, "")
    return text


_WHITESPACE = "WS: /[ \\t\\r\\n\\f]+/\n"
_NAME = "NAME: /[A-Za-z_][A-Za-z0-9_$]*/\n"


def canonical_spelling(text: str) -> str:
    """The SQL grammar text with one spelling per keyword (upper case) and one space between tokens.

    SQL reads ``SeLeCt`` as ``SELECT`` and any run of blanks as one, so the bundled grammar
    takes every spelling, and a small model takes them too: the README's example wrote
    ``InSert`` and ``CustoMers`` with blank lines between tokens. Generated SQL keeps
    the spelling people write (keywords in capitals, names as the schema spells them);
    ``canonical=False`` keeps lark's exact grammar. Free identifiers (aliases) keep any case,
    up to PostgreSQL's 63 characters (the example's model also wrote one name without end).
    :func:`compile_sql` also lets no space follow another (``single_ignore``).
    """
    if _WHITESPACE not in text:
        raise GrammarError("the bundled SQL grammar no longer has its WS terminal")
    text = text.replace(_WHITESPACE, 'WS: " "\n')
    if _NAME not in text:
        raise GrammarError("the bundled SQL grammar no longer has its NAME terminal")
    text = text.replace(_NAME, "NAME: /[A-Za-z_][A-Za-z0-9_$]{0,62}/\n")  # PostgreSQL's limit: 63 bytes
    return _KEYWORD.sub(lambda m: f'{m.group(1)}: "{m.group(2).upper()}"', text)


def sql_grammar(
    tables: Mapping[str, Sequence[str]] | None, *, comments: bool = True, canonical: bool = False
) -> str:
    """The bundled SQL grammar, restricted to ``tables`` (table name → column names) unless None,
    without comments unless ``comments``, with one spelling per keyword and name if ``canonical``."""
    text = load_grammar_source("sql")[0]
    if not comments:
        text = without_comments(text)
    if canonical:
        text = canonical_spelling(text)
    if tables is None:
        return text
    if not isinstance(tables, Mapping) or not tables:
        raise GrammarError("compile_sql needs a non-empty mapping of table name → column names")
    # canonical: no "i"
    spelled: list[tuple[str, str]] = re.findall(r'^([A-Z_]+): "([A-Za-z_]+)"i?$', text, re.MULTILINE)
    keywords = {word.lower(): name for name, word in spelled}
    terminals: dict[str, str] = {}  # spelling key → terminal name
    definitions: list[str] = []

    def terminal(name: str) -> str:
        if not isinstance(name, str) or not name:
            raise GrammarError(f"schema names must be non-empty strings, got {name!r}")
        if _IDENTIFIER.fullmatch(name):
            key = name.lower()
            if key in keywords:
                return keywords[key]
            pattern = f'"{name}"' if canonical else f'"{key}"i'
        else:
            key = '"' + name.replace('"', '""') + '"'
            pattern = _lark_string(key)
        found = terminals.get(key)
        if found is None:
            found = f"SCHEMA_{len(terminals)}"
            terminals[key] = found
            definitions.append(f"{found}: {pattern}")
        return found

    table_terms: list[str] = []
    all_columns: dict[str, None] = {}
    per_table: list[str] = []
    for index, (table, columns) in enumerate(tables.items()):
        if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
            raise GrammarError(f"table {table!r} needs a non-empty list of column names")
        table_term = terminal(table)
        table_terms.append(table_term)
        column_terms = list(dict.fromkeys(terminal(column) for column in columns))
        all_columns.update(dict.fromkeys(column_terms))
        per_table.append(f"columns_{index}: {' | '.join(column_terms)}")
        per_table.append(f'qualified_column_{index}: {table_term} "." columns_{index}')

    star = 'select_item: "*"                          -> star\n           | '
    replacements = {
        star + 'qualified_name "." "*"       -> qualified_star': (
            star + '(name | table_name) "." "*"  -> qualified_star'
        ),
        "table_primary: qualified_name [table_alias]": "table_primary: schema_table [table_alias]",
        (
            "column_ref: qualified_name\n"
            "          | DATE | TIME | TIMESTAMP   // the type keywords are also common column names"
        ): (
            'column_ref: column_name\n          | name "." column_name\n'
            + "".join(f"          | qualified_column_{i}\n" for i in range(len(tables)))
        ),
        'function_call: qualified_name "("': 'function_call: name "("',
        "insert: INSERT INTO qualified_name [column_list]": (
            "insert: INSERT INTO schema_table [schema_columns]"
        ),
        "update: UPDATE qualified_name": "update: UPDATE schema_table",
        'assignment: name "=" expr': 'assignment: column_name "=" expr',
        "delete: DELETE FROM qualified_name": "delete: DELETE FROM schema_table",
    }
    for old, new in replacements.items():
        if old not in text:  # pragma: no cover - the bundled grammar changed
            raise GrammarError(f"the bundled SQL grammar no longer contains {old.splitlines()[0]!r}")
        text = text.replace(old, new)
    extra = [
        "",
        "// ------------------------------------------------------------------ schema (generated)",
        "",
        'schema_table: [name "."] table_name',
        f"table_name: {' | '.join(dict.fromkeys(table_terms))}",
        f"column_name: {' | '.join(all_columns)}",
        'schema_columns: "(" column_name ("," column_name)* ")"',
        *per_table,
        *definitions,
    ]
    return text + "\n".join(extra) + "\n"


def compile_sql(
    tables: Mapping[str, Sequence[str]] | None,
    vocabulary: Any,
    *,
    start: str = "start",
    comments: bool = False,
    canonical: bool = False,
    limits: Limits | None = None,
) -> CFGGuide:
    """A guide for the bundled SQL dialect whose table and column names come from ``tables``
    (None: any names), without comments unless ``comments`` (see :func:`without_comments`),
    and with ``canonical=True`` keywords in capitals, names as ``tables`` spells them and one
    space between tokens (see :func:`canonical_spelling`; ``Compiler.sql`` asks for it).

    ``limits`` are those of :func:`~constrain.cfg.compile_grammar`.
    """
    vocab = vocabulary if isinstance(vocabulary, Vocabulary) else Vocabulary.from_tokenizer(vocabulary)
    text = sql_grammar(tables, comments=comments, canonical=canonical)
    label = "sql" if tables is None else "sql(schema)"
    grammar = CompiledGrammar(text, vocab, start=start, label=label, always_accept=SQL_ALWAYS_ACCEPT, limits=limits,
                              single_ignore=canonical)  # fmt: skip
    return CFGGuide(grammar, vocab)


def _lark_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sql_parser(tables: Mapping[str, Sequence[str]] | None = None) -> Any:
    """The lark parser a SQL guide reproduces (bundled grammar, or restricted to ``tables``)."""
    text = sql_grammar(tables)
    return lark_parser(text, always_accept=SQL_ALWAYS_ACCEPT)
