"""An adapter for SGLang's grammar objects (no SGLang import needed to use or test it).

SGLang's scheduler keeps one *grammar object* per request and asks it, with the
method names of ``sglang/srt/constrained/base_grammar_backend.py``'s
``BaseGrammarObject``, to accept sampled tokens, roll back, fill its row of a batch
vocabulary mask and apply that mask to the logits. A *grammar backend* compiles a
request's ``(key_type, key_string)`` (``"json"``, ``"regex"``, ``"ebnf"``) into one.

:class:`ConstrainGrammarObject` keeps the same per-request list of immutable guide
states as the vLLM adapter (:class:`constrain.integrations.vllm.RequestState`), so
rollback is deleting list entries. ``copy()`` is what SGLang calls to hand a cached
grammar to a new request: a new object at the initial state over the *same*
compiled guide, so the compile is paid once per distinct constraint.

:class:`ConstrainGrammarBackend` works without SGLang (its own small cache and
thread pool, enough for the replay tests); :func:`register_with_sglang` builds the
same dispatch on top of the installed SGLang's ``BaseGrammarBackend`` and registers
it by name. ``docs/serving.md`` has the details and what was not run here.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Hashable, Mapping

from ..errors import ConstrainError
from ..guide import Guide
from ..sampling import apply_bitmask
from .vllm import ConstrainBackend, RequestState, allocate_batch_bitmask, forced_text, write_mask_row

__all__ = ["ConstrainGrammarObject", "ConstrainGrammarBackend", "apply_packed_mask", "register_with_sglang"]

logger = logging.getLogger(__name__)


def apply_packed_mask(logits: Any, vocab_mask: Any) -> None:
    """Set the logits of tokens whose bit is clear to ``-inf``, in place, on the logits' device.

    ``vocab_mask`` is the packed int32 ``(rows, words)`` mask (already moved to the
    device). Logits wider than the mask (padded vocabularies) are disallowed past it.
    """
    apply_bitmask(logits, vocab_mask)


class ConstrainGrammarObject:
    """SGLang's per-request grammar: a shared compiled guide and this request's states."""

    def __init__(self, guide: Guide[Hashable], key_string: str | None = None) -> None:
        self.guide = guide
        self.key_string = key_string
        self._walk = RequestState(guide)
        #: Set by SGLang's scheduler when the request ends; then its mask row is not filled.
        self.finished = False
        #: SGLang reads these two attributes off every grammar object.
        self.grammar_stats: Any = None
        self.current_token: int | None = None

    def __repr__(self) -> str:
        return f"ConstrainGrammarObject({self.key_string!r}, tokens={len(self._walk.tokens)})"

    @property
    def state(self) -> Hashable:
        return self._walk.state

    @property
    def accepted_tokens(self) -> list[int]:
        return list(self._walk.tokens)

    def accept_token(self, token: int) -> None:
        """Advance by one sampled token; a token the grammar forbids raises ``ValueError``.

        SGLang's own backends raise here too: the mask made the token impossible, so a
        rejection means the mask and the state disagree. After EOS, tokens are ignored.
        """
        if self._walk.terminated:
            return
        self.current_token = int(token)
        states, taken, ok = self._walk.walk([token])
        if not ok:
            raise ValueError(f"constrain: token {token} is not allowed after {len(self._walk.tokens)} tokens "
                             f"of {self.key_string!r}")  # fmt: skip
        self._walk.push(states, taken)

    def rollback(self, k: int) -> None:
        """Forget the last ``k`` accepted tokens (speculative decoding): free, states are immutable."""
        self._walk.pop(k)

    def is_terminated(self) -> bool:
        """Whether EOS has been accepted (and not rolled back)."""
        return self._walk.terminated

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """A CPU int32 ``(batch_size, words)`` mask with every bit set (rows without a grammar stay open).

        Filled on the CPU and moved by :meth:`move_vocab_mask`, as SGLang expects.
        """
        return allocate_batch_bitmask(max(int(vocab_size), self.guide.vocab_size), batch_size)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        """Write the current state's allowed tokens into row ``idx`` (only EOS once terminated)."""
        write_mask_row(self.guide, self._walk.state, vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        apply_packed_mask(logits, vocab_mask)

    def copy(self) -> "ConstrainGrammarObject":
        """A fresh grammar at the initial state over the same compiled guide (as SGLang's cache hands out)."""
        return ConstrainGrammarObject(self.guide, self.key_string)

    # ------------------------------------------------------------------ jump-forward

    def try_jump_forward(self, tokenizer: Any) -> tuple[list[int], str] | None:
        """``([], text)`` when the grammar forces the next text (the guide's ``forced_bytes``), else None.

        The text is cut to whole UTF-8 characters. A protocol-only guide forces nothing, so it never jumps.
        """
        text = forced_text(self.guide, self._walk.state)
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        """The forced text to append; no separate "next state" is needed (-1)."""
        return helper[1], -1

    def jump_and_retokenize(
        self, old_output_ids: list[int], new_output_ids: list[int], next_state: int
    ) -> None:
        """After SGLang appended the forced text and retokenized the output: follow ``new_output_ids``.

        Rolls back to the longest common prefix of the accepted tokens and the new ids,
        then accepts the rest. The accepted tokens are this object's own record, which
        equals ``old_output_ids`` whenever every output token went through
        :meth:`accept_token`.
        """
        accepted = self._walk.tokens
        common = 0
        for old, new in zip(accepted, new_output_ids):
            if old != new:
                break
            common += 1
        self._walk.pop(len(accepted) - common)
        states, taken, ok = self._walk.walk(new_output_ids[common:])
        if not ok or len(taken) != len(new_output_ids) - common:
            raise ValueError(f"constrain: the retokenized output is not allowed by {self.key_string!r}")
        self._walk.push(states, taken)


class _Dispatch:
    """The ``dispatch_*`` methods: SGLang's request keys to shared compiled guides.

    Mixed into a base that provides ``cache`` / ``get_cached_or_future_value`` /
    ``set_cache`` / ``reset``: SGLang's ``BaseGrammarBackend`` when registered, or
    :class:`_LocalBase` without SGLang. Compiles go through a
    :class:`~constrain.integrations.vllm.ConstrainBackend`, whose cache shares guides.
    """

    #: Returned for a constraint that does not compile (SGLang aborts the request on it).
    invalid_grammar: Any = None

    def __init__(
        self,
        tokenizer: Any = None,
        vocab_size: int | None = None,
        eos_token_ids: Any = None,
        *,
        compiler: Any = None,
        schema_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if compiler is None and tokenizer is not None:
            from ..compiler import Compiler

            eos = sorted(eos_token_ids) if eos_token_ids else None
            compiler = Compiler(tokenizer, vocab_size=vocab_size, eos_token_ids=eos)
        self.compiles = ConstrainBackend(
            tokenizer=tokenizer, compiler=compiler, schema_options=schema_options
        )
        self.compiler = self.compiles.compiler
        self.vocab_size = self.compiles.vocab_size

    def _grammar(self, kind: str, spec: str, key_string: str) -> Any:
        try:
            guide = self.compiles.compiled_guide(kind, spec)
        except (ConstrainError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            logger.error("constrain: cannot compile %s %r: %s", kind.lower(), key_string[:200], exc)
            return self.invalid_grammar
        return ConstrainGrammarObject(guide, key_string)

    def dispatch_json(self, key_string: str) -> Any:
        """A JSON Schema; SGLang's ``"$$ANY$$"`` (any JSON value) is the bundled JSON grammar."""
        if key_string == "$$ANY$$":
            return self._grammar("GRAMMAR", "json", key_string)
        return self._grammar("JSON", key_string, key_string)

    def dispatch_regex(self, key_string: str) -> Any:
        return self._grammar("REGEX", key_string, key_string)

    def dispatch_ebnf(self, key_string: str) -> Any:
        """GBNF-style EBNF (what SGLang's ``ebnf`` parameter carries), or Lark text."""
        return self._grammar("GRAMMAR", key_string, key_string)

    def dispatch_structural_tag(self, key_string: str) -> Any:
        logger.error("constrain: structural tags are not supported")
        return self.invalid_grammar

    def dispatch_fallback(self, key_type: str, key_string: str) -> Any:
        logger.error("constrain: unsupported grammar key type %r", key_type)
        return self.invalid_grammar


class _LocalBase:
    """The little of ``BaseGrammarBackend`` a scheduler uses, for running without SGLang."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=2)
        self.cache: dict[tuple[str, str], Any] = {}

    def _init_value_dispatch(self, key: tuple[str, str], *_: Any) -> Any:
        key_type, key_string = key
        dispatch = getattr(self, f"dispatch_{key_type}", None)
        if key_type not in ("json", "regex", "ebnf", "structural_tag") or dispatch is None:
            return self.dispatch_fallback(key_type, key_string)  # type: ignore[attr-defined]
        return dispatch(key_string)

    def get_cached_or_future_value(self, key: tuple[str, str], *_: Any) -> tuple[Any, bool]:
        """``(a fresh copy, True)`` for a cached key, else ``(a Future of the compile, False)``."""
        value = self.cache.get(key)
        if value is not None:
            return value.copy(), True
        future: Future[Any] = self.executor.submit(self._init_value_dispatch, key)
        return future, False

    def set_cache(self, key: tuple[str, str], value: Any) -> None:
        self.cache[key] = value

    def reset(self) -> None:
        self.cache.clear()


class ConstrainGrammarBackend(_Dispatch, _LocalBase):
    """A grammar backend with SGLang's methods, usable without SGLang installed.

    ``ConstrainGrammarBackend(tokenizer, vocab_size, eos_token_ids)`` as SGLang passes
    them to a registered backend, or ``compiler=`` a ready :class:`constrain.Compiler`.
    """


def register_with_sglang(name: str = "constrain", *, schema_options: Mapping[str, Any] | None = None) -> type:
    """Register a backend named ``name`` with the installed SGLang; returns its class.

    Builds the dispatch on SGLang's own ``BaseGrammarBackend`` (its cache and compile
    thread pool), registers a factory through ``register_grammar_backend`` and, where
    this SGLang has one, adds ``name`` to the ``--grammar-backend`` choices. Must run in
    the processes that parse the arguments and run the scheduler (docs/serving.md).
    """
    from sglang.srt.constrained import base_grammar_backend as base

    backend_class = type(
        "ConstrainSGLangBackend",
        (_Dispatch, base.BaseGrammarBackend),
        {"invalid_grammar": getattr(base, "INVALID_GRAMMAR_OBJ", None), "__module__": __name__},
    )

    def create(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> Any:
        options = dict(schema_options or {})
        if getattr(server_args, "constrained_json_disable_any_whitespace", False):
            options.setdefault("whitespace", "none")
        return backend_class(tokenizer, vocab_size, eos_token_ids, schema_options=options)

    base.register_grammar_backend(name, create)
    _add_backend_choice(name)
    return backend_class


def _add_backend_choice(name: str) -> None:
    """Let ``--grammar-backend name`` pass argument parsing (the choices list moved between versions)."""
    import importlib

    for module_name in ("sglang.srt.arg_groups.choices", "sglang.srt.server_args"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        adder = getattr(module, "add_grammar_backend_choices", None)
        choices = getattr(module, "GRAMMAR_BACKEND_CHOICES", None)
        if isinstance(choices, list) and name in choices:
            return
        if callable(adder):
            adder([name])
            return
        if isinstance(choices, list):
            choices.append(name)
            return
    logger.warning("constrain: found no --grammar-backend choices list to add %r to", name)

