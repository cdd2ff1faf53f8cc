"""A disk cache of compiled guides, in a format that is read without running anything it names.

Compiled guides already pickle (see :mod:`constrain.core.sharing`), but unpickling a file
runs whatever callables the file names: a cache directory anyone else can write to would
be a way to run code in the server. So the disk cache writes the same object graph that
pickling walks — each object's ``__getstate__`` — in a format of its own: JSON for the
structure, one ``.npz`` (read with ``allow_pickle=False``) for the numpy arrays. Reading it
back creates only instances of the classes the cache was given (the compiler's list of its
compiled artefacts: this module, in the core, knows no backend), by ``object.__new__`` and
their ``__setstate__`` (or a ``__dict__`` update, as pickle does), and calls nothing a file names.

What is never written:

* the :class:`~constrain.Vocabulary`: the key holds its :attr:`~constrain.Vocabulary.fingerprint`
  and the reader re-attaches the caller's own vocabulary object;
* the tables derived from the vocabulary alone (its token tries, walk tables and class
  splits, several megabytes each): the file names them and the reader takes them from
  the caller's vocabulary, building one only if that vocabulary has not built it yet.

A file is one header line (format version, constrain version, key, payload sizes, and the
payload's sha256), then the JSON, then the ``.npz``; it is written to a temporary file and
moved into place with :func:`os.replace`, so a reader sees a whole file or none. Whatever
goes wrong on reading — no file, a truncated one, flipped bytes, bad JSON, a class outside
the allow-list, another version — the answer is "not cached": a corrupt file is removed
and the caller compiles the guide as if there were no cache. A graph holding something
the format cannot express (a lambda, an object of a class not allowed) is simply not
stored. :class:`DiskCacheStats` counts each outcome, so a test or an operator can see which.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gc
import hashlib
import io
import json
import math
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Mapping

import numpy as np

from ..vocabulary import Vocabulary

__all__ = ["DiskCache", "DiskCacheStats", "FORMAT_VERSION", "Storable"]

#: Bumped whenever the file layout or the state of an allowed class changes meaning.
#: 2: LazyDFA keeps its targets → state cache (_moves); 3: member sets count extras by key group;
#: 4: lazy DFAs and products keep their rows as runs too (_runs); 5: a byte NFA works out
#: ``unbounded`` on first use (_unbounded); 6: a Length's last tick counts; 7: a free-form
#: value reads the vocabulary's bytes only; 8: a difference whose base's options start apart
#: is one product per option group (``automaton._first_byte_groups``), and a oneOf branch
#: splits on an optional tag (objects holding it, objects without it); 9: automata and products
#: know whether they are subtracted (``subtracted``), and keep what a subtracted search left open;
#: products keep their first part's completions (_completions, _incomplete); 10: and their
#: tuples' step costs (_steps): a product read from a version 9 file would have none;
#: 11: a compiled grammar keeps its rules as plain data (rule_specs), no lark objects.
FORMAT_VERSION = 11

#: The header line is JSON of a few short fields; a longer first line is not a header.
_MAX_HEADER = 4096

#: The largest file read or written (a guide's tables reach tens of MB; a file past this is
#: not read into memory at all, and a guide past it is compiled, not stored).
MAX_FILE_BYTES = 512 << 20

#: Vocabulary tables one file may ask the reader to build: each costs milliseconds and
#: megabytes and stays in the caller's vocabulary, so a damaged or hostile file that names
#: thousands would cost both. A guide names a few (the walk tables, two tries, its splits).
_MAX_TABLES = 64
#: Token lengths a trie table may name (no token is longer; a larger bound is no table).
_MAX_TOKEN_LENGTH = 1 << 16

#: The classes a file may hold, each with the attributes its stored state leaves out (a
#: cached value that is only right in the process that computed it).
Storable = Mapping[type, tuple[str, ...]]


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class Unencodable(Exception):
    """The value (a key or a guide) holds something this format does not express."""


class Corrupt(Exception):
    """A file is not a whole, well-formed cache entry for the key asked for."""


@dataclasses.dataclass
class DiskCacheStats:
    """What the cache did, by outcome (counts since the cache was made).

    ``hits``: guides read from disk; ``misses``: no file for the key; ``stores``: guides
    written; ``rejected``: files ignored (and removed) as truncated, corrupt, of another
    version, naming a class outside the allow-list, larger than ``MAX_FILE_BYTES`` or
    asking for more vocabulary tables than a guide uses; ``unencodable``: guides not stored
    because they hold something the format cannot express or would pass ``MAX_FILE_BYTES``;
    ``unkeyable``: compilations whose key could not be written canonically (so neither read
    nor stored); ``write_errors``: stores that failed on the file system (a read-only
    directory, a full disk).
    """

    hits: int = 0
    misses: int = 0
    stores: int = 0
    rejected: int = 0
    unencodable: int = 0
    unkeyable: int = 0
    write_errors: int = 0


# ---------------------------------------------------------------------- the key


def canonical_key(key: Any) -> str:
    """``key`` (a compiler cache key) as canonical JSON text: equal keys, equal text, in any process.

    Sets are sorted by their members' text and dataclasses (Limits, SchemaOptions, regex
    trees) written field by field; a subtree met twice is written once and then referred to,
    because trees share subtrees and writing them out in full can be exponential. Raises
    :class:`Unencodable` for anything else.
    """
    memo: dict[int, int] = {}
    keep: list[Any] = []  # ids stay unique while the objects stay alive

    def canon(value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else ["float", repr(value)]
        if isinstance(value, bytes):
            return ["bytes", value.hex()]
        if isinstance(value, (tuple, list)):
            return ["tuple" if isinstance(value, tuple) else "list", [canon(v) for v in value]]
        if isinstance(value, (set, frozenset)):
            # each member on its own (a memo shared across them would number subtrees in the
            # set's iteration order, which str hashing makes differ from process to process)
            return ["set", sorted(canonical_key(v) for v in value)]
        if isinstance(value, dict):
            pairs = [[canon(k), canon(v)] for k, v in value.items()]
            return ["map", sorted(pairs, key=json.dumps)]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            seen = memo.get(id(value))
            if seen is not None:
                return ["again", seen]
            memo[id(value)] = len(memo)
            keep.append(value)
            cls = type(value)
            fields = [[f.name, canon(getattr(value, f.name))] for f in dataclasses.fields(value)]
            return ["dataclass", f"{cls.__module__}.{cls.__qualname__}", fields]
        raise Unencodable(f"a key holds a {type(value).__name__}")

    try:
        return json.dumps(canon(key), separators=(",", ":"))
    except RecursionError as exc:
        raise Unencodable("a key nests too deeply") from exc


# ---------------------------------------------------------------------- encoding

def _table_key_known(key: Hashable) -> bool:
    """Whether a vocabulary table of this key is written as a reference (the reader can build it)."""
    if key == "walk":
        return True
    if isinstance(key, tuple) and key and key[0] == "trie":
        return len(key) == 3
    if isinstance(key, tuple) and key and key[0] == "split":
        return len(key) == 5
    return False


def _vocabulary_table(vocabulary: Vocabulary, key: Any) -> Any:
    """The caller's own table for ``key``, built by its public method if it has none yet."""
    if key == "walk":
        return vocabulary.walk_tables()
    if isinstance(key, tuple) and len(key) == 3 and key[0] == "trie":
        low, high = key[1], key[2]
        if type(low) is int and 0 <= low <= _MAX_TOKEN_LENGTH and (
            high is None or (type(high) is int and low <= high <= _MAX_TOKEN_LENGTH)
        ):
            return vocabulary.token_trie(low, high)
    if isinstance(key, tuple) and len(key) == 5 and key[0] == "split":
        first, rest, utf8, utf8_first = key[1:]
        if (isinstance(first, bytes) and isinstance(rest, bytes) and len(first) == len(rest) == 256
                and type(utf8) is bool and type(utf8_first) is bool):  # fmt: skip
            return vocabulary.class_split(first, rest, utf8=utf8, utf8_first=utf8_first)
    raise Corrupt(f"no vocabulary table {key!r}")


class _Encoder:
    """The object graph under ``root`` as a table of entries (JSON) and arrays (``.npz``).

    Every object whose identity may matter — instances, lists, dicts, sets, bytearrays,
    arrays — is one entry, referred to by its index wherever it is met again, so shared
    objects stay shared and cycles close. Immutable values (tuples, frozensets, bytes, str,
    numbers) are written in place. Entries are processed from a work list, not by recursion,
    so a deep automaton or tree does not run into Python's recursion limit.
    """

    def __init__(self, vocabulary: Vocabulary, classes: Storable) -> None:
        self.vocabulary = vocabulary
        # the caller's vocabulary tables, by identity: written as a reference, never by value
        self.tables = {id(v): k for k, v in dict(vocabulary._sorted).items() if _table_key_known(k)}
        self.classes = classes
        self.index: dict[int, int] = {}
        self.entries: list[Any] = []
        self.arrays: dict[str, np.ndarray[Any, Any]] = {}
        self.keep: list[Any] = []  # ids stay unique while the objects stay alive
        self.pending: list[tuple[int, Any]] = []
        self.children: list[list[int]] = []  # by entry: the entries its contents refer to
        self.refs: list[int] = []  # those of the entry being filled

    def encode(self, root: Any) -> tuple[bytes, bytes]:
        top = self.value(root)
        while self.pending:
            at, obj = self.pending.pop()
            self.refs = self.children[at]
            self.entries[at] = self.fill(obj)
        structure = json.dumps(
            {"root": top, "entries": self.entries, "order": self.fill_order()}, separators=(",", ":"), allow_nan=False
        )
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **self.arrays)
        return structure.encode("utf-8"), buffer.getvalue()

    def fill_order(self) -> list[int]:
        """The entries in post-order (children first; a cycle is cut where it closes), iteratively.

        The reader fills entries in this order: a dict keyed by tree nodes hashes them by
        their fields, and a ``__setstate__`` may read its children, so those must be whole.
        """
        order: list[int] = []
        seen = bytearray(len(self.entries))
        for start in range(len(self.entries)):
            if seen[start]:
                continue
            seen[start] = 1
            stack = [(start, iter(self.children[start]))]
            while stack:
                at, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    order.append(at)
                elif not seen[child]:
                    seen[child] = 1
                    stack.append((child, iter(self.children[child])))
        return order

    def value(self, value: Any) -> Any:
        """``value`` written in place, or as a reference to its entry."""
        kind = type(value)
        if value is None or kind is bool or kind is str or kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else ["float", repr(value)]
        if kind is bytes:
            return ["b", base64.b64encode(value).decode("ascii")]
        if kind is tuple:
            return ["t", [self.value(v) for v in value]]
        if kind is frozenset:
            return ["fs", [self.value(v) for v in value]]
        if value is self.vocabulary:
            return ["vocab"]
        table = self.tables.get(id(value))
        if table is not None:
            return ["vt", self.value(table)]
        found = self.index.get(id(value))
        if found is not None:
            self.refs.append(found)
            return ["r", found]
        if kind in (list, dict, OrderedDict, set, bytearray, np.ndarray) or kind in self.classes or isinstance(
            value, np.generic
        ):
            at = self.index[id(value)] = len(self.entries)
            self.entries.append(None)
            self.children.append([])
            self.keep.append(value)
            self.pending.append((at, value))
            self.refs.append(at)
            return ["r", at]
        raise Unencodable(f"a guide holds a {kind.__module__}.{kind.__qualname__}")

    def fill(self, obj: Any) -> Any:
        """The entry for ``obj``: its kind and contents (nested objects as references)."""
        kind = type(obj)
        if kind is list:
            return ["list", [self.value(v) for v in obj]]
        if kind is dict or kind is OrderedDict:
            return ["dict" if kind is dict else "odict", [[self.value(k), self.value(v)] for k, v in obj.items()]]
        if kind is set:
            return ["set", [self.value(v) for v in obj]]
        if kind is bytearray:
            return ["bytearray", base64.b64encode(bytes(obj)).decode("ascii")]
        if kind is np.ndarray or isinstance(obj, np.generic):
            array = np.asarray(obj)
            if array.dtype.hasobject or array.dtype.fields is not None:
                raise Unencodable(f"an array of dtype {array.dtype}")
            name = f"a{len(self.arrays)}"
            self.arrays[name] = array
            return ["array" if kind is np.ndarray else "scalar", name]
        state = obj.__getstate__()
        self.keep.append(state)
        transient = self.classes[kind]
        if transient and isinstance(state, dict):
            state = {k: v for k, v in state.items() if k not in transient}
            self.keep.append(state)
        return ["obj", _qualified(kind), self.value(state)]


# ---------------------------------------------------------------------- decoding


class _Decoder:
    """The inverse of :class:`_Encoder`, trusting nothing in the file.

    Entries become empty shells first (an instance by ``object.__new__``, an empty list...), so
    every reference resolves; then each is filled in the writer's order, children first
    (see :meth:`_Encoder.fill_order`). Any order is safe (nothing but allowed classes is
    made); the checksum is what makes it the right one.
    """

    def __init__(self, vocabulary: Vocabulary, names: Mapping[str, type], structure: Any, arrays: Any) -> None:
        if not isinstance(structure, dict) or not isinstance(structure.get("entries"), list):
            raise Corrupt("no entry table")
        self.vocabulary = vocabulary
        self.entries: list[Any] = structure["entries"]
        self.root = structure.get("root")
        self.arrays = arrays
        #: Each array read once: a file naming one array in many entries gets one copy, not many.
        self._loaded: dict[str, Any] = {}
        order = structure.get("order")
        if (not isinstance(order, list) or not all(type(at) is int for at in order)
                or sorted(order) != list(range(len(self.entries)))):  # fmt: skip
            raise Corrupt("the fill order is not a permutation of the entries")
        self.order: list[int] = order
        self.names = names
        #: The vocabulary tables the file asked for so far (at most ``_MAX_TABLES``).
        self.tables: set[Any] = set()
        self.shells = [self.shell(entry) for entry in self.entries]

    def decode(self) -> Any:
        for at in self.order:
            self.fill(at)
        return self.value(self.root)

    def shell(self, entry: Any) -> Any:
        if not isinstance(entry, list) or len(entry) < 2 or not isinstance(entry[0], str):
            raise Corrupt("an entry is not [kind, ...]")
        kind = entry[0]
        if kind == "list":
            return []
        if kind == "dict":
            return {}
        if kind == "odict":
            return OrderedDict()
        if kind == "set":
            return set()
        if kind == "bytearray":
            return bytearray(_b64(entry[1]))
        if kind in ("array", "scalar"):
            if not isinstance(entry[1], str) or entry[1] not in self.arrays.files:
                raise Corrupt("an array entry names no array")
            array = self._loaded.get(entry[1])
            if array is None:
                array = self._loaded[entry[1]] = self.arrays[entry[1]]
            return array if kind == "array" else array[()]
        if kind == "obj" and len(entry) == 3:
            cls = self.names.get(entry[1]) if isinstance(entry[1], str) else None
            if cls is None:
                raise Corrupt(f"class {entry[1]!r} is not in the allow-list")
            instance: object = object.__new__(cls)  # no class given defines __new__: none runs
            return instance
        raise Corrupt(f"unknown entry kind {kind!r}")

    def fill(self, at: int) -> None:
        entry, shell = self.entries[at], self.shells[at]
        kind = entry[0]
        if kind == "list":
            shell.extend(self.value(v) for v in _list(entry[1]))
        elif kind in ("dict", "odict"):
            for pair in _list(entry[1]):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise Corrupt("a dict item is not a pair")
                shell[self.value(pair[0])] = self.value(pair[1])
        elif kind == "set":
            shell.update(self.value(v) for v in _list(entry[1]))
        elif kind == "obj":
            state = self.value(entry[2])
            # the class's own method (looked up on the class: the instance is the file's to fill)
            setstate: Callable[[Any, Any], None] | None = getattr(type(shell), "__setstate__", None)
            if setstate is not None:
                setstate(shell, state)
            elif isinstance(state, dict):
                shell.__dict__.update(_attributes(state))
            elif isinstance(state, tuple) and len(state) == 2:  # object.__getstate__ with __slots__
                plain, slots = state
                if plain is not None:
                    shell.__dict__.update(_attributes(plain))
                for name, value in _attributes(slots or {}).items():
                    object.__setattr__(shell, name, value)
            else:
                raise Corrupt("an object's state is neither a dict nor (dict, slots)")

    def value(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if not isinstance(value, list) or not value or not isinstance(value[0], str):
            raise Corrupt("a value is neither JSON nor [tag, ...]")
        tag = value[0]
        if tag == "r" and len(value) == 2 and type(value[1]) is int and 0 <= value[1] < len(self.shells):
            return self.shells[value[1]]
        if tag == "t" and len(value) == 2:
            return tuple(self.value(v) for v in _list(value[1]))
        if tag == "fs" and len(value) == 2:
            return frozenset(self.value(v) for v in _list(value[1]))
        if tag == "b" and len(value) == 2:
            return _b64(value[1])
        if tag == "float" and len(value) == 2 and value[1] in ("nan", "inf", "-inf"):
            return float(value[1])
        if tag == "vocab" and len(value) == 1:
            return self.vocabulary
        if tag == "vt" and len(value) == 2:
            key = self.value(value[1])
            self.tables.add(key)
            if len(self.tables) > _MAX_TABLES:
                raise Corrupt(f"more than {_MAX_TABLES} vocabulary tables asked for")
            return _vocabulary_table(self.vocabulary, key)
        raise Corrupt(f"unknown value tag {tag!r}")


def _attributes(state: Any) -> dict[str, Any]:
    """An object's attributes from a file: plain names only (no ``__class__``, no ``__dict__``)."""
    if not isinstance(state, dict) or not all(isinstance(k, str) and not k.startswith("__") for k in state):
        raise Corrupt("an object's state names something other than plain attributes")
    return state


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Corrupt("a list was expected")
    return value


def _b64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise Corrupt("bytes were expected as base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise Corrupt("bad base64") from exc


# ---------------------------------------------------------------------- the cache


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a file is read or written.

    Both make thousands of containers, and each few hundred set off a collection that
    walks the whole heap — a server's heap holds the vocabulary's 100k-entry tables, and
    the collections took 10x the decoding itself (0.3 s for a 300 KB structure).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_stored(npz: bytes) -> None:
    """Refuse an archive whose members are compressed (the writer never compresses them): a few
    kilobytes of deflated zeros would expand to gigabytes when read. Stored members take at most
    the file's own size, so reading one costs no more memory than the file."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(npz)) as archive:
        for member in archive.infolist():
            if member.compress_type != zipfile.ZIP_STORED or member.file_size > len(npz):
                raise Corrupt(f"the archive member {member.filename!r} is compressed")


def _library_versions() -> list[str]:
    """What else a stored guide's state depends on: Python (the layout of what pickling walks), numpy
    (the arrays) and lark (a grammar keeps lark's terminal definitions, and lark's internals shape
    its tables). Another version of any of them never reads an entry: it compiles afresh."""
    import sys
    from importlib.metadata import version  # not an import of lark: it stays behind cfg/lark_adapter.py

    return [f"python {sys.version_info[0]}.{sys.version_info[1]}", f"numpy {np.__version__}", f"lark {version('lark')}"]


def _constrain_version() -> str:
    from .. import __version__  # read at call time: the package imports this module first

    return __version__


class DiskCache:
    """Compiled guides over one vocabulary, stored in ``directory`` under a hash of their key.

    The key (:meth:`digest`) covers the cache format and constrain versions, the
    vocabulary's fingerprint and the compiler's cache key (the constraint's kind and
    canonical text, every compile option, the :class:`~constrain.Limits`). Reading and
    writing never raise: any failure is "not cached", counted in :attr:`stats`.

    ``classes`` gives the classes a file may hold (see :data:`Storable`); it is called on
    first use, so that a cache over regex guides alone never imports the grammar backend.
    """

    def __init__(
        self, directory: str | os.PathLike[str], vocabulary: Vocabulary, classes: Callable[[], Storable]
    ) -> None:
        self.directory = Path(directory)
        self.vocabulary = vocabulary
        self.stats = DiskCacheStats()
        self._lock = threading.Lock()
        self._given = classes
        self._classes: tuple[Storable, dict[str, type]] | None = None

    def classes(self) -> tuple[Storable, dict[str, type]]:
        """The classes a file may hold: by class (with the attributes left out), and by name."""
        if self._classes is None:
            given = dict(self._given())
            for cls in given:
                if any("__new__" in vars(base) for base in cls.__mro__ if base is not object):
                    # the reader creates instances by object.__new__, so that no code of theirs runs
                    raise TypeError(f"{_qualified(cls)} defines __new__, so the disk cache cannot hold it")
            self._classes = given, {_qualified(cls): cls for cls in given}
        return self._classes

    def _count(self, outcome: str) -> None:
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)

    def digest(self, key: Any) -> str | None:
        """The file name for compiler key ``key``, or None if the key cannot be written canonically."""
        try:
            text = canonical_key(key)
        except Unencodable:
            self._count("unkeyable")
            return None
        head = json.dumps([FORMAT_VERSION, _constrain_version(), _library_versions(), self.vocabulary.fingerprint])
        return hashlib.sha256(f"{head}\n{text}".encode("utf-8")).hexdigest()

    def path(self, digest: str) -> Path:
        return self.directory / f"{digest}.guide"

    def load(self, digest: str) -> Any | None:
        """The guide stored under ``digest``, or None (no file, or one that is not a whole valid entry)."""
        path = self.path(digest)
        _, names = self.classes()
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)  # a larger file is never read whole
        except OSError:  # none there (or unreadable): compile as if there were no cache
            self._count("misses")
            return None
        try:
            if len(data) > MAX_FILE_BYTES:
                raise Corrupt(f"larger than {MAX_FILE_BYTES} bytes")
            with _collector_paused():
                guide = self._decode(data, digest, names)
        except Exception:  # noqa: BLE001 — whatever a damaged or hostile file causes means "not cached"
            self._count("rejected")
            try:
                path.unlink()
            except OSError:
                pass
            return None
        self._count("hits")
        return guide

    def _decode(self, data: bytes, digest: str, names: Mapping[str, type]) -> Any:
        from .shell import GuideShell

        end = data.find(b"\n", 0, _MAX_HEADER)
        if end < 0:
            raise Corrupt("no header line")
        header = json.loads(data[:end])
        if not isinstance(header, dict):
            raise Corrupt("the header is not an object")
        if header.get("format") != FORMAT_VERSION or header.get("constrain") != _constrain_version():
            raise Corrupt("written by another version")
        if header.get("key") != digest:
            raise Corrupt("the header names another key")
        json_size, npz_size = header.get("json_size"), header.get("npz_size")
        if not (type(json_size) is int and type(npz_size) is int and json_size >= 0 and npz_size >= 0):
            raise Corrupt("bad payload sizes")
        payload = data[end + 1 :]
        if len(payload) != json_size + npz_size:
            raise Corrupt("truncated (or extended)")
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise Corrupt("checksum mismatch")
        structure = json.loads(payload[:json_size])
        _check_stored(payload[json_size:])
        with np.load(io.BytesIO(payload[json_size:]), allow_pickle=False) as arrays:
            guide = _Decoder(self.vocabulary, names, structure, arrays).decode()
        if not isinstance(guide, GuideShell):
            raise Corrupt("the root is not a guide")
        return guide

    def store(self, digest: str, guide: Any) -> bool:
        """Write ``guide`` under ``digest``; False (and nothing written) if it cannot be, for whatever reason."""
        classes, _ = self.classes()
        try:
            with _collector_paused():
                structure, arrays = _Encoder(self.vocabulary, classes).encode(guide)
        except Exception:  # noqa: BLE001 — Unencodable, or a state the format cannot take: not stored
            self._count("unencodable")
            return False
        payload = structure + arrays
        if len(payload) + _MAX_HEADER > MAX_FILE_BYTES:
            self._count("unencodable")  # a reader would refuse it
            return False
        header = {
            "format": FORMAT_VERSION, "constrain": _constrain_version(), "key": digest,
            "json_size": len(structure), "npz_size": len(arrays), "sha256": hashlib.sha256(payload).hexdigest(),
        }  # fmt: skip
        temporary: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                out.write(json.dumps(header).encode("utf-8") + b"\n")
                out.write(payload)
            os.replace(temporary, self.path(digest))  # readers see the old file or the new one, whole
        except OSError:
            self._count("write_errors")
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
            return False
        self._count("stores")
        return True
