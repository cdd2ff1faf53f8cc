"""Constraints that start mid-text: free text until a trigger, then a guide; and tool calls by name.

A reasoning model writes ``<think> … </think>`` and only then the answer that must fit
a schema; a tool-calling model chats freely and opens ``<tool_call>`` when it wants a
tool, and only what follows must be the tool's arguments. :class:`TriggeredGuide` is
that shape as one guide: free text until one of several *trigger* strings, then the
trigger's own inner guide, then EOS — or an *end* string (``</tool_call>``) and, after
it, EOS, free text, or free text that may open another trigger (several tool calls).

Why bytes and not tokens: a tokenizer does not know where the trigger ends. ``</think>{"``
may well be spelled ``</``, ``think``, ``>{"``, and then the last token holds the end of
the trigger *and* the start of the constrained part. The guide therefore runs on the
bytes of the generated text: it finds triggers with an Aho–Corasick automaton over
bytes (so the *first* occurrence of any trigger opens its guide, exactly), and feeds
the bytes a token holds past the trigger to the inner guide at once. That needs a
byte-level step on the inner guide, which both backends have: a regex guide walks its
byte DFA (``index.dfa``), a grammar guide runs lark's lexer and parser over bytes
(``feed_bytes``). A guide of another kind offers no such step, so there the token that
completes the trigger must end exactly at the trigger's end (and the end string starts
at a token boundary) — sound, and documented in ``docs/triggers.md``.

The same reasoning applies where the inner guide ends: ``}</tool_call>`` may be spelled
``}</``, ``tool``, ... The inner language may go on after a point where it could end
(``\\d+``), so a state is a small *set* of configurations, the way an NFA is simulated:
"still inside the guide" and "already in the end string" side by side until the bytes
tell them apart. Sets stay tiny (one or two members) because they only fork where the
inner guide is final and the next byte also starts the end string.

States are frozensets of tuples (immutable, hashable); :data:`FINISHED` is the state
after EOS, where only EOS is allowed again. The guide is the engine under
:class:`~constrain.core.shell.GuideShell`, which owns EOS, the finished state, the
messages and the mask cache.

:func:`tools_schema` builds the JSON Schema of "one tool call, picked by name": a union
of ``{"name": <const>, "arguments": <that tool's parameters>}`` objects. Its consts are
disjoint, so the union is exact; ``Compiler.tools`` compiles it, ``Compiler.tool_calls``
wraps it between ``<tool_call>`` and ``</tool_call>``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from .core.cache import BoundedCache
from .core.limits import Limits
from .core.shell import GuideShell, capabilities
from .errors import ConfigurationError, InvalidStateError, TokenRejected
from .guide import Guide, bitmask_size, bitmask_to_bool
from .vocabulary import Vocabulary

__all__ = ["Trigger", "TriggeredGuide", "FINISHED", "tools_schema"]

Config = tuple[Any, ...]
State = frozenset[Config]

# Kinds of configuration (the first item of each tuple):
_FREE = 0  # (_FREE, node, count, done): free text; ``node`` is the trigger automaton's state
_INNER = 1  # (_INNER, k, q, done): inside trigger k's guide, in its (byte-level) state q
_END = 2  # (_END, k, i, done): i bytes of trigger k's end string read
# ``done`` counts the calls completed before: exactly under ``max_calls`` (what follows an end
# string depends on it), else only 0 or 1 in a free configuration (whether its stretch may end)
# and always 0 inside a call (nothing depends on it there), so states do not multiply.
_TEXT = 3  # (_TEXT,): free text to the end, no more triggers
_DONE = 4  # (_DONE,): only EOS may follow

#: The state after EOS: final, and only EOS is allowed (padding for finished batch rows).
FINISHED: State = frozenset({(-1,)})

_THEN = ("eos", "text", "loop")


@dataclass(frozen=True)
class Trigger:
    """``start`` (a literal string) opens ``guide``; ``end``, if given, must follow once it is final.

    Without ``end`` the sequence ends (EOS) when the guide is final. The strings are
    matched on the generated *text*: a special token (one with no text, such as some
    tokenizers' ``<|python_tag|>``) can never be a trigger.
    """

    start: str
    guide: Guide[Any]
    end: str | None = None


# ---------------------------------------------------------------------- byte-level steps on inner guides


class _Bytes:
    """A byte-level view of an inner guide: step one byte, ask whether the text may end or go on."""

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        raise NotImplementedError

    def final(self, state: Hashable) -> bool:
        raise NotImplementedError

    def live(self, state: Hashable) -> bool:
        """Whether tokens can still complete the text from ``state`` (checked where a token ends)."""
        raise NotImplementedError


class _RegexBytes(_Bytes):
    """A regex guide's byte DFA: its states are the guide's own states."""

    def __init__(self, guide: Any) -> None:
        from .regex.automaton import DEAD

        self.guide = guide
        self.dfa = guide.index.dfa
        self.dead = DEAD
        # Where a lone byte is no token, a byte-live DFA state may still be a token dead end.
        self.bytes_are_tokens = guide.vocabulary.spells_every_byte_alone

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        nxt = int(self.dfa.row(state)[byte])
        return None if nxt == self.dead else nxt

    def final(self, state: Hashable) -> bool:
        return bool(self.dfa.is_final(state))

    def live(self, state: Hashable) -> bool:
        if self.bytes_are_tokens:
            return True
        return bool(self.dfa.is_final(state)) or self.guide.index.row(state).size > 0


class _GrammarBytes(_Bytes):
    """A grammar guide's lexer and parser over bytes (``feed_bytes``), viability where a token ends."""

    def __init__(self, guide: Any) -> None:
        self.guide = guide

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        new: Hashable | None = self.guide.feed_bytes(state, bytes((byte,)))
        return new

    def final(self, state: Hashable) -> bool:
        return bool(self.guide.is_final(state))

    def live(self, state: Hashable) -> bool:
        return bool(self.guide.viable(state))


def _byte_view(guide: Any) -> _Bytes | None:
    """The byte-level step of ``guide``, or None for a guide that only steps by tokens."""
    from .cfg import CFGGuide
    from .regex.guide import RegexGuide

    if isinstance(guide, RegexGuide):
        return _RegexBytes(guide)
    if isinstance(guide, CFGGuide):
        return _GrammarBytes(guide)
    return None


# ---------------------------------------------------------------------- the trigger automaton


@dataclass(frozen=True)
class _Matcher:
    """Aho–Corasick over the trigger bytes: ``delta`` follows every byte, ``goto`` only trie edges.

    ``complete[n]`` is the trigger that node ``n`` completes (-1: none). No trigger
    contains another (checked), so a completion is always a trie leaf and at most one
    trigger ends at any byte.
    """

    delta: NDArray[np.int32]
    goto: NDArray[np.int32]
    complete: NDArray[np.int32]
    depth: tuple[int, ...]

    @classmethod
    def build(cls, words: Sequence[bytes]) -> "_Matcher":
        children: list[dict[int, int]] = [{}]
        depth = [0]
        ends = [-1]
        for k, word in enumerate(words):
            node = 0
            for byte in word:
                if byte not in children[node]:
                    children.append({})
                    depth.append(depth[node] + 1)
                    ends.append(-1)
                    children[node][byte] = len(children) - 1
                node = children[node][byte]
            ends[node] = k
        size = len(children)
        goto = np.full((size, 256), -1, dtype=np.int32)
        for node, edges in enumerate(children):
            for byte, child in edges.items():
                goto[node, byte] = child
        delta = np.zeros((size, 256), dtype=np.int32)
        fail = [0] * size
        order = list(children[0].values())
        delta[0] = np.where(goto[0] >= 0, goto[0], 0)
        for node in order:  # breadth first: a node's failure link is shallower, so done before it
            for byte in range(256):
                child = int(goto[node, byte])
                if child >= 0:
                    fail[child] = int(delta[fail[node], byte]) if node else 0
                    order.append(child)
                    delta[node, byte] = child
                else:
                    delta[node, byte] = delta[fail[node], byte]
        return cls(delta, goto, np.asarray(ends, dtype=np.int32), tuple(depth))


# ---------------------------------------------------------------------- the guide


class TriggeredGuide(GuideShell[State]):
    """Free text until a trigger string, then the trigger's guide, then EOS or an end string.

    ``triggers``: one :class:`Trigger` or several, each opening its own guide (all built
    over the same vocabulary). The *first* occurrence of any trigger in the free text
    opens its guide; no trigger may contain another (it could never come first).

    ``max_free_tokens``: a bound on each stretch of free text, in tokens (every token
    that holds free text counts, including the one that starts the stretch). Once that
    many were taken, only tokens that go on spelling a trigger are allowed (the trigger
    is forced), or EOS where the free text may end.

    ``require_trigger``: True (the default) — the text must reach a trigger (a reasoning
    block must be followed by its answer); False — it may end (EOS) without ever calling a
    tool.

    ``then``: what follows a trigger's ``end`` string: ``"eos"`` (the default, one call and
    stop), ``"text"`` (free text to the end, no more triggers) or ``"loop"`` (free text that
    may open another trigger: several tool calls). The stretches after the first may always
    end. A trigger without ``end`` is followed by EOS, so ``then`` other than ``"eos"`` needs
    every trigger to have one (where else would the guide's part stop?).

    ``max_calls``: with ``then="loop"``, at most this many calls. After the last one's end
    string the rest is what ``then="text"`` writes after its one call: free text that may
    end, in which a trigger is plain text and opens nothing (so ``max_calls=1`` is
    ``then="text"``). Without it a model may call tools for as long as it is let run.
    """

    backend = "triggered"

    def __init__(
        self,
        triggers: Trigger | Sequence[Trigger],
        vocabulary: Vocabulary | None = None,
        *,
        max_free_tokens: int | None = None,
        require_trigger: bool = True,
        then: str = "eos",
        max_calls: int | None = None,
    ) -> None:
        listed: list[Trigger] | None = (
            [triggers] if isinstance(triggers, Trigger)
            else list(triggers) if isinstance(triggers, (list, tuple)) else None
        )  # fmt: skip
        if not listed or not all(isinstance(t, Trigger) for t in listed):
            raise ConfigurationError(
                f"triggers must be a Trigger or a non-empty list of them, not {triggers!r}"
            )
        if vocabulary is None:
            vocabulary = capabilities(listed[0].guide).vocabulary
        if not isinstance(vocabulary, Vocabulary):
            raise ConfigurationError(
                "a TriggeredGuide needs the Vocabulary its inner guides were compiled for"
            )
        if max_free_tokens is not None and (
            isinstance(max_free_tokens, bool) or not isinstance(max_free_tokens, int) or max_free_tokens < 0
        ):
            raise ConfigurationError(
                f"max_free_tokens must be None or an integer ≥ 0, not {max_free_tokens!r}"
            )
        if not isinstance(require_trigger, bool):
            raise ConfigurationError(f"require_trigger must be a bool, not {require_trigger!r}")
        if then not in _THEN:
            raise ConfigurationError(f"then must be one of {_THEN}, not {then!r}")
        if max_calls is not None:
            if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
                raise ConfigurationError(f"max_calls must be None or an integer ≥ 1, not {max_calls!r}")
            if then != "loop":
                raise ConfigurationError(
                    f"max_calls bounds the calls of then='loop'; then={then!r} makes one call"
                )
        starts: list[bytes] = []
        for trigger in listed:
            for name, text in (("start", trigger.start), ("end", trigger.end)):
                if text is None and name == "end":
                    continue
                if not isinstance(text, str) or not text:
                    raise ConfigurationError(f"a trigger's {name} must be a non-empty str, not {text!r}")
                missing = sorted({b for b in text.encode("utf-8") if not vocabulary.byte_alphabet[b]})
                if missing:
                    raise ConfigurationError(
                        f"the trigger {name} {text!r} holds bytes no token has ({bytes(missing)!r}): "
                        "it could never be generated"
                    )
            if getattr(trigger.guide, "vocab_size", None) != vocabulary.size:
                width = getattr(trigger.guide, "vocab_size", None)
                raise ConfigurationError(
                    f"the guide of trigger {trigger.start!r} masks {width} tokens, the vocabulary has "
                    f"{vocabulary.size}: compile every guide with one Compiler"
                )
            if then != "eos" and trigger.end is None:
                raise ConfigurationError(
                    f"then={then!r} needs an end string on every trigger ({trigger.start!r} has none): "
                    "free text after a guide needs a marker where the guide's part stops"
                )
            starts.append(trigger.start.encode("utf-8"))
        for i, a in enumerate(starts):
            for j, b in enumerate(starts):
                if i != j and b in a:
                    raise ConfigurationError(
                        f"trigger {a.decode()!r} contains trigger {b.decode()!r}, "
                        "which would always come first"
                    )
        super().__init__(vocabulary, FINISHED, mask_cache_size=Limits.max_cached_masks)
        self.triggers: tuple[Trigger, ...] = tuple(listed)
        self.max_free_tokens = max_free_tokens
        self.require_trigger = require_trigger
        self.then = then
        self.max_calls = max_calls
        # ``model_class`` stays None: the text the sampler returns is the whole text, with no
        # single class to validate it into.
        self._starts = tuple(starts)
        self._ends = tuple(None if t.end is None else t.end.encode("utf-8") for t in listed)
        self._views = tuple(_byte_view(t.guide) for t in listed)
        self._matcher = _Matcher.build(starts)
        self._words = bitmask_size(self.vocab_size)

        def text_bits() -> NDArray[np.int32]:
            spelled = np.zeros(self.vocab_size, dtype=bool)
            spelled[[i for i, b in enumerate(vocabulary.token_bytes) if b]] = True
            return _pack(spelled)

        self._text_bits = vocabulary.shared(("trigger-text-bits", self.vocab_size), text_bits)
        self._config_masks: BoundedCache[NDArray[np.int32]] = BoundedCache(Limits.max_cached_masks)
        self._free_masks: dict[tuple[int, bool, int], NDArray[np.int32]] = {}
        #: The most calls one token can complete, plus one (see ``_representative``).
        self._reach = max((len(b) for b in vocabulary.token_bytes if b), default=0) + 1
        self._remainders: dict[tuple[int, bytes, int], bool] = {}
        self._initial = self._closure({(_FREE, 0, 0, 0)})

    def __repr__(self) -> str:
        starts = ", ".join(repr(t.start) for t in self.triggers)
        calls = "" if self.max_calls is None else f", max_calls={self.max_calls}"
        return f"TriggeredGuide({starts}, then={self.then!r}{calls})"

    # ------------------------------------------------------------------ the engine

    @property
    def initial_state(self) -> State:
        return self._initial

    def _can_end(self, state: State) -> bool:
        return any(self._config_final(c) for c in state)

    def _text_mask(self, state: State) -> NDArray[np.int32]:
        packed = np.zeros(self._words, dtype=np.int32)
        for config in state:
            packed |= self._config_mask(config)
        return packed

    def _step(self, state: State, token_id: int) -> State | None:
        """Every configuration takes the token's bytes; None where none of them can."""
        data = self._text_of(token_id)
        if not data:
            return None
        new: set[Config] = set()
        for config in state:
            new |= self._take(config, token_id, data)
        return frozenset(new) if new else None

    def _rejection(self, state: State, text: bytes) -> str:
        return f"its bytes {text!r} do not continue the text"

    def forced_bytes(self, state: State, limit: int = 256) -> bytes:
        """The bytes every continuation from ``state`` starts with (for the sampler's fast-forward).

        Walked in steps, each fed to the state before the next is asked, until the text may
        end. A state of one configuration forces the rest of an end string, the rest of a
        forced trigger (past ``max_free_tokens``, while one trigger is possible), or what the
        inner guide forces while it cannot end. A state of several readings (an inner part
        that could stop here beside the end string it would run into) forces what every
        token it allows starts with, read off its mask as ``CFGGuide.forced_bytes`` does: the
        readings agree on ``</tool_call>`` after an object closed with no whitespace allowed,
        and differ after ``\\d+``'s digit (another digit, or ``<``). So a forced trigger runs
        on into its guide's forced start, and an inner part that must close runs on into its
        end string. An inner guide without a byte-level step ends the walk after its step:
        bytes cannot be fed to it, and a reading dropped there would make the rest look forced.
        """
        self._check_state(state)
        out = bytearray()
        current = state
        while current and current != FINISHED and len(out) < limit and not self._can_end(current):
            step = self._forced_step(current, limit - len(out))
            if not step:
                break
            out += step
            if any(c[0] == _INNER and self._views[c[1]] is None for c in current):
                break
            current = self._run(current, step)
        return bytes(out)

    def _forced_step(self, state: State, limit: int) -> bytes:
        """The next forced bytes of a state that may not end (one step of :meth:`forced_bytes`)."""
        if len(state) != 1:
            return self.vocabulary.common_prefix(self.allowed_token_ids(state))[:limit]
        (config,) = state
        if config[0] == _END:
            end = self._ends[config[1]]
            return b"" if end is None else end[config[2]:][:limit]
        if config[0] == _FREE and self._forced(config):
            out, node = bytearray(), config[1]
            while len(out) < limit and self._matcher.complete[node] < 0:
                edges = np.flatnonzero(self._matcher.goto[node] >= 0)
                if edges.size != 1:
                    break
                out.append(int(edges[0]))
                node = int(self._matcher.goto[node, edges[0]])
            return bytes(out)
        if config[0] == _INNER:
            return capabilities(self.triggers[config[1]].guide).forced_bytes(config[2], limit)
        return b""

    def _check_state(self, state: object) -> State:
        """``state``, if it has the shape of this guide's states (else :class:`InvalidStateError`)."""
        if isinstance(state, frozenset) and state and all(
            isinstance(c, tuple) and c and c[0] in (-1, _FREE, _INNER, _END, _TEXT, _DONE) for c in state
        ):
            return state
        raise InvalidStateError(
            f"{state!r} is not a state of this guide: states are what its initial_state and advance hand out"
        )

    # ------------------------------------------------------------------ the byte-level machine

    def _forced(self, config: Config) -> bool:
        return self.max_free_tokens is not None and config[2] >= self.max_free_tokens

    def _config_final(self, config: Config) -> bool:
        kind = config[0]
        if kind == _FREE:
            return bool(config[3]) or not self.require_trigger
        if kind == _INNER:
            view = self._views[config[1]]
            guide = self.triggers[config[1]].guide
            final = view.final(config[2]) if view is not None else guide.is_final(config[2])
            return self._ends[config[1]] is None and final
        return kind in (_TEXT, _DONE)

    def _inner_final(self, k: int, q: Hashable) -> bool:
        view = self._views[k]
        return view.final(q) if view is not None else bool(self.triggers[k].guide.is_final(q))

    def _closure(self, configs: Iterable[Config]) -> State:
        """Add the end string's start wherever the inner guide could stop here."""
        out = set(configs)
        for config in list(out):
            if config[0] != _INNER or self._ends[config[1]] is None:
                continue
            if self._inner_final(config[1], config[2]):
                out.add((_END, config[1], 0, config[3]))
        return frozenset(out)

    def _after_end(self, done: int) -> Config:
        """What follows an end string, ``done`` calls having been completed before this one."""
        if self.then == "eos":
            return (_DONE,)
        if self.then == "text" or (self.max_calls is not None and done + 1 >= self.max_calls):
            return (_TEXT,)
        return (_FREE, 0, 0, done + 1 if self.max_calls is not None else 1)

    def _representative(self, done: int) -> int:
        """The call count that stands for ``done`` in the mask caches.

        What a token may do depends on the calls left only as far as one token can reach: each
        call takes a byte at least, so no token completes more calls than it has bytes. Counts
        with as many calls left, up to that reach, share their masks; without this, a loop of
        calls under a large ``max_calls`` walked the vocabulary again, and kept another mask,
        for every call.
        """
        if self.max_calls is None:
            return 0
        return self.max_calls - min(self.max_calls - done, self._reach)

    def _opened(self, done: int) -> int:
        """The count a call opened after ``done`` calls carries (only ``max_calls`` reads it)."""
        return done if self.max_calls is not None else 0

    def _step_byte(self, config: Config, byte: int) -> Config | None:
        """One byte from one configuration (before the closure); None where the byte is refused."""
        kind = config[0]
        if kind == _FREE:
            table = self._matcher.goto if self._forced(config) else self._matcher.delta
            node = int(table[config[1], byte])
            if node < 0:
                return None
            k = int(self._matcher.complete[node])
            if k >= 0:
                return (_INNER, k, self.triggers[k].guide.initial_state, self._opened(config[3]))
            return (_FREE, node, config[2], config[3])
        if kind == _INNER:
            view = self._views[config[1]]
            if view is None:  # no byte-level step: the trigger must end where a token ends
                return None
            q = view.step(config[2], byte)
            return None if q is None else (_INNER, config[1], q, config[3])
        if kind == _END:
            end = self._ends[config[1]]
            i = config[2]
            if end is None or end[i] != byte:
                return None
            return self._after_end(config[3]) if i + 1 == len(end) else (_END, config[1], i + 1, config[3])
        if kind == _TEXT:
            return config
        return None

    def _feed(self, configs: Iterable[Config], data: bytes) -> set[Config]:
        """The configurations after ``data`` (one token's bytes, or a tail of them), counts not yet moved."""
        current = self._run(configs, data)
        return {c for c in current if c[0] != _INNER or self._live(c)}

    def _run(self, configs: Iterable[Config], data: bytes) -> State:
        """The configurations after ``data`` byte by byte, before the viability check at a token's end.

        Without that check, for a point that may lie inside a token (fast-forward's walk).
        """
        current = self._closure(configs)
        for byte in data:
            stepped = (self._step_byte(c, byte) for c in current)
            current = self._closure(c for c in stepped if c is not None)
            if not current:
                break
        return current

    def _live(self, config: Config) -> bool:
        view = self._views[config[1]]
        return True if view is None else view.live(config[2])

    def _count(self, config: Config) -> Config:
        """A token was taken: one more token of free text in a free configuration."""
        if config[0] != _FREE or self.max_free_tokens is None:
            return config
        return (_FREE, config[1], min(config[2] + 1, self.max_free_tokens), config[3])

    def _take(self, config: Config, token_id: int, data: bytes) -> set[Config]:
        """The configurations one token leads to from one configuration."""
        if config[0] == _INNER and self._views[config[1]] is None:
            guide = self.triggers[config[1]].guide
            try:
                q = guide.advance(config[2], token_id)
            except TokenRejected:
                return set()
            return set(self._closure({(_INNER, config[1], q, config[3])}))
        return {self._count(c) for c in self._feed({config}, data)}

    # ------------------------------------------------------------------ masks

    def _config_mask(self, config: Config) -> NDArray[np.int32]:
        """The text tokens one configuration allows (EOS is the state's business), packed."""
        kind = config[0]
        if kind == _FREE:
            key = (int(config[1]), self._forced(config), self._representative(config[3]))
            mask = self._free_masks.get(key)
            if mask is None:
                mask = self._free_masks[key] = self._free_mask(*key)
            return mask
        if kind == _TEXT:
            return self._text_bits
        if kind == _DONE:
            return np.zeros(self._words, dtype=np.int32)
        cached = self._config_masks.get(config)
        if cached is None:
            built = self._inner_mask(config) if kind == _INNER else self._end_mask(config)
            cached = self._config_masks.put(config, built)
        return cached

    def _free_mask(self, node: int, forced: bool, done: int) -> NDArray[np.int32]:
        """Every token from a free configuration: walked through the trigger automaton all at once.

        A token that does not complete a trigger is allowed (past the bound: if it stays
        on a trigger's path). One that completes a trigger is allowed only if the bytes it
        holds past the trigger are a start the trigger's guide takes (and so on, through
        whatever follows: a token may even hold a whole short call).
        """
        tables = self.vocabulary.walk_tables()
        table = self._matcher.goto if forced else self._matcher.delta
        if forced:  # every token is walked, and most die at their first byte
            rows = np.arange(tables.ids.size)
        else:  # only a token holding a trigger's last byte can complete one: the others are all allowed
            rows = self._touching_rows()
        states = np.full(rows.size, node, dtype=np.int32)
        alive = np.ones(rows.size, dtype=bool)
        completed_at = np.full(rows.size, -1, dtype=np.int64)
        matrix, lengths = tables.matrix, tables.lengths
        if not forced:
            matrix, lengths = matrix[rows], lengths[rows]
        for j in range(matrix.shape[1]):
            at = np.flatnonzero(alive & (completed_at < 0) & (lengths > j))
            if at.size == 0:
                break
            nxt = table[states[at], matrix[at, j]]
            dead = nxt < 0
            alive[at[dead]] = False
            at, nxt = at[~dead], nxt[~dead]
            states[at] = nxt
            completed_at[at[self._matcher.complete[nxt] >= 0]] = j + 1
        allowed = bitmask_to_bool(self._text_bits, self.vocab_size) if not forced else (
            np.zeros(self.vocab_size, dtype=bool)
        )
        allowed[tables.ids[rows[alive & (completed_at < 0)]]] = True
        for k_row in np.flatnonzero(alive & (completed_at >= 0)).tolist():
            token_id = int(tables.ids[rows[k_row]])
            k = int(self._matcher.complete[states[k_row]])
            data = self.vocabulary.token_bytes[token_id] or b""
            allowed[token_id] = self._remainder_ok(k, data[int(completed_at[k_row]):], done)
        return _pack(allowed)

    def _touching_rows(self) -> NDArray[np.int64]:
        """Rows of the vocabulary's walk tables that hold the last byte of some trigger (shared by guides)."""
        finals = bytes(sorted({start[-1] for start in self._starts}))

        def rows() -> NDArray[np.int64]:
            tables = self.vocabulary.walk_tables()
            wanted = np.zeros(256, dtype=bool)
            wanted[list(finals)] = True
            inside = np.arange(tables.matrix.shape[1]) < tables.lengths[:, None]
            return np.flatnonzero((wanted[tables.matrix] & inside).any(axis=1)).astype(np.int64)

        return self.vocabulary.shared(("trigger-final-bytes", finals), rows)

    def _remainder_ok(self, k: int, rest: bytes, done: int) -> bool:
        """Whether trigger k's guide (and what follows it) takes ``rest`` right after the trigger."""
        done = self._representative(done)
        key = (k, rest, done)
        ok = self._remainders.get(key)
        if ok is None:
            start = (_INNER, k, self.triggers[k].guide.initial_state, done)
            ok = self._remainders[key] = bool(self._feed({start}, rest))
        return ok

    def _inner_mask(self, config: Config) -> NDArray[np.int32]:
        """The inner guide's own mask, plus tokens that end its part mid-token and run into the end string."""
        _, k, q, done = config
        guide = self.triggers[k].guide
        packed = np.zeros(self._words, dtype=np.int32)
        guide.fill_bitmask(q, packed)
        packed &= ~self._eos_bits
        view, end = self._views[k], self._ends[k]
        if view is None or end is None:
            return packed
        walked: dict[bytes, Hashable | None] = {b"": q}

        def walk(prefix: bytes) -> Hashable | None:
            if prefix not in walked:
                before = walk(prefix[:-1])
                walked[prefix] = None if before is None else view.step(before, prefix[-1])
            return walked[prefix]

        extra = []
        for token_id, at in self._split_candidates(k):
            data = self.vocabulary.token_bytes[token_id] or b""
            reached = walk(data[:at])
            if reached is not None and view.final(reached) and self._feed({(_END, k, 0, done)}, data[at:]):
                extra.append(token_id)
        if extra:
            allowed = np.zeros(self.vocab_size, dtype=bool)
            allowed[extra] = True
            packed |= _pack(allowed)
        return packed

    def _split_candidates(self, k: int) -> list[tuple[int, int]]:
        """(token, position ≥ 1) where the token's bytes from there could start trigger k's end string."""
        end = self._ends[k] or b""

        def candidates() -> list[tuple[int, int]]:
            found = []
            for token_id, data in enumerate(self.vocabulary.token_bytes):
                if not data:
                    continue
                at = data.find(end[:1], 1)
                while at > 0:
                    tail = data[at:]
                    if tail.startswith(end) or end.startswith(tail):
                        found.append((token_id, at))
                    at = data.find(end[:1], at + 1)
            return found

        return self.vocabulary.shared(("trigger-split-candidates", end), candidates)

    def _end_mask(self, config: Config) -> NDArray[np.int32]:
        """Tokens that spell on from byte i of the end string (and, past it, whatever follows)."""
        _, k, i, done = config
        rest = (self._ends[k] or b"")[i:]
        tables = self.vocabulary.walk_tables()
        match = np.ones(tables.ids.size, dtype=bool)
        for j in range(min(len(rest), tables.matrix.shape[1])):
            match &= (tables.lengths <= j) | (tables.matrix[:, j] == rest[j])
        allowed = np.zeros(self.vocab_size, dtype=bool)
        allowed[tables.ids[match & (tables.lengths <= len(rest))]] = True
        after = self._after_end(done)
        for row in np.flatnonzero(match & (tables.lengths > len(rest))).tolist():
            token_id = int(tables.ids[row])
            data = self.vocabulary.token_bytes[token_id] or b""
            allowed[token_id] = bool(self._feed({after}, data[len(rest):]))
        return _pack(allowed)


def _pack(allowed: NDArray[np.bool_]) -> NDArray[np.int32]:
    """A bool mask as the packed int32 words of :mod:`constrain.guide`."""
    words = bitmask_size(allowed.size)
    bits = np.zeros(words * 32, dtype=bool)
    bits[: allowed.size] = allowed
    return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32)


# ---------------------------------------------------------------------- tools by name


def tools_schema(tools: Any, *, name_key: str = "name", arguments_key: str = "arguments") -> dict[str, Any]:
    """The JSON Schema of one call of one of ``tools``: ``{"name": NAME, "arguments": {...}}``.

    ``tools`` is a mapping name → parameters (a Pydantic class or a JSON Schema), or a
    list of OpenAI-style tools (``{"type": "function", "function": {"name", "parameters"}}``),
    bare functions (``{"name", "parameters"}``), Pydantic classes (named by the class) or
    JSON Schemas with a ``title`` (named by it). The result is an ``anyOf`` of one object
    per tool, its name a ``const``: the names are distinct, so at most one branch takes a
    text and the union is exactly "this tool, with arguments that fit it". Each tool's
    ``$defs`` (or ``definitions``) move to the root under ``<tool>.<name>`` and its local
    ``$ref``s are rewritten to match, so tools may share definition names.
    """
    pairs = _named_tools(tools)
    if not isinstance(name_key, str) or not isinstance(arguments_key, str) or name_key == arguments_key:
        raise ConfigurationError("name_key and arguments_key must be two different strings")
    branches: list[dict[str, Any]] = []
    definitions: dict[str, Any] = {}
    for index, (name, parameters) in enumerate(pairs):
        here = f"#/anyOf/{index}/properties/{_escape(arguments_key)}"
        params = _hoist(parameters, name, here, definitions)
        branches.append({
            "type": "object",
            "properties": {name_key: {"const": name}, arguments_key: params},
            "required": [name_key, arguments_key],
            "additionalProperties": False,
        })  # fmt: skip
    schema: dict[str, Any] = {"anyOf": branches}
    if definitions:
        schema["$defs"] = definitions
    return schema


def _named_tools(tools: Any) -> list[tuple[str, Any]]:
    """(name, parameters) of each tool, in order; raises for anything that is no tool."""
    from .json_schema.to_regex import load_schema

    if isinstance(tools, Mapping):
        items: list[tuple[str, Any]] = list(tools.items())
    elif isinstance(tools, (list, tuple)):
        items = [_one_tool(tool) for tool in tools]
    else:
        raise ConfigurationError(
            f"tools are a mapping name → parameters or a list of tools, not {type(tools).__name__}"
        )
    if not items:
        raise ConfigurationError("tools needs at least one tool")
    seen: set[str] = set()
    out = []
    for name, parameters in items:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a tool's name must be a non-empty str, not {name!r}")
        if name in seen:
            raise ConfigurationError(f"two tools are named {name!r}: the name picks the tool")
        seen.add(name)
        if isinstance(parameters, type) and hasattr(parameters, "model_json_schema"):
            parameters = load_schema(parameters)
        if not isinstance(parameters, (dict, bool)):
            raise ConfigurationError(
                f"the parameters of tool {name!r} must be a JSON Schema or a Pydantic class"
            )
        out.append((name, copy.deepcopy(parameters)))
    return out


def _one_tool(tool: Any) -> tuple[str, Any]:
    if isinstance(tool, type) and hasattr(tool, "model_json_schema"):
        return tool.__name__, tool
    if isinstance(tool, Mapping):
        if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
            tool = tool["function"]
        if "name" in tool and ("parameters" in tool or "description" in tool or len(tool) == 1):
            parameters = tool.get("parameters")  # omitted (or null): a tool without arguments
            return tool["name"], {"type": "object", "properties": {}} if parameters is None else parameters
        if isinstance(tool.get("title"), str):
            return tool["title"], tool
    raise ConfigurationError(
        f"{tool!r} is no tool: pass an OpenAI tool ({{'type': 'function', 'function': {{'name': ..., "
        "'parameters': ...}}}}), a Pydantic class, or a JSON Schema with a 'title'"
    )


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _hoist(parameters: Any, name: str, here: str, definitions: dict[str, Any]) -> Any:
    """``parameters`` without its definitions (moved into ``definitions``), its local refs rewritten."""
    if not isinstance(parameters, dict):
        return parameters
    if "$id" in parameters:
        raise ConfigurationError(
            f"tool {name!r}: a schema with its own $id cannot be nested in the tools' union; drop the $id"
        )
    own: dict[str, str] = {}
    moved_here: list[str] = []
    for keyword in ("$defs", "definitions"):
        for key, value in (parameters.pop(keyword, None) or {}).items():
            moved = f"{name}.{key}"
            if moved in definitions:
                raise ConfigurationError(f"tool {name!r}: two definitions would both be named {moved!r}")
            own[f"#/{keyword}/{_escape(key)}"] = f"#/$defs/{_escape(moved)}"
            definitions[moved] = value
            moved_here.append(moved)

    def rewrite(ref: str) -> str:
        if not ref.startswith("#"):
            return ref  # a remote reference: left to the compiler's ``remotes``
        for old, new in own.items():
            if ref == old or ref.startswith(old + "/"):
                return new + ref[len(old):]
        return here + ref[1:]

    def visit(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: rewrite(v) if k == "$ref" and isinstance(v, str) else visit(v) for k, v in node.items()
            }
        if isinstance(node, list):
            return [visit(v) for v in node]
        return node

    for key in moved_here:
        definitions[key] = visit(definitions[key])
    result: Any = visit(parameters)
    return result
