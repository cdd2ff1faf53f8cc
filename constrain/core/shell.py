"""The guide shell: the half of the :class:`~constrain.Guide` protocol every backend shares.

Each guide answers the same questions around its own engine, and answers them the same
way: EOS is allowed exactly where the text may end, after EOS only EOS is allowed again
(finished rows of a batch are padded with it), a token that may not come raises
:class:`~constrain.TokenRejected` saying why, a bitmask buffer of the wrong dtype or shape
raises :class:`~constrain.BitmaskError`, and a state's packed mask is computed once and
kept in a bounded cache shared by the guide's per-call copies. :class:`GuideShell` is that
half, written once; a backend subclasses it and implements only its *engine*:

* ``initial_state`` — the state before any generated token;
* ``_check_state(state)`` — the state, if it is one of the guide's (the finished
  sentinel included), else :class:`~constrain.InvalidStateError`;
* ``_can_end(state)`` — whether the text so far is complete (decides EOS);
* ``_text_mask(state)`` — the packed int32 mask of the *text* tokens that may come next
  (EOS is the shell's business);
* ``_step(state, token_id)`` — the state after a text token, or None if it may not come;
* ``_rejection(state, text)`` — why a token's bytes may not come, for the message;
* ``forced_bytes(state, limit)`` — optional: the bytes every continuation starts with.

The engine never sees the finished sentinel: the shell answers for it. Each backend keeps
a sentinel of its own state type (a regex state is an int, so its sentinel is ``-2``; a
grammar's is a tuple), because a state is a plain value the caller stores per sequence.

The shell also declares the capabilities the sampler and the engine adapters use beyond
the bare protocol — ``vocabulary``, ``eos_token_ids``, ``model_class``, ``forced_bytes``,
``allowed_token_ids`` — so they are called, not probed. A guide written outside the package
implements only the protocol; :func:`capabilities` gives it the same members, with the
answers a guide that declares nothing gets (no vocabulary, no fast-forward).
"""

from __future__ import annotations

from typing import Any, Generic, Hashable, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..errors import TokenRejected
from ..guide import bitmask_from_token_ids, check_bitmask, check_token
from ..vocabulary import Vocabulary
from . import collector
from .cache import BoundedCache

__all__ = ["GuideShell", "Capabilities", "capabilities"]

S = TypeVar("S", bound=Hashable)


class GuideShell(Generic[S]):
    """The protocol over an engine (see the module docstring for the engine's methods).

    ``finished`` is the backend's state after EOS: a value of its state type that no live
    state equals. ``mask_cache_size`` bounds the packed masks kept by state.
    """

    #: The backend's name ("regex", "cfg", "triggered"): the compiler and ``explain`` dispatch on it.
    backend: str

    def __init__(self, vocabulary: Vocabulary, finished: S, *, mask_cache_size: int) -> None:
        self.vocabulary = vocabulary
        self.vocab_size = vocabulary.size
        self.eos_token_ids: frozenset[int] = vocabulary.eos_token_ids
        self._finished = finished
        self._eos_bits = bitmask_from_token_ids(
            np.array(sorted(self.eos_token_ids), dtype=np.int32), self.vocab_size
        )
        #: Packed masks by state (EOS included), the most recently stored ``mask_cache_size``:
        #: states may come without end (a counted repeat, a deep grammar), and a 128k
        #: vocabulary's mask is 16 KB. Per-call copies of a guide share this one cache.
        self._masks: BoundedCache[NDArray[np.int32]] = BoundedCache(mask_cache_size)
        #: Where the guide came from, set per call by the compiler: the JSON Schema, the Pydantic
        #: class ``generate`` validates a complete text into, the keywords lenient mode dropped, and
        #: (keyword, JSON pointer) of the annotations the schema walk ignored.
        self.schema: object = None
        self.model_class: type | None = None
        self.dropped: tuple[tuple[str, str], ...] = ()
        self.ignored: tuple[tuple[str, str], ...] = ()

    @property
    def finished(self) -> S:
        """The state after EOS, of this guide's state type: ``state == guide.finished`` asks, for
        any backend, whether a sequence has ended (``constrain.FINISHED`` is the regex backend's)."""
        return self._finished

    # ------------------------------------------------------------------ the engine (subclasses)

    @property
    def initial_state(self) -> S:
        """The state before any generated token."""
        raise NotImplementedError

    def _check_state(self, state: object) -> S:
        """``state`` as one of the guide's states (the finished one included), else InvalidStateError."""
        raise NotImplementedError

    def _can_end(self, state: S) -> bool:
        """Whether the text read to the live ``state`` is complete: the one fact EOS depends on."""
        raise NotImplementedError

    def _text_mask(self, state: S) -> NDArray[np.int32]:
        """The packed mask of the text tokens the live ``state`` allows (a fresh array, EOS left out)."""
        raise NotImplementedError

    def _step(self, state: S, token_id: int) -> S | None:
        """The state after token ``token_id``, or None if it may not come.

        Any int but an EOS id: one outside the vocabulary or without text (``_text_of``) is refused too.
        """
        raise NotImplementedError

    def _rejection(self, state: S, text: bytes) -> str:
        """Why a token of bytes ``text`` may not come in ``state`` (the end of a TokenRejected message)."""
        raise NotImplementedError

    def forced_bytes(self, state: S, limit: int = 256) -> bytes:
        """The bytes every continuation from ``state`` must start with (the sampler appends them at once).

        b"" by default: an engine that knows nothing forced never fast-forwards.
        """
        return b""

    # ------------------------------------------------------------------ the protocol

    def is_final(self, state: S) -> bool:
        state = self._check_state(state)
        return state == self._finished or self._can_end(state)

    def advance(self, state: S, token_id: int) -> S:
        token_id, state = check_token(token_id), self._check_state(state)
        if token_id in self.eos_token_ids:
            if state == self._finished or self._can_end(state):
                return self._finished
            raise TokenRejected(token_id, state, "EOS before the text is complete")
        if state == self._finished:
            raise TokenRejected(token_id, state, "the sequence already ended; only EOS may follow")
        new = self._step(state, token_id)
        if new is None:
            raise TokenRejected(token_id, state, self._why_rejected(state, token_id))
        return new

    def fill_bitmask(self, state: S, out: NDArray[np.int32]) -> None:
        check_bitmask(out, self.vocab_size)
        # The sampler's hot path: the cache is asked before the state is checked (a hit is a
        # state equal to one the guide handed out); a miss is checked in ``_mask``.
        try:
            cached = self._masks.get(state)
        except TypeError:  # unhashable, so no state: ``_mask`` says so
            cached = None
        out[...] = self._mask(state) if cached is None else cached

    def allowed_tokens(self, state: S) -> NDArray[np.bool_]:
        # A fresh array each call (callers change it: EOS left out, a pool narrowed), unpacked
        # from the cached packed mask by the kernel: 2.2 us on a cached 49k-token mask where
        # fill_bitmask takes 1.2 and numpy's unpackbits (the fallback) 4.4. The cache first, as
        # in fill_bitmask.
        try:
            packed = self._masks.get(state)
        except TypeError:  # unhashable, so no state: ``_mask`` says so
            packed = None
        if packed is None:
            packed = self._mask(state)
        compiled = kernel.compiled
        if compiled is None:
            return np.unpackbits(packed.view(np.uint8), count=self.vocab_size, bitorder="little").view(np.bool_)
        allowed = np.empty(self.vocab_size, dtype=np.bool_)
        compiled.unpack(packed, allowed)
        return allowed

    def allowed_token_ids(self, state: S) -> NDArray[np.int32]:
        """Sorted ids of the allowed tokens (EOS included where the state is final)."""
        return np.flatnonzero(self.allowed_tokens(state)).astype(np.int32)

    # ------------------------------------------------------------------ shared parts

    def _mask(self, state: S) -> NDArray[np.int32]:
        """``state``'s packed mask: EOS alone after EOS, else the engine's text tokens, EOS where final."""
        state = self._check_state(state)
        cached = self._masks.get(state)
        if cached is not None:
            return cached
        if state == self._finished:
            packed = self._eos_bits
        else:
            with collector.paused():  # a first visit builds states by the thousand (see collector)
                packed = self._text_mask(state)
            if self._can_end(state):
                packed = packed | self._eos_bits
        return self._masks.put(state, packed)

    def _text_of(self, token_id: int) -> bytes | None:
        """The bytes of a text token; None for an id outside the vocabulary or one with no text."""
        pieces = self.vocabulary.token_bytes
        return pieces[token_id] if 0 <= token_id < len(pieces) else None

    def _why_rejected(self, state: S, token_id: int) -> str:
        if not 0 <= token_id < self.vocab_size:
            return f"id outside the vocabulary (size {self.vocab_size})"
        text = self._text_of(token_id)
        if not text:
            return "a special token that is never generated"
        return self._rejection(state, text)


class Capabilities(Protocol):
    """What the sampler and the engine adapters ask of a guide beyond the bare protocol."""

    @property
    def vocabulary(self) -> Vocabulary | None: ...

    @property
    def eos_token_ids(self) -> frozenset[int]: ...

    @property
    def model_class(self) -> type | None: ...

    def forced_bytes(self, state: Any, limit: int = 256) -> bytes: ...

    def allowed_token_ids(self, state: Any) -> NDArray[np.int32]: ...


class _Declared:
    """A guide from outside the package, seen through :class:`Capabilities`.

    Such a guide implements the protocol and may have any of the capabilities under
    their names; what it lacks gets the answer that changes nothing: no vocabulary (and
    so no EOS ids known), no class to validate into, nothing forced.
    """

    def __init__(self, guide: Any) -> None:
        self._guide = guide

    @property
    def vocabulary(self) -> Vocabulary | None:
        vocabulary: Vocabulary | None = getattr(self._guide, "vocabulary", None)
        return vocabulary

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return frozenset(getattr(self.vocabulary, "eos_token_ids", ()))

    @property
    def model_class(self) -> type | None:
        model_class: type | None = getattr(self._guide, "model_class", None)
        return model_class

    def forced_bytes(self, state: Any, limit: int = 256) -> bytes:
        forced = getattr(self._guide, "forced_bytes", None)
        return b"" if forced is None else bytes(forced(state))

    def allowed_token_ids(self, state: Any) -> NDArray[np.int32]:
        ids = getattr(self._guide, "allowed_token_ids", None)
        if ids is not None:
            found: NDArray[np.int32] = np.asarray(ids(state), dtype=np.int32)
            return found
        return np.flatnonzero(self._guide.allowed_tokens(state)).astype(np.int32)


def capabilities(guide: Any) -> Capabilities:
    """``guide``'s capabilities: a shell's own members, or those a protocol-only guide declares.

    The one place that probes a guide by attribute name; the sampler and the adapters
    call what this returns.
    """
    if isinstance(guide, GuideShell):
        return guide
    return _Declared(guide)
