"""Why does a constraint behave as it does? The five debugging stages, as data.

1. the schema exactly as received (after loading JSON text or a Pydantic model);
2. the regex the guide enforces (rendered from the tree the automaton is built from);
3. the byte DFA: how many states, and Graphviz DOT of the part explored;
4. token-index sparsity: allowed tokens per state against the vocabulary size;
5. a per-token log of a text: each token's bytes, the state before and after, how
   many tokens were allowed, and at the first rejected token, why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .errors import ConfigurationError, TokenRejected
from .regex.automaton import DEAD
from .regex.guide import RegexGuide

__all__ = ["Explanation", "Step", "explain", "dfa_to_dot"]


@dataclass(frozen=True)
class Step:
    token_id: int
    token: bytes | None
    state_before: int
    state_after: int | None
    allowed: int
    rejected: str = ""


@dataclass
class Explanation:
    schema: Any
    regex: str
    dfa_states: int
    dfa_complete: bool
    dot: str
    vocab_size: int
    sparsity: list[tuple[int, int]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    final: bool | None = None
    dropped: tuple[tuple[str, str], ...] = ()

    def format(self) -> str:
        """A report for a person, stage by stage."""
        lines = ["== 1. schema as received =="]
        lines.append(json.dumps(self.schema, indent=2) if self.schema is not None else "(a regex, no schema)")
        if self.dropped:
            lines.append("dropped by lenient mode: " + ", ".join(f"{k} at {p}" for k, p in self.dropped))
        regex = self.regex if len(self.regex) <= 2000 else self.regex[:2000] + f"… ({len(self.regex)} chars)"
        lines += ["", "== 2. regex ==", regex]
        more = "" if self.dfa_complete else "+ (exploration stopped at the limit)"
        lines += ["", "== 3. byte DFA ==", f"{self.dfa_states}{more} states (DOT with --dot FILE)"]
        lines += ["", "== 4. token index sparsity =="]
        if self.sparsity:
            start = self.sparsity[0][1]
            lines.append(f"start state allows {start} of {self.vocab_size} tokens ({100 * start / self.vocab_size:.2f}%)")
            counts = np.array([n for _, n in self.sparsity])
            lines.append(
                f"over {len(counts)} explored states: min {counts.min()}, median {int(np.median(counts))}, "
                f"max {counts.max()} allowed tokens"
            )
        if self.steps:
            lines += ["", "== 5. transition log =="]
            for i, step in enumerate(self.steps):
                after = "REJECTED" if step.state_after is None else step.state_after
                lines.append(f"{i:4d}  token {step.token_id:>7}  {step.token!r:<24} {step.state_before} → {after}"
                             f"  ({step.allowed} allowed)")  # fmt: skip
                if step.rejected:
                    lines.append(f"      why: {step.rejected}")
            lines.append(f"final (may end here): {self.final}")
        return "\n".join(lines)


def explain(
    guide: RegexGuide,
    *,
    text: str | None = None,
    token_ids: Sequence[int] | None = None,
    tokenizer: Any = None,
    max_states: int = 500,
) -> Explanation:
    """Collect the five stages for ``guide``; ``text`` needs the ``tokenizer`` that spells it."""
    dfa, index, vocabulary = guide.index.dfa, guide.index, guide.vocabulary
    explored = _explore(guide, max_states)
    sparsity = [(s, int(len(index.row(s).token_ids) + (len(vocabulary.eos_token_ids) if dfa.is_final(s) else 0)))
                for s in explored]  # fmt: skip
    if text is not None and token_ids is None:
        if tokenizer is None:
            raise ConfigurationError("explain(text=...) needs the tokenizer that spells the text: pass tokenizer=...")
        from .vocabulary import tokenize_continuation

        token_ids = tokenize_continuation(tokenizer, text)
    steps, final = _log(guide, token_ids) if token_ids is not None else ([], None)
    return Explanation(
        schema=guide.schema,
        regex=guide.regex,
        dfa_states=dfa.num_states,
        dfa_complete=len(explored) < max_states,
        dot=dfa_to_dot(guide, explored),
        vocab_size=vocabulary.size,
        sparsity=sparsity,
        steps=steps,
        final=final,
        dropped=guide.dropped,
    )


def _explore(guide: RegexGuide, max_states: int) -> list[int]:
    """States reachable by bytes from the start, breadth first, at most ``max_states``."""
    dfa = guide.index.dfa
    order, seen = [dfa.start], {dfa.start}
    for state in order:
        for successor in np.unique(dfa.row(state)).tolist():
            if successor != DEAD and successor not in seen and len(order) < max_states:
                seen.add(successor)
                order.append(successor)
    return order


def _log(guide: RegexGuide, token_ids: Sequence[int]) -> tuple[list[Step], bool]:
    state = guide.initial_state
    steps = []
    vocabulary = guide.vocabulary
    for token_id in token_ids:
        allowed = int(guide.allowed_tokens(state).sum())
        piece = vocabulary.token_bytes[token_id] if token_id < len(vocabulary.token_bytes) else None
        try:
            after = guide.advance(state, token_id)
        except TokenRejected as exc:
            steps.append(Step(token_id, piece, state, None, allowed, str(exc)))
            return steps, False
        steps.append(Step(token_id, piece, state, after, allowed))
        state = after
    return steps, guide.is_final(state)


def dfa_to_dot(guide: RegexGuide, states: Sequence[int]) -> str:
    """Graphviz DOT of the byte DFA restricted to ``states``; edges labelled with byte ranges."""
    dfa = guide.index.dfa
    shown = set(states)
    lines = ["digraph dfa {", "  rankdir=LR;", '  node [shape=circle, fontsize=10];', '  start [shape=point];']
    lines.append(f"  start -> {dfa.start};")
    for s in states:
        if dfa.is_final(s):
            lines.append(f"  {s} [shape=doublecircle];")
        row = dfa.row(s)
        for target in np.unique(row).tolist():
            if target == DEAD:
                continue
            label = _byte_ranges(np.flatnonzero(row == target).tolist())
            dest = target if target in shown else f'"{target}…"'
            lines.append(f'  {s} -> {dest} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines)


def _byte_ranges(values: list[int]) -> str:
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])

    def show(b: int) -> str:
        c = chr(b)
        return c if 0x21 <= b < 0x7F and c not in '"\\' else f"\\\\x{b:02x}"

    return ",".join(show(a) if a == b else f"{show(a)}-{show(b)}" for a, b in runs)

