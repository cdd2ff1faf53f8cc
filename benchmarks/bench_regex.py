#!/usr/bin/env python
"""Regex benchmark: constrain's regex backend against outlines-core, same tokenizer, one run.

Run with ``python benchmarks/bench_regex.py`` (``--quick`` for fewer repeats,
``--tokenizer mistral|llama3`` for another offline tokenizer). It prints a
markdown table and writes ``benchmarks/results/regex.json`` and ``regex.md``.

Methodology
-----------
* **Same inputs.** Both engines get the same vocabulary: constrain's
  ``Vocabulary`` is built from the tokenizer once, and outlines-core's
  ``Vocabulary`` is built from those very token bytes (special tokens and EOS
  left out of its map, EOS passed as its ``eos_token_id``). Every instance is
  tokenized once with ``tokenize_continuation`` and the same ids are fed to both
  engines; the ids are checked to spell the instance byte for byte.
* **Same language.** The patterns spell digits as ``[0-9]``: outlines-core's
  ``\\d`` is Unicode-aware while constrain's is ASCII, so ``\\d`` would make the
  two engines compile different (and differently sized) languages.
* **Compile time** is the median of ``--repeats`` runs, engines interleaved
  within a repeat. constrain *lazy* is ``Compiler.regex`` alone (rows are built
  when a state is first visited); constrain *eager* is ``regex`` plus
  ``precompute()`` (every reachable state's row), which is the like-for-like
  figure for outlines-core, whose ``Index`` is always built in full. Each timed
  constrain compile uses a fresh ``Compiler`` over the shared ``Vocabulary``,
  so the guide cache never answers, while the vocabulary's walk tables (a
  one-time, per-tokenizer cost, reported in the header) are reused.
* **Mask time** is per generation step: fill the packed int32 bitmask, then
  advance by the instance's next token; a closing step fills the mask once more
  (the one a sampler would pick EOS from) without advancing, since
  outlines-core's ``Guide.advance`` refuses EOS. Only those calls sit between
  the two ``perf_counter_ns`` readings; the checks that the token's bit was set
  come after the second one. For constrain the *cold* figures are the first
  walk over each freshly compiled lazy guide (its rows are built then), pooled
  over the repeats; the *warm* figures, and all of outlines-core's, come from
  ``--walks`` walks after one untimed warm-up walk, pooled into p50/p90/p99.
  The garbage collector is off during every timed section.
* **Verdict.** An engine accepts an instance when every token of the
  tokenizer's own tokenization is set in the mask filled just before it, every
  advance succeeds, and at the end the state is final and EOS is in the mask.
  Where outlines-core rejects that tokenization, both engines are timed on
  another tokenization of the same text that outlines-core accepts (longest
  tokens first), if one exists; otherwise constrain is timed alone. A compile
  error is recorded as ``refused`` and a rejected instance as ``rejected``
  instead of stopping the run.
* **One thread.** The thread-count variables of OpenMP/BLAS/Rayon are set to 1
  before numpy or torch load, and torch is told to use one thread. CPU time is
  recorded next to wall time for every compile so a multi-threaded compile
  would show up in the JSON (``cpu_ms`` > ``wall_ms``).
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

import constrain
from _common import Timing, Walk, bit_is_set, describe, timed


# ---------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    name: str
    pattern: str
    instance: str


def pseudo_words(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct pronounceable lowercase words, the same on every run."""
    rng = random.Random(seed)
    onsets = "b c d f g l m n p r s t v br ch gr pl sh st".split()
    vowels = "a e i o u ai ea ou".split()
    codas = ["", "", *"l m n r s t nd st".split()]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < count:
        syllables = rng.randint(1, 3)
        word = "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def build_cases() -> list[Case]:
    words = pseudo_words(200)
    octet = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    return [
        Case("phone", r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}", "(555) 867-5309"),
        Case(
            "email",
            r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9-]+(\.[a-zA-Z0-9-]+)+",
            "jane.doe+news@mail.example.co.uk",
        ),
        Case(
            "iso_datetime",
            r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
            r"(\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
            "2024-02-29T13:45:07.123+05:30",
        ),
        Case(
            "json_string",
            r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
            r'"Caf\u00e9 \"menu\": 3 items\n— ok"',
        ),
        Case("number", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", "-12345.678e-9"),
        Case("lower_1_200", r"[a-z]{1,200}", "pneumonoultramicroscopicsilicovolcanoconiosis"),
        Case("words_200", "(" + "|".join(words) + ")", next(w for w in words[100:] if len(w) >= 10)),
        Case(
            "json_object",
            r'\{"name": "[^"]{1,20}", "age": (0|[1-9][0-9]{0,2})\}',
            '{"name": "Ada Lovelace", "age": 36}',
        ),
        Case("cjk_1_10", r"[一-龥]{1,10}", "机器学习模型"),
        Case("ipv4", rf"({octet}\.){{3}}{octet}", "192.168.254.7"),
    ]


# ---------------------------------------------------------------------- timing helpers


def median_ms(samples: Sequence[Timing], attr: str = "wall_ns") -> float:
    return float(_common.median([getattr(s, attr) for s in samples])) / 1e6


# ---------------------------------------------------------------------- outlines-core


class OutlinesMask:
    """The bitmask outlines-core writes into, filled through its torch kernel or directly.

    ``kernel`` is the documented path (``outlines_core.kernels.torch``, which
    validates the tensor on every call before ``Guide.write_mask_into``);
    ``direct`` calls ``write_mask_into`` on a numpy buffer, the same write
    without the Python-side checks.
    """

    def __init__(self, vocab_size: int, mode: str) -> None:
        self.mode = mode
        self.tensor: Any = None
        self.kernel_fill: Any = None
        if mode == "kernel":
            import torch
            from outlines_core.kernels.torch import allocate_token_bitmask, fill_next_token_bitmask

            torch.set_num_threads(1)
            self.tensor = allocate_token_bitmask(vocab_size)
            self.view: NDArray[np.int32] = self.tensor.numpy()[0]
            self.kernel_fill = fill_next_token_bitmask
        else:
            self.view = constrain.allocate_bitmask(vocab_size)
        self.pointer = int(self.view.ctypes.data)
        self.words = int(self.view.size)


def walk_outlines(index: Any, token_ids: Sequence[int], eos_id: int, mask: OutlinesMask) -> Walk:
    """Like :func:`_common.timed_walk`; outlines-core's ``advance`` refuses EOS, so none is taken."""
    import outlines_core

    walk = Walk()
    clock = time.perf_counter_ns
    guide = outlines_core.Guide(index)
    kernel, fill, tensor = mask.mode == "kernel", mask.kernel_fill, mask.tensor
    pointer, words = mask.pointer, mask.words
    with _common.gc_paused():
        try:
            for position, token_id in enumerate(token_ids):
                start = clock()
                if kernel:
                    fill(guide, tensor)
                else:
                    guide.write_mask_into(pointer, words, 4)
                guide.advance(token_id, return_tokens=False)
                walk.steps_ns.append(clock() - start)
                if not bit_is_set(mask.view, token_id):
                    return Walk(walk.steps_ns, False, "taken but not in the mask", position)
            start = clock()
            if kernel:
                fill(guide, tensor)
            else:
                guide.write_mask_into(pointer, words, 4)
            walk.steps_ns.append(clock() - start)
        except ValueError as exc:
            return Walk(walk.steps_ns, False, describe(exc), len(walk.steps_ns))
    if not (guide.is_finished() and bit_is_set(mask.view, eos_id)):
        return Walk(walk.steps_ns, False, "EOS is not allowed after the last token", len(token_ids))
    return walk


def outlines_vocabulary(vocabulary: constrain.Vocabulary, eos_id: int) -> Any:
    import outlines_core

    return outlines_core.Vocabulary(eos_id, _common.token_map(vocabulary.token_bytes, eos_id))


def outlines_tokenization(index: Any, vocabulary: constrain.Vocabulary, text: bytes) -> list[int] | None:
    """A tokenization of ``text`` that outlines-core's index accepts (longest tokens first), if any."""
    failed: set[tuple[int, int]] = set()

    def search(state: int, position: int) -> list[int] | None:
        if position == len(text):
            return [] if index.is_final_state(state) else None
        if (state, position) in failed:
            return None
        pieces = vocabulary.token_bytes
        candidates = [
            t for t in index.get_allowed_tokens(state) if pieces[t] and text.startswith(pieces[t], position)
        ]
        for token_id in sorted(candidates, key=lambda t: -len(pieces[t])):
            rest = search(index.get_next_state(state, token_id), position + len(pieces[token_id]))
            if rest is not None:
                return [token_id, *rest]
        failed.add((state, position))
        return None

    return search(index.get_initial_state(), 0)


# ---------------------------------------------------------------------- one case


def rejection(walk: Walk, token_ids: Sequence[int], vocabulary: constrain.Vocabulary) -> str | None:
    """Where and why a walk stopped, for the report; None when it went through."""
    if walk.accepted:
        return None
    at = walk.failed_at
    if at is None or at >= len(token_ids):
        return walk.error
    piece = vocabulary.token_bytes[token_ids[at]]
    return f"token {at + 1} of {len(token_ids)} (id {token_ids[at]}, {piece!r}): {walk.error}"


def fresh_compile(
    vocabulary: constrain.Vocabulary, pattern: str, *, eager: bool = False
) -> Callable[[], Any]:
    """The call to time: compile ``pattern`` on a new Compiler (no cached guide), optionally precompute."""
    compiler = constrain.Compiler(vocabulary)

    def run() -> Any:
        guide = compiler.regex(pattern)
        return guide.precompute() if eager else guide

    return run


def run_case(
    case: Case,
    vocabulary: constrain.Vocabulary,
    token_ids: list[int],
    eos_id: int,
    outlines_vocab: Any,
    mask: OutlinesMask,
    repeats: int,
    walks: int,
) -> dict[str, Any]:
    import outlines_core

    bitmask = constrain.allocate_bitmask(vocabulary.size)
    c: dict[str, Any] = {"error": None, "eager_error": None}
    o: dict[str, Any] = {"error": None}
    result: dict[str, Any] = {
        "name": case.name,
        "pattern": case.pattern,
        "instance": case.instance,
        "token_ids": token_ids,
        "constrain": c,
        "outlines_core": o,
    }

    # 1. Verdicts on the tokenizer's own tokenization (untimed).
    index: Any = None
    try:
        walk = _common.timed_walk(constrain.Compiler(vocabulary).regex(case.pattern), token_ids, eos_id, bitmask)
        c["accepts"], c["reject_reason"] = walk.accepted, rejection(walk, token_ids, vocabulary)
    except constrain.ConstrainError as exc:
        c["error"] = describe(exc)
    try:
        index = outlines_core.Index(case.pattern, outlines_vocab)
        walk = walk_outlines(index, token_ids, eos_id, mask)
        o["accepts"], o["reject_reason"] = walk.accepted, rejection(walk, token_ids, vocabulary)
    except Exception as exc:  # outlines-core raises ValueError and friends for patterns it refuses
        o["error"] = describe(exc)

    # 2. The tokens to time: the tokenizer's own for both engines; where outlines-core rejects
    #    those, another tokenization of the same text that both take, if there is one; failing
    #    that, constrain alone on the tokenizer's own.
    c_ids: list[int] | None = token_ids if c.get("accepts") else None
    o_ids: list[int] | None = token_ids if o.get("accepts") else None
    result["timed_tokenization"] = "tokenizer"
    if c_ids is not None and o.get("accepts") is False:
        alternative = outlines_tokenization(index, vocabulary, case.instance.encode())
        if alternative is not None:
            guide = constrain.Compiler(vocabulary).regex(case.pattern)
            if _common.timed_walk(guide, alternative, eos_id, bitmask).accepted:
                c_ids = o_ids = alternative
                result["timed_tokenization"] = "alternative"
    result["timed_token_ids"] = {"constrain": c_ids, "outlines_core": o_ids}

    # 3. Compile times, engines interleaved; constrain's cold walk follows each lazy compile.
    c_lazy: list[Timing] = []
    c_eager: list[Timing] = []
    o_index: list[Timing] = []
    cold_walks: list[Walk] = []
    lazy_guide: constrain.RegexGuide | None = None
    for _ in range(repeats):
        if c["error"] is None:
            lazy_guide, timing = timed(fresh_compile(vocabulary, case.pattern))
            c_lazy.append(timing)
            if c_ids is not None:
                cold_walks.append(_common.timed_walk(lazy_guide, c_ids, eos_id, bitmask))
            if c["eager_error"] is None:
                try:
                    states, timing = timed(fresh_compile(vocabulary, case.pattern, eager=True))
                    c_eager.append(timing)
                    c["states_eager"] = states
                except constrain.ConstrainError as exc:
                    c["eager_error"] = describe(exc)
        if o["error"] is None:
            index, timing = timed(lambda: outlines_core.Index(case.pattern, outlines_vocab))
            o_index.append(timing)

    if c_lazy:
        c["compile_lazy_ms"] = median_ms(c_lazy)
        c["compile_lazy_cpu_ms"] = median_ms(c_lazy, "cpu_ns")
    if c_eager and c["eager_error"] is None:
        c["compile_eager_ms"] = median_ms(c_eager)
        c["compile_eager_cpu_ms"] = median_ms(c_eager, "cpu_ns")
    if o_index:
        o["compile_ms"] = median_ms(o_index)
        o["compile_cpu_ms"] = median_ms(o_index, "cpu_ns")
        o["states"] = len(index.get_transitions())

    # 4. Per-step mask times: an untimed warm-up walk, then `walks` timed walks per engine.
    if c_ids is not None and lazy_guide is not None and all(w.accepted for w in cold_walks):
        c["mask_cold_us"] = _common.steps_us(cold_walks)
        c["mask_cold_walk_ms"] = float(_common.median([sum(w.steps_ns) for w in cold_walks])) / 1e6
        _common.timed_walk(lazy_guide, c_ids, eos_id, bitmask)
        warm = [_common.timed_walk(lazy_guide, c_ids, eos_id, bitmask) for _ in range(walks)]
        c["mask_warm_us"] = _common.steps_us(warm)
        c["states_built_lazy"] = lazy_guide.index.num_built_rows
    if o_ids is not None and index is not None:
        walk_outlines(index, o_ids, eos_id, mask)
        warm = [walk_outlines(index, o_ids, eos_id, mask) for _ in range(walks)]
        if all(w.accepted for w in warm):
            o["mask_warm_us"] = _common.steps_us(warm)
    return result


# ---------------------------------------------------------------------- report


def ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or denominator <= 0:
        return "–"
    return f"{numerator / denominator:.1f}×"


def pair(stats: dict[str, float] | None) -> str:
    return "–" if stats is None else f"{stats['p50']:.1f} / {stats['p99']:.1f}"


def mask_cell(engine: dict[str, Any], stats_key: str) -> str:
    stats = engine.get(stats_key)
    if stats is not None:
        return pair(stats)
    if engine.get("error"):
        return "refused"
    return "rejected" if engine.get("accepts") is False else "–"


def verdict(engine: dict[str, Any]) -> str:
    if engine.get("error"):
        return "refused"
    return "✓" if engine.get("accepts") else "✗"


def markdown(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    setup = meta["setup_ms"]
    lines = [
        f"# Regex benchmark: constrain {meta['versions']['constrain']} vs outlines-core "
        f"{meta['versions']['outlines-core']}",
        "",
        f"- machine: {meta['cpu_model']}, {meta['cpu_count']} CPUs, {meta['platform']}; single-threaded",
        f"- python {meta['python']}; numpy {meta['versions']['numpy']}; torch {meta['versions']['torch']}",
        f"- tokenizer: {meta['tokenizer']} ({meta['vocab_size']} ids, EOS {meta['eos_id']}); "
        f"outlines-core mask fill: {meta['outlines_fill']}",
        f"- one-time setup: constrain vocabulary {setup['constrain_vocabulary']:.0f} ms + walk tables "
        f"{setup['constrain_walk_tables']:.0f} ms; "
        f"outlines-core vocabulary {setup['outlines_vocabulary']:.0f} ms",
        f"- compile: median of {meta['repeats']} (lazy = compile only, eager = compile + precompute); "
        f"mask: one step = fill bitmask + advance, µs p50 / p99; cold = first walk of each fresh lazy "
        f"guide, warm = {meta['walks']} walks after a warm-up",
        "",
        "| regex | tokens | lazy ms | eager ms | outlines ms | o/lazy | o/eager "
        "| constrain cold µs | constrain warm µs | outlines µs | o/c p50 | accepts c/o |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for r in results:
        c, o = r["constrain"], r["outlines_core"]
        c_warm, o_warm = c.get("mask_warm_us"), o.get("mask_warm_us")
        tokens = str(len(r["token_ids"]))
        if r["timed_tokenization"] == "alternative":
            tokens = f"{tokens} ({len(r['timed_token_ids']['outlines_core'])}*)"
        cells = [
            r["name"],
            tokens,
            "refused" if c.get("error") else _common.fmt(c.get("compile_lazy_ms")),
            "refused" if c.get("error") or c.get("eager_error") else _common.fmt(c.get("compile_eager_ms")),
            "refused" if o.get("error") else _common.fmt(o.get("compile_ms")),
            ratio(o.get("compile_ms"), c.get("compile_lazy_ms")),
            ratio(o.get("compile_ms"), c.get("compile_eager_ms")),
            mask_cell(c, "mask_cold_us"),
            mask_cell(c, "mask_warm_us"),
            mask_cell(o, "mask_warm_us"),
            ratio(o_warm["p50"], c_warm["p50"]) if c_warm and o_warm else "–",  # same tokens for both
            f"{verdict(c)} / {verdict(o)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "o/lazy, o/eager: outlines-core compile time over constrain's; o/c p50: outlines-core warm step "
        "over constrain's (above 1× means constrain is faster). accepts: whether each engine takes the "
        "tokenizer's own tokenization of the instance and then allows EOS.",
    ]
    if any(r["timed_tokenization"] == "alternative" for r in results):
        lines.append(
            "(n*): outlines-core rejected the tokenizer's own tokenization, so both engines' mask times "
            "come from another tokenization of the same text (n tokens) that outlines-core accepts."
        )
    problems = [
        f"- {r['name']}: {engine} {what}: {reason}"
        for r in results
        for engine, key in (("constrain", "constrain"), ("outlines-core", "outlines_core"))
        for what, reason in (
            ("refused the pattern", r[key].get("error")),
            ("could not precompute", r[key].get("eager_error")),
            ("rejected the instance", r[key].get("reject_reason")),
        )
        if reason
    ]
    if problems:
        lines += ["", "Problems:", *problems]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "mistral", "llama3"])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and walks (2 and 5)")
    parser.add_argument("--repeats", type=int, help="compile repeats (default 5, --quick 2)")
    parser.add_argument("--walks", type=int, help="timed warm walks per engine (default 30, --quick 5)")
    parser.add_argument(
        "--outlines-fill",
        choices=["kernel", "direct"],
        default="kernel",
        help="fill outlines-core's mask via outlines_core.kernels.torch (default) or Guide.write_mask_into",
    )
    parser.add_argument("--only", nargs="*", help="run only these case names")
    parser.add_argument("--output-dir", type=Path, default=_common.RESULTS_DIR)
    return parser.parse_args(argv)


def iter_cases(only: list[str] | None) -> Iterator[Case]:
    cases = build_cases()
    names = {c.name for c in cases}
    unknown = set(only or ()) - names
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; choose from {sorted(names)}")
    yield from (c for c in cases if not only or c.name in only)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    walks = args.walks or (5 if args.quick else 30)
    cases = list(iter_cases(args.only))
    for case in cases:  # the instances themselves are checked with Python's re, independently of both engines
        if not re.fullmatch(case.pattern, case.instance):
            raise SystemExit(f"case {case.name}: instance {case.instance!r} does not match its own pattern")

    started = time.perf_counter()
    setup = _common.load_setup(args.tokenizer)
    tokenizer, vocabulary, eos_id = setup.tokenizer, setup.vocabulary, setup.eos_id
    outlines_vocab, t_ovocab = timed(lambda: outlines_vocabulary(vocabulary, eos_id))
    mask = OutlinesMask(vocabulary.size, args.outlines_fill)

    meta: dict[str, Any] = {
        **_common.machine(),
        "versions": _common.versions("constrain", "outlines-core", "numpy", "torch"),
        "tokenizer": args.tokenizer,
        "vocab_size": vocabulary.size,
        "eos_id": eos_id,
        "outlines_fill": args.outlines_fill,
        "repeats": repeats,
        "walks": walks,
        "quick": args.quick,
        "setup_ms": {
            "constrain_vocabulary": setup.vocabulary_ms,
            "constrain_walk_tables": setup.tables_ms,
            "outlines_vocabulary": t_ovocab.wall_ms,
        },
    }

    results = []
    for case in cases:
        ids = _common.spelled_ids(tokenizer, vocabulary, case.instance)
        if ids is None:
            raise SystemExit(f"case {case.name}: the tokenizer's ids do not spell {case.instance!r}")
        case_start = time.perf_counter()
        result = run_case(case, vocabulary, ids, eos_id, outlines_vocab, mask, repeats, walks)
        result["seconds"] = time.perf_counter() - case_start
        results.append(result)
        print(f"  {case.name}: {result['seconds']:.1f} s", file=sys.stderr)
    meta["total_seconds"] = time.perf_counter() - started

    table = markdown(meta, results)
    print(table)
    _common.write_results("regex", {"meta": meta, "results": results}, table, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
