#!/usr/bin/env python
"""Scaling: how setup, compile time, mask time and memory grow with the vocabulary and the schema.

Run with ``python benchmarks/bench_scaling.py`` (``--quick`` for fewer sizes and
repeats, ``--engines constrain,xgrammar`` for a subset of engines, ``--parts vocabulary``
or ``--parts schema`` for one half). It prints markdown tables and writes
``benchmarks/results/scaling.json`` and ``scaling.md``.

Vocabulary scaling
------------------
The four offline tokenizers, 32k → 49k → 128k → 151k tokens (Mistral's SentencePiece,
SmolLM2's byte-level BPE, Llama-3's and Qwen's tiktoken BPE). For each one:

* **setup**: loading the tokenizer (from the converted cache), constrain's
  ``Vocabulary.from_tokenizer`` and the tables built on its first use (walk tables,
  byte alphabet: the one-time, per-tokenizer cost), and tracemalloc's peak over those; for each peer, what its worker spends
  turning the tokenizer into its own tables (``peers.py``'s engine constructor:
  xgrammar's ``TokenizerInfo`` + ``GrammarCompiler``, llguidance's ``from_tokenizer``,
  outlines-core's ``Vocabulary``).
* **regexes** (constrain only; four patterns of ``bench_regex``): compile, then per-step
  mask time cold and warm, as in ``bench_hierarchy`` (``_common.measure_guide``).
* **schemas** (every engine, the same harness as ``bench_peers``: one single-threaded
  worker per engine, killed past its budget): compile (median of up to 3), then the
  instance walked twice by fresh matchers of that compile: the per-step time (fill the
  full mask + advance) of the first walk is *cold* (a lazy engine builds what it needs
  then), of the second *warm*; and whether the engine took the tokens.

Schema size growth
------------------
On SmolLM2's vocabulary, three axes built by ``bench_schema``'s scale-case builders:
properties of one object (``wide_object``, every fifth required), the size of a
string enum (``place_names``) and the nesting depth of objects in arrays (``nested``).
For every engine: compile time in its worker (no walk; each compile is fresh). For
constrain, also tracemalloc's peak over one more compile and its first mask, and the
size of its automaton (NFA states). Peers' memory is native (Rust/C++) and invisible to
tracemalloc, so it is not compared. An engine whose compile runs past its per-schema
budget is killed and the point is recorded as a timeout.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import constrain
from bench_peers import Case, Instance, Worker, write_context
from bench_regex import build_cases as regex_cases
from bench_schema import nested, place_names, wide_object
from constrain.testing import OFFLINE_TOKENIZERS

ENGINES = ("constrain", "xgrammar", "llguidance", "outlines-core")
REGEXES = ("phone", "iso_datetime", "json_string", "words_200")
SCHEMAS = ("tool_get_weather", "tool_book_flight")


# ---------------------------------------------------------------------- peers, through bench_peers' workers


def run_engines(setup: _common.Setup, cases: list[Case], args: argparse.Namespace) -> dict[str, Any]:
    """Each engine in its own worker over ``cases``: setup, compile times, steps and verdicts per case."""
    context_path = write_context(setup)
    out: dict[str, Any] = {}
    try:
        for engine in args.engines:
            worker = Worker(engine, context_path)
            if not worker.start():
                out[engine] = {"available": False, "error": worker.failed}
                print(f"    {engine}: not available ({worker.failed})", file=sys.stderr, flush=True)
                worker.close()
                continue
            info = worker.info or {}
            run: dict[str, Any] = {"available": True, "version": info.get("version"), "setup_s": info.get("setup_s"),
                                   "cases": {}}  # fmt: skip
            for case in cases:
                run["cases"][case.name] = case_summary(worker.run(case, args.budget, args.grace))
            worker.close()
            out[engine] = run
            compiled = [c for c in run["cases"].values() if c["status"] == "ok"]
            print(f"    {engine}: setup {_common.fmt(run['setup_s'])} s, {len(compiled)}/{len(cases)} compiled",
                  file=sys.stderr, flush=True)  # fmt: skip
    finally:
        os.unlink(context_path)
    return out


def case_summary(result: dict[str, Any]) -> dict[str, Any]:
    """One worker answer reduced to its compile median, verdicts and step times: the first walk cold, the rest warm."""
    records = result.get("instances", [])
    out: dict[str, Any] = {
        "status": result["status"],
        "compile_ms": _common.median(result.get("compile_ms") or []),
        "accepted": [record.get("accepted") for record in records],
        "cold_steps_us": records[0].get("steps_us", []) if records else [],
        "warm_steps_us": [t for record in records[1:] for t in record.get("steps_us", [])],
    }
    out["cold_us"] = _common.percentiles(out["cold_steps_us"])
    out["warm_us"] = _common.percentiles(out["warm_steps_us"])
    if result.get("error"):
        out["error"] = result["error"]
    return out


def instance(setup: _common.Setup, value: Any) -> Instance | None:
    """``value`` as ``json.dumps`` text and the tokenizer's ids for it; None when they do not spell it."""
    text = json.dumps(value)
    ids = _common.spelled_ids(setup.tokenizer, setup.vocabulary, text)
    return None if ids is None else Instance("valid", "", text, ids)


# ---------------------------------------------------------------------- vocabulary scaling


def corpus_case(name: str, setup: _common.Setup, walks: int) -> Case:
    schema = json.loads((_common.HERE / "schemas" / f"{name}.json").read_text())
    examples = json.loads((_common.HERE / "schemas" / f"{name}.examples.json").read_text())["instances"]
    return walked(Case(name, "scaling", schema), instance(setup, examples[0]), walks)


def enum_case(n: int, setup: _common.Setup, walks: int) -> Case:
    names = place_names(n)
    return walked(Case(f"enum_{n}", "scaling", {"type": "string", "enum": names}), instance(setup, names[n // 2]), walks)


def walked(case: Case, tokenized: Instance | None, walks: int) -> Case:
    """The case with its instance ``1 + walks`` times: the worker's first walk is cold, the others warm."""
    case.instances = [] if tokenized is None else [tokenized] * (1 + walks)
    return case


def pool_steps(points: list[dict[str, Any]]) -> None:
    """Set each point's ``pooled``: per engine, cold and warm step percentiles over the common schemas.

    Common = walked by every available engine at every vocabulary size, so that an engine
    that refuses (or times out on) the hardest schema somewhere does not look faster for it.
    """
    runs = [{engine: run["cases"] for engine, run in p["engines"].items() if run.get("available")} for p in points]
    common = [name for name in points[0]["schemas"]
              if all(cases[name]["status"] == "ok" and cases[name]["warm_steps_us"]
                     for point_runs in runs for cases in point_runs.values())]  # fmt: skip
    for point, point_runs in zip(points, runs):
        point["pooled"] = {"schemas": common}
        for engine, cases in point_runs.items():
            point["pooled"][engine] = {
                key: _common.percentiles([t for name in common for t in cases[name][f"{key}_steps_us"]])
                for key in ("cold", "warm")
            }


def vocabulary_point(name: str, args: argparse.Namespace) -> dict[str, Any]:
    setup = _common.load_setup(name)

    def build_vocabulary() -> None:
        constrain.Compiler(constrain.Vocabulary.from_tokenizer(setup.tokenizer)).regex("a").precompute()

    out: dict[str, Any] = {
        "tokenizer": name,
        "family": OFFLINE_TOKENIZERS[name],
        "vocab_size": setup.vocabulary.size,
        "text_tokens": sum(piece is not None for piece in setup.vocabulary.token_bytes),
        "load_ms": setup.load_ms,
        "vocabulary_ms": setup.vocabulary_ms,
        "tables_ms": setup.tables_ms,
        "vocabulary_peak_mib": _common.peak_mib(build_vocabulary),
        "regexes": {},
    }
    for case in (c for c in regex_cases() if c.name in REGEXES):
        ids = _common.spelled_ids(setup.tokenizer, setup.vocabulary, case.instance)
        if ids is None:
            out["regexes"][case.name] = {"error": "the tokenizer's ids do not spell the instance"}
            continue
        out["regexes"][case.name] = _common.measure_guide(
            lambda compiler: compiler.regex(case.pattern), ids, setup, repeats=args.repeats, walks=args.walks,
            budget_s=args.budget, tracemalloc_max_ms=args.budget * 1e3,
            states=lambda guide: {"dfa": guide.index.dfa.num_states, "rows": guide.index.num_built_rows},
        )  # fmt: skip
    cases = [corpus_case(schema, setup, args.walks) for schema in SCHEMAS] + [enum_case(100, setup, args.walks)]
    out["schemas"] = [case.name for case in cases]
    out["engines"] = run_engines(setup, cases, args)
    return out


# ---------------------------------------------------------------------- schema size growth


AXES: dict[str, tuple[str, Callable[[int], Any], tuple[int, ...], tuple[int, ...]]] = {
    # axis: (what the size counts, schema of that size, quick sizes, full sizes)
    "properties": ("properties", lambda n: wide_object(n, 5)[0], (10, 50, 200), (10, 50, 100, 200, 500)),
    "enum": ("enum values", lambda n: {"type": "string", "enum": place_names(n)}, (10, 100, 1_000),
             (10, 100, 1_000, 10_000)),
    "depth": ("nesting depth", lambda n: nested(n)[0], (1, 2, 4, 8), (1, 2, 3, 4, 6, 8)),
}  # fmt: skip


def constrain_footprint(schema: Any, vocabulary: Any) -> dict[str, Any]:
    """NFA states of constrain's automaton and tracemalloc's peak over a compile and its first mask."""
    guides: list[Any] = []

    def compile_and_mask() -> None:
        guide = constrain.Compiler(vocabulary).json_schema(schema)
        guide.allowed_tokens(guide.initial_state)
        guides.append(guide)

    try:
        peak = _common.peak_mib(compile_and_mask)
    except constrain.ConstrainError as exc:
        return {"error": _common.describe(exc), "limit": getattr(exc, "limit", None)}
    return {"peak_mib": peak, "nfa": len(guides[0].index.dfa.nfa)}


def schema_growth(setup: _common.Setup, args: argparse.Namespace) -> dict[str, Any]:
    """Every axis's schemas through every engine (one worker each for all of them), then constrain's footprint."""
    sizes = {axis: quick if args.quick else full for axis, (_, _, quick, full) in AXES.items()}
    cases = {(axis, n): Case(f"{axis}_{n}", "scaling", AXES[axis][1](n)) for axis in AXES for n in sizes[axis]}
    print(f"  schema size: {len(cases)} schemas", file=sys.stderr, flush=True)
    engines = run_engines(setup, list(cases.values()), args)
    out: dict[str, Any] = {}
    for axis, (counts, _, _, _) in AXES.items():
        points = []
        for n in sizes[axis]:
            case = cases[axis, n]
            point: dict[str, Any] = {"size": n, "schema_chars": len(json.dumps(case.schema))}
            point["constrain_footprint"] = constrain_footprint(case.schema, setup.vocabulary)
            point["engines"] = {
                engine: run["cases"][case.name] if run.get("available") else {"status": "unavailable"}
                for engine, run in engines.items()
            }
            points.append(point)
        out[axis] = {"counts": counts, "points": points}
    return out


# ---------------------------------------------------------------------- report


def cell(result: dict[str, Any] | None) -> str:
    """An engine's compile ms for one case, or why there is none."""
    if not result:
        return "–"
    if result["status"] != "ok":
        return result["status"]
    return _common.fmt(result["compile_ms"])


def steps_cell(result: dict[str, Any] | None, key: str) -> str:
    stats = (result or {}).get(key)
    if not stats:
        return "–"
    verdict = "" if all(result["accepted"]) else " ✗"
    return f"{_common.fmt(stats['p50'])} / {_common.fmt(stats['p99'])}{verdict}"


def vocabulary_tables(points: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| tokenizer | vocabulary | text tokens | load ms | constrain vocabulary ms | tables ms "
        "| vocabulary peak MiB | " + " | ".join(f"{e} setup s" for e in ENGINES if e != "constrain") + " |",
        "|---|--:|--:|--:|--:|--:|--:|" + "--:|" * (len(ENGINES) - 1),
    ]
    for p in points:
        setups = [p["engines"].get(e, {}).get("setup_s") for e in ENGINES if e != "constrain"]
        lines.append(
            f"| {p['tokenizer']} | {p['vocab_size']:,} | {p['text_tokens']:,} | {_common.fmt(p['load_ms'])} "
            f"| {_common.fmt(p['vocabulary_ms'])} | {_common.fmt(p['tables_ms'])} "
            f"| {_common.fmt(p['vocabulary_peak_mib'])} | " + " | ".join(_common.fmt(s) for s in setups) + " |"
        )
    lines += ["", "constrain's regexes (compile ms; mask µs p50 / p99, cold and warm):", "",
              "| tokenizer | regex | compile ms | cold µs | warm µs | DFA states | peak MiB |",
              "|---|---|--:|--:|--:|--:|--:|"]  # fmt: skip
    for p in points:
        for name, r in p["regexes"].items():
            if r.get("error"):
                lines.append(f"| {p['tokenizer']} | {name} | {r['error']} ||||| ")
                continue
            cold, warm = r.get("mask_cold_us"), r.get("mask_warm_us")
            lines.append(
                f"| {p['tokenizer']} | {name} | {_common.fmt(r['compile_ms'])} "
                f"| {'–' if not cold else _common.fmt(cold['p50']) + ' / ' + _common.fmt(cold['p99'])} "
                f"| {'–' if not warm else _common.fmt(warm['p50']) + ' / ' + _common.fmt(warm['p99'])} "
                f"| {r['states']['dfa']:,} | {_common.fmt(r.get('peak_mib'))} |"
            )
    common = ", ".join(points[0]["pooled"]["schemas"]) if points else ""
    lines += ["", f"Schema steps pooled over the schemas every engine walked at every size ({common}): µs p50 / p99 "
              "of the cold walk; of the warm walks.", "",
              "| tokenizer | " + " | ".join(ENGINES) + " |", "|---|" + "--:|" * len(ENGINES)]  # fmt: skip
    for p in points:
        cells = []
        for engine in ENGINES:
            cold, warm = (p["pooled"].get(engine, {}).get(key) for key in ("cold", "warm"))
            cells.append("–" if not cold or not warm else
                         f"{_common.fmt(cold['p50'])} / {_common.fmt(cold['p99'])}; "
                         f"{_common.fmt(warm['p50'])} / {_common.fmt(warm['p99'])}")  # fmt: skip
        lines.append(f"| {p['tokenizer']} | " + " | ".join(cells) + " |")
    schemas = points[0]["schemas"] if points else []
    lines += ["", "Schemas, every engine in its own worker: compile ms, then step µs p50 / p99 of the cold walk "
              "and of the warm one (✗: the engine rejected the instance).", "",
              "| tokenizer | schema | engine | compile ms | cold µs | warm µs |", "|---|---|---|--:|--:|--:|"]  # fmt: skip
    for p in points:
        for name in schemas:
            for engine in ENGINES:
                result = p["engines"].get(engine, {}).get("cases", {}).get(name)
                lines.append(f"| {p['tokenizer']} | {name} | {engine} | {cell(result)} "
                             f"| {steps_cell(result, 'cold_us')} | {steps_cell(result, 'warm_us')} |")  # fmt: skip
    return lines


def growth_tables(growth: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for axis, data in growth.items():
        lines += [
            "",
            f"Compile ms by {data['counts']} (constrain's NFA states and tracemalloc peak beside it):",
            "",
            f"| {data['counts']} | schema chars | " + " | ".join(ENGINES) + " | constrain NFA | constrain peak MiB |",
            "|--:|--:|" + "--:|" * (len(ENGINES) + 2),
        ]
        for p in data["points"]:
            footprint = p["constrain_footprint"]
            nfa = f"{footprint['nfa']:,}" if "nfa" in footprint else footprint.get("limit") or "error"
            cells = [cell(p["engines"].get(engine)) for engine in ENGINES]
            lines.append(f"| {p['size']:,} | {p['schema_chars']:,} | " + " | ".join(cells)
                         + f" | {nfa} | {_common.fmt(footprint.get('peak_mib'))} |")  # fmt: skip
    return lines


def growth_exponent(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """The slope of log(value) over log(size) between the first and the last point (1.0: linear)."""
    import math

    if len(sizes) < 2 or values[0] <= 0 or values[-1] <= 0 or sizes[0] == sizes[-1]:
        return None
    return math.log(values[-1] / values[0]) / math.log(sizes[-1] / sizes[0])


def pooled(point: dict[str, Any], engine: str, key: str, q: str = "p99") -> float | None:
    """An engine's pooled step percentile (``key`` cold or warm) at one vocabulary size, if it walked them."""
    stats = point["pooled"].get(engine, {}).get(key)
    return stats[q] if stats else None


def findings(payload: dict[str, Any]) -> list[str]:
    """Statements computed from the numbers, for this page and docs/benchmarks.md."""
    out = []
    points = payload.get("vocabulary") or []
    if len(points) >= 2:
        first, last = points[0], points[-1]
        out.append(
            f"constrain's vocabulary + tables: {_common.fmt(first['vocabulary_ms'] + first['tables_ms'])} ms "
            f"at {first['vocab_size']:,} tokens → {_common.fmt(last['vocabulary_ms'] + last['tables_ms'])} ms "
            f"at {last['vocab_size']:,} ({_common.fmt(first['vocabulary_peak_mib'])} → "
            f"{_common.fmt(last['vocabulary_peak_mib'])} MiB peak)"
        )
        for engine in ENGINES:
            cold = [pooled(p, engine, "cold") for p in (first, last)]
            warm = [pooled(p, engine, "warm") for p in (first, last)]
            if None not in cold + warm:
                out.append(f"{engine}: schema step p99 cold {_common.fmt(cold[0])} → {_common.fmt(cold[1])} µs, "
                           f"warm {_common.fmt(warm[0])} → {_common.fmt(warm[1])} µs from {first['tokenizer']} "
                           f"to {last['tokenizer']}")  # fmt: skip
    for axis, data in (payload.get("schema_size") or {}).items():
        for engine in ENGINES:
            ok = [(p["size"], p["engines"][engine]["compile_ms"]) for p in data["points"]
                  if p["engines"].get(engine, {}).get("status") == "ok"]  # fmt: skip
            failed = [f"{p['size']:,} ({p['engines'][engine]['status']})" for p in data["points"]
                      if p["engines"].get(engine, {}).get("status") not in ("ok", None)]  # fmt: skip
            if not ok and not failed:
                continue
            text = f"{axis}, {engine}: "
            if ok:
                exponent = growth_exponent([s for s, _ in ok], [v for _, v in ok])
                text += f"compile {_common.fmt(ok[0][1])} ms at {ok[0][0]:,} → {_common.fmt(ok[-1][1])} ms at {ok[-1][0]:,}"
                if exponent is not None:
                    text += f" (grows as size^{exponent:.2f})"
            if failed:
                text += ("; " if ok else "") + "no compile at " + ", ".join(failed)
            out.append(text)
    return out


def tables(payload: dict[str, Any]) -> str:
    """Findings and tables (also embedded in docs/benchmarks.md by ``run.py``)."""
    lines = [f"- {line}" for line in findings(payload)]
    if payload.get("vocabulary"):
        lines += ["", "### Vocabulary size", ""] + vocabulary_tables(payload["vocabulary"])
    if payload.get("schema_size"):
        lines += ["", "### Schema size (SmolLM2's vocabulary)"] + growth_tables(payload["schema_size"])
    return "\n".join(lines) + "\n"


def markdown(payload: dict[str, Any]) -> str:
    meta = payload["meta"]
    versions = ", ".join(f"{name} {v}" for name, v in meta["versions"].items())
    return "\n".join([
        "# Scaling: vocabulary size and schema size",
        "",
        "- " + _common.machine_line(meta),
        f"- versions: {versions}",
        f"- constrain regexes: median of {meta['repeats']} compiles, cold = first walk of each fresh guide, "
        f"warm = {meta['walks']} walks; peers and schemas: `bench_peers` workers, budget {meta['budget_s']:g} s "
        "per engine and schema",
        "",
        tables(payload),
    ])  # fmt: skip


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer sizes, 2 repeats, 5 warm walks, 3 s budget")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of " + ",".join(ENGINES))
    parser.add_argument("--parts", default="vocabulary,schema", help="vocabulary, schema or both")
    parser.add_argument("--tokenizers", default=",".join(_common.TOKENIZERS), help="for the vocabulary part")
    parser.add_argument("--repeats", type=int, help="constrain regex compiles (default 3, --quick 2)")
    parser.add_argument("--walks", type=int, help="warm walks per regex (default 20, --quick 5)")
    parser.add_argument("--budget", type=float, help="seconds per engine and schema (default 30, --quick 3)")
    parser.add_argument("--grace", type=float, default=3.0, help="a worker this late past its budget is killed")
    parser.add_argument("--output-dir", type=Path, default=_common.RESULTS_DIR)
    args = parser.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")
    args.parts = set(args.parts.split(","))
    args.repeats = args.repeats or (2 if args.quick else 3)
    args.walks = args.walks or (5 if args.quick else 20)
    args.budget = args.budget or (3.0 if args.quick else 30.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    payload: dict[str, Any] = {}
    if "vocabulary" in args.parts:
        payload["vocabulary"] = []
        for name in args.tokenizers.split(","):
            print(f"  vocabulary: {name}", file=sys.stderr, flush=True)
            payload["vocabulary"].append(vocabulary_point(name, args))
        pool_steps(payload["vocabulary"])
    if "schema" in args.parts:
        payload["schema_size"] = schema_growth(_common.load_setup("smollm2"), args)
    payload["meta"] = {
        **_common.machine(),
        "versions": _common.versions("constrain", "xgrammar", "llguidance", "outlines-core", "numpy"),
        "engines": args.engines,
        "repeats": args.repeats,
        "walks": args.walks,
        "budget_s": args.budget,
        "quick": args.quick,
        "total_seconds": time.perf_counter() - started,
    }
    report = markdown(payload)
    print(report)
    _common.write_results("scaling", payload, report, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
