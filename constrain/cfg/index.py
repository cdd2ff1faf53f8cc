"""Masks for the grammar guide without a Python loop over the vocabulary.

The vocabulary is walked through the current lexer DFA all at once (numpy, one
gather per byte position, as the regex backend's token index does). Each token
either

* stays inside the lexeme being read (the DFA never dies and never finishes a
  lexeme): whether it is allowed depends only on the lexer state, plus a cheap
  check that the lexeme can still become a terminal the parser takes; or
* crosses a terminal boundary at some byte: then a lexeme is handed to the
  parser and the rest of the token is lexed in the next context.

The walk from a lexer state is a :class:`Node`. It depends on the lexer state
and the token rows only — never on the parser stack — so it is built once and
cached. Crossing tokens are grouped by *what* ends at the boundary and *where*
(emission, resume offset); each group's continuation is a child node, keyed by
(lexer state, row set, offset), so tokens that share a prefix up to a boundary
are carried together and every (lexer state, suffix set) is walked once. At mask
time only the parser runs: for each group the parser takes the emission (a
memoised table lookup), which picks the child, and the mask is the OR of the
reached nodes' packed token sets. ``docs/cfg.md`` has the whole picture.

Cached walks hold each of their tokens once (as an id, a bit, or a row of a
continuation group); ``Limits.max_index_entries`` bounds that total, counted
as each walk is cached. Walks are kept per lexer state, so they stop growing once
the lexer states a text meets have been walked. Masks by stack signature keep the
newest ``signature_cache_size``, and the depths they read ``Limits.max_memo_entries``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, TypeAlias, cast

import numpy as np
from numpy.typing import NDArray

from .. import kernel
from ..core.cache import BoundedCache
from ..core.limits import visit_deadline
from ..core.sharing import Shared
from ..errors import LimitExceededError
from .lexer import DEAD, UNEXPANDED, LexerDFA

if TYPE_CHECKING:
    from .guide import CFGGuide, State

__all__ = ["MaskIndex", "Node"]

#: Below this many rows a walk continues in plain Python.
_PYTHON_TAIL = 24
#: A token set: int32 ids (small sets) or packed uint32 bit words (large ones).
TokenSet: TypeAlias = "NDArray[np.int32] | NDArray[np.uint32]"
#: Packs (possible-set id, last emission + 1) into one int64 key.
_KEY = 1 << 24
#: Token sets larger than this are kept as packed bits (OR-ed) rather than ids (scattered).
_PACK_ABOVE = 256


def _add_to(words: list[NDArray[np.uint32]], ids: list[NDArray[np.int32]], tokens: TokenSet) -> None:
    """Put a token set with the others of its kind: its dtype tells (numpy's types can't narrow on it)."""
    if tokens.dtype == np.uint32:
        words.append(cast("NDArray[np.uint32]", tokens))
    else:
        ids.append(cast("NDArray[np.int32]", tokens))


@dataclass
class Node:
    """The walk of some token rows, from byte ``offset`` on, through one lexer state."""

    #: Tokens whose bytes end exactly where this node starts (None: no such token).
    #: Token sets are int32 ids when small, packed uint32 bit words when large.
    ended: "NDArray[np.int32] | NDArray[np.uint32] | None"
    #: Tokens ending inside a lexeme, bucketed by a terminal the lexeme may still become:
    #: (that terminal, all the bucket's tokens, members), each member being (every terminal
    #: the lexeme may still become, that one first; emission of the token's last match or
    #: -1; tokens).
    inside: "list[tuple[str, TokenSet, list[tuple[tuple[str, ...], int, TokenSet]]]]"
    #: (emission or -1 for "the match pending before this node", resume offset, row-set id).
    groups: list[tuple[int, int, int]]
    children: dict[tuple[int, int, bool], "Node"] = field(default_factory=dict)


class MaskIndex(Shared):
    """Builds and caches :class:`Node` walks for one guide, and turns them into masks."""

    def __init__(self, guide: "CFGGuide") -> None:
        self.guide = guide
        self.grammar = guide.grammar
        self.walk = guide.vocabulary.walk_tables()
        self._roots: dict[int, Node] = {}
        self._all_rows = np.arange(len(self.walk.ids), dtype=np.int64)
        # The token byte matrix by position, so one position's bytes are contiguous.
        self._columns = np.ascontiguousarray(self.walk.matrix.T)
        # And by row, with int64 lengths, for the compiled walk (kernel.lex_walk).
        self._matrix = np.ascontiguousarray(self.walk.matrix)
        self._lengths = self.walk.lengths.astype(np.int64)
        # Row sets are interned by content, and nodes by (lexer state, row set, offset):
        # different parents often hand the same suffixes to the same lexer state (every
        # token starting with a space, after any identifier), so they share a walk.
        self._row_ids: dict[bytes, int] = {}
        self._row_sets: list[NDArray[np.int64]] = []
        self._row_bits: dict[int, NDArray[np.uint32]] = {}
        self._nodes: dict[tuple[int, int, int, bool], Node] = {}
        self._lock = threading.RLock()
        self.nodes_built = 0
        #: Tokens held by the cached walks, against ``Limits.max_index_entries``.
        self.entries = 0
        self.computed = 0
        # Masks are cached by *stack signature*: the lexer part of the state plus only
        # the top entries of the parser stack that computing the mask actually read.
        # Two positions of a document with different stacks below those entries share
        # the mask (the guide adds an exact-state cache in front).
        # How deep each base's masks read is a memo too (keyed by the pending bytes, which
        # the text sets): Limits.max_memo_entries bounds it, and a dropped depth is learnt again.
        self._sig_depth: BoundedCache[int] = BoundedCache(self.grammar.limits.max_memo_entries)
        self._sig_masks: "OrderedDict[tuple[object, ...], NDArray[np.uint8]]" = OrderedDict()
        self.signature_cache_size = 2 * self.grammar.limits.max_cached_masks
        self._words = (guide.vocab_size + 31) // 32

    def allowed_packed(self, state: "State") -> NDArray[np.uint8]:
        """Allowed text tokens (no EOS) as little-endian packed bits, 4 bytes per 32 tokens (cached)."""
        stack, q, last, pending = state
        stacks = self.grammar.stacks
        base = (q, last, pending, stacks.top[stack])
        depth = self._sig_depth.get(base)
        if depth is not None:
            key = (base, self._top_states(stack, depth))
            found = self._sig_masks.get(key)
            if found is not None:
                # A mask computed inside another one: the outer result depends on what this
                # one read, as if it had been recomputed.
                self.grammar.note_floor(stacks.depth[stack] - depth + 1)
                return found
        with self.grammar.track() as floor, visit_deadline(self.grammar.limits.timeout_s):
            packed = self._compute(state).view(np.uint8)
        self.computed += 1
        floor.value = min(floor.value, stacks.depth[stack])  # the top entry picks the lexer context
        self.grammar.note_floor(floor.value)
        read = stacks.depth[stack] - floor.value + 1
        depth = max(depth or 0, read)
        with self._lock:
            self._sig_depth.store(base, depth)
            self._sig_masks[(base, self._top_states(stack, depth))] = packed
            if len(self._sig_masks) > self.signature_cache_size:
                self._sig_masks.popitem(last=False)
        return packed

    def _top_states(self, stack: int, count: int) -> tuple[int, ...]:
        stacks = self.grammar.stacks
        out = []
        for _ in range(count):
            if stack < 0:
                out.append(-1)
                break
            out.append(stacks.top[stack])
            stack = stacks.parent[stack]
        return tuple(out)

    def _compute(self, state: "State") -> NDArray[np.uint32]:
        """The packed mask (uint32 words) of ``state``, walking cached nodes and running the parser."""
        root = self.root(state[1])
        words: list[NDArray[np.uint32]] = []
        ids: list[NDArray[np.int32]] = []
        self._collect(root, state, words, ids)
        result = np.zeros(self._words, dtype=np.uint32)
        for part in words:
            result |= part
        if ids:
            result |= self._pack(np.concatenate(ids) if len(ids) > 1 else ids[0])
        return result

    def root(self, q: int) -> Node:
        """The walk of the whole vocabulary from lexer state ``q`` (built on first use)."""
        root = self._roots.get(q)
        if root is None:
            with self._lock:
                root = self._roots.get(q)
                if root is None:
                    lexer = self.grammar.lexer
                    root = self._build(q, self._all_rows, 0, drop_inherit=bool(lexer.is_start[q]))
                    self._roots[q] = root
        return root

    def _pack(self, token_ids: NDArray[np.integer]) -> NDArray[np.uint32]:
        bits = np.zeros(self._words * 32, dtype=bool)
        bits[token_ids] = True
        return np.packbits(bits, bitorder="little").view(np.uint32)

    def _union(self, sets: "list[TokenSet]") -> "TokenSet":
        if len(sets) == 1:
            return sets[0]
        packed = [t for t in sets if t.dtype == np.uint32]
        small = [t for t in sets if t.dtype != np.uint32]
        if not packed:
            return self._token_set(np.concatenate(small))
        result: TokenSet = packed[0].copy()  # uint32 words (numpy's types can't narrow on the dtype)
        for t in packed[1:]:
            result |= t
        if small:
            result |= self._pack(np.concatenate(small))
        return result

    def _token_set(self, token_ids: NDArray[np.integer]) -> "NDArray[np.int32] | NDArray[np.uint32]":
        """Small id sets stay ids (scattered at mask time); large ones are packed once (OR-ed then)."""
        if token_ids.size > _PACK_ABOVE:
            return self._pack(token_ids)
        return token_ids.astype(np.int32)

    # ------------------------------------------------------------------ mask time

    def _collect(
        self, node: Node, state: "State", words: list[NDArray[np.uint32]], ids: list[NDArray[np.int32]]
    ) -> None:
        guide, grammar = self.guide, self.grammar
        stack, _q, last, pending = state
        if node.ended is not None and guide.viable(state):
            _add_to(words, ids, node.ended)
        if node.inside:
            # Whether the parser takes a terminal is asked once per name. Groups are bucketed
            # by the name most of them share (an identifier, say): when the parser takes it,
            # the whole bucket is allowed at once.
            actionable = grammar.action_terminals[grammar.stacks.top[stack]]
            taken: dict[str, bool] = {}

            def takes(name: str) -> bool:
                verdict = taken.get(name)
                if verdict is None:
                    verdict = name in grammar.ignore_names or (
                        name in actionable and grammar.feed(stack, name) >= 0
                    )
                    taken[name] = verdict
                return verdict

            for lead, union, members in node.inside:
                if takes(lead):
                    _add_to(words, ids, union)
                    continue
                for names, matched, tokens in members:
                    # Else another terminal the lexeme may become, or the last match it falls
                    # back on (made in the token, else pending from before it).
                    fallback = matched if matched >= 0 else last
                    if any(takes(name) for name in names[1:]) or (
                        fallback >= 0 and guide.emit(stack, fallback) >= 0
                    ):
                        _add_to(words, ids, tokens)
        for number, (emission, resume, row_set) in enumerate(node.groups):
            replay = b""
            if emission < 0:
                if last < 0:
                    continue
                emission, replay = last, pending
            new_stack = guide.emit(stack, emission)
            if new_stack < 0:
                continue
            next_state: "State" = (new_stack, grammar.start_after(new_stack, emission), -1, b"")
            if replay:
                fed = guide.feed_bytes(next_state, replay)
                if fed is None:
                    continue
                next_state = fed
            if resume == 0:
                # The lexeme ended before the token's first byte: these tokens are allowed
                # exactly when they are allowed at the next state, whose mask is cached.
                words.append(self._row_packed(row_set) & self.allowed_packed(next_state).view(np.uint32))
                continue
            key = (number, next_state[1], next_state[2] < 0)
            child = node.children.get(key)
            if child is None:
                child = self._child(next_state[1], row_set, resume, next_state[2] < 0)
                node.children[key] = child
            self._collect(child, next_state, words, ids)

    def _row_packed(self, row_set: int) -> NDArray[np.uint32]:
        packed = self._row_bits.get(row_set)
        if packed is None:
            packed = self._pack(self.walk.ids[self._row_sets[row_set]])
            self._row_bits[row_set] = packed
        return packed

    # ------------------------------------------------------------------ walks

    def _child(self, q: int, row_set: int, offset: int, drop_inherit: bool) -> Node:
        key = (q, row_set, offset, drop_inherit)
        node = self._nodes.get(key)
        if node is None:
            with self._lock:
                node = self._nodes.get(key)
                if node is None:
                    node = self._build(q, self._row_sets[row_set], offset, drop_inherit=drop_inherit)
                    self._nodes[key] = node
        return node

    def _intern_rows(self, rows: NDArray[np.int64]) -> int:
        rows = np.sort(rows)
        key = rows.tobytes()
        found = self._row_ids.get(key)
        if found is None:
            found = len(self._row_sets)
            self._row_sets.append(rows)
            self._row_ids[key] = found
        return found

    def _build(self, q: int, rows: NDArray[np.int64], offset: int, *, drop_inherit: bool) -> Node:
        """Walk ``rows`` from byte ``offset`` through the lexer DFA, starting in state ``q``.

        ``drop_inherit``: the lexer state has no pending match, so tokens on which the
        DFA dies before matching anything are simply rejected.
        """
        self.nodes_built += 1
        ctx = self.grammar.lexer
        walk = self.walk
        lengths = walk.lengths[rows]
        ended_ids = walk.ids[rows[lengths == offset]]
        ended = self._token_set(ended_ids) if ended_ids.size else None
        rows = rows[lengths > offset]
        inside: list[tuple[int, int, TokenSet]] = []
        inside_chunks: dict[tuple[int, int], list[NDArray[np.integer]]] = {}  # token ids, int32 or int64
        groups: list[tuple[int, int, int]] = []
        pending_groups: dict[tuple[int, int], list[NDArray[np.int64]]] = {}
        inside_lists: dict[tuple[int, int], list[int]] = {}
        if kernel.compiled is not None and rows.size > _PYTHON_TAIL:
            self._walk_compiled(kernel.compiled, q, rows, offset, drop_inherit, pending_groups, inside_chunks)
            rows = rows[:0]
        if rows.size:
            # Rows whose first byte kills the lexeme are settled without walking them.
            first_ok = self._expanded_row(ctx, q)[self._columns[offset][rows]] != DEAD
            if not first_ok.all():
                if not drop_inherit:
                    pending_groups[(-1, offset)] = [rows[~first_ok]]
                rows = rows[first_ok]
        # Rows sorted by length, longest first: the rows that end at a position are then
        # a tail slice, and removals by boolean masks keep the order.
        lengths = walk.lengths[rows]
        order = np.argsort(-lengths, kind="stable")
        rows, lengths = rows[order], lengths[order]
        # Index arrays are intp and lookups use np.take on flat tables: numpy converts
        # int32 index arrays on every fancy-indexing call, which costs more than the gather.
        states = np.full(rows.size, q, dtype=np.intp)
        last = np.full(rows.size, -1, dtype=np.intp)
        last_pos = np.full(rows.size, -1, dtype=np.intp)
        position = offset
        columns = self._columns
        while rows.size:
            if rows.size <= _PYTHON_TAIL:
                # A handful of long tokens is left (runs of spaces, dashes...): walking them
                # one by one is cheaper than a dozen numpy calls per byte position.
                self._walk_tail(rows, states, last, last_pos, position, offset, drop_inherit,
                                pending_groups, inside_lists)  # fmt: skip
                break
            flat_index = (states << 8) | np.take(columns[position], rows)
            nxt = np.take(ctx.table.reshape(-1), flat_index).astype(np.intp)
            negative = nxt < 0
            if negative.any():
                fresh = nxt == UNEXPANDED
                if fresh.any():
                    ctx.expand(np.unique(states[fresh]))
                    nxt = np.take(ctx.table.reshape(-1), flat_index).astype(np.intp)
                dead = nxt == DEAD
                if dead.any():
                    d_rows, d_last, d_pos = rows[dead], last[dead], last_pos[dead]
                    if drop_inherit:
                        keep = d_last >= 0
                        d_rows, d_last, d_pos = d_rows[keep], d_last[keep], d_pos[keep]
                    d_pos = np.where(d_last >= 0, d_pos, offset)
                    self._group(pending_groups, d_last, d_pos, d_rows)
                    alive = ~dead
                    rows, nxt, last = rows[alive], nxt[alive], last[alive]
                    last_pos, lengths = last_pos[alive], lengths[alive]
            states = nxt
            position += 1
            emission = np.take(ctx.emit, states)
            matched = emission >= 0
            if matched.any():
                last = np.where(matched, emission, last)
                last_pos = np.where(matched, position, last_pos)
                final = np.take(ctx.final_only, states)
                if final.any():
                    resumes = np.full(int(final.sum()), position)
                    self._group(pending_groups, emission[final], resumes, rows[final])
                    keep = ~final
                    rows, states, last = rows[keep], states[keep], last[keep]
                    last_pos, lengths = last_pos[keep], lengths[keep]
            # Rows ending here form the tail (lengths are non-increasing).
            cut = int(np.searchsorted(-lengths, -position, side="left"))
            if cut < rows.size:
                d_states = states[cut:]
                key = np.take(ctx.possible, d_states).astype(np.int64) * _KEY + (last[cut:] + 1)
                ids = walk.ids[rows[cut:]]
                for k, where in self._split(key):
                    inside_chunks.setdefault((k // _KEY, k % _KEY - 1), []).append(ids[where])
                rows, states, last = rows[:cut], states[:cut], last[:cut]
                last_pos, lengths = last_pos[:cut], lengths[:cut]
        for key_pm, id_list in inside_lists.items():
            inside_chunks.setdefault(key_pm, []).append(np.array(id_list, dtype=np.int64))
        held = ended_ids.size
        for (possible_id, matched), chunks in inside_chunks.items():
            inside_ids = np.concatenate(chunks)
            held += inside_ids.size
            inside.append((possible_id, matched, self._token_set(inside_ids)))
        for (emission_id, resume), row_chunks in pending_groups.items():
            rows_of_group = np.concatenate(row_chunks) if len(row_chunks) > 1 else row_chunks[0]
            held += rows_of_group.size
            groups.append((emission_id, resume, self._intern_rows(rows_of_group)))
        self._hold(held)
        # Order each group's names by how many groups share them, so the name that settles
        # most groups is asked first.
        shared: dict[str, int] = {}
        for possible_id, _, _ in inside:
            for name in ctx.possible_sets[possible_id]:
                shared[name] = shared.get(name, 0) + 1
        buckets: dict[str, list[tuple[tuple[str, ...], int, TokenSet]]] = {}
        for p, matched, tokens in inside:
            names = tuple(sorted(ctx.possible_sets[p], key=lambda n: (-shared[n], n)))
            buckets.setdefault(names[0], []).append((names, matched, tokens))
        bucketed = [
            (lead, self._union([tokens for _, _, tokens in members]), members)
            for lead, members in buckets.items()
        ]
        return Node(ended, bucketed, groups)

    def _hold(self, count: int) -> None:
        """Count a new walk's tokens against ``Limits.max_index_entries`` (called under the lock)."""
        limit = self.grammar.limits.max_index_entries
        if self.entries + count > limit:
            raise LimitExceededError(
                "max_index_entries", limit,
                "the cached vocabulary walks would hold more token entries than allowed (a walk "
                "from each lexer state met holds up to the whole vocabulary); "
                "raise Limits.max_index_entries",
            )  # fmt: skip
        self.entries += count

    def _walk_compiled(
        self,
        compiled: ModuleType,
        q: int,
        rows: NDArray[np.int64],
        offset: int,
        drop_inherit: bool,
        pending_groups: dict[tuple[int, int], list[NDArray[np.int64]]],
        inside_chunks: dict[tuple[int, int], list[NDArray[np.integer]]],
    ) -> None:
        """The same walk as the vectorised loop, every row to its end in C (``lex_walk``): a
        row that meets a state with no row yet stops there, the state is expanded (Python)
        and the walk goes on from where it stopped. The rows' outcomes are then grouped as
        the loop groups them (the groups' order aside, which no mask depends on)."""
        ctx = self.grammar.lexer
        walkers = np.empty((rows.size, 4), dtype=np.int64)
        walkers[:] = (q, -1, -1, offset)
        out = np.empty((rows.size, 3), dtype=np.int64)
        todo: NDArray[np.int64] | None = None
        while True:
            pending = compiled.lex_walk(
                ctx.table, ctx.emit, ctx.final_only, ctx.possible, self._matrix, self._matrix.shape[1],
                self._lengths, rows, todo, walkers, out, offset, drop_inherit,
            )  # fmt: skip
            if not pending:
                break
            todo = np.flatnonzero(out[:, 0] == 3).astype(np.int64)
            ctx.expand(np.unique(walkers[todo, 0]).astype(np.intp))
        kinds = out[:, 0]
        for kind in (1, 2):
            chosen = np.flatnonzero(kinds == kind)
            if not chosen.size:
                continue
            keys = out[chosen, 1] * _KEY + out[chosen, 2] + 1  # (a, b + 1): b may be -1
            order = np.argsort(keys, kind="stable")
            chosen, keys = chosen[order], keys[order]
            starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            members = rows[chosen] if kind == 1 else self.walk.ids[rows[chosen]]
            heads = chosen[starts]
            for a, b, part in zip(out[heads, 1].tolist(), out[heads, 2].tolist(), np.split(members, starts[1:])):
                if kind == 1:
                    pending_groups.setdefault((a, b), []).append(cast("NDArray[np.int64]", part))
                else:
                    inside_chunks.setdefault((a, b), []).append(cast("NDArray[np.integer]", part))

    def _walk_tail(
        self,
        rows: NDArray[np.int64],
        states: NDArray[np.intp],
        last: NDArray[np.intp],
        last_pos: NDArray[np.intp],
        position: int,
        offset: int,
        drop_inherit: bool,
        pending_groups: dict[tuple[int, int], list[NDArray[np.int64]]],
        inside_lists: dict[tuple[int, int], list[int]],
    ) -> None:
        """The same walk as the vectorised loop, one row at a time (for the last few rows)."""
        lexer, walk = self.grammar.lexer, self.walk
        walks = zip(rows.tolist(), states.tolist(), last.tolist(), last_pos.tolist())
        for row, state, match, match_pos in walks:
            length = int(walk.lengths[row])
            data = walk.matrix[row, :length].tobytes()
            pos = position
            while True:
                successor = lexer.step(state, data[pos])
                if successor == DEAD:
                    if match >= 0:
                        pending_groups.setdefault((match, match_pos), []).append(np.array([row]))
                    elif not drop_inherit:
                        pending_groups.setdefault((-1, offset), []).append(np.array([row]))
                    break
                pos += 1
                state = successor
                emission = int(lexer.emit[state])
                if emission >= 0:
                    match, match_pos = emission, pos
                    if lexer.final_only[state]:
                        pending_groups.setdefault((emission, pos), []).append(np.array([row]))
                        break
                if pos == length:
                    key = (int(lexer.possible[state]), match)
                    inside_lists.setdefault(key, []).append(int(walk.ids[row]))
                    break

    @staticmethod
    def _split(key: NDArray[np.int64]) -> list[tuple[int, NDArray[np.intp]]]:
        """(value, positions) for each distinct value of ``key`` (usually one or two)."""
        first = key[0]
        if (key == first).all():
            return [(int(first), np.arange(key.size))]
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        return [(int(key[part[0]]), part) for part in np.split(order, cuts)]

    @staticmethod
    def _group(
        groups: dict[tuple[int, int], list[NDArray[np.int64]]],
        emissions: NDArray[np.int32],
        resumes: NDArray[np.int32] | NDArray[np.int64],
        rows: NDArray[np.int64],
    ) -> None:
        if not rows.size:
            return
        key = emissions.astype(np.int64) * 1_000_000 + resumes.astype(np.int64)
        for k, where in MaskIndex._split(key):
            emission, resume = divmod(k, 1_000_000)  # floor division keeps emission -1 intact
            groups.setdefault((int(emission), int(resume)), []).append(rows[where])

    @staticmethod
    def _expanded_row(ctx: LexerDFA, q: int) -> NDArray[np.int32]:
        ctx.expand([q])
        row: NDArray[np.int32] = ctx.table[q]
        return row
