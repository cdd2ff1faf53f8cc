"""The guide shell: the protocol's common behaviour, checked the same way on all three guide kinds.

``constrain.core.shell.GuideShell`` owns EOS, the finished state, ``TokenRejected``, the
bitmask checks and the mask cache for every backend; these tests hold each kind to the
same contract with a real tokenizer, and check that the sampler reaches ``forced_bytes``
through the shell (and still runs a guide that implements the bare protocol only).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import constrain
from constrain import Trigger
from constrain.core.shell import GuideShell, capabilities
from constrain.vocabulary import tokenize_continuation

GRAMMAR = r"""
start: CHOICE ": hello world " DIGIT
CHOICE: "a" | "b"
DIGIT: /[0-9]/
"""

#: kind → (build the guide, a text it accepts)
KINDS: dict[str, tuple[Callable[[constrain.Compiler], Any], str]] = {
    "regex": (lambda c: c.regex(r"[ab]: hello world [0-9]"), "a: hello world 7"),
    "cfg": (lambda c: c.grammar(GRAMMAR), "b: hello world 3"),
    "triggered": (lambda c: c.triggered(Trigger("</think>", c.regex(r"[ab]: hello world [0-9]"))),
                  "hmm, let me see</think>a: hello world 5"),
}  # fmt: skip


@pytest.fixture(scope="module")
def compiler(compilers: dict[str, constrain.Compiler], smollm2: object) -> constrain.Compiler:
    if "smollm2" not in compilers:
        compilers["smollm2"] = constrain.Compiler(smollm2)
    return compilers["smollm2"]


@pytest.fixture(params=sorted(KINDS))
def case(
    request: pytest.FixtureRequest, compiler: constrain.Compiler, smollm2: object
) -> tuple[Any, list[int]]:
    build, text = KINDS[request.param]
    guide = build(compiler)
    assert isinstance(guide, GuideShell) and guide.backend == request.param
    return guide, tokenize_continuation(smollm2, text)


def _walk(guide: Any, ids: list[int]) -> list[Any]:
    states = [guide.initial_state]
    for token_id in ids:
        states.append(guide.advance(states[-1], token_id))
    return states


def test_eos_exactly_where_final_and_masks_agree(case: tuple[Any, list[int]]) -> None:
    guide, ids = case
    eos = sorted(guide.vocabulary.eos_token_ids)
    states = _walk(guide, ids)
    assert not guide.is_final(states[0]) and guide.is_final(states[-1])
    for state in states:
        allowed = guide.allowed_tokens(state)
        assert allowed.dtype == np.bool_ and allowed.shape == (guide.vocab_size,)
        assert all(allowed[e] == guide.is_final(state) for e in eos)
        out = constrain.allocate_bitmask(guide.vocab_size)
        guide.fill_bitmask(state, out)
        assert np.array_equal(constrain.bitmask_to_bool(out, guide.vocab_size), allowed)
        guide.fill_bitmask(state, out)  # again, from the cache
        assert np.array_equal(constrain.bitmask_to_bool(out, guide.vocab_size), allowed)
        assert np.array_equal(guide.allowed_token_ids(state), np.flatnonzero(allowed))
        assert guide.allowed_token_ids(state).dtype == np.int32


def test_after_eos_only_eos(case: tuple[Any, list[int]]) -> None:
    guide, ids = case
    eos = min(guide.vocabulary.eos_token_ids)
    done = guide.advance(_walk(guide, ids)[-1], eos)
    assert done == guide.finished and all(state != guide.finished for state in _walk(guide, ids))
    assert guide.is_final(done)
    assert np.array_equal(guide.allowed_token_ids(done), sorted(guide.vocabulary.eos_token_ids))
    assert guide.advance(done, eos) == done  # padding for finished batch rows
    assert guide.forced_bytes(done) == b""
    with pytest.raises(constrain.TokenRejected, match="already ended") as caught:
        guide.advance(done, ids[0])
    assert caught.value.token_id == ids[0] and caught.value.state == done
    hash(done)


def test_token_rejected_says_why(case: tuple[Any, list[int]]) -> None:
    guide, ids = case
    pieces = guide.vocabulary.token_bytes
    # the first state that refuses some text token (free text before a trigger takes them all)
    state, refused = next(
        (s, i) for s in _walk(guide, ids) if not guide.is_final(s)
        for i in np.flatnonzero(~guide.allowed_tokens(s)).tolist() if i < len(pieces) and pieces[i]
    )  # fmt: skip
    eos = guide.eos_token_ids
    special = next((i for i, piece in enumerate(pieces) if piece is None and i not in eos), None)
    cases = [(refused, "continue"), (min(guide.eos_token_ids), "EOS before the text is complete"),
             (guide.vocab_size + 3, "outside the vocabulary")]  # fmt: skip
    if special is not None:
        cases.append((special, "special token"))
    for token_id, reason in cases:
        with pytest.raises(constrain.TokenRejected, match=reason) as caught:
            guide.advance(state, token_id)
        assert caught.value.token_id == token_id and caught.value.state == state
    with pytest.raises(constrain.InvalidStateError):
        guide.advance(state, "7")  # not an id at all


def test_bad_bitmasks_are_refused(case: tuple[Any, list[int]]) -> None:
    guide, _ = case
    words = constrain.bitmask_size(guide.vocab_size)
    for bad in (np.zeros(words, dtype=np.float32), np.zeros((2, words), dtype=np.int32),
                np.zeros(words + 1, dtype=np.int32), np.zeros(words * 2, dtype=np.int32)[::2],
                [0] * words):  # fmt: skip
        with pytest.raises(constrain.BitmaskError):
            guide.fill_bitmask(guide.initial_state, bad)


def test_foreign_states_are_refused(case: tuple[Any, list[int]], compiler: constrain.Compiler) -> None:
    guide, _ = case
    others = [compiler.regex("x").initial_state, compiler.grammar(GRAMMAR).initial_state,
              compiler.triggered(Trigger("<t>", compiler.regex("x"))).initial_state]  # fmt: skip
    foreign = [s for s in others if not _valid(guide, s)]
    foreign += ["nope", None, 1.5, [1], 10**9, frozenset({(99,)})]
    out = constrain.allocate_bitmask(guide.vocab_size)
    for state in foreign:
        for call in (guide.is_final, guide.allowed_tokens, guide.allowed_token_ids,
                     lambda s: guide.advance(s, 5), lambda s: guide.fill_bitmask(s, out)):  # fmt: skip
            with pytest.raises(constrain.InvalidStateError):
                call(state)


def _valid(guide: Any, state: Any) -> bool:
    try:
        guide.is_final(state)
    except constrain.InvalidStateError:
        return False
    return True


# ---------------------------------------------------------------------- the sampler, through the shell

torch = pytest.importorskip("torch")


class _FlatModel:
    """Every logit equal: greedy sampling takes the lowest allowed id, so runs are deterministic."""

    def __init__(self, width: int) -> None:
        self.width = width

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, use_cache: bool,
                past_key_values: Any) -> Any:  # fmt: skip
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.width), past_key_values=None)

    __call__ = forward


class _ProtocolOnly:
    """A guide from outside the package: the protocol and nothing else."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.vocab_size = inner.vocab_size

    @property
    def initial_state(self) -> Any:
        return self._inner.initial_state

    def allowed_tokens(self, state: Any) -> Any:
        return self._inner.allowed_tokens(state)

    def advance(self, state: Any, token_id: int) -> Any:
        return self._inner.advance(state, token_id)

    def is_final(self, state: Any) -> bool:
        return bool(self._inner.is_final(state))

    def fill_bitmask(self, state: Any, out: Any) -> None:
        self._inner.fill_bitmask(state, out)


#: kind → (a guide whose text flat logits can complete, the texts it allows). The triggered guide
#: is bounded to no free text, so the trigger itself is forced (greedy free text would never end).
FORCING: dict[str, tuple[Callable[[constrain.Compiler], Any], str]] = {
    "regex": (KINDS["regex"][0], r"[ab]: hello world [0-9]"),
    "cfg": (KINDS["cfg"][0], r"[ab]: hello world [0-9]"),
    "triggered": (
        lambda c: c.triggered(Trigger("</think>", c.regex(r"[ab]: hello world [0-9]")), max_free_tokens=0),
        r"</think>[ab]: hello world [0-9]",
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(FORCING))
def test_sampler_fast_forwards_through_forced_bytes(
    kind: str, compiler: constrain.Compiler, smollm2: Any
) -> None:
    import re

    from constrain.sampling import generate

    build, pattern = FORCING[kind]
    guide = build(compiler)
    vocabulary = compiler.vocabulary
    model = _FlatModel(vocabulary.size)

    def run(g: Any, fast_forward: bool) -> Any:
        return generate(model, smollm2, "Say it.", g, vocabulary, max_new_tokens=60, chat=False,
                        fast_forward=fast_forward)  # fmt: skip

    fast, slow = run(guide, True), run(guide, False)
    assert fast.complete and slow.complete
    assert re.fullmatch(pattern, fast.text) and re.fullmatch(pattern, slow.text)
    assert fast.fast_forwarded > 0 and fast.forward_passes < slow.forward_passes
    after_first = guide.advance(guide.initial_state, slow.token_ids[0])
    assert guide.forced_bytes(after_first), "the guide declares forced bytes where the sampler skipped passes"
    # a protocol-only guide still runs: nothing is forced, so every token takes a pass
    bare = run(_ProtocolOnly(guide), True)
    assert bare.complete and bare.fast_forwarded == 0 and bare.token_ids == slow.token_ids
    assert capabilities(_ProtocolOnly(guide)).forced_bytes(after_first) == b""
    assert capabilities(_ProtocolOnly(guide)).model_class is None
    assert capabilities(guide) is guide
