"""``uniqueItems`` over strings, checked while the text is generated: a guide around a guide.

No regular (or context-free) language holds "these strings are all different": the
automaton would have to remember every item. So the schema walk builds such an array as a
plain array of strings and lists where it lies (``WalkResult.unique``: an instance path
reached through ``properties``, ``patternProperties``, ``additionalProperties``, ``items`` and
``allOf`` alone, so that every array there is
one the keyword applies to), and :class:`UniqueItemsGuide` wraps the guide of that tree.
Its state is the inner guide's state and a *scan* of the text so far: where in the JSON
value the text is, and for an array the keyword applies to, the items read so far (each as
its value's UTF-8 bytes, escapes decoded, so ``"a"`` and ``"\\u0061"`` are one item).

A token is refused where it would end an item equal to an earlier one, and where it would
leave an item that can only end as a repeat. Where the item strings have endless completions
(no ``maxLength``, no finite pattern) the second never happens, and the first is all there is
to check. Elsewhere (``maxLength: 40``) the guide reads the item's own automaton beside the
scan: a token that leaves the item a prefix of an earlier one keeps it only where a search
finds an ending that is no repeat (``_fresh``). Either way every state the guide hands out
can still reach the end.

The scan trusts the inner guide for the syntax (it only ever reads text that guide let
through), so it is a small pushdown over bytes: containers, the key of each object, the
index of each array, and inside strings the escapes.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .core.limits import Limits
from .core.sharing import Shared
from .core.shell import GuideShell
from .errors import InvalidStateError
from .regex.automaton import DEAD, ByteNFA, LazyDFA
from .regex.counting import plain_spellings
from .regex.tree import Intersect, Node
from .vocabulary import Vocabulary

__all__ = ["UniqueItemsGuide"]

Path = tuple[Any, ...]

# phases of the scan
_VALUE, _AFTER, _KEY, _COLON, _STRING, _KEY_STRING, _LITERAL, _END = range(8)
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_SPACE = frozenset(b" \t\r\n")
_SIMPLE = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f",
           ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}  # fmt: skip


def _code_bytes(code: int) -> bytes:
    """A code point's UTF-8 bytes; a lone surrogate as Python's ``json`` keeps it (``surrogatepass``)."""
    return chr(code).encode("utf-8", "surrogatepass")


def _high(escape: bytes) -> bool:
    """Whether a complete ``\\uXXXX`` escape is a high surrogate (its pair may follow)."""
    return 0xD800 <= int(escape[2:6], 16) <= 0xDBFF


def string_byte(value: bytes, pending: bytes, byte: int) -> tuple[bytes, bytes, bool]:
    """One byte of a JSON string's interior: the decoded value so far, the escape bytes not yet
    decoded, and whether ``byte`` was the closing quote.

    ``pending`` is an escape being read (``\\``, ``\\u00``), a high surrogate's complete escape
    waiting for its low half, or both. A pair decodes to one character, as ``json.loads`` does;
    a lone surrogate stays one (``_code_bytes``).
    """
    if not pending:
        if byte == _BACKSLASH:
            return value, b"\\", False
        if byte == _QUOTE:
            return value, b"", True
        return value + bytes([byte]), b"", False
    held = pending[:6] if len(pending) >= 6 and _high(pending[:6]) else b""
    escape = pending[len(held):] + bytes([byte])
    if not escape.startswith(b"\\"):  # a high surrogate not followed by an escape: it stays lone
        return string_byte(value + _code_bytes(int(held[2:6], 16)), b"", byte)
    if len(escape) == 2 and escape[1] != ord("u"):
        lone = _code_bytes(int(held[2:6], 16)) if held else b""
        return value + lone + _SIMPLE.get(escape[1], escape), b"", False
    if len(escape) < 6:
        return value, held + escape, False
    code = int(escape[2:6], 16)
    if held:
        high = int(held[2:6], 16)
        if 0xDC00 <= code <= 0xDFFF:
            return value + _code_bytes(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)), b"", False
        value += _code_bytes(high)
    if 0xD800 <= code <= 0xDBFF:
        return value, escape, False
    return value + _code_bytes(code), b"", False


class _Scan:
    """The scan's state, unpacked for a run of bytes (``UniqueItemsGuide`` keeps it as a tuple).

    ``frames``: the open containers, ``("o", key)`` (the current member's key, None before
    one) or ``("a", index)``; ``tracked``: for an array ``uniqueItems`` applies to, (its depth,
    the items read, the item being read or None between items, its pending escape bytes, the
    listed paths it lies at, and the state of the item's automaton where the guide reads one).
    """

    __slots__ = ("frames", "phase", "key", "escaped", "tracked", "guide")

    def __init__(self, snapshot: tuple[Any, ...], guide: "UniqueItemsGuide") -> None:
        frames, self.phase, self.key, self.escaped, self.tracked = snapshot
        self.frames = list(frames)
        self.guide = guide

    def snapshot(self) -> tuple[Any, ...]:
        return (tuple(self.frames), self.phase, self.key, self.escaped, self.tracked)

    def feed(self, data: bytes) -> bool:
        """Read ``data``; False where it ends an item equal to an earlier one of its array."""
        for byte in data:
            if not self.byte(byte):
                return False
        return True

    def byte(self, byte: int) -> bool:
        phase = self.phase
        if phase == _STRING:
            if self.tracked is not None and self.tracked[2] is not None:
                return self.item_byte(byte)
            if self.escaped:
                self.escaped = False
            elif byte == _BACKSLASH:
                self.escaped = True
            elif byte == _QUOTE:
                self.ended_value()
            return True
        if phase == _KEY_STRING:
            if self.escaped:
                self.escaped = False
            elif byte == _BACKSLASH:
                self.escaped = True
            elif byte == _QUOTE:
                self.frames[-1] = ("o", _decoded_key(self.key))
                self.key, self.phase = b"", _COLON
                return True
            self.key += bytes([byte])
            return True
        if phase == _LITERAL:
            if byte in b"0123456789+-.eEtrufalsn":
                tracked = self.tracked
                return self.word_byte(byte) if tracked is not None and tracked[2] is not None else True
            self.ended_value()
            return self.byte(byte)
        if byte in _SPACE:
            return True
        if phase == _VALUE:
            if byte == ord("]") and self.frames and self.frames[-1][0] == "a":
                return self.closed()
            self.value_start(byte)
        elif phase == _KEY:
            if byte == _QUOTE:
                self.phase, self.key, self.escaped = _KEY_STRING, b"", False
            elif byte == ord("}"):
                return self.closed()
        elif phase == _COLON:
            self.phase = _VALUE
        elif phase == _AFTER:
            if byte == ord(","):
                kind, slot = self.frames[-1]
                self.frames[-1] = ("o", None) if kind == "o" else ("a", slot + 1)
                self.phase = _KEY if kind == "o" else _VALUE
            else:
                return self.closed()
        return True

    def value_start(self, byte: int) -> None:
        if byte == _QUOTE:
            self.phase, self.escaped = _STRING, False
            if self.tracked is not None and self.tracked[0] == len(self.frames):
                depth, seen, _, _, kind, _ = self.tracked
                automaton = self.guide.item_automaton(kind)
                start = None if automaton is None else automaton.successor(automaton.start, byte)
                self.tracked = (depth, seen, b"", b"", kind, start)
        elif byte == ord("{"):
            self.frames.append(("o", None))
            self.phase = _KEY
        elif byte == ord("["):
            path = tuple(slot for _, slot in self.frames)
            self.frames.append(("a", 0))
            self.phase = _VALUE
            kind = frozenset(k for k, p in enumerate(self.guide.paths) if _matches(p, path))
            if self.tracked is None and kind:
                self.tracked = (len(self.frames), frozenset(), None, b"", kind, None)
        else:
            self.phase = _LITERAL
            if self.tracked is not None and self.tracked[0] == len(self.frames):  # null, true or false
                depth, seen, _, _, kind, _ = self.tracked
                automaton = self.guide.item_automaton(kind)
                start = None if automaton is None else automaton.successor(automaton.start, byte)
                self.tracked = (depth, seen, bytes([byte]), None, kind, start)

    def word_byte(self, byte: int) -> bool:
        """A byte of ``null``, ``true`` or ``false`` as an item (``pending`` None marks a word): the
        word is a value once whole, kept among the items read as a ``str`` (a string's value is
        ``bytes``, so ``"null"`` and ``null`` stay apart)."""
        depth, seen, value, _, kind, at = self.tracked
        value += bytes([byte])
        if at is not None and at != DEAD:
            at = self.guide.item_automaton(kind).successor(at, byte)  # type: ignore[union-attr]
        if value not in _WORDS:
            self.tracked = (depth, seen, value, None, kind, at)
            return True
        if value.decode() in seen:
            return False
        self.tracked = (depth, seen | {value.decode()}, None, b"", kind, None)
        return True

    def item_byte(self, byte: int) -> bool:
        depth, seen, value, pending, kind, at = self.tracked
        value, pending, closed = string_byte(value, pending, byte)
        if at is not None and at != DEAD:
            at = self.guide.item_automaton(kind).successor(at, byte)  # type: ignore[union-attr]
        if not closed:
            self.tracked = (depth, seen, value, pending, kind, at)
            return True
        if value in seen:
            return False
        self.tracked = (depth, seen | {value}, None, b"", kind, None)
        self.ended_value()
        return True

    def ended_value(self) -> None:
        self.phase = _AFTER if self.frames else _END

    def closed(self) -> bool:
        if self.tracked is not None and self.tracked[0] == len(self.frames):
            self.tracked = None
        self.frames.pop()
        self.ended_value()
        return True


def _decoded_key(raw: bytes) -> str | None:
    """A key's name (its escapes decoded), or None where it spells no UTF-8 text."""
    value, pending = b"", b""
    for byte in raw:
        value, pending, _ = string_byte(value, pending, byte)
    if pending:  # a high surrogate's escape at the end: lone
        value += _code_bytes(int(pending[2:6], 16))
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _matches(pattern: Path, path: Path) -> bool:
    """Whether an instance path (keys and indices) is one a listed array lies at."""
    if len(pattern) != len(path):
        return False
    for step, slot in zip(pattern, path):
        kind = step[0]
        if kind == "prop":
            if slot != step[1]:
                return False
        elif kind == "keys":  # an undeclared key of a class: as the walk's key automata read its canonical spelling
            if not isinstance(slot, str) or slot in step[3]:
                return False
            spelled = json.dumps(slot, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
            if not all(a.matches(spelled) for a in step[1]) or any(a.matches(spelled) for a in step[2]):
                return False
        elif not isinstance(slot, int) or (slot < step[1] if kind == "items" else slot != step[1]):
            return False
    return True


_START = ((), _VALUE, b"", False, None)
_WORDS = frozenset((b"null", b"true", b"false"))
#: Values enough that a few more items always leave fresh ones (``UniqueItemsGuide._repeats``).
_ROOM = 1 << 20


def _may_become(seen: frozenset[Any], value: bytes, pending: bytes | None) -> bool:
    """Whether the open item (a string's value so far, or with ``pending`` None a word's letters)
    may still end as one of the items read."""
    if pending is None:
        word = value.decode("ascii", "replace")
        return any(isinstance(earlier, str) and earlier.startswith(word) for earlier in seen)
    return any(isinstance(earlier, bytes) and earlier.startswith(value) for earlier in seen)


class _Closers:
    """The vocabulary's tokens that hold a quote, read once per vocabulary.

    ``closing[v]``: the tokens with one quote that, read inside a string with nothing pending,
    end it as ``v`` more bytes of its value (the quote closes it, escapes before it decoded);
    ``several``: the tokens with two quotes or more, checked one by one (``", "`` ends an item
    and starts the next; a rare one holds a whole item).
    """

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.closing: dict[bytes, list[int]] = {}
        several: list[int] = []
        quoted: list[int] = []
        for token_id, piece in enumerate(vocabulary.token_bytes):
            if not piece or _QUOTE not in piece:
                continue
            quoted.append(token_id)
            if piece.count(_QUOTE) > 1:
                several.append(token_id)
                continue
            value, pending = b"", b""
            for byte in piece:
                value, pending, closed = string_byte(value, pending, byte)
                if closed:
                    self.closing.setdefault(value, []).append(token_id)
                    break
        self.several = np.array(several, dtype=np.int64)
        self.quoted = np.array(quoted, dtype=np.int64)
        #: The tokens with neither quote nor backslash by their bytes (their value's bytes as they
        #: are), those with a backslash and no quote, and the longest token's length: where an
        #: item may still become an earlier one (``UniqueItemsGuide._prefix_tokens``).
        self.spelled: dict[bytes, list[int]] = {}
        escaped: list[int] = []
        for token_id, piece in enumerate(vocabulary.token_bytes):
            if piece and _QUOTE not in piece:
                if _BACKSLASH in piece:  # by its value where its escapes end inside it (read from nothing pending)
                    value, pending = b"", b""
                    for byte in piece:
                        value, pending, _ = string_byte(value, pending, byte)
                    if pending:
                        escaped.append(token_id)
                    else:
                        self.spelled.setdefault(value, []).append(token_id)
                else:
                    self.spelled.setdefault(piece, []).append(token_id)
        #: The tokens that end inside an escape (``\u00``): their value depends on what follows.
        self.escaped = np.array(escaped, dtype=np.int64)
        #: The tokens but those with one quote (which between items only open one): what may
        #: complete an item in one token there (a word, a whole string) or move past one.
        single = set(quoted) - set(several)
        #: Whether a token holds exactly one quote (between items such a token only opens one).
        self.single = np.zeros(vocabulary.size, dtype=bool)
        self.single[sorted(single)] = True
        #: The tokens with one quote by the value bytes after it (an item they open: ``"ab`` under
        #: ``"ab"``), and those whose bytes after it hold a backslash (read one by one).
        self.opening: dict[bytes, list[int]] = {}
        opening_escaped: list[int] = []
        for token_id in sorted(single):
            rest = vocabulary.token_bytes[token_id].split(b'"', 1)[1]  # type: ignore[union-attr]
            if _BACKSLASH in rest:
                opening_escaped.append(token_id)
            else:
                self.opening.setdefault(rest, []).append(token_id)
        self.opening_escaped = np.array(opening_escaped, dtype=np.int64)
        #: The tokens that may end an item, or start the next after a comma: a quote or a comma in them.
        self.ending = np.array(sorted(set(quoted) | {t for t, p in enumerate(vocabulary.token_bytes)
                                                     if p and ord(",") in p}), dtype=np.int64)  # fmt: skip
        self.longest = max((len(p) for p in vocabulary.token_bytes if p), default=0)


_CLOSERS: "weakref.WeakKeyDictionary[Vocabulary, _Closers]" = weakref.WeakKeyDictionary()
_CLOSERS_LOCK = threading.Lock()


def _closers(vocabulary: Vocabulary) -> _Closers:
    with _CLOSERS_LOCK:
        found = _CLOSERS.get(vocabulary)
        if found is None:
            found = _CLOSERS[vocabulary] = _Closers(vocabulary)
        return found


def _allowed(packed: NDArray[np.int32], ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ids among ``ids`` whose bit is set in ``packed``."""
    if not ids.size:
        return ids
    words = packed.view(np.uint32)[ids >> 5]
    chosen: NDArray[np.int64] = ids[(words >> (ids & 31).astype(np.uint32)) & 1 == 1]
    return chosen


def _bit(packed: NDArray[np.int32], token_id: int) -> bool:
    """Whether ``token_id`` is allowed in ``packed``."""
    return bool(int(packed.view(np.uint32)[token_id >> 5]) >> (token_id & 31) & 1)


class UniqueItemsGuide(Shared, GuideShell[tuple[Any, Any]]):
    """``inner``'s language, without the texts whose listed arrays repeat an item.

    ``arrays``: ``(instance path, JSON pointer, item tree, endless)`` of each ``uniqueItems``
    array that the walk built as a plain array (``WalkResult.unique``). States are ``(inner
    state, scan)``.
    """

    def __init__(
        self, inner: GuideShell[Any], arrays: list[tuple[Path, str, Node, bool]], limits: Limits | None = None
    ) -> None:
        super().__init__(inner.vocabulary, (inner.finished, None), mask_cache_size=inner._masks.size)
        self.inner = inner
        self.arrays = tuple(arrays)
        self.limits = limits or Limits()
        #: The listed places, each once, and the items' trees at each (two arrays may share one).
        self.paths = tuple(dict.fromkeys(path for path, _, _, _ in arrays))
        self._items = [[(item, endless) for path, _, item, endless in arrays if path == p] for p in self.paths]
        #: The item automaton by the set of places an array lies at: None where every item prefix
        #: has endless completions (one tree, endless), built on first use.
        self._automata: dict[frozenset[int], LazyDFA | None] = {}
        #: How many values the items at the places ``kind`` have (plain spellings, up to ``_ROOM``).
        self._room: dict[frozenset[int], int] = {}
        self._lock = threading.Lock()
        self._closers = _closers(inner.vocabulary)

    def item_automaton(self, kind: frozenset[int]) -> LazyDFA | None:
        """The automaton of the items an array at the places ``kind`` holds, or None where the
        guide need not read one (see the module docstring)."""
        if kind in self._automata:
            return self._automata[kind]
        with self._lock:
            trees = list(dict.fromkeys(item for k in sorted(kind) for item in self._items[k]))
            if len(trees) == 1 and trees[0][1]:
                automaton = None
            else:
                nodes = tuple(dict.fromkeys(tree for tree, _ in trees))
                automaton = LazyDFA(ByteNFA(nodes[0] if len(nodes) == 1 else Intersect(nodes), self.limits,
                                            self.vocabulary.byte_alphabet))  # fmt: skip
                deadline = time.monotonic() + self.limits.timeout_s
                self._room.setdefault(kind, plain_spellings(automaton, _ROOM, deadline))
            return self._automata.setdefault(kind, automaton)

    @property
    def backend(self) -> str:  # type: ignore[override]
        """The inner guide's backend: it does the work, this guide only refuses repeats."""
        return self.inner.backend

    def __repr__(self) -> str:
        return f"UniqueItemsGuide({self.inner!r}, arrays={[at for _, at, _, _ in self.arrays]})"

    def __getattr__(self, name: str) -> Any:
        # what a backend offers beyond the protocol (``regex``, ``source``, ``precompute``) is the inner's
        if name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def initial_state(self) -> tuple[Any, Any]:
        return (self.inner.initial_state, _START)

    def forced_bytes(self, state: tuple[Any, Any], limit: int = 256) -> bytes:
        state = self._check_state(state)
        if state == self._finished:
            return b""
        forced = self.inner.forced_bytes(state[0], limit)
        if state[1][4] is not None and _QUOTE in forced:  # (an item's end is this guide's to check)
            forced = forced[: forced.index(_QUOTE)]
        return forced

    # ------------------------------------------------------------------ the engine

    def _check_state(self, state: object) -> tuple[Any, Any]:
        if state == self._finished:
            return self._finished
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], tuple) and len(state[1]) == 5:
            inner = self.inner._check_state(state[0])
            if inner != self.inner.finished:
                return (inner, state[1])
        raise InvalidStateError(
            f"{state!r} is not a state of this guide: states are the pairs its initial_state and advance hand out"
        )

    def _can_end(self, state: tuple[Any, Any]) -> bool:
        return self.inner._can_end(state[0])

    def _mask(self, state: tuple[Any, Any]) -> NDArray[np.int32]:
        state = self._check_state(state)
        if state == self._finished:
            return self._eos_bits
        packed = self.inner._mask(state[0])
        tracked = state[1][4]
        if tracked is None:
            return packed  # outside the listed arrays: the inner guide's own (cached) mask
        cached = self._masks.get(state)
        if cached is not None:
            return cached
        refused = self._repeats(state, packed, tracked)
        if refused:
            packed = packed.copy()
            ids = np.array(sorted(refused), dtype=np.int64)
            np.bitwise_and.at(packed.view(np.uint32), ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
        return self._masks.put(state, packed)

    def _repeats(self, state: tuple[Any, Any], packed: NDArray[np.int32], tracked: tuple[Any, ...]) -> set[int]:
        """The allowed tokens that would end an item as a repeat of an earlier one, or leave it
        one that can only end as a repeat."""
        _, seen, value, pending, kind, at = tracked
        closers = self._closers
        refused: set[int] = set()
        if self.item_automaton(kind) is not None:  # items may run out of endings: read what may end one
            roomy = self._room[kind] > len(seen) + 2  # (two more items in one token still leave a fresh one)
            if pending is None or (value is None and not roomy):  # in a word, or a next item may lack
                candidates = set(self._allowed_ids(packed).tolist())
            elif value is None:  # between items, values to spare: what completes a word or an item in one
                # token, and what opens an item as the start of an earlier one
                allowed = self._allowed_ids(packed)
                candidates = set(allowed[~closers.single[allowed]].tolist())
                candidates.update(_allowed(packed, closers.opening_escaped).tolist())
                for earlier in seen:
                    for k in range(min(len(earlier), closers.longest) + 1) if isinstance(earlier, bytes) else ():
                        candidates.update(t for t in closers.opening.get(earlier[:k], ()) if _bit(packed, t))
            else:
                candidates = set(_allowed(packed, closers.quoted if pending or not roomy else closers.several)
                                 .tolist())  # fmt: skip
                if roomy and not pending:  # one lookup per earlier item, as for endless items
                    for earlier in seen:
                        if isinstance(earlier, bytes) and earlier.startswith(value):
                            candidates.update(closers.closing.get(earlier[len(value):], ()))
                if not roomy:
                    candidates.update(_allowed(packed, closers.ending).tolist())
                if _may_become(seen, value, pending):
                    candidates.update(self._prefix_tokens(packed, tracked))
            return {t for t in candidates if self._scan(state[1], t) is None}
        check = closers.several
        if value is not None and not pending:  # inside an item: one lookup per earlier item it may become
            for earlier in seen:
                if earlier.startswith(value):
                    refused.update(closers.closing.get(earlier[len(value):], ()))
        elif value is not None:  # an escape pending: every token that ends the item is read
            check = closers.quoted
        for token_id in _allowed(packed, check).tolist():
            if self._scan(state[1], token_id) is None:
                refused.add(token_id)
        return refused

    def _prefix_tokens(self, packed: NDArray[np.int32], tracked: tuple[Any, ...]) -> list[int]:
        """The allowed tokens after which the item may still become an earlier one: those whose value
        is the next bytes of an earlier item's (escapes decoded), and every one that ends inside an
        escape (or every one at all where an escape is pending)."""
        _, seen, value, pending, _, _ = tracked
        closers = self._closers
        if pending:
            every: list[int] = self._allowed_ids(packed).tolist()
            return every
        found: set[int] = set(_allowed(packed, closers.escaped).tolist())
        for earlier in seen:
            if isinstance(earlier, bytes) and earlier.startswith(value):
                rest = earlier[len(value):]
                for k in range(1, min(len(rest), closers.longest) + 1):
                    found.update(closers.spelled.get(rest[:k], ()))
        return [t for t in found if _bit(packed, t)]

    def _allowed_ids(self, packed: NDArray[np.int32]) -> NDArray[np.int64]:
        """Every token ``packed`` allows (where the few allowed ones are all read)."""
        bits = np.unpackbits(packed.view(np.uint8), count=self.vocab_size, bitorder="little")
        return np.flatnonzero(bits)

    def _fresh(self, tracked: tuple[Any, ...], phase: int) -> bool:
        """Whether the array can go on without a repeat: the open item can still end as a value
        no earlier item has, and after a comma the next item can. Only where the item's
        automaton is read (finitely many completions may remain, ``item_automaton``)."""
        _, seen, value, pending, kind, at = tracked
        automaton = self.item_automaton(kind)
        if automaton is None or not seen:
            return True
        if value is None:  # between items: after a comma, an item must come
            return phase != _VALUE or self._ending(automaton, automaton.start, None, None, seen)
        if at is None or not _may_become(seen, value, pending):
            return True  # (no earlier item can be hit: any ending will do, and a live state has one)
        return self._ending(automaton, at, value, pending, seen)

    @staticmethod
    def _ending(
        automaton: LazyDFA, at: int, value: bytes | None, pending: bytes | None, seen: frozenset[Any]
    ) -> bool:
        """A depth-first search for an ending of the item from its automaton's state ``at`` whose
        value is not in ``seen`` (``value`` None: from before the item, ``pending`` None: in a
        word): a few bytes of each run of the state's row, in byte order (the closing quote comes
        before letters), the backslash left out (two texts without escapes that differ are
        different values), so at most ``len(seen)`` endings are repeats and the search stops soon
        after. It has a budget: past it the token is refused (stricter, never stuck)."""
        if at == DEAD:  # (the item's automaton and the inner guide disagree: refuse, never stuck)
            return False
        stack: list[tuple[int, bytes | None, bytes | None]] = [(at, value, pending)]
        width = len(seen) + 1
        budget = 64 * (len(seen) + 2)
        while stack and budget:
            budget -= 1
            state, value, pending = stack.pop()
            following: list[tuple[int, bytes | None, bytes | None]] = []
            for low, high, after in automaton.runs(state):
                for byte in range(low, min(high, low + width) + 1):
                    if byte == _BACKSLASH:
                        continue
                    if value is None:  # the item's first byte: a string's quote, or a word's letter
                        following.append((after, b"", b"") if byte == _QUOTE else (after, bytes([byte]), None))
                        continue
                    if pending is None:  # a word: whole once the automaton accepts it
                        word = value + bytes([byte])
                        if automaton.is_final(after):
                            if word.decode() not in seen:
                                return True
                        else:
                            following.append((after, word, None))
                        continue
                    grown, held, closed = string_byte(value, pending, byte)
                    if closed:
                        if grown not in seen:
                            return True
                    else:
                        following.append((after, grown, held))
            stack.extend(reversed(following))
        return False

    def scan(self, snapshot: tuple[Any, ...], data: bytes) -> tuple[Any, ...] | None:
        """The scan (a state's second half) after ``data``, or None where ``data`` ends a repeat or
        leaves an item that can only end as one (``explain`` walks the text byte by byte with it)."""
        scan = _Scan(snapshot, self)
        if not scan.feed(data) or (scan.tracked is not None and not self._fresh(scan.tracked, scan.phase)):
            return None
        return scan.snapshot()

    def _scan(self, snapshot: tuple[Any, ...], token_id: int) -> tuple[Any, ...] | None:
        text = self._text_of(token_id)
        return None if text is None else self.scan(snapshot, text)

    def _text_mask(self, state: tuple[Any, Any]) -> NDArray[np.int32]:
        return self._mask(state) & ~self._eos_bits

    def _step(self, state: tuple[Any, Any], token_id: int) -> tuple[Any, Any] | None:
        inner = self.inner._step(state[0], token_id)
        if inner is None:
            return None
        scan = self._scan(state[1], token_id)
        return None if scan is None else (inner, scan)

    def _rejection(self, state: tuple[Any, Any], text: bytes) -> str:
        return self.inner._rejection(state[0], text)

    def _why_rejected(self, state: tuple[Any, Any], token_id: int) -> str:
        if 0 <= token_id < self.vocab_size and self.inner._step(state[0], token_id) is not None:
            listed = ", ".join(at for _, at, _, _ in self.arrays)
            return (f"its bytes {self._text_of(token_id)!r} would repeat an item of an array whose items must be "
                    f"unique ({listed})")
        return super()._why_rejected(state, token_id)
