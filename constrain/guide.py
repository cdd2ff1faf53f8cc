"""The one protocol every backend implements, and the bitmask helpers around it.

A guide holds compiled tables and no per-sequence data: the caller keeps a
*state* (immutable, hashable) per sequence and asks the guide about it. That
makes a guide safe to share across a batch, across beams (a beam forks by
copying a state reference) and across threads.

The packed bitmask is the layout xgrammar and llguidance use: ``int32`` words,
token ``i`` allowed iff bit ``i % 32`` of word ``i // 32`` is set. Why int32
rather than bool: 32× less memory traffic when a mask crosses to the device, and
one shared layout means the same kernels can apply any engine's mask.
"""

from __future__ import annotations

from typing import Hashable, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from . import kernel
from .errors import BitmaskError, InvalidStateError

__all__ = [
    "Guide", "bitmask_size", "allocate_bitmask", "bitmask_from_token_ids", "bitmask_to_bool", "check_bitmask",
]  # fmt: skip

State = TypeVar("State", bound=Hashable)


@runtime_checkable
class Guide(Protocol[State]):
    """What a sampler needs from a constraint.

    * ``initial_state`` — the state before any generated token;
    * ``allowed_tokens(state)`` — bool array of shape ``(vocab_size,)``; the EOS
      ids are in it exactly when ``is_final(state)``;
    * ``advance(state, token_id)`` — the next state; raises
      :class:`~constrain.TokenRejected` for a token that is not allowed; after EOS
      the state only allows EOS again (so finished rows of a batch can be padded);
    * ``is_final(state)`` — whether the text so far is complete (EOS allowed);
    * ``fill_bitmask(state, out)`` — writes the packed int32 mask into ``out``.
    """

    vocab_size: int

    @property
    def initial_state(self) -> State: ...

    def allowed_tokens(self, state: State) -> NDArray[np.bool_]: ...

    def advance(self, state: State, token_id: int) -> State: ...

    def is_final(self, state: State) -> bool: ...

    def fill_bitmask(self, state: State, out: NDArray[np.int32]) -> None: ...


def check_token(token_id: object) -> int:
    """``token_id`` as an int, or :class:`InvalidStateError` (numpy integers are ids too; bools are not)."""
    if type(token_id) is int:  # the common case, without the isinstance chain
        return token_id
    if isinstance(token_id, (int, np.integer)) and not isinstance(token_id, (bool, np.bool_)):
        return int(token_id)
    raise InvalidStateError(f"a token id is an integer, not {token_id!r}")


#: The one int32 dtype object numpy hands out for int32 arrays (compared by identity first).
_INT32 = np.dtype(np.int32)


def check_bitmask(out: object, vocab_size: int) -> None:
    """Refuse a buffer ``fill_bitmask`` would fill wrongly: another dtype, shape or a non-contiguous view.

    Without this, numpy casts the words into a float32 or bool buffer, and broadcasts
    one row into every row of a 2-D one, silently.
    """
    words = bitmask_size(vocab_size)
    if type(out) is np.ndarray and out.dtype is _INT32 and out.shape == (words,):  # the sampler's buffer
        flags = out.flags
        if flags.c_contiguous and flags.writeable:
            return
    dtype, shape = getattr(out, "dtype", None), getattr(out, "shape", None)
    if not isinstance(out, np.ndarray):
        raise BitmaskError(f"fill_bitmask writes into a numpy int32 array, not {type(out).__name__}")
    if dtype != np.int32:
        raise BitmaskError(f"fill_bitmask needs an int32 buffer, not {dtype}")
    if shape != (words,):
        raise BitmaskError(f"fill_bitmask needs shape ({words},) for {vocab_size} tokens, not {shape}; "
                           "for a batch, pass one row: out[i]")  # fmt: skip
    if not out.flags.writeable or not out.flags.c_contiguous:
        raise BitmaskError("fill_bitmask needs a writeable, contiguous buffer (kernels read it as one block)")


def bitmask_size(vocab_size: int) -> int:
    """Number of int32 words that hold one bit per token."""
    return (vocab_size + 31) // 32


def allocate_bitmask(vocab_size: int, batch_size: int | None = None) -> NDArray[np.int32]:
    """A zeroed bitmask for one sequence, or ``(batch_size, words)`` for a batch."""
    words = bitmask_size(vocab_size)
    shape = (words,) if batch_size is None else (batch_size, words)
    return np.zeros(shape, dtype=np.int32)


def bitmask_from_token_ids(token_ids: NDArray[np.integer], vocab_size: int) -> NDArray[np.int32]:
    """Pack allowed token ids into a fresh bitmask."""
    if kernel.compiled is not None and token_ids.dtype == np.int32:
        words = np.zeros(bitmask_size(vocab_size), dtype=np.int32)
        kernel.compiled.scatter(np.ascontiguousarray(token_ids), None, words, None)
        return words
    bits = np.zeros(bitmask_size(vocab_size) * 32, dtype=bool)
    bits[token_ids] = True
    return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32, copy=False)


def bitmask_to_bool(bitmask: NDArray[np.int32], vocab_size: int) -> NDArray[np.bool_]:
    """Unpack a bitmask (last axis = words) into a bool array of ``vocab_size`` per row."""
    as_bytes = np.ascontiguousarray(bitmask).astype("<i4", copy=False).view(np.uint8)
    bits = np.unpackbits(as_bytes, axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(bool)
