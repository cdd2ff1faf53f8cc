"""How many texts an automaton holds, as far as the ``uniqueItems`` check needs to know.

An item schema's automaton may have *endless* completions from every state (a string with no
``maxLength``): then refusing a repeat never strands an item. Where it does not, the values
must still be counted: an array needing more items than the items have values would be stuck.
Both questions are answered on the explored automaton, once per schema.
"""

from __future__ import annotations

import numpy as np

from .automaton import DEAD, LazyDFA

__all__ = ["endless", "plain_spellings"]


def _peeled(dfa: LazyDFA, deadline: float) -> tuple[set[int], list[set[int]]]:
    """The states of ``dfa`` (explored whole) that cannot reach a cycle, and every state's successors.

    States are live, so a state on a cycle has endless completions. The others are found by
    peeling: a state whose successors are all peeled is peeled.
    """
    count = dfa.explore(deadline)
    successors = [set(np.unique(row[row != DEAD]).tolist()) for row in dfa.table[:count]]
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for s, targets in enumerate(successors):
        for t in targets:
            predecessors[t].append(s)
    waiting = [len(targets) for targets in successors]
    peeled = [s for s in range(count) if not waiting[s]]
    for s in peeled:  # (the list grows as it is read)
        for p in predecessors[s]:
            waiting[p] -= 1
            if not waiting[p]:
                peeled.append(p)
    return set(peeled), successors


def endless(dfa: LazyDFA, deadline: float) -> bool:
    """Whether every state of ``dfa`` that reads on has endless completions (reaches a cycle): only
    a state that reads no further (past a string's closing quote) may be peeled (``_peeled``)."""
    if dfa.start == DEAD:
        return False
    peeled, successors = _peeled(dfa, deadline)
    return all(not successors[s] for s in peeled)


def plain_spellings(dfa: LazyDFA, cap: int, deadline: float) -> int:
    """How many texts without a backslash ``dfa`` accepts, counted up to ``cap`` (each is another
    value). A state that reaches a cycle has endless ones (a free string beside ``null``).

    Rows are read with numpy, each state's once: on winget-pkgs-locale (an array of unique tags
    of at most 40 characters, explored whole) reading 256 cells a visit in Python took 1.1 s."""
    peeled, _ = _peeled(dfa, deadline)
    counts: dict[int, int] = {}
    moves: dict[int, list[tuple[int, int]]] = {}
    readable = np.ones(256, dtype=bool)
    readable[0x5C] = False  # a backslash spells a value another spelling has too
    stack = [dfa.start]
    while stack:  # depth first, a state counted once its successors are (iterative: maxLength may be deep)
        state = stack[-1]
        if state in counts:  # (pushed again by another predecessor)
            stack.pop()
            continue
        if state not in peeled:
            counts[state] = cap
            stack.pop()
            continue
        targets = moves.get(state)
        if targets is None:  # each successor once, with how many bytes lead there (each another text)
            row = dfa.table[state]
            successors, bytes_to = np.unique(row[readable & (row != DEAD)], return_counts=True)
            targets = moves[state] = list(zip(successors.tolist(), bytes_to.tolist()))
        waiting = [t for t, _ in targets if t not in counts]
        if waiting:
            stack.extend(waiting)
            continue
        stack.pop()
        counts[state] = min(cap, int(dfa.is_final(state)) + sum(counts[t] * n for t, n in targets))
    return counts[dfa.start]
