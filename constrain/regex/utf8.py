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

from typing import Iterable, Iterator

MAX_CODEPOINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

ByteRange = tuple[int, int]


def codepoint_ranges(chars: Iterable[str], *, negated: bool) -> list[tuple[int, int]]:
    """Sorted, merged code point ranges of a character set (or of its complement)."""
    points = sorted({ord(c) for c in chars})
    ranges: list[tuple[int, int]] = []
    for p in points:
        if ranges and ranges[-1][1] + 1 == p:
            ranges[-1] = (ranges[-1][0], p)
        else:
            ranges.append((p, p))
    if not negated:
        return ranges
    complement, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            complement.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODEPOINT:
        complement.append((start, MAX_CODEPOINT))
    return complement


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
