"""llama.cpp through ``llama-cpp-python``: a logits processor, the model's own vocabulary, and ``generate``.

Three pieces, none of which needs transformers or torch:

* :func:`llama_vocabulary` reads a :class:`~constrain.Vocabulary` straight from a
  ``llama_cpp.Llama`` (the GGUF file's tokenizer, as llama.cpp itself decodes it), so
  ``Compiler(llama_vocabulary(llm))`` compiles guides for the model without a Hugging
  Face tokenizer;
* :class:`LlamaLogitsProcessor` is the callable ``logits_processor=LogitsProcessorList([...])``
  takes: it follows the guide through the tokens generated after the prompt and sets
  every logit the guide forbids to ``-inf`` (EOS is allowed exactly where the text is
  complete);
* :func:`generate` runs llama.cpp's own sampling loop (``Llama.generate``) with that
  processor and returns a :class:`~constrain.sampling.Generation`, the validated value
  included for a guide compiled from a Pydantic class.

Everything here goes through llama-cpp-python's public names: the ``Llama`` methods
and attributes (``model``, ``tokenize``, ``generate``, ``n_ctx``, ``metadata``,
``draft_model``), ``LogitsProcessorList``, the chat formatter
``llama_chat_format.Jinja2ChatFormatter``, and the ctypes bindings of llama.cpp's C
API that the package exports (``llama_model_get_vocab``, ``llama_vocab_*``,
``llama_token_to_piece``). No private name of llama_cpp is used.

Two facts about llama-cpp-python 0.3 shape the processor (both read in its
``llama.py`` / ``_internals.py`` and checked on the real model):

* the processor runs inside a llama.cpp *custom sampler*, a C callback. ``scores`` is
  a strided numpy view of llama.cpp's candidate array (in token-id order, one entry per
  id) and ``input_ids`` the whole evaluated sequence, prompt included. Writing into
  ``scores`` in place is what reaches llama.cpp;
* an exception raised in a ctypes callback never reaches the caller: ctypes prints it
  to stderr and sampling goes on with whatever the logits are. So on misuse the
  processor first masks the logits to EOS only (the generation ends at once), keeps the
  error in ``processor.error`` and only then raises; :meth:`LlamaLogitsProcessor.check`
  and :func:`generate` re-raise it where the caller can catch it.
"""

from __future__ import annotations

import ctypes
import re
from typing import TYPE_CHECKING, Any, Hashable, Iterable, Sequence, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from ..core.shell import capabilities
from ..errors import ConfigurationError, ConstrainError, VocabularyError
from ..guide import Guide, allocate_bitmask, bitmask_to_bool
from ..sampling import Generation
from ..vocabulary import Vocabulary

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["LlamaLogitsProcessor", "generate", "llama_vocabulary"]

#: The logits' dtype, kept (llama-cpp-python's ``LogitsProcessor`` type returns float32 logits).
_Float = TypeVar("_Float", bound=np.floating[Any])

_BYTE_PIECE = re.compile(rb"^<0x([0-9A-Fa-f]{2})>$")
_NEEDS_LLAMA_CPP = (
    "the llama.cpp integration needs llama-cpp-python: pip install llama-cpp-python "
    "(it builds llama.cpp from source, with cmake and a C++ compiler)"
)


def _llama_cpp() -> Any:
    """The ``llama_cpp`` module, imported on first use: it is an optional dependency."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConstrainError(_NEEDS_LLAMA_CPP) from exc
    return llama_cpp


def _check_llama(llm: Any) -> None:
    """Refuse anything that is not a ``llama_cpp.Llama`` (duck-typed: the attributes used here)."""
    if not all(hasattr(llm, name) for name in ("model", "tokenize", "generate", "n_vocab", "n_ctx")):
        raise ConfigurationError(
            f"expected a llama_cpp.Llama (e.g. Llama(model_path='model.gguf')), not {type(llm).__name__}"
        )


# ---------------------------------------------------------------------------- the vocabulary


class _Pieces:
    """Exact bytes of single tokens through llama.cpp's ``llama_token_to_piece``.

    llama-cpp-python's own ``Llama.detokenize`` is not used: it decodes through a
    32-byte buffer (SmolLM2 has tokens of up to 81 bytes) and drops a leading space
    after BOS. The C call says how many bytes a piece needs (a negative count) when
    the buffer is too small, so the buffer grows instead.
    """

    def __init__(self, llm: Any) -> None:
        self.lib = _llama_cpp()
        self.vocab = self.lib.llama_model_get_vocab(llm.model)
        if not self.vocab:
            raise VocabularyError("the Llama object has no vocabulary (was the model closed?)")
        self.size = int(self.lib.llama_vocab_n_tokens(self.vocab))
        self._buffer = ctypes.create_string_buffer(128)
        lib = self.lib
        self._never = (  # ids a guide never allows as text
            lib.LLAMA_TOKEN_ATTR_CONTROL | lib.LLAMA_TOKEN_ATTR_UNKNOWN | lib.LLAMA_TOKEN_ATTR_UNUSED
        )

    def piece(self, token_id: int, *, special: bool = False) -> bytes:
        """What llama.cpp writes out for one token (``lstrip=0``: a leading space is kept)."""
        for _ in range(2):
            size = len(self._buffer)
            n = self.lib.llama_token_to_piece(self.vocab, token_id, self._buffer, size, 0, special)
            if n >= 0:
                return self._buffer.raw[:n]
            self._buffer = ctypes.create_string_buffer(-n + 1)
        raise VocabularyError(f"llama.cpp could not write token {token_id} out")

    def text_bytes(self, token_id: int) -> bytes | None:
        """The bytes token ``token_id`` adds to the text, or None for a token that is never text.

        * control, unknown and unused tokens (``<|im_start|>``, ``<unk>``, reserved ids)
          and ids without attributes: never text;
        * byte tokens: SentencePiece's byte fallback ``<0xNN>`` is the single byte
          ``NN`` (its stored text says which byte);
        * every other token (normal and user-defined ones): the piece llama.cpp writes,
          which undoes the tokenizer's own encoding (GPT-2's byte alphabet, ``▁`` for a
          space). An empty piece adds nothing, so a guide never needs it and it is
          treated as never text (allowing it could stall a generation).
        """
        attr = int(self.lib.llama_vocab_get_attr(self.vocab, token_id))
        if attr == self.lib.LLAMA_TOKEN_ATTR_UNDEFINED or attr & self._never:
            return None
        if attr & self.lib.LLAMA_TOKEN_ATTR_BYTE:
            fallback = _BYTE_PIECE.match(self.lib.llama_vocab_get_text(self.vocab, token_id) or b"")
            if fallback:
                return bytes([int(fallback.group(1), 16)])
        return self.piece(token_id) or None

    def end_of_generation(self) -> frozenset[int]:
        """Every id llama.cpp ends a generation at (``llama_vocab_is_eog``: EOS, EOT and the like)."""
        return frozenset(i for i in range(self.size) if self.lib.llama_vocab_is_eog(self.vocab, i))


def llama_vocabulary(llm: "Llama", *, eos_token_ids: Iterable[int] | None = None) -> Vocabulary:
    """The :class:`~constrain.Vocabulary` of a ``llama_cpp.Llama`` model, read from the model itself.

    Token bytes come from llama.cpp's own decoder (see :meth:`_Pieces.text_bytes`), so
    they are exact whatever the tokenizer family (byte-level BPE, SentencePiece with
    byte fallback). The EOS ids are every token llama.cpp ends a generation at
    (``llama_vocab_is_eog``; for SmolLM2 ``<|im_end|>``, ``<|endoftext|>`` and
    ``<reponame>``), because ``Llama.create_completion`` stops at any of them; pass
    ``eos_token_ids`` to choose others. The size is ``llm.n_vocab()``, the width of
    llama.cpp's logits. Building it takes about 0.3 s for 49k tokens: build it once per
    model and reuse it (``Compiler(llama_vocabulary(llm))``).
    """
    _check_llama(llm)
    pieces = _Pieces(llm)
    table = [pieces.text_bytes(i) for i in range(pieces.size)]
    eos = pieces.end_of_generation() if eos_token_ids is None else frozenset(int(i) for i in eos_token_ids)
    if not eos:
        raise VocabularyError(
            "the model declares no end-of-generation token, so a guide could never let a sequence end; "
            "pass eos_token_ids=[...]"
        )
    for i in eos:
        if 0 <= i < len(table):
            table[i] = None  # EOS is allowed through eos_token_ids, never as text
    return Vocabulary(tuple(table), eos, pieces.size)


def _check_guide_fits(llm: Any, guide: Guide[Hashable], pieces: _Pieces) -> None:
    """Refuse a guide compiled for another vocabulary: wider than the logits, or other bytes.

    A full comparison costs as much as building the vocabulary, so a sample of ids
    (every 97th, and the guide's EOS ids) is compared: a guide compiled for another
    model's tokenizer differs almost everywhere.
    """
    width = int(llm.n_vocab())
    if guide.vocab_size > width:
        raise ConfigurationError(
            f"the guide was compiled for {guide.vocab_size} tokens but the model has {width}: compile it "
            "with constrain.Compiler(llama_vocabulary(llm))"
        )
    vocabulary = capabilities(guide).vocabulary
    if vocabulary is None:
        return
    for i in sorted(set(range(0, len(vocabulary.token_bytes), 97)) | set(vocabulary.eos_token_ids)):
        ours = vocabulary.token_bytes[i] if i < len(vocabulary.token_bytes) else None
        if i in vocabulary.eos_token_ids:
            theirs_ok = i < width  # the guide ends the text with it; llama.cpp must know the id
        else:
            theirs_ok = ours is None or (i < width and pieces.text_bytes(i) == ours)
        if not theirs_ok:
            raise ConfigurationError(
                f"the guide was compiled for another vocabulary: token {i} is {ours!r} there, "
                f"{pieces.text_bytes(i) if i < width else None!r} in this model; compile the guide with "
                "constrain.Compiler(llama_vocabulary(llm))"
            )


# ---------------------------------------------------------------------------- the logits processor


class LlamaLogitsProcessor:
    """Masks llama.cpp's logits through a guide: ``Llama(..., logits_processor=LogitsProcessorList([p]))``.

    llama-cpp-python calls ``processor(input_ids, scores)`` once per sampled token, with
    the whole evaluated sequence (prompt included) and the next token's logits. The
    first call of a generation fixes the prompt: everything after it is the generated
    text, which the guide follows one token per call. A call that does not continue the
    last one by exactly one token (another prompt, or the same prompt again) starts a
    new generation, so one processor serves one ``create_completion`` after another;
    :meth:`reset` forces it. Not supported: a ``Llama`` with a ``draft_model``
    (llama-cpp-python then hands processors the drafted ids as well, so the position
    being sampled is not the end of ``input_ids``) and anything after this processor
    that raises a logit from ``-inf`` (put it last in the list).

    On misuse (a guide for another vocabulary, a token the guide forbids was sampled)
    the processor masks everything but EOS, so the generation stops, records the
    :class:`~constrain.ConstrainError` in :attr:`error` and raises it. Inside
    llama-cpp-python that exception is only printed (a C callback cannot raise): call
    :meth:`check` after the completion, as :func:`generate` does.
    """

    def __init__(self, guide: Guide[Hashable]) -> None:
        if not isinstance(guide, Guide):
            raise ConfigurationError(
                f"LlamaLogitsProcessor needs a guide (compiler.regex(...), compiler.json_schema(...)), "
                f"not {type(guide).__name__}"
            )
        self.guide = guide
        self.eos_token_ids: frozenset[int] = capabilities(guide).eos_token_ids
        self._bitmask = allocate_bitmask(guide.vocab_size)
        self.prompt_length: int | None = None
        self._prompt: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._last_length = -1
        #: The guide state after the tokens generated so far (one step behind llama.cpp: the
        #: token sampled last is taken at the next call).
        self.state: Hashable = guide.initial_state
        #: The generated token ids seen so far.
        self.token_ids: list[int] = []
        #: The first error of the current generation (see the class docstring).
        self.error: ConstrainError | None = None
        #: Calls so far, over every generation: one per sampled token, so one per forward pass.
        self.calls = 0

    def reset(self) -> None:
        """Forget the prompt, the state and any error: the next call starts a new generation."""
        self.prompt_length = None
        self._last_length = -1
        self.state = self.guide.initial_state
        self.token_ids = []
        self.error = None

    def check(self) -> None:
        """Raise the error the processor met during the current generation, if any."""
        if self.error is not None:
            raise self.error

    def __call__(self, input_ids: NDArray[np.integer[Any]], scores: NDArray[_Float]) -> NDArray[_Float]:
        self.calls += 1
        if not isinstance(scores, np.ndarray) or scores.ndim != 1:
            raise ConfigurationError(
                "LlamaLogitsProcessor takes one row of logits (llama-cpp-python's scores, 1-D), not "
                f"{type(scores).__name__} of shape {getattr(scores, 'shape', None)}; for transformers' "
                "batched generate use constrain.integrations.transformers.LogitsProcessor"
            )
        allowed: NDArray[np.bool_] | None = None
        try:
            self._follow(input_ids, scores)
            if self.error is None:
                self.guide.fill_bitmask(self.state, self._bitmask)
                allowed = bitmask_to_bool(self._bitmask, self.guide.vocab_size)
        except ConstrainError as exc:
            self.error = self.error or exc
        if self.error is not None:
            self._only_eos(scores)
            raise self.error
        allowed = cast("NDArray[np.bool_]", allowed)  # computed whenever there is no error
        width = self.guide.vocab_size
        scores[:width][~allowed] = -np.inf
        scores[width:] = -np.inf  # ids the guide's vocabulary does not have are never allowed
        return scores

    def _follow(self, input_ids: NDArray[np.integer[Any]], scores: NDArray[np.floating[Any]]) -> None:
        """Start a generation or take the one token sampled since the last call."""
        ids = np.asarray(input_ids)
        if ids.ndim != 1 or not ids.size:
            raise ConfigurationError(
                "LlamaLogitsProcessor takes the token ids of one sequence (1-D, not empty), "
                f"not shape {ids.shape}"
            )
        if scores.shape[0] < self.guide.vocab_size:
            raise ConfigurationError(
                f"the model has {scores.shape[0]} logits but the guide was compiled for "
                f"{self.guide.vocab_size} tokens: compile it with constrain.Compiler(llama_vocabulary(llm))"
            )
        length = int(ids.shape[0])
        continues = (
            self.prompt_length is not None
            and length == self._last_length + 1
            and np.array_equal(ids[: self.prompt_length], self._prompt)
        )
        self._last_length = length
        if not continues:
            self.reset()
            self._last_length = length
            self.prompt_length = length
            self._prompt = ids.astype(np.int64)
            return
        token_id = int(ids[-1])
        self.token_ids.append(token_id)
        if self.error is not None:
            return
        try:
            self.state = self.guide.advance(self.state, token_id)
        except ConstrainError as exc:
            raise ConstrainError(
                f"llama.cpp sampled token {token_id} after {len(self.token_ids) - 1} generated tokens, but "
                f"the guide forbids it there ({exc}). Either something after this processor raised a masked "
                "logit (put LlamaLogitsProcessor last in the LogitsProcessorList; do not combine it with "
                "grammar=...), the Llama has a draft_model (not supported), or the guide was compiled for "
                "another vocabulary (use constrain.Compiler(llama_vocabulary(llm)))"
            ) from exc

    def _only_eos(self, scores: NDArray[np.floating[Any]]) -> None:
        """After an error: allow only EOS, so llama.cpp ends the generation at once."""
        keep = [i for i in self.eos_token_ids if i < scores.shape[0]]
        kept = scores[keep].copy()
        scores[:] = -np.inf
        scores[keep] = np.where(np.isfinite(kept), kept, 0.0)


# ---------------------------------------------------------------------------- generate


def generate(
    llm: "Llama",
    prompts: str | Sequence[str],
    guides: Guide[Hashable] | Sequence[Guide[Hashable]],
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int = 40,
    top_p: float = 0.95,
    min_p: float = 0.05,
    repeat_penalty: float = 1.0,
    seed: int | None = None,
    chat: bool = True,
    reuse_prefix: bool = False,
) -> Any:
    """Generate constrained text with llama.cpp: a :class:`~constrain.sampling.Generation`, or a list of them.

    Each prompt runs through ``Llama.generate`` (llama.cpp's sampler chain: the guide's
    mask first, then the repeat penalty, then greedy for ``temperature=0`` or top-k,
    top-p, min-p, temperature and a seeded draw) until EOS, until the guide allows
    nothing but EOS, or ``max_tokens``. A list of prompts runs one after another (a
    ``Llama`` holds one sequence); each may have its own guide. ``chat`` wraps a prompt
    in the chat template stored in the GGUF file, as a user message. The text is
    decoded from llama.cpp's exact token bytes; ``complete`` says whether the guide
    ended it, and for a guide compiled from a Pydantic class a complete generation's
    ``value`` is the validated instance.

    ``reuse_prefix``: keep llama.cpp's KV cache for the part of the prompt shared with
    the sequence evaluated last (llama-cpp-python's prefix matching), which saves the
    prompt pass for long shared prompts. Off by default because it is not exact: the
    reused prefix plus a re-evaluated last token give logits that differ in their last
    bits from one pass over the whole prompt, and greedy output can change with them
    (on SmolLM2 a date prompt gave ``2024-01-01`` fresh and ``2020-01-02`` reused). Off,
    the same call gives the same generation.
    """
    _check_llama(llm)
    if getattr(llm, "draft_model", None) is not None:
        raise ConfigurationError(
            "constrained generation with a draft_model is not supported: llama-cpp-python hands logits "
            "processors the drafted ids too; create the Llama without draft_model"
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ConfigurationError(f"max_tokens must be an int ≥ 0, not {max_tokens!r}")
    single = isinstance(prompts, str)
    prompt_list = [prompts] if isinstance(prompts, str) else list(prompts)
    if not all(isinstance(p, str) for p in prompt_list):
        raise ConfigurationError("prompts are a str or a list of str")
    # Anything but a list or a tuple is one guide, shared by every prompt.
    guide_list: list[Guide[Hashable]] = (
        list(guides) if isinstance(guides, (list, tuple))
        else [cast("Guide[Hashable]", guides)] * len(prompt_list)
    )  # fmt: skip
    if len(guide_list) != len(prompt_list):
        raise ConfigurationError(f"{len(guide_list)} guides for {len(prompt_list)} prompts")
    pieces = _Pieces(llm)
    for guide in dict.fromkeys(guide_list):  # each distinct guide once, in order
        if not isinstance(guide, Guide):
            raise ConfigurationError(f"expected a guide, not {type(guide).__name__}")
        _check_guide_fits(llm, guide, pieces)
    if seed is not None:
        llm.set_seed(seed)
    options = dict(temp=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty)
    results = [
        _generate_one(llm, pieces, _prompt_tokens(llm, pieces, p, chat), g, max_tokens, options, reuse_prefix)
        for p, g in zip(prompt_list, guide_list)
    ]
    return results[0] if single else results


def _prompt_tokens(llm: Any, pieces: _Pieces, prompt: str, chat: bool) -> list[int]:
    """The prompt's ids: in the GGUF file's chat template (with ``chat``, if it has one), BOS as declared."""
    lib = pieces.lib
    template = (getattr(llm, "metadata", None) or {}).get("tokenizer.chat_template")
    if chat and template:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def special_text(token_id: int) -> str:
            return pieces.piece(token_id, special=True).decode("utf-8", "replace") if token_id >= 0 else ""

        formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=special_text(lib.llama_vocab_eos(pieces.vocab)),
            bos_token=special_text(lib.llama_vocab_bos(pieces.vocab)),
        )
        prompt = formatter(messages=[{"role": "user", "content": prompt}]).prompt
    add_bos = bool(lib.llama_vocab_get_add_bos(pieces.vocab))
    tokens: list[int] = list(llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True))
    bos = int(lib.llama_vocab_bos(pieces.vocab))
    if len(tokens) >= 2 and tokens[0] == tokens[1] == bos:
        tokens = tokens[1:]  # the template wrote BOS itself
    if not tokens:
        raise ConfigurationError("the prompt is empty: llama.cpp needs at least one token to start from")
    return tokens


def _generate_one(
    llm: Any, pieces: _Pieces, tokens: list[int], guide: Guide[Hashable], max_tokens: int,
    options: dict[str, Any], reuse_prefix: bool,
) -> Generation:  # fmt: skip
    lib = _llama_cpp()
    room = int(llm.n_ctx()) - len(tokens)
    if room <= 0:
        raise ConfigurationError(
            f"the prompt has {len(tokens)} tokens, more than the context holds (n_ctx={llm.n_ctx()}): "
            "create the Llama with a larger n_ctx"
        )
    budget = min(max_tokens, room)
    processor = LlamaLogitsProcessor(guide)
    eos = processor.eos_token_ids
    state = guide.initial_state
    ids: list[int] = []
    complete = guide.is_final(state) and _only_eos_allowed(guide, state, eos)
    steps = None
    if budget and not complete:
        if not reuse_prefix:
            llm.reset()  # evaluate the whole prompt afresh (see generate's reuse_prefix)
        steps = llm.generate(tokens, logits_processor=lib.LogitsProcessorList([processor]), **options)
    try:
        for token_id in steps or ():
            processor.check()
            if token_id in eos:
                complete = True
                break
            try:
                state = guide.advance(state, int(token_id))
            except ConstrainError as exc:  # the processor masked it: only another sampler can have chosen it
                raise ConstrainError(
                    f"llama.cpp sampled token {token_id}, which the guide forbids: {exc}"
                ) from exc
            ids.append(int(token_id))
            if guide.is_final(state) and _only_eos_allowed(guide, state, eos):
                complete = True  # nothing but EOS can follow: stop without another forward pass
                break
            if len(ids) >= budget:
                break
    finally:
        if steps is not None:
            steps.close()
    processor.check()
    raw = b"".join(pieces.text_bytes(i) or b"" for i in ids)
    text = raw.decode("utf-8", errors="strict" if complete else "replace")
    value = None
    model_class: Any = capabilities(guide).model_class  # a Pydantic class, or None
    if complete and model_class is not None:
        value = model_class.model_validate_json(text)
    return Generation(text, ids, complete, processor.calls, 0, value)


def _only_eos_allowed(guide: Guide[Hashable], state: Hashable, eos: frozenset[int]) -> bool:
    """Whether the guide allows nothing but EOS in ``state`` (the text cannot go on)."""
    allowed = np.flatnonzero(guide.allowed_tokens(state))
    return bool(allowed.size) and all(int(i) in eos for i in allowed)
