"""An adapter for vLLM V1's structured-output interface (no vLLM import needed to use or test it).

vLLM's engine core talks to a structured-output library through two objects
(``vllm/v1/structured_output/backend_types.py``): an engine-wide *backend* that
compiles a request's constraint and allocates the batch bitmask, and a per-request
*grammar* that follows the request's tokens. :class:`ConstrainBackend` and
:class:`ConstrainGrammar` implement those methods by name and signature, duck-typed,
so this module imports neither vLLM nor torch at import time.

The split maps onto ours directly. A compiled guide holds tables and no per-sequence
data, so the backend compiles each distinct ``(request type, spec)`` once and every
request with that constraint shares the guide. A guide state is immutable and
hashable, so a request's whole history is a list of states: accepting a token appends
one, rolling back ``n`` tokens deletes the last ``n`` (nothing is recomputed, and
there is no rollback window to size), and validating draft tokens walks from the
current state without touching the list.

``docs/serving.md`` says how to put the backend into a running vLLM (vLLM selects
structured-output backends by a fixed set of names, so this takes a small patch) and
what was and was not run here.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from ..core.shell import capabilities
from ..errors import BitmaskError, ConfigurationError, ConstrainError, InvalidStateError
from ..guide import Guide, bitmask_size

__all__ = ["ConstrainBackend", "ConstrainGrammar", "RequestState", "compile_request", "install", "register"]

logger = logging.getLogger(__name__)

#: vLLM's request kinds (``StructuredOutputOptions`` member names) this adapter compiles.
KINDS = ("JSON", "JSON_OBJECT", "REGEX", "GRAMMAR", "CHOICE")


# ---------------------------------------------------------------------------- compiling a request


def request_kind(request_type: Any) -> str:
    """The kind's upper-case name, from vLLM's enum member or a plain string (``"regex"``, ``"JSON"``).

    Matching by name keeps this module free of a vLLM import: the enum values are
    ``enum.auto()`` numbers, the names are the stable part.
    """
    name = getattr(request_type, "name", request_type)
    if not isinstance(name, str):
        raise ConfigurationError(
            f"a structured-output request type is a name or an enum member, not {request_type!r}"
        )
    kind = name.upper().replace("-", "_")
    if kind == "STRUCTURAL_TAG":
        raise ConfigurationError(
            "structural tags (free text with constrained islands after trigger strings) are not supported by "
            "constrain; send the constraint as JSON, regex, grammar or choice"
        )
    if kind not in KINDS:
        raise ConfigurationError(f"unknown structured-output request type {name!r}; expected one of {KINDS}")
    return kind


def looks_like_gbnf(text: str) -> bool:
    """Whether grammar text is GBNF (llama.cpp / xgrammar EBNF: ``root ::= ...``) rather than Lark.

    A ``::=`` outside a comment decides it, as it does for vLLM's own Lark check: Lark
    rules are written ``name: ...`` and never use ``::=``.
    """
    for line in text.splitlines():
        code = line.split("#", 1)[0].split("//", 1)[0]
        if "::=" in code:
            return True
    return False


def compile_request(
    compiler: Any, kind: str, spec: Any, *, schema_options: Mapping[str, Any] | None = None
) -> Any:
    """Compile one request's constraint: ``kind`` is one of :data:`KINDS`, ``spec`` vLLM's string for it.

    * ``JSON``: JSON Schema text (or an already parsed schema);
    * ``JSON_OBJECT``: any JSON object (``spec`` is ignored, vLLM sends ``""``);
    * ``REGEX``: the pattern, matched in full;
    * ``GRAMMAR``: GBNF text when it :func:`looks like GBNF <looks_like_gbnf>`, else a Lark grammar
      (or ``"json"`` / ``"sql"``, the bundled grammars);
    * ``CHOICE``: a JSON list of strings (vLLM serialises the list), or the list itself.
    """
    kind = request_kind(kind)
    options = dict(schema_options or {})
    if kind == "JSON":
        return compiler.json_schema(spec, **options)
    if kind == "JSON_OBJECT":
        options.setdefault("strict_properties", False)  # any object: undeclared members allowed
        return compiler.json_schema({"type": "object"}, **options)
    if kind == "REGEX":
        return compiler.regex(spec)
    if kind == "CHOICE":
        choices = json.loads(spec) if isinstance(spec, str) else list(spec)
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
            raise ConfigurationError(f"a choice request needs a non-empty list of strings, not {spec!r}")
        return compiler.choice(choices)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError("a grammar request needs non-empty grammar text")
    return compiler.gbnf(spec) if looks_like_gbnf(spec) else compiler.grammar(spec)


def spec_key(spec: Any) -> Hashable:
    """A cache key: a string as it is, anything else (a parsed schema, a list) as canonical JSON."""
    if isinstance(spec, str):
        return spec
    return json.dumps(spec, sort_keys=True)


# ---------------------------------------------------------------------------- writing a mask row


def write_mask_row(guide: Guide[Hashable], state: Hashable, bitmask: Any, index: int) -> None:
    """Write ``state``'s packed mask into row ``index`` of a 2-D int32 ``bitmask`` (torch tensor or numpy).

    A CPU tensor is written through a numpy view of its memory (no copy); a tensor on
    another device, or a row wider than the guide's vocabulary, goes through a scratch
    row. Words past the guide's vocabulary are cleared: those ids are never allowed.
    """
    words = bitmask_size(guide.vocab_size)
    shape = tuple(getattr(bitmask, "shape", ()))
    if len(shape) != 2:
        raise BitmaskError(f"the batch bitmask is 2-D (rows, words), not of shape {shape}")
    if not -shape[0] <= index < shape[0]:
        raise BitmaskError(f"row {index} is outside a bitmask of {shape[0]} rows")
    if shape[1] < words:
        raise BitmaskError(f"bitmask rows hold {shape[1]} words; {guide.vocab_size} tokens need {words}")
    view = _numpy_view(bitmask)
    if view is not None and view.dtype == np.int32:
        row = view[index]
        if shape[1] == words and row.flags.c_contiguous and row.flags.writeable:
            guide.fill_bitmask(state, row)
            return
        scratch = np.empty(words, dtype=np.int32)
        guide.fill_bitmask(state, scratch)
        row[:words] = scratch
        row[words:] = 0
        return
    if view is not None:
        raise BitmaskError(f"the batch bitmask must hold int32 words, not {view.dtype}")
    import torch

    if bitmask.dtype != torch.int32:
        raise BitmaskError(f"the batch bitmask must hold int32 words, not {bitmask.dtype}")
    scratch = np.empty(words, dtype=np.int32)
    guide.fill_bitmask(state, scratch)
    bitmask[index, :words].copy_(torch.from_numpy(scratch))
    bitmask[index, words:] = 0


def _numpy_view(bitmask: Any) -> np.ndarray | None:
    """A numpy array sharing ``bitmask``'s memory, or None (a tensor off the CPU)."""
    if isinstance(bitmask, np.ndarray):
        return bitmask
    device = getattr(bitmask, "device", None)
    if device is not None and getattr(device, "type", "cpu") == "cpu" and hasattr(bitmask, "numpy"):
        view: np.ndarray = bitmask.numpy()  # shares memory with the tensor
        return view
    return None


def allocate_batch_bitmask(vocab_size: int, rows: int) -> Any:
    """An int32 ``(rows, words)`` bitmask on the CPU, every bit set: a row nobody fills allows everything.

    A torch tensor when torch is installed (engines hand it to their kernels), else numpy.
    """
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 0:
        raise ConfigurationError(f"the number of bitmask rows is an int ≥ 0, not {rows!r}")
    shape = (int(rows), bitmask_size(vocab_size))
    try:
        import torch
    except ImportError:
        return np.full(shape, -1, dtype=np.int32)
    return torch.full(shape, -1, dtype=torch.int32)


def forced_text(guide: Guide[Hashable], state: Hashable) -> str:
    """The text every continuation of ``state`` starts with, cut to whole UTF-8 characters ("" if none).

    Every guide of the package says (``forced_bytes``; a protocol-only guide forces nothing);
    a cut is needed because a forced run can end inside a multi-byte character.
    """
    data = capabilities(guide).forced_bytes(state)
    for end in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:end].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


# ---------------------------------------------------------------------------- one request's states


class RequestState:
    """One request's walk through a shared guide: the list of states it has been in.

    ``states[0]`` is the guide's initial state and ``states[-1]`` the current one;
    ``tokens[i]`` took ``states[i]`` to ``states[i + 1]``. Because states are immutable
    values, keeping them all costs one reference per token, and going back ``n``
    tokens is deleting ``n`` entries: no undo log, no recomputation, no bound on how
    far back a rollback may reach. Both engine adapters keep their state in one.
    """

    __slots__ = ("guide", "eos_token_ids", "states", "tokens")

    def __init__(self, guide: Guide[Hashable]) -> None:
        self.guide = guide
        self.eos_token_ids: frozenset[int] = capabilities(guide).eos_token_ids
        self.states: list[Hashable] = [guide.initial_state]
        self.tokens: list[int] = []

    @property
    def state(self) -> Hashable:
        return self.states[-1]

    @property
    def terminated(self) -> bool:
        """Whether the last accepted token was EOS (the guide's state then only allows EOS again)."""
        return bool(self.tokens) and self.tokens[-1] in self.eos_token_ids

    def walk(self, tokens: Iterable[int]) -> tuple[list[Hashable], list[int], bool]:
        """States and tokens of the longest accepted prefix of ``tokens``, and whether all were accepted.

        Stops after an EOS: nothing follows the end of the text. Changes nothing.
        """
        state = self.state
        states: list[Hashable] = []
        taken: list[int] = []
        for token in tokens:
            try:
                state = self.guide.advance(state, token)
            except ConstrainError:  # TokenRejected, or a limit reached while building a state lazily
                return states, taken, False
            states.append(state)
            taken.append(int(token))
            if taken[-1] in self.eos_token_ids:
                break
        return states, taken, True

    def push(self, states: Sequence[Hashable], tokens: Sequence[int]) -> None:
        self.states.extend(states)
        self.tokens.extend(tokens)

    def pop(self, count: int) -> None:
        """Go back ``count`` accepted tokens (≤ 0: nothing)."""
        if count <= 0:
            return
        if count > len(self.tokens):
            raise InvalidStateError(f"cannot roll back {count} tokens: only {len(self.tokens)} were accepted")
        del self.states[-count:]
        del self.tokens[-count:]

    def reset(self) -> None:
        del self.states[1:]
        self.tokens.clear()


# ---------------------------------------------------------------------------- vLLM's two objects


class ConstrainGrammar:
    """vLLM's per-request grammar: a shared compiled guide and this request's own states.

    Creating one is cheap (a list with the initial state), so the backend hands out a
    fresh one per request even when the constraint was compiled before.
    """

    def __init__(self, guide: Guide[Hashable], key: tuple[str, Hashable] | None = None) -> None:
        self.guide = guide
        self.key = key
        self.vocab_size = guide.vocab_size
        self._walk = RequestState(guide)

    def __repr__(self) -> str:
        tokens, done = len(self._walk.tokens), self.is_terminated()
        return f"ConstrainGrammar({self.key!r}, tokens={tokens}, terminated={done})"

    @property
    def state(self) -> Hashable:
        """The guide state after the accepted tokens (immutable: safe to keep, compare or hash)."""
        return self._walk.state

    @property
    def num_processed_tokens(self) -> int:
        """Tokens accepted and not rolled back (after EOS, later tokens are ignored, not counted)."""
        return len(self._walk.tokens)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance by all of ``tokens``, or return False and change nothing.

        All or nothing, so a rejected batch never leaves the request half advanced.
        Once EOS has been accepted the request is over: later tokens (vLLM can hand
        over a step's tokens past the stop, e.g. a speculative bonus token) are
        ignored and True is returned, as vLLM's own backends do.
        """
        if self._walk.terminated:
            return True
        states, taken, ok = self._walk.walk(tokens)
        if not ok:
            rejected, after = list(tokens)[len(taken)], len(self._walk.tokens) + len(taken)
            logger.warning("constrain: request %s: token %s rejected after %d tokens",
                           request_id, rejected, after)  # fmt: skip
            return False
        self._walk.push(states, taken)
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts from here, without advancing.

        The scheduler uses it to cut draft tokens at the first invalid one. Nothing is
        accepted after EOS, nor anything once the request has ended.
        """
        if self._walk.terminated:
            return []
        _, taken, _ = self._walk.walk(tokens)
        return list(tokens[: len(taken)])

    def rollback(self, num_tokens: int) -> None:
        """Forget the last ``num_tokens`` accepted tokens (≤ 0: nothing): free, states are immutable."""
        self._walk.pop(num_tokens)

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Write the allowed tokens of the current state into row ``idx`` of the batch bitmask.

        After EOS the row allows only EOS (the guide's finished state). vLLM's manager
        does not ask a terminated grammar for its mask (it writes an all-allowed row
        and lets the stop check end the request), so that row only matters to other
        callers, for whom it is the safe choice.
        """
        write_mask_row(self.guide, self._walk.state, bitmask, idx)

    def is_terminated(self) -> bool:
        """Whether EOS has been accepted (and not rolled back)."""
        return self._walk.terminated

    def reset(self) -> None:
        """Back to the initial state, as for a preempted request that starts over."""
        self._walk.reset()

    def find_jump_string(self) -> str | None:
        """The text the grammar forces next (older vLLM's jump-forward hook), or None."""
        return forced_text(self.guide, self._walk.state) or None


class ConstrainBackend:
    """vLLM's engine-level backend: compiles constraints over one tokenizer and shares them.

    Constructed as vLLM constructs its backends, ``ConstrainBackend(vllm_config,
    tokenizer=..., vocab_size=...)``; ``vocab_size`` is the model's logits width (the
    bitmask's width). ``compiler`` passes a ready :class:`constrain.Compiler` instead
    of a tokenizer. ``schema_options`` go to every JSON Schema compile; from the vLLM
    config, ``disable_any_whitespace`` turns into ``whitespace="none"``.

    Compiled guides are kept by ``(kind, spec)`` (the last ``cache_size`` of them), so
    every request with the same constraint shares one guide and its lazily filled
    tables; vLLM compiles on a thread pool, hence the lock.
    """

    def __init__(
        self,
        vllm_config: Any = None,
        tokenizer: Any = None,
        vocab_size: int | None = None,
        *,
        compiler: Any = None,
        schema_options: Mapping[str, Any] | None = None,
        cache_size: int = 256,
    ) -> None:
        from ..compiler import Compiler

        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        if compiler is None:
            if tokenizer is None:
                raise ConfigurationError("ConstrainBackend needs a tokenizer or compiler=Compiler(...)")
            compiler = Compiler(tokenizer, vocab_size=vocab_size)
        self.compiler = compiler
        self.vocab_size = compiler.vocabulary.size
        options = dict(schema_options or {})
        so_config = getattr(vllm_config, "structured_outputs_config", None)
        if getattr(so_config, "disable_any_whitespace", False):
            options.setdefault("whitespace", "none")
        self.schema_options = options
        self._guides: OrderedDict[tuple[str, Hashable], Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def compiled_guide(self, request_type: Any, grammar_spec: Any) -> Any:
        """The shared compiled guide for a constraint (compiled on first request)."""
        kind = request_kind(request_type)
        key = (kind, "" if kind == "JSON_OBJECT" else spec_key(grammar_spec))
        with self._lock:
            guide = self._guides.get(key)
            if guide is not None:
                self._guides.move_to_end(key)
                return guide
        guide = compile_request(self.compiler, kind, grammar_spec, schema_options=self.schema_options)
        with self._lock:
            guide = self._guides.setdefault(key, guide)  # another thread may have compiled it meanwhile
            self._guides.move_to_end(key)
            while len(self._guides) > self._cache_size:
                self._guides.popitem(last=False)
        return guide

    def compile_grammar(self, request_type: Any, grammar_spec: str) -> ConstrainGrammar:
        """A new request's grammar: the shared compiled guide plus a fresh state list.

        Raises the compile error (:class:`~constrain.ConstrainError`, a ``ValueError``
        for bad patterns and schemas) for vLLM to report on the request.
        """
        kind = request_kind(request_type)
        guide = self.compiled_guide(kind, grammar_spec)
        return ConstrainGrammar(guide, (kind, spec_key(grammar_spec)))

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """An int32 tensor of shape ``(max_num_seqs, bitmask_size(vocab_size))``, all bits set."""
        return allocate_batch_bitmask(self.vocab_size, max_num_seqs)

    def destroy(self) -> None:
        """Drop the compiled guides (vLLM calls this when the engine shuts down)."""
        with self._lock:
            self._guides.clear()


# ---------------------------------------------------------------------------- putting it into vLLM

#: Where vLLM's structured-output manager finds each backend class it may instantiate, by the
#: name ``structured_outputs_config.backend`` selects (as read in vLLM's source, see docs/serving.md).
BACKEND_SLOTS = {
    "guidance": ("vllm.v1.structured_output", "GuidanceBackend"),
    "xgrammar": ("vllm.v1.structured_output", "XgrammarBackend"),
    "outlines": ("vllm.v1.structured_output.backend_outlines", "OutlinesBackend"),
    "lm-format-enforcer": ("vllm.v1.structured_output.backend_lm_format_enforcer", "LMFormatEnforcerBackend"),
}


def install(replaces: str = "guidance") -> None:
    """Make vLLM build a :class:`ConstrainBackend` where it would build backend ``replaces``.

    vLLM has no registry for structured-output backends: the manager picks a class by
    name from a fixed list. This swaps the class behind one name in the current
    process; the engine core is where grammars are compiled, so it must run there
    (a ``vllm.general_plugins`` entry point runs in every vLLM process: see
    :func:`register`). Requests are still validated in the front end by the replaced
    backend's own checker. Imports vLLM.
    """
    import importlib

    if replaces not in BACKEND_SLOTS:
        raise ConfigurationError(
            f"install(replaces=...) takes one of {sorted(BACKEND_SLOTS)}, not {replaces!r}"
        )
    module_name, attribute = BACKEND_SLOTS[replaces]
    module = importlib.import_module(module_name)
    if not hasattr(module, attribute):
        raise ConfigurationError(
            f"{module_name} has no {attribute}: this vLLM selects backends differently (docs/serving.md)"
        )
    setattr(module, attribute, ConstrainBackend)
    types = importlib.import_module("vllm.v1.structured_output.backend_types")
    types.StructuredOutputGrammar.register(ConstrainGrammar)  # isinstance checks pass
    types.StructuredOutputBackend.register(ConstrainBackend)


def register() -> None:
    """The ``vllm.general_plugins`` entry point: :func:`install` over ``$CONSTRAIN_VLLM_REPLACES``.

    The variable names the backend to replace (default ``guidance``).
    """
    import os

    install(os.environ.get("CONSTRAIN_VLLM_REPLACES", "guidance"))
