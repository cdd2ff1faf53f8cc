"""The serving adapters, driven by replaying the call sequence of vLLM's and SGLang's schedulers.

Neither engine runs here (no GPU, not installed). The drivers below play what their
schedulers do with a structured-output object, in the order they do it, over a real
tokenizer (SmolLM2's) and real compiled guides:

* vLLM (``vllm/v1/structured_output/__init__.py``, ``StructuredOutputManager``): a
  request's grammar is compiled once per ``(type, spec)``; each step the scheduler
  cuts the draft tokens with ``validate_tokens``, then fills one bitmask row per draft
  position of every request into one shared tensor (accepting each draft token to
  reach the next position, then rolling all of them back), writes an all-allowed row
  for terminated requests, and after sampling calls ``accept_tokens`` with what was
  generated;
* SGLang (``sampling_batch_info.update_regex_vocab_mask`` and ``grammar_manager``):
  grammars come from the backend's cache as ``copy()``s, every step allocates a mask,
  fills the rows of unfinished requests, moves it and applies it to the logits; then
  ``accept_token`` per request, with jump-forward where the grammar forces text.

The "model" is a seeded RNG; outputs are checked by oracles that share nothing with
constrain (``json`` + ``jsonschema``, ``re``, the choice list, ``lark``'s own parser),
on the tokenizer's own decoding of the ids.
"""

from __future__ import annotations

import enum
import json
import multiprocessing
import pickle
import random
import re
import sys
from typing import Any

import jsonschema
import lark
import numpy as np
import pytest
import torch

import constrain
from constrain import bitmask_size, bitmask_to_bool
from constrain.errors import BitmaskError, ConfigurationError, InvalidStateError
from constrain.integrations.sglang import ConstrainGrammarBackend, ConstrainGrammarObject
from constrain.integrations.vllm import ConstrainBackend, ConstrainGrammar, looks_like_gbnf

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]{1,8}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
REGEX = r"\d{3}-[a-z]{2,4}"
CHOICES = ["yes", "no", "maybe later"]
LARK = r"""
?start: list
list: "[" [value ("," value)*] "]"
?value: list | INT
INT: /[1-9][0-9]{0,2}|0/
"""


class Options(enum.Enum):
    """A stand-in with the member names of vLLM's ``StructuredOutputOptions`` (values are auto numbers)."""

    JSON = enum.auto()
    JSON_OBJECT = enum.auto()
    REGEX = enum.auto()
    GRAMMAR = enum.auto()
    CHOICE = enum.auto()
    STRUCTURAL_TAG = enum.auto()


#: request id → (request type, spec as vLLM's get_structured_output_key serialises it, oracle name)
REQUESTS: dict[str, tuple[Options, str, str]] = {
    "json": (Options.JSON, json.dumps(SCHEMA), "schema"),
    "regex": (Options.REGEX, REGEX, "regex"),
    "choice": (Options.CHOICE, json.dumps(CHOICES), "choice"),
    "lark": (Options.GRAMMAR, LARK, "lark"),
    "json-again": (Options.JSON, json.dumps(SCHEMA), "schema"),  # joins later, shares the compiled guide
}


def oracle(kind: str, text: str) -> None:
    """Raise unless ``text`` is a complete, valid output for the constraint ``kind``."""
    if kind == "schema":
        jsonschema.validate(json.loads(text), SCHEMA)
    elif kind == "regex":
        assert re.fullmatch(REGEX, text), text
    elif kind == "choice":
        assert text in CHOICES, text
    elif kind == "lark":
        lark.Lark(LARK, parser="lalr").parse(text)
        assert isinstance(json.loads(text), list), text
    elif kind == "json-object":
        assert isinstance(json.loads(text), dict), text
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.fixture(scope="module")
def tokenizer(smollm2: Any) -> Any:
    return smollm2


@pytest.fixture(scope="module")
def backend(tokenizer: Any) -> ConstrainBackend:
    return ConstrainBackend(compiler=constrain.Compiler(tokenizer))


@pytest.fixture(scope="module")
def eos(backend: ConstrainBackend) -> int:
    return min(backend.compiler.vocabulary.eos_token_ids)


def row_mask(bitmask: torch.Tensor, row: int, vocab_size: int) -> np.ndarray:
    return bitmask_to_bool(bitmask[row].numpy(), vocab_size)


# ---------------------------------------------------------------------------- the vLLM replay


class VLLMReplay:
    """Plays vLLM's scheduler around a :class:`ConstrainBackend`, with speculative decoding (k drafts)."""

    def __init__(
        self, backend: ConstrainBackend, tokenizer: Any, seed: int, k: int = 3, max_seqs: int = 8
    ) -> None:
        self.backend, self.tokenizer, self.k = backend, tokenizer, k
        self.rng = random.Random(seed)
        self.vocab_size = backend.vocab_size
        self.eos = min(backend.compiler.vocabulary.eos_token_ids)
        self.bitmask = backend.allocate_token_bitmask(max_seqs * (1 + k))
        self.grammars: dict[str, ConstrainGrammar] = {}
        self.outputs: dict[str, list[int]] = {}
        self.finished_at: dict[str, int] = {}
        #: per request: the mask before each output token (what a worker replay must reproduce)
        self.masks: dict[str, list[np.ndarray]] = {}
        self.stats = {"drafts": 0, "invalid drafts": 0, "accepted drafts": 0, "rollbacks": 0}

    def add(self, request_id: str) -> None:
        request_type, spec, _ = REQUESTS[request_id]
        self.grammars[request_id] = self.backend.compile_grammar(request_type, spec)
        self.outputs[request_id] = []
        self.masks[request_id] = []

    def draft(self, grammar: ConstrainGrammar) -> list[int]:
        """A drafter that knows nothing of the grammar: mostly plausible tokens, sometimes a random id."""
        guide, state, tokens = grammar.guide, grammar.state, []
        for _ in range(self.k):
            allowed = np.flatnonzero(guide.allowed_tokens(state))
            if self.rng.random() < 0.7 and allowed.size:
                token = int(allowed[self.rng.randrange(allowed.size)])
                tokens.append(token)
                state = guide.advance(state, token)
                if token == self.eos:
                    break
            else:
                tokens.append(self.rng.randrange(self.vocab_size))  # almost always invalid here
                state = None
                break
        while len(tokens) < self.k:  # after an invalid token the drafter keeps guessing blindly
            tokens.append(self.rng.randrange(self.vocab_size))
        return tokens

    def step(self, number: int) -> None:
        active = [r for r in self.grammars if r not in self.finished_at]
        self.rng.shuffle(active)  # the batch order changes between steps, so do the rows
        # 1. the drafter proposes k tokens; the scheduler keeps the grammar-valid prefix
        scheduled: dict[str, list[int]] = {}
        proposals: dict[str, list[int]] = {}
        for request_id in active:
            grammar = self.grammars[request_id]
            proposal = self.draft(grammar)
            before = grammar.state
            valid = grammar.validate_tokens(proposal)
            assert grammar.state == before, "validate_tokens must not advance"
            assert valid == proposal[: len(valid)]
            self.stats["drafts"] += len(proposal)
            self.stats["invalid drafts"] += len(proposal) - len(valid)
            scheduled[request_id] = valid
            proposals[request_id] = proposal
        # 2. the batch bitmask: one row per draft position plus one; garbage from the last step stays
        self.bitmask.copy_(torch.randint(-(2**31), 2**31 - 1, self.bitmask.shape, dtype=torch.int32))
        rows: dict[str, list[int]] = {}
        index = 0
        for request_id in active:
            grammar = self.grammars[request_id]
            advanced = 0
            rows[request_id] = []
            for token in [*scheduled[request_id], -1]:
                if grammar.is_terminated():
                    self.bitmask[index].fill_(-1)  # what vLLM writes for a terminated request
                else:
                    grammar.fill_bitmask(self.bitmask, index)
                rows[request_id].append(index)
                if token != -1 and not grammar.is_terminated():
                    assert grammar.accept_tokens(request_id, [token])
                    advanced += 1
                index += 1
            if advanced:
                grammar.rollback(advanced)
                self.stats["rollbacks"] += 1
        # 3. the "model" verifies the drafts against the masks and samples one more token
        for request_id in active:
            grammar = self.grammars[request_id]
            draft = scheduled[request_id]
            masks = [row_mask(self.bitmask, row, self.vocab_size) for row in rows[request_id]]
            for position, token in enumerate(draft):
                assert masks[position][token], "validate_tokens kept a token its mask forbids"
            if len(draft) < self.k and not (draft and draft[-1] == self.eos):
                cut = proposals[request_id][len(draft)]
                assert not masks[len(draft)][cut], "validate_tokens cut a token its mask allows"
            generated: list[int] = []
            for position in range(len(masks)):
                if position < len(draft) and self.rng.random() < 0.7:
                    generated.append(draft[position])  # the target agrees with the draft
                    self.stats["accepted drafts"] += 1
                    if draft[position] == self.eos:
                        break
                    continue
                generated.append(self.sample(masks[position]))  # recovered or bonus token
                break
            # 4. the scheduler feeds what was generated to the grammar
            self.masks[request_id].extend(masks[: len(generated)])
            assert grammar.accept_tokens(request_id, generated)
            for token in generated:
                if token == self.eos:
                    break
                self.outputs[request_id].append(token)
            if grammar.is_terminated():
                self.finished_at[request_id] = number

    def sample(self, mask: np.ndarray) -> int:
        allowed = np.flatnonzero(mask)
        assert allowed.size, "a live request's mask allows nothing"
        if mask[self.eos] and self.rng.random() < 0.9:
            return self.eos
        text = allowed[allowed != self.eos]
        return int(text[self.rng.randrange(text.size)]) if text.size else self.eos


def test_vllm_replay_batch_with_speculative_decoding(backend: ConstrainBackend, tokenizer: Any) -> None:
    replay = VLLMReplay(backend, tokenizer, seed=14)
    for request_id in ("json", "regex", "choice", "lark"):
        replay.add(request_id)
    for number in range(80):
        if number == 3:
            replay.add("json-again")  # a request arriving mid-run, same constraint as "json"
        replay.step(number)
        if len(replay.finished_at) == len(replay.grammars):
            break
    assert set(replay.finished_at) == set(REQUESTS), (replay.finished_at, replay.outputs)
    assert len(set(replay.finished_at.values())) > 1, "requests should finish at different steps"
    # the speculative path was really exercised: invalid drafts cut, drafts accepted, rollbacks made
    assert replay.stats["invalid drafts"] > 0 and replay.stats["accepted drafts"] > 0, replay.stats
    assert replay.stats["rollbacks"] > 0, replay.stats
    # same constraint, one compiled guide, two independent requests
    first, again = replay.grammars["json"], replay.grammars["json-again"]
    assert first.guide is again.guide and first is not again
    assert replay.outputs["json"] != replay.outputs["json-again"]
    for request_id, ids in replay.outputs.items():
        text = tokenizer.decode(ids)
        oracle(REQUESTS[request_id][2], text)


def test_vllm_rollback_restores_earlier_masks(backend: ConstrainBackend, tokenizer: Any, eos: int) -> None:
    grammar = backend.compile_grammar(Options.JSON, json.dumps(SCHEMA))
    ids = tokenizer.encode('{"name": "bob", "age": 42, "ok": true}', add_special_tokens=False)
    bitmask = backend.allocate_token_bitmask(4)
    masks = []
    for position, token in enumerate(ids):
        grammar.fill_bitmask(bitmask, position % 4)
        masks.append(bitmask[position % 4].clone())
        assert grammar.accept_tokens("r", [token])
    grammar.fill_bitmask(bitmask, 1)
    masks.append(bitmask[1].clone())  # the complete object: EOS allowed
    assert row_mask(bitmask, 1, backend.vocab_size)[eos]
    assert grammar.accept_tokens("r", [eos]) and grammar.is_terminated()
    grammar.fill_bitmask(bitmask, 0)
    only_eos = row_mask(bitmask, 0, backend.vocab_size)
    assert only_eos[eos] and only_eos.sum() == len(backend.compiler.vocabulary.eos_token_ids)
    assert grammar.validate_tokens([ids[0]]) == [] and grammar.accept_tokens("r", [ids[0], ids[1]])  # ignored
    assert grammar.num_processed_tokens == len(ids) + 1
    for back in (1, 3, 4):  # EOS, then further into the object
        grammar.rollback(back)
        assert not grammar.is_terminated()
        where = grammar.num_processed_tokens
        grammar.fill_bitmask(bitmask, 3)
        assert torch.equal(bitmask[3], masks[where]), where
    grammar.rollback(0)
    grammar.rollback(-2)  # nothing, as vLLM's backends do
    assert grammar.num_processed_tokens == len(ids) + 1 - 8
    with pytest.raises(InvalidStateError):
        grammar.rollback(10_000)
    grammar.reset()
    grammar.fill_bitmask(bitmask, 2)
    assert torch.equal(bitmask[2], masks[0]) and grammar.num_processed_tokens == 0


def test_vllm_accept_is_all_or_nothing(backend: ConstrainBackend, tokenizer: Any, eos: int) -> None:
    grammar = backend.compile_grammar("regex", REGEX)
    good = tokenizer.encode("123-ab", add_special_tokens=False)
    bad = tokenizer.encode("x", add_special_tokens=False)
    state = grammar.state
    assert not grammar.accept_tokens("r", [good[0], *bad])
    assert grammar.state == state and grammar.num_processed_tokens == 0
    assert not grammar.accept_tokens("r", [-1]) and not grammar.accept_tokens("r", [10**9])
    assert grammar.validate_tokens([*good, eos, *bad]) == [*good, eos]  # nothing after EOS
    assert grammar.validate_tokens(bad + good) == []
    assert not grammar.accept_tokens("r", [eos])  # EOS before the text is complete
    assert grammar.accept_tokens("r", good) and not grammar.is_terminated()
    assert grammar.accept_tokens("r", [eos, *bad]) and grammar.is_terminated()  # stops at EOS
    assert grammar.num_processed_tokens == len(good) + 1


def test_vllm_compile_kinds_and_cache(backend: ConstrainBackend, tokenizer: Any) -> None:
    assert backend.compile_grammar(Options.CHOICE, json.dumps(CHOICES)).guide is (
        backend.compile_grammar("CHOICE", json.dumps(CHOICES)).guide
    )
    assert backend.compile_grammar(Options.JSON, json.dumps(SCHEMA)).guide is not (
        backend.compile_grammar(Options.REGEX, REGEX).guide
    )
    gbnf = 'root ::= "(" inner ")"\ninner ::= "x" | "(" inner ")"'
    assert looks_like_gbnf(gbnf) and not looks_like_gbnf(LARK)
    assert not looks_like_gbnf('# a ::= b\nstart: "a"')
    for request_type, spec, text, ok in [
        (Options.GRAMMAR, gbnf, "((x))", True),
        (Options.GRAMMAR, gbnf, "((x)", False),
        (Options.JSON_OBJECT, "", '{"any": [1, {"b": null}]}', True),
        (Options.JSON_OBJECT, "", "[1]", False),
        (Options.GRAMMAR, "json", '{"a": [true, 1.5]}', True),
    ]:
        grammar = backend.compile_grammar(request_type, spec)
        ids = tokenizer.encode(text, add_special_tokens=False)
        accepted = grammar.validate_tokens(ids) == ids and grammar.accept_tokens("r", ids)
        done = accepted and grammar.accept_tokens("r", [min(grammar.guide.vocabulary.eos_token_ids)])
        assert bool(done) == ok, (request_type, text)
    with pytest.raises(ConfigurationError):
        backend.compile_grammar(Options.STRUCTURAL_TAG, "{}")
    with pytest.raises(ConfigurationError):
        backend.compile_grammar(Options.CHOICE, "[]")
    with pytest.raises(constrain.ConstrainError):
        backend.compile_grammar(Options.REGEX, "(unclosed")


def test_vllm_bitmask_buffers(backend: ConstrainBackend) -> None:
    grammar = backend.compile_grammar(Options.REGEX, REGEX)
    words = bitmask_size(backend.vocab_size)
    tensor = backend.allocate_token_bitmask(3)
    assert tensor.dtype == torch.int32 and tuple(tensor.shape) == (3, words) and bool((tensor == -1).all())
    grammar.fill_bitmask(tensor, 1)
    expected = grammar.guide.allowed_tokens(grammar.state)
    assert np.array_equal(row_mask(tensor, 1, backend.vocab_size), expected)
    assert bool((tensor[0] == -1).all()) and bool((tensor[2] == -1).all())  # other rows untouched
    array = np.full((2, words), 7, dtype=np.int32)  # numpy int32 buffers work too
    grammar.fill_bitmask(array, -1)
    assert np.array_equal(bitmask_to_bool(array[1], backend.vocab_size), expected) and (array[0] == 7).all()
    wide = torch.full((2, words + 3), -1, dtype=torch.int32)  # a wider row: the extra words are cleared
    grammar.fill_bitmask(wide, 0)
    assert bool((wide[0, words:] == 0).all())
    assert np.array_equal(row_mask(wide[:, :words].contiguous(), 0, backend.vocab_size), expected)
    strided = torch.full((words, 2), -1, dtype=torch.int32).T  # rows not contiguous: written through a copy
    grammar.fill_bitmask(strided, 1)
    assert np.array_equal(bitmask_to_bool(strided[1].numpy(), backend.vocab_size), expected)
    with pytest.raises(BitmaskError):
        grammar.fill_bitmask(torch.zeros((2, words), dtype=torch.float32), 0)
    with pytest.raises(BitmaskError):
        grammar.fill_bitmask(torch.zeros((2, words - 1), dtype=torch.int32), 0)
    with pytest.raises(BitmaskError):
        grammar.fill_bitmask(tensor, 3)


# ---------------------------------------------------------------------------- compiled guides in workers


def _worker_masks(payload: bytes) -> list[bytes]:
    """In a worker process: unpickle a compiled guide, replay a request's tokens, return its packed masks."""
    guide, tokens = pickle.loads(payload)
    grammar = ConstrainGrammar(guide)
    bitmask = np.zeros((1, bitmask_size(guide.vocab_size)), dtype=np.int32)
    out = []
    for token in tokens:
        grammar.fill_bitmask(bitmask, 0)
        out.append(bitmask[0].tobytes())
        assert grammar.accept_tokens("worker", [token])
    return out


@pytest.mark.slow
def test_pickled_compiled_guides_give_identical_masks(backend: ConstrainBackend, tokenizer: Any) -> None:
    replay = VLLMReplay(backend, tokenizer, seed=7)
    for request_id in ("json", "regex", "choice", "lark"):
        replay.add(request_id)
    for number in range(80):
        replay.step(number)
        if len(replay.finished_at) == len(replay.grammars):
            break
    assert set(replay.finished_at) == set(replay.grammars)
    payloads, expected = [], []
    for request_id, grammar in replay.grammars.items():
        tokens = grammar._walk.tokens  # the accepted tokens, EOS included
        payloads.append(pickle.dumps((grammar.guide, tokens)))
        expected.append(replay.masks[request_id])
    # in this process, from the pickled bytes
    local = [_worker_masks(payload) for payload in payloads]
    # and in two spawned worker processes (nothing inherited: the pickle carries the guide)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        spawned = pool.map(_worker_masks, payloads)
    for got, want in [*zip(local, expected), *zip(spawned, expected)]:
        assert len(got) == len(want)
        for mask, wanted in zip(got, want):
            unpacked = bitmask_to_bool(np.frombuffer(mask, dtype=np.int32), backend.vocab_size)
            assert np.array_equal(unpacked, wanted)


# ---------------------------------------------------------------------------- the SGLang replay

SGLANG_KEYS = {
    "json": ("json", json.dumps(SCHEMA)),
    "regex": ("regex", REGEX),
    "ebnf": ("ebnf", 'root ::= "[" item ("," item)* "]"\nitem ::= [0-9] | "[" item "]"'),
    "any": ("json", "$$ANY$$"),
    "json-again": ("json", json.dumps(SCHEMA)),
}


def _sglang_oracle(request_id: str, text: str) -> None:
    if request_id in ("json", "json-again"):
        oracle("schema", text)
    elif request_id == "regex":
        oracle("regex", text)
    elif request_id == "ebnf":
        assert re.fullmatch(r"\[(\[*[0-9]\]*)(,\[*[0-9]\]*)*\]", text), text
        assert isinstance(json.loads(text), list)
    else:
        json.loads(text)


@pytest.mark.slow
def test_sglang_replay_with_jump_forward(tokenizer: Any, backend: ConstrainBackend) -> None:
    sglang = ConstrainGrammarBackend(compiler=backend.compiler)
    vocab_size = sglang.vocab_size
    eos = min(sglang.compiler.vocabulary.eos_token_ids)
    grammars: dict[str, ConstrainGrammarObject] = {}
    for request_id in ("json", "regex", "ebnf", "any"):  # first sight of each key: a compile future
        value, hit = sglang.get_cached_or_future_value(SGLANG_KEYS[request_id])
        assert not hit
        grammar = value.result()
        assert isinstance(grammar, ConstrainGrammarObject)
        sglang.set_cache(SGLANG_KEYS[request_id], grammar.copy())
        grammars[request_id] = grammar
    again, hit = sglang.get_cached_or_future_value(SGLANG_KEYS["json-again"])
    assert hit and again.guide is grammars["json"].guide and again is not grammars["json"]
    grammars["json-again"] = again
    bad, _ = sglang.get_cached_or_future_value(("regex", "(unclosed"))
    assert bad.result() is None  # SGLang's INVALID_GRAMMAR_OBJ when SGLang is installed

    generator = torch.Generator().manual_seed(3)
    outputs: dict[str, list[int]] = {r: [] for r in grammars}
    jumps = 0
    order = list(grammars)
    for _ in range(120):
        live = [r for r in order if not grammars[r].finished]
        if not live:
            break
        first = grammars[live[0]]
        mask = first.allocate_vocab_mask(vocab_size=vocab_size, batch_size=len(order), device="cpu")
        for i, request_id in enumerate(order):
            grammar = grammars[request_id]
            if not grammar.finished and not grammar.is_terminated():
                grammar.fill_vocab_mask(mask, i)
        mask = first.move_vocab_mask(mask, "cpu")
        logits = torch.randn((len(order), vocab_size), generator=generator)
        logits[:, eos] += 4.0  # a model keen to stop, so that requests end
        first.apply_vocab_mask(logits, mask)
        picks = torch.argmax(logits, dim=-1).tolist()
        for i, request_id in enumerate(order):
            grammar = grammars[request_id]
            if grammar.finished:
                assert torch.isfinite(logits[i]).all()  # a finished row is left open
                continue
            allowed = bitmask_to_bool(mask[i].numpy(), vocab_size)
            assert torch.isfinite(logits[i]).sum().item() == allowed.sum()  # apply_vocab_mask masked exactly
            token = picks[i]
            assert allowed[token]
            grammar.accept_token(token)
            if grammar.is_terminated():
                grammar.finished = True
                continue
            outputs[request_id].append(token)
            helper = grammar.try_jump_forward(tokenizer)
            if helper is not None:  # SGLang appends the forced text and retokenizes the output
                text, next_state = grammar.jump_forward_str_state(helper)
                extended = tokenizer.decode(outputs[request_id]) + text
                new_ids = tokenizer.encode(extended, add_special_tokens=False)
                grammar.jump_and_retokenize(outputs[request_id], new_ids, next_state)
                outputs[request_id] = new_ids
                jumps += 1
    assert all(g.finished for g in grammars.values()), {r: tokenizer.decode(o) for r, o in outputs.items()}
    assert jumps > 0
    for request_id, ids in outputs.items():
        _sglang_oracle(request_id, tokenizer.decode(ids))


def test_sglang_accept_rollback_and_copy(tokenizer: Any, backend: ConstrainBackend) -> None:
    sglang = ConstrainGrammarBackend(compiler=backend.compiler)
    grammar = sglang.dispatch_regex(REGEX)
    eos = min(sglang.compiler.vocabulary.eos_token_ids)
    ids = tokenizer.encode("123-abc", add_special_tokens=False)
    mask = grammar.allocate_vocab_mask(sglang.vocab_size, 2, "cpu")
    seen = []
    for token in ids:
        grammar.fill_vocab_mask(mask, 1)
        seen.append(mask[1].clone())
        grammar.accept_token(token)
    with pytest.raises(ValueError):
        grammar.accept_token(tokenizer.encode("!", add_special_tokens=False)[0])
    assert grammar.accepted_tokens == ids
    grammar.accept_token(eos)
    assert grammar.is_terminated()
    grammar.accept_token(ids[0])  # after EOS: ignored
    grammar.rollback(1)
    assert not grammar.is_terminated()
    grammar.rollback(len(ids) - 1)
    grammar.fill_vocab_mask(mask, 0)
    assert torch.equal(mask[0], seen[1])
    fresh = grammar.copy()
    assert fresh.guide is grammar.guide and fresh.accepted_tokens == []
    fresh.fill_vocab_mask(mask, 0)
    assert torch.equal(mask[0], seen[0])
    assert sglang.dispatch_structural_tag("{}") is None
    assert sglang.dispatch_ebnf('start: "a"+').guide.backend == "cfg"


def test_adapters_import_without_the_engines() -> None:
    assert "vllm" not in sys.modules and "sglang" not in sys.modules
    from constrain.integrations import vllm as adapter

    with pytest.raises(ImportError):
        adapter.install()
