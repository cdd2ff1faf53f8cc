"""Token id → exact bytes, EOS ids and mask width: everything a guide needs from a tokenizer.

A guide works on bytes, never on decoded strings, because a token can hold half of
a UTF-8 character (byte-level BPE, SentencePiece byte fallback) and decoding such a
token alone gives replacement characters. This module recovers each token's exact
bytes from the tokenizer's own conventions:

* byte-level BPE (GPT-2 and every tiktoken vocabulary converted to Hugging Face):
  each character of a token string stands for one byte through GPT-2's
  ``bytes_to_unicode`` table;
* SentencePiece: ``▁`` is a space, and ``<0xNN>`` byte-fallback pieces are the
  single byte ``NN``;
* added tokens that are not special are their literal UTF-8 text.

Special and control tokens (``<|im_start|>``, reserved ids, padding) get no bytes:
a guide never allows them, except the EOS ids, which it allows exactly where the
constrained text may end.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Hashable, Iterable, Sequence, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from .errors import ConfigurationError, VocabularyError
from .guide import bitmask_from_token_ids

T = TypeVar("T")

__all__ = ["Vocabulary", "tokenize_continuation"]

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _gpt2_unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable bytes map to themselves, the rest to U+0100…"""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping: dict[str, int] = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            mapping[chr(256 + extra)] = b
            extra += 1
    return mapping


_GPT2_UNICODE_TO_BYTE = _gpt2_unicode_to_byte()
#: The same map as a ``str.translate`` table to Latin-1 characters (one per byte), and a pattern
#: that finds a character outside it: a 128k vocabulary decodes in 0.1 s this way, where a
#: generator over each piece's characters took 0.8 s.
_GPT2_TRANSLATION = {ord(c): b for c, b in _GPT2_UNICODE_TO_BYTE.items()}
_OUTSIDE_GPT2 = re.compile("[^" + "".join(re.escape(c) for c in _GPT2_UNICODE_TO_BYTE) + "]")


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """The exact bytes of every token id, which ids end a sequence, and the mask width.

    ``token_bytes[i]`` is ``None`` for ids that are never generated (special tokens,
    gaps in the id space); EOS ids are listed separately in ``eos_token_ids``.
    ``size`` is the width of every mask: the largest id + 1, or the model's logits
    width when that is larger (models often pad their embedding matrix).
    """

    token_bytes: tuple[bytes | None, ...]
    eos_token_ids: frozenset[int]
    size: int
    #: Built on first use and shared: "walk" → WalkTables, ("split", …) → ClassSplit,
    #: ("trie", …) → TokenTrie, "by bytes" → SortedTokens.
    _sorted: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.eos_token_ids:
            raise VocabularyError("a vocabulary needs at least one EOS token id")
        if self.size < len(self.token_bytes):
            raise VocabularyError(
                f"size {self.size} is smaller than the number of token ids ({len(self.token_bytes)})"
            )
        for eos in self.eos_token_ids:
            if not 0 <= eos < self.size:
                raise VocabularyError(f"EOS id {eos} is outside the vocabulary (size {self.size})")
            if eos < len(self.token_bytes) and self.token_bytes[eos] is not None:
                # Otherwise a guide would allow it as text mid-sequence, where it ends the sequence.
                raise VocabularyError(
                    f"EOS id {eos} also has text bytes {self.token_bytes[eos]!r}; an end-of-sequence id is "
                    "never text: set its token_bytes entry to None"
                )

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: Any,
        *,
        size: int | None = None,
        eos_token_ids: Iterable[int] | None = None,
        generation_config: Any = None,
    ) -> "Vocabulary":
        """Build the vocabulary of a Hugging Face tokenizer (fast or SentencePiece-based).

        ``size`` is the model's logits width when known (``model.config.vocab_size``
        or the lm-head width); ``generation_config`` (or a model, whose
        ``generation_config`` is read) adds the EOS ids it declares, e.g. Llama-3's
        ``<|eot_id|>``. ``eos_token_ids`` overrides both, for tokenizers without EOS.
        """
        if generation_config is not None and hasattr(generation_config, "generation_config"):
            generation_config = generation_config.generation_config
        if not callable(getattr(tokenizer, "get_vocab", None)):
            raise ConfigurationError(
                f"a tokenizer (with get_vocab(), as Hugging Face tokenizers have) or a Vocabulary is needed, "
                f"not {type(tokenizer).__name__}"
            )
        vocab: dict[str, int] = tokenizer.get_vocab()
        if not vocab:
            raise VocabularyError(f"{type(tokenizer).__name__} has an empty vocabulary")
        largest = max(vocab.values())
        special_ids = _special_ids(tokenizer)
        added_text = {
            int(i): tok.content
            for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items()
            if int(i) not in special_ids
        }
        decode_piece = _piece_decoder(tokenizer)
        table: list[bytes | None] = [None] * (largest + 1)
        pieces: list[str] = []
        piece_ids: list[int] = []
        for piece, i in vocab.items():
            if i in special_ids:
                continue
            if i in added_text:
                table[i] = added_text[i].encode("utf-8")
            else:
                pieces.append(piece)
                piece_ids.append(i)
        for i, spelled in zip(piece_ids, _decode_all(decode_piece, pieces)):
            table[i] = spelled

        eos = set(eos_token_ids) if eos_token_ids is not None else _declared_eos(tokenizer, generation_config)
        if not eos:
            raise VocabularyError(
                f"{type(tokenizer).__name__} declares no EOS token, so a guide could never let a "
                "sequence end; pass eos_token_ids=[...] explicitly"
            )
        width = largest + 1 if size is None else size
        if width < largest + 1:
            raise VocabularyError(
                f"size={size} is smaller than the tokenizer's largest id + 1 ({largest + 1})"
            )
        for i in eos:
            if 0 <= i < len(table):
                table[i] = None  # EOS is allowed through eos_token_ids, never as text
        return cls(tuple(table), frozenset(eos), width)

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return self.size

    @cached_property
    def byte_alphabet(self) -> bytes:
        """``byte_alphabet[b]`` is 1 when byte ``b`` occurs in some token, else 0.

        Text containing any other byte can never be generated, so automata drop
        those bytes up front (SmolLM2, for one, has no token holding ``\\x04`` or
        the lead byte ``\\xf1``).
        """
        text = np.frombuffer(b"".join(filter(None, self.token_bytes)), dtype=np.uint8)
        return (np.bincount(text, minlength=256) > 0).astype(np.uint8).tobytes()

    @cached_property
    def fingerprint(self) -> str:
        """A sha256 (hex) of everything a compiled guide depends on: every token's bytes, the EOS ids, the size.

        Two vocabularies with the same fingerprint compile every constraint to the same
        guide, in any process, so the disk cache keys entries by it. Computed once and kept
        (the vocabulary is immutable); ``None`` entries are told apart from empty tokens.
        """
        digest = hashlib.sha256(b"constrain-vocabulary-1\n")
        digest.update(f"{self.size} {sorted(self.eos_token_ids)}\n".encode("ascii"))
        for piece in self.token_bytes:
            # length-prefixed, so no two token tables hash the same byte stream
            digest.update(b"-\n" if piece is None else b"%d:%s" % (len(piece), piece))
        return digest.hexdigest()

    @cached_property
    def spells_every_byte_alone(self) -> bool:
        """True when every byte of the alphabet is also a single-byte token.

        Then any string over the alphabet can be spelled token by token, so the
        regex backend may decide liveness on bytes alone, without exploring
        tokens. Byte-level BPE and SentencePiece with byte fallback satisfy this.
        """
        singles = set(filter(None, self.token_bytes)) & _SINGLE_BYTES
        return all(bytes([byte]) in singles for byte in range(256) if self.byte_alphabet[byte])

    def class_split(
        self, first: bytes, rest: bytes, *, utf8: bool = False, utf8_first: bool = False
    ) -> "ClassSplit":
        """Tokens split by two byte classes (256 flags each), built once per pair and shared.

        A wide automaton state sends every byte of ``first`` to one state that loops on
        every byte of ``rest`` (a string's interior: any byte but a quote, a backslash or a
        control). A token that starts in ``first`` and stays in ``rest`` ends in that state
        whatever its bytes, and one that leaves ``rest`` does so at one byte, from the same
        state: only its suffix from there needs walking. With ``utf8`` the loop also takes
        every whole UTF-8 character (and with ``utf8_first`` a token may start with one).
        See :class:`ClassSplit`.
        """
        key = ("split", first, rest, utf8, utf8_first)
        split: ClassSplit | None = self._sorted.get(key)
        if split is None:
            tables = self.walk_tables()
            # where each token leaves the loop depends on ``rest`` alone: kept per loop class, which
            # many pairs share (a key's first letters differ by object, its interior does not)
            leaving = self.shared(("leaving", rest, utf8), lambda: ClassSplit.leaving(tables, rest, utf8))
            split = ClassSplit.build(tables, first, leaving, self.size, utf8_first=utf8_first)
            self._sorted[key] = split
        return split

    def shared(self, key: Hashable, build: Callable[[], T]) -> T:
        """A table derived from the vocabulary alone: built by ``build`` on first use, then shared
        by every guide over this vocabulary (a front end above the backends keys its own, as
        ``constrain.triggered`` does). Two threads may both build it; either result is right."""
        found: T | None = self._sorted.get(key)
        if found is None:
            found = self._sorted[key] = build()
        return found

    def common_prefix(self, token_ids: "Sequence[int] | NDArray[np.integer]") -> bytes:
        """The bytes every one of ``token_ids`` starts with (``b""`` if any has none, or for no ids).

        Where a guide allows only these tokens, every continuation starts with them: what
        fast-forward may write without asking the model (see ``CFGGuide.forced_bytes``).
        The first bytes are compared in one array step, so a wide state costs microseconds.
        """
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.size == 0:
            return b""
        firsts: NDArray[np.int16] | None = self._sorted.get("first_bytes")
        if firsts is None:
            firsts = np.array([b[0] if b else -1 for b in self.token_bytes], dtype=np.int16)
            self._sorted["first_bytes"] = firsts
        known = ids[ids < firsts.size]
        if known.size < ids.size:
            return b""  # an id past the token table (padding): it spells nothing
        first = firsts[known]
        if first[0] < 0 or (first != first[0]).any():
            return b""
        pieces = [self.token_bytes[int(i)] or b"" for i in known]
        low, high = min(pieces), max(pieces)  # the common prefix of all is that of the extremes
        size = 0
        while size < min(len(low), len(high)) and low[size] == high[size]:
            size += 1
        return low[:size]

    def walk_tables(self) -> "WalkTables":
        """Arrays for walking every token through an automaton at once (built on first use)."""
        tables: WalkTables | None = self._sorted.get("walk")
        if tables is None:
            tables = WalkTables.build(self.token_bytes)
            self._sorted["walk"] = tables
        return tables

    def token_trie(self, min_length: int = 1, max_length: int | None = None) -> "TokenTrie":
        """The tokens of ``min_length..max_length`` bytes as a byte trie (built on first use)."""
        key = ("trie", min_length, max_length)
        trie: TokenTrie | None = self._sorted.get(key)
        if trie is None:
            by_bytes: SortedTokens | None = self._sorted.get("by bytes")
            if by_bytes is None:  # sorted once for every trie (a guide builds three)
                by_bytes = SortedTokens.of_pieces(self.token_bytes)
                self._sorted["by bytes"] = by_bytes
            trie = TokenTrie.of_sorted(by_bytes.between(min_length, max_length))
            self._sorted[key] = trie
        return trie


@dataclass(frozen=True)
class WalkTables:
    """The vocabulary as a byte matrix, grouped by first byte.

    ``ids[k]`` is a token id, ``matrix[k, j]`` its j-th byte (0-padded),
    ``lengths[k]`` its length; rows are sorted by first byte and
    ``first_byte_start[b]:first_byte_start[b + 1]`` are the rows starting with
    byte ``b``. A token index walks all tokens that start with an allowed byte in
    one numpy step per byte position, instead of a Python loop over the vocabulary.

    For :class:`ClassSplit`, the same bytes flat: every byte after a token's first
    (``later_row``, ``later_pos``, ``later_byte``, in row then position order, so a
    row's first hit in a mask over them is its earliest), the rows' bytes
    (``pieces``), and ``broken[k, start]``: the first position from ``start`` (0 or
    1) where reading whole UTF-8 characters fails (a lone continuation byte, an
    invalid or cut-off sequence), or -1. Those depend on the token alone, so they
    are computed once per vocabulary, not once per class pair.
    """

    ids: NDArray[np.int32]
    matrix: NDArray[np.uint8]
    lengths: NDArray[np.int32]
    first_byte_start: NDArray[np.int64]
    pieces: tuple[bytes, ...]
    later_row: NDArray[np.int32]
    later_pos: NDArray[np.int32]
    later_byte: NDArray[np.uint8]
    broken: NDArray[np.int32]

    @classmethod
    def build(cls, token_bytes: Sequence[bytes | None]) -> "WalkTables":
        items = sorted(
            ((b, i) for i, b in enumerate(token_bytes) if b),  # empty tokens could loop forever
            key=lambda item: item[0][0],
        )
        width = max((len(b) for b, _ in items), default=1)
        matrix = np.zeros((len(items), width), dtype=np.uint8)
        lengths = np.empty(len(items), dtype=np.int32)
        ids = np.empty(len(items), dtype=np.int32)
        broken = np.full((len(items), 2), -1, dtype=np.int32)
        for k, (b, i) in enumerate(items):
            matrix[k, : len(b)] = np.frombuffer(b, dtype=np.uint8)
            lengths[k] = len(b)
            ids[k] = i
            if not b.isascii():
                broken[k] = [_utf8_break(b, 0), _utf8_break(b, 1)]
        first = matrix[:, 0] if len(items) else np.zeros(0, dtype=np.uint8)
        first_byte_start = np.searchsorted(first, np.arange(257), side="left").astype(np.int64)
        later = np.arange(width)[None, 1:] < lengths[:, None]
        later_row, later_pos = np.nonzero(later)
        later_pos = later_pos + 1
        return cls(
            ids, matrix, lengths, first_byte_start, tuple(b for b, _ in items), later_row.astype(np.int32),
            later_pos.astype(np.int32), matrix[later_row, later_pos], broken,
        )  # fmt: skip


def _utf8_break(piece: bytes, k: int) -> int:
    """The first position from ``k`` where ``piece`` stops being whole UTF-8 characters, or -1."""
    while k < len(piece):
        byte = piece[k]
        if byte < 0x80:
            k += 1
            continue
        size = 2 if 0xC2 <= byte <= 0xDF else 3 if 0xE0 <= byte <= 0xEF else 4 if 0xF0 <= byte <= 0xF4 else 0
        try:
            if not size or k + size > len(piece):
                return k  # a lone continuation byte, or a character cut off by the token's end
            piece[k : k + size].decode("utf-8")  # overlong forms and surrogates are not characters
        except UnicodeDecodeError:
            return k
        k += size
    return -1


@dataclass(frozen=True)
class ClassSplit:
    """The tokens that start in a class ``first``, split by what keeps a loop state looping.

    ``opened`` flags the first bytes of the tokens taken (``first``, plus the UTF-8 lead
    bytes when whole characters start the loop). ``inside`` (sorted ids): the tokens all
    of whose later bytes stay in the loop, a byte of ``rest`` or (with ``utf8``) a whole
    valid UTF-8 character at a time; ``inside_words``, the same as a packed bitmask (a row
    that holds them copies it into a mask, see ``regex.index.Row``). ``suffixes``: a trie
    of the other tokens' suffixes, each from the first byte where the token leaves the loop.
    """

    opened: NDArray[np.bool_]
    inside: NDArray[np.int32]
    inside_words: NDArray[np.int32]
    suffixes: "TokenTrie"

    @staticmethod
    def leaving(tables: "WalkTables", rest: bytes, utf8: bool) -> "NDArray[np.int64]":
        """Per token (row of ``tables``), the first position where it leaves a loop on ``rest``,
        ``_STAYS`` where it never does: one column for a token whose first byte entered the
        loop (its characters are read from position 1), one for a token that starts with a
        character in it (position 0; with ``utf8`` only). Without ``utf8`` both are alike."""
        # All in whole-vocabulary array steps (a Python loop per token cost 30-80 ms a pair,
        # and real schemas meet a hundred pairs).
        stays = np.frombuffer(rest, dtype=np.uint8).astype(bool)
        leaves = ~stays[tables.later_byte]
        if utf8:  # non-ASCII bytes are read a character at a time: see ``broken``
            leaves &= tables.later_byte < 0x80
        hits = np.flatnonzero(leaves)
        end = np.full(tables.ids.size, _STAYS, dtype=np.int64)
        rows, first_hit = np.unique(tables.later_row[hits], return_index=True)
        end[rows] = tables.later_pos[hits[first_hit]]
        if not utf8:
            return np.stack([end, end], axis=1)
        broken = tables.broken
        columns = [np.where(broken[:, k] >= 0, np.minimum(end, broken[:, k]), end) for k in (1, 0)]
        return np.stack(columns, axis=1)

    @classmethod
    def build(
        cls, tables: "WalkTables", first: bytes, leaving: "NDArray[np.int64]", size: int, *,
        utf8_first: bool = False,
    ) -> "ClassSplit":
        """The split of the tokens that start in ``first``, from their positions ``leaving`` a
        loop (see :meth:`leaving`)."""
        given = np.frombuffer(first, dtype=np.uint8).astype(bool)
        opened = given | ((np.arange(256) >= 0xC2) & (np.arange(256) <= 0xF4)) if utf8_first else given
        if not tables.ids.size:
            empty = np.zeros(0, dtype=np.int32)
            return cls(opened, empty, bitmask_from_token_ids(empty, size), TokenTrie.build([]))
        lead = tables.matrix[:, 0]
        taken = opened[lead]
        # a byte of ``first`` led into the loop (characters are read from position 1); a lead
        # byte (``utf8_first``) starts a character in it (from position 0)
        end = np.where(given[lead], leaving[:, 0], leaving[:, 1])
        stay = taken & (end == _STAYS)
        cut = np.flatnonzero(taken & ~stay)
        pieces, ids = tables.pieces, tables.ids
        suffixes = [(pieces[r][e:], i) for r, e, i in zip(cut.tolist(), end[cut].tolist(), ids[cut].tolist())]
        inside = np.sort(ids[stay]).astype(np.int32)
        return cls(opened, inside, bitmask_from_token_ids(inside, size), TokenTrie.build(suffixes))


#: A position past every token's end: it never leaves the loop (see ``ClassSplit.leaving``).
_STAYS = np.iinfo(np.int32).max


@dataclass(frozen=True)
class TrieLevel:
    """The trie nodes at one depth, in byte order (so children of one parent are contiguous).

    ``byte[i]`` is the last byte of node ``i``'s prefix, ``token[i]`` the token that
    spells exactly that prefix (-1 if none), and the children of node ``i`` are nodes
    ``child_start[i]:child_start[i + 1]`` of the next level.
    """

    byte: NDArray[np.uint8]
    token: NDArray[np.int32]
    child_start: NDArray[np.int64]


@dataclass(frozen=True)
class TokenTrie:
    """The vocabulary as a byte trie, stored level by level for vectorized walks.

    Walking tokens through an automaton one byte position at a time repeats the work
    for every shared prefix (``"ing"``, ``" the"``...): SmolLM2's 49k tokens hold 332k
    bytes but only 100k distinct prefixes. A walk over the trie advances each prefix
    once, one numpy step per depth. ``levels[0]`` are the first bytes.
    ``duplicates`` pairs ``(token, same_as)`` for tokens that spell the same bytes as
    another (SentencePiece byte-fallback pieces next to single-character pieces): the
    trie holds ``same_as``, and a walk copies its result to ``token``.
    """

    levels: tuple[TrieLevel, ...]
    duplicates: tuple[tuple[int, int], ...]
    #: The same nodes in one array per field, level after level, for the compiled walk
    #: (:mod:`constrain.kernel`): node ``i``'s children are nodes ``child_lo[i]:child_hi[i]``,
    #: and the last node is a root above the first level (no byte, no token).
    flat: "FlatTrie"

    @classmethod
    def build(cls, tokens: Iterable[tuple[bytes, int]]) -> "TokenTrie":
        """The trie of ``(bytes, token id)`` pairs (see :meth:`of_sorted`)."""
        return cls.of_sorted(SortedTokens.of(tokens))

    @classmethod
    def of_sorted(cls, tokens: "SortedTokens") -> "TokenTrie":
        """The trie of tokens sorted by their bytes (then id), built one depth at a time.

        Sorted so, each trie node's tokens lie together, in the order the node's level
        keeps, and a token starts a new node at a depth exactly where it stops agreeing
        with the token before it. So each level is a few array operations over the tokens
        still that long (a byte-by-byte loop in Python took 1.2 s for a 128k vocabulary).
        """
        text, starts, lengths, ids = tokens.text, tokens.starts, tokens.lengths, tokens.ids
        agrees = np.zeros(ids.size, dtype=bool)  # token i spells what token i - 1 does, so far
        agrees[1:] = True
        node_of = np.zeros(ids.size, dtype=np.int64)  # each token's node at the last depth
        active = np.arange(ids.size)
        raw: list[tuple[NDArray[np.uint8], NDArray[np.int32], NDArray[np.int64]]] = []
        duplicates: list[tuple[int, int, int]] = []  # (position in sorted order, token, same_as)
        depth = 0
        while active.size:
            byte = text[starts[active] + depth]
            before = active - 1  # the sorted token before: agreeing so far means as long as this one
            same = agrees[active] & (before >= 0)
            same[same] = lengths[before[same]] > depth  # a shorter token before it ends the agreement
            same[same] = text[starts[before[same]] + depth] == byte[same]
            agrees[active] = same
            new = ~same
            node = np.cumsum(new) - 1
            tokens_at = np.full(int(new.sum()), -1, dtype=np.int32)
            ending = lengths[active] == depth + 1
            if ending.any():
                ends, end_ids = node[ending], ids[active[ending]]
                holders, first = np.unique(ends, return_index=True)
                tokens_at[holders] = end_ids[first]
                again = np.ones(ends.size, dtype=bool)
                again[first] = False
                positions = active[ending][again]
                duplicates += zip(positions.tolist(), end_ids[again].tolist(), tokens_at[ends[again]].tolist())
            raw.append((byte[new], tokens_at, node_of[active][new]))
            node_of[active] = node
            active = active[lengths[active] > depth + 1]
            depth += 1
        levels = []
        for d, (level_bytes, level_tokens, _) in enumerate(raw):
            children = raw[d + 1][2] if d + 1 < len(raw) else np.zeros(0, dtype=np.int64)
            levels.append(TrieLevel(
                level_bytes, level_tokens,
                np.searchsorted(children, np.arange(len(level_bytes) + 1), side="left").astype(np.int64),
            ))  # fmt: skip
        pairs = tuple((token, same_as) for _, token, same_as in sorted(duplicates))
        return cls(tuple(levels), pairs, FlatTrie.of(levels))


@dataclass(frozen=True)
class SortedTokens:
    """Tokens sorted by their bytes, then id: all their bytes in one array, and per token where
    its bytes start, how many there are, and its id (what :meth:`TokenTrie.of_sorted` reads)."""

    text: NDArray[np.uint8]
    starts: NDArray[np.int64]
    lengths: NDArray[np.int64]
    ids: NDArray[np.int32]

    @classmethod
    def of(cls, tokens: Iterable[tuple[bytes, int]]) -> "SortedTokens":
        """``(bytes, id)`` pairs, sorted."""
        items = list(tokens)
        spelled = [b for b, _ in items]
        ids = np.fromiter((i for _, i in items), dtype=np.int32, count=len(items))
        text, starts, lengths = _concatenated(spelled)
        return cls._ordered(text, starts, lengths, ids)

    @classmethod
    def of_pieces(cls, pieces: Sequence[bytes | None]) -> "SortedTokens":
        """Token ``i`` spelled ``pieces[i]`` (None or empty: no token), sorted."""
        text, starts, lengths = _concatenated([b or b"" for b in pieces])
        ids = np.flatnonzero(lengths).astype(np.int32)
        return cls._ordered(text, starts[ids], lengths[ids], ids)

    @classmethod
    def _ordered(
        cls, text: NDArray[np.uint8], starts: NDArray[np.int64], lengths: NDArray[np.int64], ids: NDArray[np.int32]
    ) -> "SortedTokens":
        order = _byte_order(text, starts, lengths, ids)
        return cls(text, starts[order], lengths[order], ids[order])

    def between(self, low: int, high: int | None) -> "SortedTokens":
        """The tokens of ``low..high`` bytes, still sorted (their bytes stay where they are)."""
        keep = (self.lengths >= low) & (True if high is None else self.lengths <= high)
        return SortedTokens(self.text, self.starts[keep], self.lengths[keep], self.ids[keep])


#: Every one-byte string.
_SINGLE_BYTES = frozenset(bytes([b]) for b in range(256))

#: Bytes of each token compared in numpy by :func:`_byte_order` (two big-endian words).
_PREFIX_BYTES = 16


def _concatenated(spelled: list[bytes]) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]]:
    """All of ``spelled`` in one array, with where each piece starts and its length."""
    lengths = np.fromiter(map(len, spelled), dtype=np.int64, count=len(spelled))
    starts = np.zeros(len(spelled), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(b"".join(spelled), dtype=np.uint8), starts, lengths


def _byte_order(
    text: NDArray[np.uint8], starts: NDArray[np.int64], lengths: NDArray[np.int64], ids: NDArray[np.int32]
) -> NDArray[np.int64]:
    """The order of tokens by their bytes (``text[starts[k]:starts[k] + lengths[k]]``), then id.

    Sorting 152k Python ``bytes`` took 0.1 s (and 0.07 more to build the pairs); here each
    token's first 16 bytes, zero-padded, are two big-endian words, sorted by numpy with the
    length, then the id, breaking ties. That is byte order wherever the 16 bytes tell two
    tokens apart or both fit in them (a zero pad ties with a zero byte, and the shorter one,
    a prefix, comes first, as in byte order). Only runs of tokens that agree on all 16 bytes
    and hold a longer one are sorted again by their whole bytes.
    """
    if not ids.size:
        return np.zeros(0, dtype=np.int64)
    columns = np.arange(_PREFIX_BYTES)
    inside = columns < lengths[:, None]
    at = np.minimum(starts[:, None] + columns, max(text.size - 1, 0))
    padded = np.where(inside, text[at] if text.size else 0, 0).astype(np.uint8)
    words = padded.view(">u8")
    order = np.lexsort((ids, lengths, words[:, 1], words[:, 0]))
    first, second, long = words[order, 0], words[order, 1], lengths[order] > _PREFIX_BYTES
    if long.any():
        starts_run = np.ones(order.size, dtype=bool)
        starts_run[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
        run = np.cumsum(starts_run) - 1
        edges = np.flatnonzero(np.append(starts_run, True))
        whole = text.tobytes()
        for r in np.unique(run[long]).tolist():
            lo, hi = int(edges[r]), int(edges[r + 1])
            if hi - lo > 1:
                members = order[lo:hi].tolist()
                members.sort(key=lambda k: (whole[starts[k] : starts[k] + lengths[k]], int(ids[k])))
                order[lo:hi] = members
    return order


@dataclass(frozen=True)
class FlatTrie:
    """A :class:`TokenTrie`'s nodes with global indices (see ``TokenTrie.flat``)."""

    byte: NDArray[np.uint8]
    token: NDArray[np.int32]
    child_lo: NDArray[np.int32]
    child_hi: NDArray[np.int32]

    @property
    def root(self) -> int:
        return len(self.byte) - 1

    @classmethod
    def of(cls, levels: list[TrieLevel]) -> "FlatTrie":
        offsets = np.cumsum([0] + [len(level.byte) for level in levels])
        starts = [offsets[d + 1] + level.child_start for d, level in enumerate(levels)]
        root_children = offsets[1] if levels else 0  # the root's children: the first level
        return cls(
            np.concatenate([level.byte for level in levels] + [np.zeros(1, np.uint8)]),
            np.concatenate([level.token for level in levels] + [np.full(1, -1, np.int32)]),
            np.concatenate([s[:-1] for s in starts] + [np.zeros(1, np.int64)]).astype(np.int32),
            np.concatenate([s[1:] for s in starts] + [np.full(1, root_children, np.int64)]).astype(np.int32),
        )


# ---------------------------------------------------------------------- tokenizer conventions


def _special_ids(tokenizer: Any) -> set[int]:
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(tok, "special", False):
            ids.add(int(i))
    return ids


def _declared_eos(tokenizer: Any, generation_config: Any) -> set[int]:
    eos: set[int] = set()
    for source in (getattr(tokenizer, "eos_token_id", None), getattr(generation_config, "eos_token_id", None)):
        if source is None:
            continue
        eos.update([source] if isinstance(source, int) else source)
    return eos


def _piece_decoder(tokenizer: Any) -> Any:
    """Choose how token strings map to bytes from the tokenizer's declared decoder."""
    kind = _decoder_kind(tokenizer)
    if kind == "byte_level":
        return _decode_byte_level
    if kind == "sentencepiece":
        return _decode_sentencepiece
    raise VocabularyError(
        f"cannot recover exact token bytes for {type(tokenizer).__name__}: its decoder ({kind}) is neither "
        "byte-level BPE nor SentencePiece; build a Vocabulary(token_bytes, eos_token_ids, size) directly"
    )


def _decoder_kind(tokenizer: Any) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "sentencepiece" if hasattr(tokenizer, "sp_model") else "unknown"
    # The decoder's own JSON (its pickle state): serializing and reading the whole tokenizer to
    # find it took 0.5 s for a 128k vocabulary.
    try:
        decoder = json.loads(backend.decoder.__getstate__()) if backend.decoder is not None else {}
    except (AttributeError, TypeError, ValueError):  # another tokenizers version: the whole JSON
        decoder = json.loads(backend.to_str()).get("decoder") or {}
    found = set()

    def visit(node: dict[str, Any]) -> None:
        found.add(node.get("type"))
        if node.get("type") == "Replace" and node.get("pattern", {}).get("String") == "▁":
            found.add("Metaspace")
        for child in node.get("decoders", []) or []:
            visit(child)

    visit(decoder)
    if "ByteLevel" in found:
        return "byte_level"
    if "Metaspace" in found or "ByteFallback" in found:
        return "sentencepiece"
    return ",".join(sorted(str(t) for t in found)) or "none"


def _decode_all(decode_piece: Any, pieces: list[str]) -> list[bytes]:
    """Each piece's bytes; byte-level pieces in one translation of their concatenation.

    One ``translate`` and ``encode`` per piece cost 0.2 s for 152k pieces; every character
    of the GPT-2 alphabet stands for one byte, so the joined pieces translate at once and
    the result is cut at the pieces' lengths. A piece with a character outside the alphabet
    (literal text) makes the whole batch go piece by piece, as before.
    """
    if decode_piece is not _decode_byte_level:
        return [decode_piece(piece) for piece in pieces]
    joined = "".join(pieces)
    if _OUTSIDE_GPT2.search(joined):
        return [decode_piece(piece) for piece in pieces]
    data = joined.translate(_GPT2_TRANSLATION).encode("latin-1")
    ends = list(itertools.accumulate(map(len, pieces)))
    return [data[a:b] for a, b in zip([0, *ends], ends)]


def _decode_byte_level(piece: str) -> bytes:
    if _OUTSIDE_GPT2.search(piece):  # a piece outside the byte alphabet is literal text (rare added tokens)
        return piece.encode("utf-8")
    return piece.translate(_GPT2_TRANSLATION).encode("latin-1")


def _decode_sentencepiece(piece: str) -> bytes:
    fallback = _BYTE_FALLBACK.match(piece)
    if fallback:
        return bytes([int(fallback.group(1), 16)])
    return piece.replace("▁", " ").encode("utf-8")


def tokenize_continuation(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` as the tokenizer spells it *after* some earlier text.

    A model never starts generating at the beginning of a document: SentencePiece
    would otherwise add its dummy-prefix space (``▁``) that the constrained text
    does not contain. The text is encoded after a short prefix whose own tokens
    stay a prefix of the result; the remaining ids are the continuation.
    """
    for prefix in ("\n", "x\n", ". ", "a"):
        head = tokenizer.encode(prefix, add_special_tokens=False)
        full = tokenizer.encode(prefix + text, add_special_tokens=False)
        if full[: len(head)] == head:
            return list(full[len(head):])
    return list(tokenizer.encode(text, add_special_tokens=False))
