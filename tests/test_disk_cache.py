"""The disk cache of compiled guides: a guide read back guides exactly as one compiled afresh,
a second compiler reads instead of compiling, and no damaged, foreign or unwritable file is
ever more than a cache miss.

Masks are compared state by state along random walks against a guide compiled without any
cache, for both backends (regex, a JSON Schema on the regex backend, a recursive schema and
the JSON grammar on the CFG backend).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import constrain
from constrain.core import diskcache
from constrain.testing import random_walk

GUIDES: dict[str, Callable[[constrain.Compiler], Any]] = {
    "regex": lambda c: c.regex(r"(\d{3}-)?\d{4}|[a-z]+@[a-z]+\.(com|org)"),
    # a product (oneOf over overlapping branches) and a free-form value: the regex backend
    "schema": lambda c: c.json_schema({
        "type": "object", "properties": {"n": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}, "free": {},
                                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}}},
        "required": ["n"]}, strict_properties=False),  # fmt: skip
    "recursive schema": lambda c: c.json_schema({
        "$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
        "$ref": "#/$defs/t"}),  # fmt: skip
    "json grammar": lambda c: c.grammar("json"),
}

BACKENDS = {"regex": "regex", "schema": "regex", "recursive schema": "cfg", "json grammar": "cfg"}


@pytest.fixture(scope="module")
def vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


@pytest.fixture(scope="module")
def references(vocabulary: constrain.Vocabulary) -> dict[str, Any]:
    """Each guide compiled with no disk cache at all: what a guide read from disk must equal."""
    compiler = constrain.Compiler(vocabulary)
    return {name: make(compiler) for name, make in GUIDES.items()}


def _masks(guide: Any, ids: list[int]) -> list[np.ndarray]:
    state, masks = guide.initial_state, [guide.allowed_tokens(guide.initial_state)]
    for token in ids:
        state = guide.advance(state, token)
        masks.append(guide.allowed_tokens(state))
    return masks


def _assert_same_masks(reference: Any, guide: Any, vocabulary: constrain.Vocabulary, seed: int = 0) -> None:
    rng = random.Random(seed)
    for _ in range(4):
        ids, _ = random_walk(reference, vocabulary, rng, max_tokens=30)
        for step, (want, got) in enumerate(zip(_masks(reference, ids), _masks(guide, ids))):
            assert np.array_equal(want, got), f"masks differ after {step} tokens of {ids}"


def _stats(compiler: constrain.Compiler) -> diskcache.DiskCacheStats:
    if compiler.disk_cache is None:
        raise AssertionError("the compiler has no disk cache")
    return compiler.disk_cache.stats


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.guide"))


def _stored(vocabulary: constrain.Vocabulary, directory: Path, name: str) -> Path:
    """Compile ``name`` with a disk cache in ``directory`` and return the one file it wrote."""
    compiler = constrain.Compiler(vocabulary, cache_dir=directory)
    GUIDES[name](compiler)
    assert _stats(compiler).stores == 1, _stats(compiler)
    (path,) = _entries(directory)
    return path


def _rewrite(
    path: Path, change: Callable[[dict[str, Any], dict[str, Any]], None],
    change_arrays: Callable[[bytes], bytes] = lambda npz: npz,
) -> None:
    """Change a file's header, JSON structure and arrays, then write it back *with a valid checksum*:
    what stops such a file is the reader's checks, not the checksum (anyone can compute one)."""
    data = path.read_bytes()
    end = data.index(b"\n")
    header = json.loads(data[:end])
    payload = data[end + 1:]
    structure = json.loads(payload[: header["json_size"]])
    arrays = change_arrays(payload[header["json_size"]:])
    change(header, structure)
    text = json.dumps(structure).encode("utf-8")
    header.update(json_size=len(text), npz_size=len(arrays), sha256=hashlib.sha256(text + arrays).hexdigest())
    path.write_bytes(json.dumps(header).encode("utf-8") + b"\n" + text + arrays)


# ---------------------------------------------------------------------- reading back


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_a_guide_read_from_disk_gives_the_same_masks(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, name: str
) -> None:
    _stored(vocabulary, tmp_path, name)
    second = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    loaded = GUIDES[name](second)
    assert _stats(second).hits == 1 and _stats(second).stores == 0, _stats(second)
    assert loaded.backend == BACKENDS[name]
    assert loaded.vocabulary is vocabulary  # never read from the file: the caller's own is attached
    _assert_same_masks(references[name], loaded, vocabulary)
    if name == "json grammar":  # the lark parser is not stored: it is rebuilt on demand
        loaded.grammar.lark.parse("[1, {}]")


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_a_second_compiler_reads_instead_of_compiling(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stored(vocabulary, tmp_path, name)

    def no_compiling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled although the guide was on disk")

    # what the cached builds make: a regex guide's token index, a grammar's tables (what comes
    # before the cache lookup, such as the grammar text of a recursive schema, still runs)
    monkeypatch.setattr(constrain.compiler, "TokenIndex", no_compiling)
    monkeypatch.setattr(constrain.cfg, "compile_grammar", no_compiling)
    second = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    loaded = GUIDES[name](second)
    assert (_stats(second).hits, _stats(second).misses) == (1, 0)
    monkeypatch.undo()  # a first visit may build deferred parts: that is guiding, not compiling
    _assert_same_masks(references[name], loaded, vocabulary, seed=1)


_READER = """
import hashlib, json, sys
import numpy as np
import constrain
from constrain.testing import load_offline_tokenizer
sys.path.insert(0, "tests")
from test_disk_cache import GUIDES
name, directory, walks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
vocabulary = constrain.Vocabulary.from_tokenizer(load_offline_tokenizer("smollm2"))
compiler = constrain.Compiler(vocabulary, cache_dir=directory)
guide = GUIDES[name](compiler)
digest = hashlib.sha256()
for ids in walks:
    state = guide.initial_state
    digest.update(np.packbits(guide.allowed_tokens(state)).tobytes())
    for token in ids:
        state = guide.advance(state, token)
        digest.update(np.packbits(guide.allowed_tokens(state)).tobytes())
print(json.dumps({"hits": compiler.disk_cache.stats.hits, "masks": digest.hexdigest()}))
"""


@pytest.mark.parametrize("name", ["schema", "recursive schema"])
@pytest.mark.slow
def test_another_process_reads_the_guide(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, name: str
) -> None:
    """Read back where str hashes, ids and the monotonic clock all differ from the writer's."""
    import subprocess
    import sys

    _stored(vocabulary, tmp_path, name)
    rng = random.Random(3)
    reference = references[name]
    walks = [random_walk(reference, vocabulary, rng, max_tokens=30)[0] for _ in range(4)]
    digest = hashlib.sha256()
    for ids in walks:
        for mask in _masks(reference, ids):
            digest.update(np.packbits(mask).tobytes())
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", _READER, name, str(tmp_path), json.dumps(walks)], cwd=root, capture_output=True,
        text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"hits": 1, "masks": digest.hexdigest()}


def test_a_class_with_a_new_of_its_own_is_refused(vocabulary: constrain.Vocabulary, tmp_path: Path) -> None:
    """The reader makes instances by ``object.__new__``: a class whose ``__new__`` would be skipped is refused."""
    from fractions import Fraction

    cache = diskcache.DiskCache(tmp_path, vocabulary, lambda: {Fraction: ()})
    with pytest.raises(TypeError, match="__new__"):
        cache.classes()
    compiler = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    assert compiler.disk_cache is not None
    classes, names = compiler.disk_cache.classes()  # the compiler's own list passes the check
    assert len(classes) == len(names) > 20


# ---------------------------------------------------------------------- damaged and foreign files


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for at in range(len(data) // 3, len(data), len(data) // 7):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _naming(class_name: str) -> Callable[[Path], None]:
    """Every object but the guide itself named ``class_name``: only the allow-list can stop that."""

    def change(header: dict[str, Any], structure: dict[str, Any]) -> None:
        root = structure["root"][1]
        objects = [entry for at, entry in enumerate(structure["entries"]) if entry[0] == "obj" and at != root]
        assert objects
        for entry in objects:
            entry[1] = class_name

    return lambda path: _rewrite(path, change)


def _version(field: str, value: Any) -> Callable[[Path], None]:
    return lambda path: _rewrite(path, lambda header, structure: header.update({field: value}))


def _not_a_permutation(path: Path) -> None:
    _rewrite(path, lambda header, structure: structure.update(order=[0] * len(structure["order"])))


def _compressed(npz: bytes) -> bytes:
    """The same arrays, deflated: how a few kilobytes could stand for gigabytes once read."""
    with np.load(io.BytesIO(npz), allow_pickle=False) as arrays:
        loaded = {name: arrays[name] for name in arrays.files}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **loaded)
    return buffer.getvalue()


def _reference_past_the_end(path: Path) -> None:
    def change(header: dict[str, Any], structure: dict[str, Any]) -> None:
        structure["root"] = ["r", len(structure["entries"]) + 5]

    _rewrite(path, change)


def _naming_tables(structure: dict[str, Any]) -> list[Any]:
    """The attributes of the first object whose state names a vocabulary table."""
    for entry in structure["entries"]:
        if entry[0] == "dict" and '["vt", ' in json.dumps(entry[1]):
            return entry[1]
    raise AssertionError("the file names no vocabulary table")


def _many_tables(path: Path) -> None:
    """A file asking for 100 tries: each would be built and kept in the caller's vocabulary."""
    junk = ["t", [["vt", ["t", ["trie", 1, length]]] for length in range(1, 101)]]
    _rewrite(path, lambda header, structure: _naming_tables(structure).append(["_junk", junk]))


def _huge_trie_bound(path: Path) -> None:
    """A trie of tokens longer than any token (a bound past ``_MAX_TOKEN_LENGTH``)."""
    huge = ["vt", ["t", ["trie", 10**12, None]]]
    _rewrite(path, lambda header, structure: _naming_tables(structure).append(["_junk", huge]))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "a hundred vocabulary tables": _many_tables,
    "a trie past any token length": _huge_trie_bound,
    "truncated": _truncate,
    "flipped bytes": _flip,
    "empty": _empty,
    "os.system": _naming("os.system"),
    "builtins.eval": _naming("builtins.eval"),
    "an allowed module, another class": _naming("constrain.api.Model"),
    "another format version": _version("format", diskcache.FORMAT_VERSION + 1),
    "another constrain version": _version("constrain", "0.0.0-other"),
    "another key": _version("key", "0" * 64),
    "fill order": _not_a_permutation,
    "dangling reference": _reference_past_the_end,
    "compressed arrays": lambda path: _rewrite(path, lambda header, structure: None, _compressed),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["schema", pytest.param("recursive schema", marks=pytest.mark.slow)])
def test_a_damaged_or_foreign_file_is_a_miss_and_the_guide_is_compiled(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, name: str, damage: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _stored(vocabulary, tmp_path, name)
    DAMAGE[damage](path)
    called: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *args: called.append(args) or 0)
    compiler = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    guide = GUIDES[name](compiler)  # no exception, whatever the file holds
    assert not called
    assert _stats(compiler).rejected == 1 and _stats(compiler).hits == 0, _stats(compiler)
    _assert_same_masks(references[name], guide, vocabulary)
    # the bad file was removed and a whole one written in its place: the next compiler reads it
    assert _stats(compiler).stores == 1 and _entries(tmp_path) == [path]
    third = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    GUIDES[name](third)
    assert _stats(third).hits == 1


def test_a_file_past_the_size_cap_is_neither_read_nor_written(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``MAX_FILE_BYTES`` a file is not read into memory (and a guide that large is not stored)."""
    path = _stored(vocabulary, tmp_path, "schema")
    monkeypatch.setattr(diskcache, "MAX_FILE_BYTES", path.stat().st_size - 1)
    compiler = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    guide = GUIDES["schema"](compiler)
    stats = _stats(compiler)
    assert (stats.rejected, stats.hits, stats.stores, stats.unencodable) == (1, 0, 0, 1), stats
    assert _entries(tmp_path) == []
    _assert_same_masks(references["schema"], guide, vocabulary)


@pytest.mark.parametrize("where", ["under a file", "a file", "read-only"])
def test_a_directory_that_cannot_be_written_is_no_error(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, where: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    directory = {"under a file": blocker / "cache", "a file": blocker, "read-only": tmp_path / "ro"}[where]
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory anyway (the other cases still run)")
        directory.mkdir(mode=0o500)
    compiler = constrain.Compiler(vocabulary, cache_dir=directory)
    guide = GUIDES["schema"](compiler)
    assert _stats(compiler).write_errors == 1 and _stats(compiler).stores == 0, _stats(compiler)
    _assert_same_masks(references["schema"], guide, vocabulary)
    assert blocker.read_text() == "not a directory"


def test_a_guide_the_format_cannot_hold_is_compiled_and_not_stored(
    vocabulary: constrain.Vocabulary, references: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class missing from the allow-list (as a new one would be) makes the guide unencodable."""
    storable = constrain.compiler._storable
    monkeypatch.setattr(
        constrain.compiler, "_storable", lambda: {k: v for k, v in storable().items() if k is not constrain.Limits}
    )
    compiler = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    guide = GUIDES["regex"](compiler)
    assert _stats(compiler).unencodable == 1 and _stats(compiler).stores == 0
    assert not list(tmp_path.iterdir())
    _assert_same_masks(references["regex"], guide, vocabulary)


# ---------------------------------------------------------------------- what the key tells apart


@pytest.mark.slow
def test_vocabularies_never_share_an_entry(
    vocabulary: constrain.Vocabulary, mistral: object, tmp_path: Path
) -> None:
    pattern = r"[a-z]{2,8}( [a-z]{2,8})?"
    others = {
        "mistral": constrain.Vocabulary.from_tokenizer(mistral),
        "wider": constrain.Vocabulary(vocabulary.token_bytes, vocabulary.eos_token_ids, vocabulary.size + 64),
        "another EOS": constrain.Vocabulary(
            vocabulary.token_bytes[:-1] + (None,), frozenset({len(vocabulary.token_bytes) - 1}), vocabulary.size
        ),
        "one token changed": constrain.Vocabulary(
            (b"zz",) + vocabulary.token_bytes[1:], vocabulary.eos_token_ids, vocabulary.size
        ),
    }
    assert constrain.Vocabulary(vocabulary.token_bytes, vocabulary.eos_token_ids, vocabulary.size).fingerprint == (
        vocabulary.fingerprint
    )  # the same tables: the same fingerprint, in any process (no id() or hash() in it)
    first = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    first.regex(pattern)
    for label, other in others.items():
        assert other.fingerprint != vocabulary.fingerprint, label
        compiler = constrain.Compiler(other, cache_dir=tmp_path)
        guide = compiler.regex(pattern)
        assert (_stats(compiler).hits, _stats(compiler).stores) == (0, 1), label
        assert guide.vocab_size == other.size
        _assert_same_masks(constrain.Compiler(other).regex(pattern), guide, other)
    assert len(_entries(tmp_path)) == 1 + len(others)


OPTIONS: dict[str, Callable[[constrain.Compiler], Any]] = {
    "regex": lambda c: c.regex(r"[a-c]{1,3}"),
    "the same text as a choice": lambda c: c.choice(["[a-c]{1,3}"]),
    "another pattern": lambda c: c.regex(r"[a-c]{1,4}"),
    "other limits": lambda c: c.regex(r"[a-c]{1,3}", limits=constrain.Limits(max_dfa_states=5_000)),
    "schema": lambda c: c.json_schema({"type": "array", "items": {"type": "integer"}}),
    "schema, other whitespace": lambda c: c.json_schema(
        {"type": "array", "items": {"type": "integer"}}, whitespace="none"),  # fmt: skip
    "schema, lenient": lambda c: c.json_schema({"type": "array", "items": {"type": "integer"}}, lenient=True),
    "grammar": lambda c: c.grammar('start: "a" start | "b"'),
    "grammar, another start": lambda c: c.grammar('start: "a" start | "b"\nother: "b" other | "a"', start="other"),
}


def test_options_never_share_an_entry(vocabulary: constrain.Vocabulary, tmp_path: Path) -> None:
    first = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    for make in OPTIONS.values():
        make(first)
    assert (_stats(first).hits, _stats(first).stores) == (0, len(OPTIONS)), _stats(first)
    assert len(_entries(tmp_path)) == len(OPTIONS)
    second = constrain.Compiler(vocabulary, cache_dir=tmp_path)
    for label, make in OPTIONS.items():  # each reads its own entry: the guide of its own options
        _assert_same_masks(make(constrain.Compiler(vocabulary)), make(second), vocabulary)
    assert _stats(second).hits == len(OPTIONS), _stats(second)


def test_cache_dir_must_be_a_path(vocabulary: constrain.Vocabulary) -> None:
    with pytest.raises(constrain.ConfigurationError):
        constrain.Compiler(vocabulary, cache_dir=42)
