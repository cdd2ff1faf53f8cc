"""Constraints that start mid-text (TriggeredGuide) and tool calls by name (tools_schema), on real tokenizers.

The oracle is independent of the guide: a text is in the language when, split at the
*first* occurrence of a trigger, the part after it is something the inner constraint's
own checker accepts (``re.fullmatch``, or ``json.loads`` + ``jsonschema``), followed by
what may follow (nothing, the end string and free text, or the end string and another
round). Token sequences are the tokenizer's own, plus ones built on purpose so that a
token straddles the trigger's end and the constrained part's start (``>{"``).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Callable, Sequence

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel, Field

import constrain
from constrain import ConfigurationError, TokenRejected, Trigger, TriggeredGuide, tools_schema
from constrain.guide import allocate_bitmask, bitmask_to_bool
from constrain.testing import load_offline_tokenizer, token_text, tokenize_continuation
from constrain.vocabulary import Vocabulary

import conftest

#: A byte-level BPE, a SentencePiece with byte fallback, and the 128k Llama-3 vocabulary
#: (conftest's list: the fast tier narrows it).
FAMILIES = conftest.FAMILIES

ANSWER = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}
ADD = {
    "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"],
}  # fmt: skip
OPENAI_TOOLS = [
    {"type": "function",
     "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER}},  # fmt: skip
    {"type": "function", "function": {"name": "add", "parameters": ADD}},
]


def _family(name: str, tokenizers: dict[str, Any],
            compilers: dict[str, constrain.Compiler]) -> tuple[str, Any, constrain.Compiler]:  # fmt: skip
    """One family's tokenizer and compiler, loaded once per session."""
    if name not in tokenizers:
        tokenizers[name] = load_offline_tokenizer(name)
    if name not in compilers:
        compilers[name] = constrain.Compiler(tokenizers[name])
    return name, tokenizers[name], compilers[name]


@pytest.fixture(scope="session", params=FAMILIES)
def setup(request: pytest.FixtureRequest, tokenizers: dict[str, Any],
          compilers: dict[str, constrain.Compiler]) -> tuple[str, Any, constrain.Compiler]:  # fmt: skip
    return _family(request.param, tokenizers, compilers)


@pytest.fixture(scope="session")
def small(
    tokenizers: dict[str, Any], compilers: dict[str, constrain.Compiler]
) -> tuple[Any, constrain.Compiler]:
    if "smollm2" not in tokenizers:
        tokenizers["smollm2"] = load_offline_tokenizer("smollm2")
    if "smollm2" not in compilers:
        compilers["smollm2"] = constrain.Compiler(tokenizers["smollm2"])
    return tokenizers["smollm2"], compilers["smollm2"]


# ---------------------------------------------------------------------- the oracle


def json_checker(schema: Any) -> Callable[[bytes], bool]:
    """Whether ``body`` is one JSON document valid under ``schema`` (no NaN/Infinity, strict UTF-8)."""

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    def check(body: bytes) -> bool:
        try:
            value = json.loads(body.decode("utf-8"), parse_constant=refuse)
        except (ValueError, UnicodeDecodeError):
            return False
        return jsonschema.Draft202012Validator(schema).is_valid(value)

    return check


def regex_checker(pattern: str) -> Callable[[bytes], bool]:
    return lambda body: re.fullmatch(pattern.encode(), body) is not None


OracleTrigger = tuple[bytes, Callable[[bytes], bool], "bytes | None"]


def in_language(text: bytes, triggers: Sequence[OracleTrigger], *, then: str = "eos",
                require_trigger: bool = True, first: bool = True,
                max_calls: int | None = None) -> bool:  # fmt: skip
    """The language of a TriggeredGuide, written out directly (no automaton).

    ``max_calls`` (with ``then="loop"``): after that many calls the rest is any text.
    """
    hits = [(text.find(start), k) for k, (start, _, _) in enumerate(triggers) if start in text]
    if not hits:
        return not (first and require_trigger)
    at, k = min(hits)
    start, check, end = triggers[k]
    rest = text[at + len(start):]
    if end is None:
        return check(rest)
    for j in range(len(rest) + 1):
        if rest[j:].startswith(end) and check(rest[:j]):
            tail = rest[j + len(end):]
            if then == "text" or (then == "eos" and not tail) or (then == "loop" and max_calls == 1):
                return True
            left = None if max_calls is None else max_calls - 1
            if then == "loop" and in_language(tail, triggers, then=then, first=False, max_calls=left):
                return True
    return False


def walk(guide: TriggeredGuide, vocabulary: Vocabulary, rng: random.Random, hints: np.ndarray, *,
         max_tokens: int = 80, eos_probability: float = 0.5) -> tuple[list[int], bool, list[Any]]:  # fmt: skip
    """A random walk that picks a hinted token (a piece of a trigger or a body) half the time.

    Uniform picks alone would almost never spell ``</think>``; hints make triggers, near
    misses (``</thi`` then something else) and straddling tokens common. Returns the ids,
    whether EOS ended the walk, and every state visited.
    """
    state = guide.initial_state
    taken: list[int] = []
    states = [state]
    eos = sorted(vocabulary.eos_token_ids)
    for _ in range(max_tokens):
        allowed = guide.allowed_tokens(state)
        allowed[eos] = False
        if guide.is_final(state) and (not allowed.any() or rng.random() < eos_probability):
            state = guide.advance(state, eos[0])
            states.append(state)
            return taken, True, states
        allowed[eos] = False
        ids = np.flatnonzero(allowed)
        assert ids.size, f"dead end in {state!r}"
        hinted = np.flatnonzero(allowed[: hints.size] & hints) if rng.random() < 0.5 else ids[:0]
        pool = hinted if hinted.size else ids
        token = int(pool[rng.randrange(pool.size)])
        state = guide.advance(state, token)
        taken.append(token)
        states.append(state)
    return taken, False, states


def hint_tokens(vocabulary: Vocabulary, texts: Sequence[str]) -> np.ndarray:
    """Tokens whose bytes occur inside one of ``texts``, as a bool mask."""
    data = [t.encode() for t in texts]
    hints = np.zeros(vocabulary.size, dtype=bool)
    hints[[i for i, b in enumerate(vocabulary.token_bytes) if b and any(b in d for d in data)]] = True
    return hints


def accepts(guide: TriggeredGuide, ids: Sequence[int]) -> bool:
    """Token by token: each in the mask (and the mask equal to the packed one), then EOS allowed."""
    state = guide.initial_state
    out = allocate_bitmask(guide.vocab_size)
    for token in ids:
        allowed = guide.allowed_tokens(state)
        guide.fill_bitmask(state, out)
        assert (bitmask_to_bool(out, guide.vocab_size) == allowed).all(), state
        if not allowed[token]:
            return False
        state = guide.advance(state, token)
    return guide.is_final(state)


def straddling(tokenizer: Any, vocabulary: Vocabulary, text: str, boundary: int) -> list[list[int]]:
    """Token sequences spelling ``text`` in which one token holds bytes on both sides of ``boundary``."""
    data = text.encode()
    index: dict[bytes, int] = {}
    for i, piece in enumerate(vocabulary.token_bytes):
        if piece:
            index.setdefault(piece, i)
    found = []
    for a in range(max(0, boundary - 8), boundary):
        for b in range(boundary + 1, min(len(data), boundary + 8) + 1):
            if data[a:b] not in index:
                continue
            head = tokenize_continuation(tokenizer, data[:a].decode()) if a else []
            tail = tokenize_continuation(tokenizer, data[b:].decode()) if b < len(data) else []
            ids = head + [index[data[a:b]]] + tail
            if token_text(vocabulary, ids) == data:
                found.append(ids)
    return found


def reference_mask(guide: TriggeredGuide, state: Any, token_ids: np.ndarray) -> np.ndarray:
    """Which of ``token_ids`` advance takes (the definition the mask must agree with)."""
    ok = np.zeros(token_ids.size, dtype=bool)
    for n, token in enumerate(token_ids.tolist()):
        try:
            guide.advance(state, token)
            ok[n] = True
        except TokenRejected:
            pass
    return ok


def check_masks(guide: TriggeredGuide, state: Any, sample: np.ndarray) -> None:
    """fill_bitmask == allowed_tokens, and both agree with advance on ``sample``."""
    allowed = guide.allowed_tokens(state)
    out = allocate_bitmask(guide.vocab_size)
    guide.fill_bitmask(state, out)
    assert (bitmask_to_bool(out, guide.vocab_size) == allowed).all()
    text = sample[~np.isin(sample, sorted(guide.vocabulary.eos_token_ids))]
    assert (reference_mask(guide, state, text) == allowed[text]).all(), state


def interesting(
    vocabulary: Vocabulary, rng: random.Random, strings: Sequence[str], extra: int = 800
) -> np.ndarray:
    """Tokens holding a byte of ``strings`` (where trigger logic acts) and a random sample of the rest."""
    wanted = set(b"".join(s.encode() for s in strings)) - set(b"abcdefghijklmnopqrstuvwxyz")
    hit = [i for i, b in enumerate(vocabulary.token_bytes) if b and wanted & set(b)]
    rest = rng.sample(range(vocabulary.size), extra)
    return np.unique(np.array(hit + rest, dtype=np.int64))


# ---------------------------------------------------------------------- (b) completeness, straddling tokens


REASONING_CASES: list[tuple[Any, list[str]]] = [
    (ANSWER, ['I think. </think>{"a": 1}', '<think>two plus two</think>{"a": 4}',
              'a </thin> is no </th trigger</think>{"a": -12}', '</think>{"a": 0}']),
    ({"enum": ["yes", "no"]}, ['Hmm.</think>"yes"', 'x</think>"no"']),
]  # fmt: skip


def test_reasoning_then_json_accepts_real_and_straddling_tokenizations(setup: tuple[str, Any, Any]) -> None:
    name, tokenizer, compiler = setup
    vocabulary = compiler.vocabulary
    straddles = 0
    for schema, texts in REASONING_CASES:
        guide = compiler.triggered(Trigger("</think>", compiler.json_schema(schema)))
        check = json_checker(schema)
        for text in texts:
            assert in_language(text.encode(), [(b"</think>", check, None)])
            assert accepts(guide, tokenize_continuation(tokenizer, text)), (name, text)
            boundary = text.index("</think>") + len("</think>")
            for ids in straddling(tokenizer, vocabulary, text, boundary):  # e.g. '>{"' or '>"'
                straddles += 1
                assert accepts(guide, ids), (name, [vocabulary.token_bytes[i] for i in ids])
        # invalid after the trigger, or no trigger: refused
        refused = ['I think</think>{"a": "x"}', "no trigger at all", 'x</think> {"a": 1}', 'x</think>"maybe"']
        for text in refused:
            if not in_language(text.encode(), [(b"</think>", check, None)]):
                assert not accepts(guide, tokenize_continuation(tokenizer, text)), text
    assert straddles, f"{name}: no token straddles the trigger's end in any text"


def test_token_past_the_trigger_must_start_the_inner_text(setup: tuple[str, Any, Any]) -> None:
    """After ``...</think``, a token ``>X`` is allowed exactly when the JSON guide takes ``X`` as a start."""
    name, tokenizer, compiler = setup
    vocabulary = compiler.vocabulary
    inner = compiler.json_schema(ANSWER)
    guide = compiler.triggered(Trigger("</think>", inner))
    state = guide.initial_state
    for token in tokenize_continuation(tokenizer, "so</think"):
        state = guide.advance(state, token)
    allowed = guide.allowed_tokens(state)
    seen_good = seen_bad = 0
    for token, piece in enumerate(vocabulary.token_bytes):
        if not piece or b">" not in piece:
            continue
        at = piece.index(b">")
        if piece[:at] != b"":
            continue  # does not complete the trigger here
        rest = piece[at + 1:]
        inner_state: Any = inner.initial_state
        takes = True
        for byte in rest:  # the inner guide's own byte DFA, by hand
            nxt = int(inner.index.dfa.row(inner_state)[byte])
            if nxt < 0:
                takes = False
                break
            inner_state = nxt
        assert allowed[token] == takes, (name, piece)
        if takes:
            seen_good += 1
            guide.advance(state, token)
        else:
            seen_bad += 1
            with pytest.raises(TokenRejected):
                guide.advance(state, token)
    assert seen_good >= 1 and seen_bad >= 1, name


@pytest.mark.parametrize(
    ("start", "end"), [("<tool_call>", "</tool_call>"), ("<tool_call>\n", "\n</tool_call>")]
)
def test_tool_calls_loop_with_straddles_at_both_ends(
    setup: tuple[str, Any, Any], start: str, end: str
) -> None:
    """Several calls, each a straddle candidate at its start and at its end (``>{"``, ``}}</``, ``}\n``)."""
    name, tokenizer, compiler = setup
    vocabulary = compiler.vocabulary
    guide = compiler.tool_calls(OPENAI_TOOLS, start=start, end=end, then="loop", require_trigger=False)
    schema = tools_schema(OPENAI_TOOLS)
    triggers = [(start.encode(), json_checker(schema), end.encode())]
    call_a = start + '{"name": "add", "arguments": {"x": 1, "y": 2}}' + end
    call_w = start + '{"name": "get_weather", "arguments": {"city": "Rome"}}' + end
    texts = ["Sure." + call_a, "Sure." + call_a + " and " + call_w + " done.", "No tool needed.", call_w]
    straddles = 0
    for text in texts:
        assert in_language(text.encode(), triggers, then="loop", require_trigger=False)
        assert accepts(guide, tokenize_continuation(tokenizer, text)), (name, text)
        if start in text:
            for at in (text.index(start) + len(start), text.index(end)):
                for ids in straddling(tokenizer, vocabulary, text, at):
                    straddles += 1
                    assert accepts(guide, ids), (name, [vocabulary.token_bytes[i] for i in ids])
    # SmolLM2's pre-tokenizer keeps '>', '}' and newlines apart, and Mistral spells a newline as a byte
    # piece: there no token straddles these markers (the reasoning test has SmolLM2's '>"').
    expected = name == "llama3" or (name == "mistral" and "\n" not in start)
    assert straddles or not expected, name
    wrong = start + '{"name": "add", "arguments": {"city": "Rome"}}' + end
    assert not accepts(guide, tokenize_continuation(tokenizer, wrong))
    once = compiler.tool_calls(OPENAI_TOOLS, start=start, end=end, then="eos")
    assert accepts(once, tokenize_continuation(tokenizer, "ok" + call_a))
    assert not accepts(once, tokenize_continuation(tokenizer, "ok" + call_a + " more"))
    assert not accepts(once, tokenize_continuation(tokenizer, "ok, no tool"))


def test_inner_part_that_may_go_on_meets_its_end_string(small: tuple[Any, constrain.Compiler]) -> None:
    r"""``\d+`` is final after every digit: "still digits" and "end string" live side by side."""
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    guide = compiler.triggered(Trigger("<n>", compiler.regex(r"\d+"), "</n>"), then="text")
    triggers = [(b"<n>", regex_checker(r"\d+"), b"</n>")]
    for text in ["a<n>12</n>b", "<n>1</n>", "x<n>9</n><n>"]:
        assert in_language(text.encode(), triggers, then="text")
        assert accepts(guide, tokenize_continuation(tokenizer, text)), text
        for ids in straddling(tokenizer, vocabulary, text, text.index("</n>")):
            assert accepts(guide, ids)
    for text in ["<n></n>", "<n>1a</n>", "<n>12"]:
        assert not accepts(guide, tokenize_continuation(tokenizer, text)), text


# ---------------------------------------------------------------------- (a) soundness, (c) masks


@pytest.mark.parametrize("then", ["eos", "loop"])
@pytest.mark.slow
def test_random_walks_stay_in_the_language(setup: tuple[str, Any, Any], then: str) -> None:
    name, _, compiler = setup
    vocabulary = compiler.vocabulary
    rng = random.Random(f"{name}-{then}")
    number = r"-?[1-9]\d{0,3}"
    triggers = [
        Trigger("<calc>", compiler.regex(number), "</calc>"),
        Trigger("<tool_call>", compiler.tools(OPENAI_TOOLS), "</tool_call>"),
    ]
    oracle = [(b"<calc>", regex_checker(number), b"</calc>"),
              (b"<tool_call>", json_checker(tools_schema(OPENAI_TOOLS)), b"</tool_call>")]  # fmt: skip
    hints = hint_tokens(vocabulary, ['x</calc><calc>-42</calc><tool_call>{"name": "add", "arguments": '
                                     '{"x": 1, "y": 2}}</tool_call>', '{"name": "get_weather", "arguments": '
                                     '{"city": "Oslo"}}'])  # fmt: skip
    sample = interesting(vocabulary, rng, ["<calc></calc><tool_call></tool_call>{}\":,"])
    ended = 0
    for n in range(12):
        bound = rng.choice([None, 0, 1, 3, 6])
        guide = TriggeredGuide(triggers, vocabulary, max_free_tokens=bound, then=then,
                               require_trigger=n % 2 == 0)  # fmt: skip
        ids, done, states = walk(guide, vocabulary, rng, hints, max_tokens=70)
        if n < 3:  # (c): packed mask == bool mask == what advance takes, on visited states
            for state in states[:: max(1, len(states) // 4)]:
                check_masks(guide, state, sample)
        if not done:
            continue
        ended += 1
        text = token_text(vocabulary, ids)
        assert in_language(text, oracle, then=then, require_trigger=n % 2 == 0), (name, text)
        if bound is not None:  # after `bound` tokens of free text, only the rest of a trigger
            hits = [text.find(s) for s, _, _ in oracle if s in text]
            if hits:
                first = min(hits)
                offsets = np.cumsum([len(vocabulary.token_bytes[i] or b"") for i in ids])
                after_bound = int(offsets[bound - 1]) if bound else 0
                assert first <= after_bound or len([o for o in offsets if o <= first]) <= bound, (name, text)
    assert ended >= 3, name


def test_bound_forces_the_trigger(small: tuple[Any, constrain.Compiler]) -> None:
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    inner = compiler.json_schema(ANSWER)
    guide = compiler.triggered(Trigger("</think>", inner), max_free_tokens=2)
    state = guide.initial_state
    for token in tokenize_continuation(tokenizer, "Hello there"):
        state = guide.advance(state, token)
    assert not guide.is_final(state)
    allowed = np.flatnonzero(guide.allowed_tokens(state))
    for token in allowed.tolist():  # each spells on from "" along "</think>", maybe into the JSON
        piece = vocabulary.token_bytes[token] or b""
        assert piece[:8] == b"</think>"[: len(piece)], piece
    assert guide.forced_bytes(state) == b"</think>{"  # the trigger, then the object's brace
    zero = compiler.triggered(Trigger("</think>", inner), max_free_tokens=0)
    for token in np.flatnonzero(zero.allowed_tokens(zero.initial_state)).tolist():
        assert (vocabulary.token_bytes[token] or b"").startswith(b"<"), token
    optional = compiler.triggered(Trigger("</think>", inner), max_free_tokens=0, require_trigger=False)
    assert optional.is_final(optional.initial_state)  # may still end instead of calling


def test_eos_and_finished(small: tuple[Any, constrain.Compiler]) -> None:
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    eos = min(vocabulary.eos_token_ids)
    guide = compiler.triggered(Trigger("</think>", compiler.json_schema(ANSWER)))
    start = guide.initial_state
    assert not guide.is_final(start) and not guide.allowed_tokens(start)[eos]
    with pytest.raises(TokenRejected):
        guide.advance(start, eos)
    state = start
    for token in tokenize_continuation(tokenizer, '</think>{"a": 7}'):
        state = guide.advance(state, token)
    assert guide.is_final(state) and guide.allowed_tokens(state)[eos]
    done = guide.advance(state, eos)
    assert guide.is_final(done) and np.flatnonzero(guide.allowed_tokens(done)).tolist() == sorted(
        vocabulary.eos_token_ids
    )
    assert guide.advance(done, eos) == done
    with pytest.raises(TokenRejected):
        guide.advance(done, tokenize_continuation(tokenizer, "x")[0])
    with pytest.raises(constrain.InvalidStateError):
        guide.allowed_tokens(3)  # type: ignore[arg-type]
    assert hash(state) == hash(frozenset(state))
    import pickle  # servers hand guides to worker processes by pickle

    copied = pickle.loads(pickle.dumps(guide))
    assert (copied.allowed_tokens(state) == guide.allowed_tokens(state)).all()


def test_inner_guide_without_byte_steps_must_start_at_a_token_boundary(
    small: tuple[Any, constrain.Compiler]
) -> None:
    """A guide of another kind (here a TriggeredGuide nested as the inner one) steps by tokens only."""
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    nested = compiler.triggered(Trigger("=", compiler.regex(r"\d{1,3}")), max_free_tokens=0)
    guide = compiler.triggered(Trigger("</think>", nested))
    state = guide.initial_state
    for token in tokenize_continuation(tokenizer, "hm</think"):
        state = guide.advance(state, token)
    for token in np.flatnonzero(guide.allowed_tokens(state)).tolist():
        piece = vocabulary.token_bytes[token] or b""
        if piece.startswith(b">"):
            assert piece == b">", piece  # the token that completes the trigger ends with it
    ids = tokenize_continuation(tokenizer, "hm</think") + tokenize_continuation(tokenizer, ">")
    ids += tokenize_continuation(tokenizer, "=42")
    assert accepts(guide, ids)


def test_grammar_inner_guide(small: tuple[Any, constrain.Compiler]) -> None:
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    guide = compiler.triggered(Trigger("<j>", compiler.grammar("json"), "</j>"), then="loop")
    oracle = [(b"<j>", lambda body: _loads(body), b"</j>")]
    for text in ['x<j>{"a": [1, 2]}</j> y', "<j>[]</j><j>3</j>"]:
        assert in_language(text.encode(), oracle, then="loop")
        assert accepts(guide, tokenize_continuation(tokenizer, text)), text
        for ids in straddling(tokenizer, vocabulary, text, text.index("<j>") + 3):
            assert accepts(guide, ids)
    rng = random.Random(3)
    hints = hint_tokens(vocabulary, ['<j>{"a": [1, 2.5, null]}</j>'])
    bounded = compiler.triggered(
        Trigger("<j>", compiler.grammar("json"), "</j>"), then="loop", max_free_tokens=2
    )
    ended = 0
    for _ in range(6):
        ids, done, _ = walk(bounded, vocabulary, rng, hints, max_tokens=40)
        if done:
            ended += 1
            assert in_language(token_text(vocabulary, ids), oracle, then="loop"), token_text(vocabulary, ids)
    assert ended


def _loads(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------- (f) a cap on calls, forced bytes


def free_text_mask(vocabulary: Vocabulary) -> np.ndarray:
    """What free text that may end allows: every token with text, and EOS."""
    mask = np.zeros(vocabulary.size, dtype=bool)
    mask[[i for i, b in enumerate(vocabulary.token_bytes) if b]] = True
    mask[sorted(vocabulary.eos_token_ids)] = True
    return mask


def first_calls(text: bytes, count: int) -> list[tuple[bytes, int]]:
    """The bodies of the first ``count`` tool calls and the offset just past each end string.

    Exact for ``OPENAI_TOOLS``: no string in their calls can hold ``</tool_call>`` (a city
    has at most 8 characters), so a call ends at the first end string after its trigger.
    """
    calls, at = [], 0
    while len(calls) < count and b"<tool_call>" in text[at:]:
        start = text.index(b"<tool_call>", at) + len(b"<tool_call>")
        if b"</tool_call>" not in text[start:]:
            break
        end = text.index(b"</tool_call>", start)
        at = end + len(b"</tool_call>")
        calls.append((text[start:end], at))
    return calls


def test_max_calls_makes_the_rest_free_text(setup: tuple[str, Any, Any]) -> None:
    """``max_calls=2``: two calls checked against their schema, then a third trigger opens nothing."""
    name, tokenizer, compiler = setup
    vocabulary = compiler.vocabulary
    schema = tools_schema(OPENAI_TOOLS)
    valid = json_checker(schema)
    trigger = Trigger("<tool_call>", compiler.tools(OPENAI_TOOLS), "</tool_call>")
    capped = compiler.triggered(trigger, then="loop", require_trigger=False, max_calls=2)
    uncapped = compiler.triggered(trigger, then="loop", require_trigger=False)
    oracle = [(b"<tool_call>", valid, b"</tool_call>")]
    free = free_text_mask(vocabulary)
    call_a = '<tool_call>{"name": "add", "arguments": {"x": 1, "y": 2}}</tool_call>'
    call_w = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
    two = "Sure." + call_a + " then " + call_w
    for tail in ["", " done.", " " + call_a, " <tool_call>not JSON</tool_call> x", "<tool_call>{"]:
        text = two + tail
        assert in_language(text.encode(), oracle, then="loop", require_trigger=False, max_calls=2)
        ids = tokenize_continuation(tokenizer, text)
        assert accepts(capped, ids), (name, text)
        expected = in_language(text.encode(), oracle, then="loop", require_trigger=False)
        assert accepts(uncapped, ids) == expected, (name, text)
        state, offset = capped.initial_state, 0
        for token in ids:  # every state past the second end string: exactly the free-text mask
            state = capped.advance(state, token)
            offset += len(vocabulary.token_bytes[token] or b"")
            if offset >= len(two.encode()):
                assert (capped.allowed_tokens(state) == free).all(), (name, text, offset)
    third = tokenize_continuation(tokenizer, two + " <tool_call>")
    by_name = compiler.tool_calls(OPENAI_TOOLS, then="loop", require_trigger=False, max_calls=2)
    for guide, opens in ((capped, False), (by_name, False), (uncapped, True)):  # uncapped: the third is guided
        state = guide.initial_state
        for token in third:
            state = guide.advance(state, token)
        assert (guide.allowed_tokens(state) == free).all() != opens, name
    with pytest.raises(TokenRejected):  # the uncapped guide's third call must be JSON
        uncapped.advance(state, tokenize_continuation(tokenizer, "x")[0])
    # random walks, the triggers forced where the bound says so: the first two calls are valid
    # calls, and from the second end string on every mask is free text's
    rng = random.Random(f"calls-{name}")
    hints = hint_tokens(vocabulary, [call_a + call_w, "</tool_call><tool_call>"])
    ended = twice = 0
    for n in range(8):
        guide = compiler.triggered(trigger, then="loop", max_calls=2, max_free_tokens=n % 3,
                                   require_trigger=n % 2 == 0)  # fmt: skip
        ids, done, states = walk(guide, vocabulary, rng, hints, max_tokens=120, eos_probability=0.05)
        text = token_text(vocabulary, ids)
        calls = first_calls(text, 2)
        for body, _ in calls:
            assert valid(body), (name, text)
        if len(calls) == 2:
            twice += 1
            offsets = np.cumsum([0] + [len(vocabulary.token_bytes[i] or b"") for i in ids])
            for state, offset in zip(states, offsets):
                if offset >= calls[1][1] and state != constrain.triggered.FINISHED:
                    assert (guide.allowed_tokens(state) == free).all(), (name, text, offset)
        if done:
            ended += 1
            required = n % 2 == 0
            assert in_language(text, oracle, then="loop", require_trigger=required, max_calls=2), (name, text)
    assert ended >= 3 and twice >= 1, (name, ended, twice)


def forced_by_bytes(guide: TriggeredGuide, state: Any, limit: int = 256) -> bytes:
    """Forced bytes the slow way: while the text may not end, try every byte a token has and go on
    where exactly one of them leaves a reading alive.

    Bytes are fed with the guide's byte-level step (``_feed``, the machine the language tests
    above check against the independent oracle); ``forced_bytes`` reads masks and the inner
    guides' own answers instead, so the two share no shortcut.
    """
    out = bytearray()
    alphabet = guide.vocabulary.byte_alphabet
    while len(out) < limit and not guide.is_final(state):
        alive = [(b, nxt) for b in range(256) if alphabet[b] and (nxt := guide._feed(state, bytes([b])))]
        if len(alive) != 1:
            break
        out.append(alive[0][0])
        state = frozenset(alive[0][1])
    return bytes(out)


@pytest.fixture(scope="session", params=[name for name in ("smollm2", "mistral") if name in FAMILIES])
def two_families(
    request: pytest.FixtureRequest, tokenizers: dict[str, Any], compilers: dict[str, constrain.Compiler]
) -> tuple[str, Any, constrain.Compiler]:
    """A byte-level BPE and a SentencePiece with byte fallback (the 128k vocabulary is left out: the
    brute-force oracle feeds 256 bytes per forced byte)."""
    return _family(request.param, tokenizers, compilers)


@pytest.mark.slow
def test_forced_bytes_equal_trying_every_byte(two_families: tuple[str, Any, Any]) -> None:
    """At every state of random walks, including states of two readings: what every continuation
    starts with, where the readings agree (``}`` + ``</tool_call>``), and nothing where they differ."""
    name, _, compiler = two_families
    vocabulary = compiler.vocabulary
    guides = {
        "trigger into JSON": compiler.triggered(
            Trigger("</think>", compiler.json_schema(ANSWER, whitespace="none")), max_free_tokens=1),
        "call into its end": compiler.triggered(
            Trigger("<tool_call>", compiler.tools(OPENAI_TOOLS, whitespace="none"), "</tool_call>"),
            then="loop", max_free_tokens=1, max_calls=2),
        "digits meet the end": compiler.triggered(
            Trigger("<n>", compiler.regex(r"\d{1,3}"), "</n>"), then="text", max_free_tokens=0),
        "grammar": compiler.triggered(
            Trigger("<j>", compiler.grammar("json"), "</j>"), then="loop", max_free_tokens=1),
    }  # fmt: skip
    call = '<tool_call>{"name":"add","arguments":{"x":1,"y":2}}</tool_call>'
    hints = hint_tokens(vocabulary, ['</think>{"a":12}', '<n>123</n><n>4</n>', '<j>{"a":[1,2]}</j>', call])
    rng = random.Random(f"forced-{name}")
    agreed = differed = 0
    for label, guide in guides.items():
        for _ in range(3):
            _, _, states = walk(guide, vocabulary, rng, hints, max_tokens=40, eos_probability=0.3)
            for state in states:
                forced = guide.forced_bytes(state)
                assert forced == forced_by_bytes(guide, state), (name, label, state)
                if len(state) > 1 and not guide.is_final(state):
                    agreed += bool(forced)
                    differed += not forced
    assert agreed and differed, (name, agreed, differed)


def test_configuration_errors(small: tuple[Any, constrain.Compiler]) -> None:
    _, compiler = small
    inner = compiler.regex(r"\d")
    with pytest.raises(ConfigurationError):
        compiler.triggered([])
    with pytest.raises(ConfigurationError):
        compiler.triggered([Trigger("<a>", inner), Trigger("x<a>", inner)])  # contains another
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", inner), then="loop")  # no end string to stop at
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", inner), max_free_tokens=-1)
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", inner), then="again")
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("", inner))
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", inner, ""))
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ConfigurationError):
            compiler.triggered(Trigger("<a>", inner, "</a>"), then="loop", max_calls=bad)
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", inner, "</a>"), then="text", max_calls=2)  # one call anyway
    other = constrain.Compiler(load_offline_tokenizer("mistral"))
    with pytest.raises(ConfigurationError):
        compiler.triggered(Trigger("<a>", other.regex(r"\d")))  # another vocabulary's guide
    with pytest.raises(ConfigurationError):
        tools_schema([{"type": "function", "function": {"name": "a"}}, {"name": "a", "parameters": {}}])
    with pytest.raises(ConfigurationError):
        tools_schema([42])
    with pytest.raises(ConfigurationError):
        tools_schema([])


# ---------------------------------------------------------------------- (d) tools by name


class Address(BaseModel):
    street: str = Field(max_length=10)
    zip: int


class Ship(BaseModel):
    """A tool as a Pydantic class: its name is the class name, its nested model a $def."""

    to: Address
    express: bool


class Refund(BaseModel):
    order: int = Field(ge=1)
    address: Address


TOOL_INPUTS: dict[str, Any] = {
    "openai": OPENAI_TOOLS,
    "pydantic": [Ship, Refund],
    "json_schema": [{"title": "get_weather", **WEATHER}, {"title": "add", **ADD}],
    "mapping": {"get_weather": WEATHER, "ship": Ship},
}

GOOD_CALLS: dict[str, list[Any]] = {
    "openai": [
        {"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"x": -3, "y": 40}},
    ],
    "pydantic": [
        {"name": "Ship", "arguments": {"to": {"street": "Main St", "zip": 12345}, "express": True}},
        {"name": "Refund", "arguments": {"order": 7, "address": {"street": "Elm", "zip": 1}}},
    ],
    "json_schema": [{"name": "add", "arguments": {"x": 0, "y": 1}}],
    "mapping": [{"name": "ship", "arguments": {"to": {"street": "A", "zip": 2}, "express": False}}],
}

BAD_CALLS: dict[str, list[Any]] = {
    "openai": [
        {"name": "add", "arguments": {"city": "Oslo"}},  # another tool's arguments
        {"name": "get_weather", "arguments": {"x": 1, "y": 2}},
        {"name": "get_weather", "arguments": {"city": "far too long a name"}},
        {"name": "delete_all", "arguments": {}},  # no such tool
        {"name": "add", "arguments": {"x": 1}},  # a required argument missing
    ],
    "pydantic": [
        {"name": "Refund", "arguments": {"to": {"street": "A", "zip": 1}, "express": True}},
        {"name": "Refund", "arguments": {"order": 0, "address": {"street": "Elm", "zip": 1}}},
        {"name": "Ship", "arguments": {"to": {"street": "A very long street", "zip": 1}, "express": True}},
    ],
    "json_schema": [{"name": "get_weather", "arguments": {"x": 0, "y": 1}}],
    "mapping": [{"name": "get_weather", "arguments": {"to": {"street": "A", "zip": 2}, "express": False}}],
}


@pytest.mark.parametrize("kind", sorted(TOOL_INPUTS))
def test_tools_accept_exactly_the_oracles_calls(kind: str, small: tuple[Any, constrain.Compiler]) -> None:
    tokenizer, compiler = small
    vocabulary = compiler.vocabulary
    schema = tools_schema(TOOL_INPUTS[kind])
    validator = jsonschema.Draft202012Validator(schema)
    guide = compiler.tools(TOOL_INPUTS[kind])
    by_name = dict(_params(TOOL_INPUTS[kind]))
    for call in GOOD_CALLS[kind]:
        assert validator.is_valid(call), call
        ids = tokenize_continuation(tokenizer, json.dumps(call))
        assert constrain.testing.accepts(guide, ids), call
    for call in BAD_CALLS[kind]:
        assert not validator.is_valid(call), call
        ids = tokenize_continuation(tokenizer, json.dumps(call))
        assert not constrain.testing.accepts(guide, ids), call
    rng = random.Random(kind)
    texts = constrain.testing.finished_walks(guide, vocabulary, rng, count=25, max_tokens=80)
    assert len(texts) >= 5
    for text in texts:
        call = json.loads(text)
        assert validator.is_valid(call), text
        params = by_name[call["name"]]  # the name picked the tool, and the arguments fit that tool
        jsonschema.validate(call["arguments"], params)


def _params(tools: Any) -> list[tuple[str, Any]]:
    """Each tool's parameters as a standalone schema, for the oracle (Pydantic's own schema)."""
    items = tools.items() if isinstance(tools, dict) else [(None, t) for t in tools]
    out = []
    for name, tool in items:
        if isinstance(tool, type):
            out.append((name or tool.__name__, tool.model_json_schema()))
        elif "function" in tool:
            out.append((tool["function"]["name"], tool["function"]["parameters"]))
        else:
            out.append((name or tool["title"], tool))
    return out


def test_tools_schema_hoists_definitions() -> None:
    schema = tools_schema([Ship, Refund])
    assert set(schema["$defs"]) == {"Ship.Address", "Refund.Address"}
    text = json.dumps(schema)
    assert '"#/$defs/Ship.Address"' in text and '"#/$defs/Refund.Address"' in text
    kids = {"type": "array", "items": {"$ref": "#"}}
    recursive = {"title": "tree", "type": "object", "properties": {"kids": kids}}
    branch = tools_schema([recursive])["anyOf"][0]
    assert branch["properties"]["arguments"]["properties"]["kids"]["items"] == {
        "$ref": "#/anyOf/0/properties/arguments"
    }
    jsonschema.validate({"name": "tree", "arguments": {"kids": [{"kids": []}]}}, tools_schema([recursive]))


# ---------------------------------------------------------------------- (e) the real model


@pytest.mark.slow
def test_real_model_reasons_then_answers_in_json(model_and_tokenizer: tuple[Any, Any],
                                                model_compiler: constrain.Compiler) -> None:  # fmt: skip
    from constrain.sampling import generate

    model, tokenizer = model_and_tokenizer
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    answer = model_compiler.json_schema(schema)
    guide = model_compiler.triggered(Trigger("</think>", answer), max_free_tokens=40)
    question = ("How many legs do 3 spiders have? Think step by step inside <think> ... </think>, "
                'then give the answer as JSON like {"answer": 5}.')  # fmt: skip
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                           add_generation_prompt=True) + "<think>\n"  # fmt: skip
    result = generate(model, tokenizer, prompt, guide, model_compiler.vocabulary,
                      chat=False, max_new_tokens=90)  # fmt: skip
    assert result.complete, result.text
    free, trigger, body = result.text.partition("</think>")
    assert trigger and free.strip(), result.text
    jsonschema.validate(json.loads(body), schema)


@pytest.mark.slow
def test_real_model_through_the_transformers_logits_processor(model_and_tokenizer: tuple[Any, Any],
                                                             model_compiler: constrain.Compiler) -> None:  # fmt: skip
    import torch
    from transformers import LogitsProcessorList

    from constrain.integrations.transformers import LogitsProcessor

    model, tokenizer = model_and_tokenizer
    guide = model_compiler.tool_calls(OPENAI_TOOLS, max_free_tokens=8)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3? Use the add tool: <tool_call>{...}</tool_call>"}],
        tokenize=False, add_generation_prompt=True,
    )  # fmt: skip
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=70, do_sample=False,
                             logits_processor=LogitsProcessorList([LogitsProcessor(guide)]))  # fmt: skip
    new = out[0, inputs["input_ids"].shape[1]:].tolist()
    eos = model_compiler.vocabulary.eos_token_ids
    assert new[-1] in eos, tokenizer.decode(new)
    text = token_text(model_compiler.vocabulary, [t for t in new if t not in eos])
    oracle = [(b"<tool_call>", json_checker(tools_schema(OPENAI_TOOLS)), b"</tool_call>")]
    assert in_language(text, oracle), text
