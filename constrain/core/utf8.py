"""Unicode code point sets → UTF-8 byte-range sequences.

A character class such as ``[^"\\]`` or ``[一-龥]`` stands for a set of code
points; a byte-level automaton needs, for that set, a small set of byte-range
sequences like ``[E4-E9][80-BF][80-BF]`` whose concatenations are exactly the
UTF-8 encodings of those code points. The split below is the classic one
(used by RE2 and Rust's regex-syntax): first at the boundaries where the
encoded length changes, then until every range is a product of byte ranges.
Surrogates (U+D800–U+DFFF) are never encoded: they are not valid UTF-8.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

MAX_CODEPOINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

ByteRange = tuple[int, int]
AddEdge = Callable[[int, int, int, int], None]


def codepoint_ranges(chars: Iterable[str], *, negated: bool) -> list[tuple[int, int]]:
    """Sorted, merged code point ranges of a character set (or of its complement)."""
    points = sorted({ord(c) for c in chars})
    ranges: list[tuple[int, int]] = []
    for p in points:
        if ranges and ranges[-1][1] + 1 == p:
            ranges[-1] = (ranges[-1][0], p)
        else:
            ranges.append((p, p))
    return list(complement_ranges(ranges)) if negated else ranges


def complement_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The code points 0..U+10FFFF that sorted, non-overlapping ``ranges`` leave out."""
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = max(start, hi + 1)
    if start <= MAX_CODEPOINT:
        out.append((start, MAX_CODEPOINT))
    return tuple(out)


def utf8_sequences(lo: int, hi: int) -> Iterator[list[ByteRange]]:
    """Yield byte-range sequences matching exactly the UTF-8 encodings of ``lo..hi``."""
    stack = [(lo, hi)]
    while stack:
        lo, hi = stack.pop()
        if lo > hi:
            continue
        if lo <= SURROGATES[1] and hi >= SURROGATES[0]:
            stack.append((max(lo, SURROGATES[1] + 1), hi))
            stack.append((lo, min(hi, SURROGATES[0] - 1)))
            continue
        split = next((b for b in (0x7F, 0x7FF, 0xFFFF) if lo <= b < hi), None)
        if split is not None:
            stack.append((split + 1, hi))
            stack.append((lo, split))
            continue
        if hi <= 0x7F:
            yield [(lo, hi)]
            continue
        if _split_continuation(lo, hi, stack):
            continue
        first, last = chr(lo).encode("utf-8"), chr(hi).encode("utf-8")
        yield list(zip(first, last))


def _split_continuation(lo: int, hi: int, stack: list[tuple[int, int]]) -> bool:
    """Split ``lo..hi`` where a trailing continuation byte does not span its full 80–BF range."""
    for i in range(1, 4):
        mask = (1 << (6 * i)) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask != 0:
                stack.append(((lo | mask) + 1, hi))
                stack.append((lo, lo | mask))
                return True
            if hi & mask != mask:
                stack.append((hi & ~mask, hi))
                stack.append((lo, (hi & ~mask) - 1))
                return True
    return False


def byte_runs(alphabet: bytes) -> list[ByteRange]:
    """Maximal ranges of the bytes marked in ``alphabet`` (256 flags)."""
    runs: list[ByteRange] = []
    for byte in range(256):
        if alphabet[byte]:
            if runs and runs[-1][1] == byte - 1:
                runs[-1] = (runs[-1][0], byte)
            else:
                runs.append((byte, byte))
    return runs


def clip_to_runs(low: int, high: int, runs: list[ByteRange]) -> Iterator[ByteRange]:
    """The parts of ``low..high`` inside the runs (bytes no token contains are left out)."""
    for run_low, run_high in runs:
        if run_low > high:
            break
        if run_high >= low:
            yield max(low, run_low), min(high, run_high)


def add_utf8_trie(
    ranges: Iterable[tuple[int, int]], entry: int, exit_: int, new_state: Callable[[], int], add_edge: AddEdge
) -> None:
    """Edges from ``entry`` to ``exit_`` spelling one code point of ``ranges`` in UTF-8.

    The byte-range sequences share their prefixes in a trie, so the automaton stays
    deterministic inside a character: ``add_edge(state, low, high, target)``.
    """
    children: dict[tuple[int, int, int], int] = {}
    for lo, hi in ranges:
        for sequence in utf8_sequences(lo, hi):
            current = entry
            for depth, (blo, bhi) in enumerate(sequence):
                if depth == len(sequence) - 1:
                    add_edge(current, blo, bhi, exit_)
                    continue
                key = (current, blo, bhi)
                if key not in children:
                    children[key] = new_state()
                    add_edge(current, blo, bhi, children[key])
                current = children[key]
