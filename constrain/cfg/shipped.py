"""The bundled grammars' lark tables, read from lark once and shipped with the package.

A grammar compile starts with lark: its grammar loader, its LALR(1) construction and one
scanner per lexer context. For the bundled SQL grammar that is about 0.7 s of a 0.8 s
compile, the same in every process, for tables that change only with the grammar text and
lark's version. So for each text the bundled grammars compile to (``json``; ``sql`` with and
without comments, in lark's spellings and in the canonical ones) the package ships what the
compile reads of lark (a :class:`~.lark_adapter.LarkRecord`), and a compile of exactly that
text reads the file instead of building lark. ``CompiledGrammar.lark``, the oracle, still
builds lark's parser on first use.

The format is gzip'd JSON of strings, numbers and lists: reading a file runs nothing it
names (nothing is unpickled). A file is used only when the grammar text, the start rule and
``always_accept`` hash to its name and the installed lark is the one that built it; anything
else, a missing or damaged file included, means lark builds the tables, as for any other
grammar. ``make tables`` rewrites the files after a change of a bundled
grammar or of lark; ``tests/test_shipped_tables.py`` fails while a file is missing or differs
from what lark builds. Guides of other grammars are kept across processes by the compiler's
disk cache (``Compiler(cache_dir=...)``) instead.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import threading
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

from .lark_adapter import LARK_VERSION, LarkRecord, LexerContextSpec, ParseTable, Reduction, RuleSpec, TerminalSpec

__all__ = ["FORMAT", "digest", "encode", "decode", "load", "variants", "canonical", "write_all", "main"]

#: Bumped whenever the layout of a file or the meaning of a field changes.
FORMAT = 1

#: A file's name: ``tables-<label>-<first 16 hex digits of its digest>.json.gz``.
_PREFIX, _SUFFIX = "tables-", ".json.gz"
#: A shipped file is at most a few hundred kB; anything past this is not read.
_MAX_FILE_BYTES = 16 << 20

_memo: dict[str, LarkRecord] = {}
_memo_lock = threading.Lock()


def digest(text: str, start: str, always_accept: Sequence[str]) -> str:
    """The hash a file is found by: of everything lark's tables depend on but lark itself."""
    payload = json.dumps([FORMAT, text, start, list(always_accept)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def load(text: str, start: str, always_accept: Sequence[str], places: Iterable[Any]) -> LarkRecord | None:
    """The shipped tables of this grammar text under the installed lark, or None.

    ``places`` are the directories to look in (the bundled grammars' folders). Decoded
    records are kept for the process: they are immutable, and the compiled grammars that
    read one share it.
    """
    key = digest(text, start, always_accept)
    with _memo_lock:
        found = _memo.get(key)
    if found is not None:
        return found
    ending = f"-{key[:16]}{_SUFFIX}"
    for place in places:
        try:
            files = [e for e in place.iterdir() if e.name.startswith(_PREFIX) and e.name.endswith(ending)]
        except (FileNotFoundError, NotADirectoryError, OSError):
            continue
        for entry in files:
            try:
                data = entry.read_bytes()
                if len(data) > _MAX_FILE_BYTES:
                    continue
                record = decode(data, key)
            except (OSError, ValueError):  # damaged, another format, another grammar
                continue
            if record.lark_version != LARK_VERSION:
                continue
            with _memo_lock:
                _memo[key] = record
            return record
    return None


# ---------------------------------------------------------------------- one numbering


def canonical(record: LarkRecord) -> LarkRecord:
    """``record`` with its parser states, reductions and lexer contexts numbered in one fixed order.

    lark numbers LALR states in the order it meets them in sets of Python strings, whose
    iteration order changes with the interpreter's hash seed: two builds of one grammar give
    the same automaton under other numbers. Here states are numbered breadth-first from the
    start state (each state's moves taken in symbol order), reductions and contexts in the
    order those states first use them, so that a file is one function of the grammar (and a
    test can compare it with what lark builds now). States the start does not reach (none, for
    one start rule) keep their relative order after the rest.
    """
    table = record.table
    order: list[int] = [table.start_state]
    seen = {table.start_state}
    for state in order:  # grows while read: a breadth-first walk
        for symbol in sorted(table.actions.get(state, {})):
            is_shift, target = table.actions[state][symbol]
            if is_shift and target not in seen:
                seen.add(target)
                order.append(target)
    order.extend(sorted(set(table.actions) - seen))
    number = {old: new for new, old in enumerate(order)}
    reductions: list[Reduction] = []
    reduction_number: dict[int, int] = {}
    actions: dict[int, dict[str, tuple[bool, int]]] = {}
    for old in order:
        out = actions[number[old]] = {}
        for symbol in sorted(table.actions.get(old, {})):
            is_shift, arg = table.actions[old][symbol]
            if is_shift:
                out[symbol] = (True, number[arg])
                continue
            if arg not in reduction_number:
                reduction_number[arg] = len(reductions)
                reductions.append(table.reductions[arg])
            out[symbol] = (False, reduction_number[arg])
    context_of = dict(record.context_of_state)
    contexts: list[LexerContextSpec] = []
    context_number: dict[int, int] = {}
    of_state: list[tuple[int, int]] = []
    for old in order:
        if old not in context_of:
            continue
        context = context_of[old]
        if context not in context_number:
            context_number[context] = len(contexts)
            contexts.append(record.contexts[context])
        of_state.append((number[old], context_number[context]))
    return dataclasses.replace(
        record,
        table=ParseTable(actions, tuple(reductions), number[table.start_state], number[table.end_state]),
        context_of_state=tuple(of_state),
        contexts=tuple(contexts),
    )


# ---------------------------------------------------------------------- the format


def encode(record: LarkRecord, label: str, key: str) -> bytes:
    """The file for ``record`` (the tables of the grammar text whose :func:`digest` is ``key``)."""
    table = record.table
    body = {
        "format": FORMAT, "label": label, "key": key, "lark": record.lark_version, "start": record.start,
        "terminals": [[t.name, t.regexp, t.is_string, t.value] for t in record.terminals],
        "ignore": list(record.ignore), "regex_flags": record.regex_flags,
        "rules": [[r.origin, [[name, is_term] for name, is_term in r.expansion]] for r in record.rules],
        "lexer_order": list(record.lexer_order),
        "actions": [
            [state, [[symbol, is_shift, arg] for symbol, (is_shift, arg) in acts.items()]]
            for state, acts in table.actions.items()
        ],
        "reductions": [[r.origin, r.size] for r in table.reductions],
        "start_state": table.start_state, "end_state": table.end_state,
        "context_of_state": [list(pair) for pair in record.context_of_state],
        "contexts": [
            [list(c.order), [[name, list(strings)] for name, strings in c.unless]] for c in record.contexts
        ],
    }  # fmt: skip
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def decode(data: bytes, key: str) -> LarkRecord:
    """The record in a file written by :func:`encode` for ``key``; ValueError for anything else."""
    try:
        body = json.loads(gzip.decompress(data).decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a tables file: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or body.get("key") != key:
        raise ValueError("a tables file of another format or another grammar")
    try:
        return _record(body)
    except KeyError as exc:
        raise ValueError(f"a tables file without {exc}") from None


def _record(body: dict[str, Any]) -> LarkRecord:
    table = ParseTable(
        {
            _int(state): {_str(symbol): (_bool(is_shift), _int(arg)) for symbol, is_shift, arg in _rows(acts, 3)}
            for state, acts in _rows(body["actions"], 2)
        },
        tuple(Reduction(_str(origin), _int(size)) for origin, size in _rows(body["reductions"], 2)),
        _int(body["start_state"]),
        _int(body["end_state"]),
    )
    return LarkRecord(
        lark_version=_str(body["lark"]),
        start=_str(body["start"]),
        terminals=tuple(
            TerminalSpec(_str(name), _str(regexp), _bool(is_string), _str(value))
            for name, regexp, is_string, value in _rows(body["terminals"], 4)
        ),
        ignore=_strings(body["ignore"]),
        regex_flags=_int(body["regex_flags"]),
        rules=tuple(
            RuleSpec(_str(origin), tuple((_str(name), _bool(is_term)) for name, is_term in _rows(expansion, 2)))
            for origin, expansion in _rows(body["rules"], 2)
        ),
        lexer_order=_strings(body["lexer_order"]),
        table=table,
        context_of_state=tuple((_int(state), _int(ctx)) for state, ctx in _rows(body["context_of_state"], 2)),
        contexts=tuple(
            LexerContextSpec(_strings(order), tuple((_str(name), _strings(names)) for name, names in _rows(unless, 2)))
            for order, unless in _rows(body["contexts"], 2)
        ),
    )


def _rows(value: Any, width: int) -> list[list[Any]]:
    if not isinstance(value, list) or not all(isinstance(row, list) and len(row) == width for row in value):
        raise ValueError(f"expected a list of {width}-item lists")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError("expected a list of strings")
    return tuple(_str(item) for item in value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, not {type(value).__name__}")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, not {type(value).__name__}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected a boolean, not {type(value).__name__}")
    return value


# ---------------------------------------------------------------------- writing the files


def variants() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``(label, text, start, always_accept)`` for every text a bundled grammar compiles to."""
    from .grammar import BUNDLED_OPTIONS, load_grammar_source
    from .sql import SQL_ALWAYS_ACCEPT, sql_grammar

    json_accept = tuple(BUNDLED_OPTIONS.get("json", {}).get("always_accept", ()))
    found = [("json", load_grammar_source("json")[0], "start", json_accept)]
    for comments in (True, False):
        for canonical in (False, True):
            label = "sql" + ("" if comments else "-no-comments") + ("-canonical" if canonical else "")
            text = sql_grammar(None, comments=comments, canonical=canonical)
            found.append((label, text, "start", SQL_ALWAYS_ACCEPT))
    return found


def write_all(folder: Path) -> list[Path]:
    """Write every variant's file into ``folder`` (lark builds each), removing older ones."""
    from .lark_adapter import LarkTables, lark_parser

    written = []
    for label, text, start, always_accept in variants():
        key = digest(text, start, always_accept)
        parser = lark_parser(text, start=start, always_accept=always_accept)
        record = canonical(LarkTables(parser).record(start))
        path = folder / f"{_PREFIX}{label}-{key[:16]}{_SUFFIX}"
        path.write_bytes(encode(record, label, key))
        written.append(path)
    for stale in folder.glob(f"{_PREFIX}*{_SUFFIX}"):
        if stale not in written:
            stale.unlink()
    return written


def main() -> None:
    """``make tables``: rewrite the repository's shipped files (``grammars/tables-*.json.gz``)."""
    for path in write_all(Path(__file__).resolve().parents[2] / "grammars"):
        print(f"{path.name}: {path.stat().st_size:,} bytes")
