#!/usr/bin/env python
"""Hierarchy levels: the same JSON language compiled as a regex guide and as a CFG guide.

Run with ``python benchmarks/bench_hierarchy.py`` (``--quick`` for smaller sizes and
fewer repeats, ``--families tree,enum`` for a subset). It prints markdown tables and
writes ``benchmarks/results/hierarchy.json`` and ``hierarchy.md``.

Why
---
constrain has two backends. A regular language compiles to a byte automaton whose
states are built lazily (the regex backend); a recursive schema needs a stack and goes
to the Lark CFG backend. Between the two sits a choice: a recursive schema can also be
*unrolled* to a fixed depth (``max_recursion_depth``) and stay regular. This benchmark
puts numbers on that choice, and on what either backend costs for the same language
when both can express it.

Families
--------
* **flat**: two realistic schemas of the corpus (``benchmarks/schemas``): a tool call's
  arguments, and a flight search with one nested object.
* **tree**: ``{"name", "children": [Node]}``. Unrolled, each level adds one copy of the
  node, so the regex automaton grows linearly with the depth.
* **binary**: an expression ``{"op", "left": Expr | number | name, "right": ...}``
  (``bench_schema.expression_tree``). Unrolled, each level holds *two* copies of the
  level below, so the automaton doubles with each level: this is where the regex path
  blows up.
* **enum**: a string enum of n made-up place names.
* **array**: an array of integers with ``maxItems`` n (the instance has n - 1 items).
* **object**: an object of n optional properties, every fifth required
  (``bench_schema.wide_object``).

For each point, the **regex** guide is ``Compiler.json_schema(schema)`` (with
``max_recursion_depth=d`` for the recursive families) and the **CFG** guide is
``schema_to_grammar(schema)`` compiled as ``json_schema`` compiles it (lark over the skeleton,
terminals from the regex backend), which is what ``json_schema`` does by
itself for a recursive schema; for a non-recursive one the whole schema becomes a
single lexer terminal. Both are built from the same keyword walker, so they describe
the same language. The recursive families walk an instance of exactly depth ``d``, so
the depth-``d`` regex and the CFG both must accept it.

Measurements
------------
* **compile**: a fresh ``Compiler`` over the shared ``Vocabulary`` (empty guide cache,
  shared walk tables) per sample; median of ``--repeats``. The CFG figure includes
  ``schema_to_grammar``, as the regex figure includes the schema walk.
* **mask**: one step is ``fill_bitmask`` then ``advance`` (``_common.timed_walk``), plus
  the closing mask. *cold* = the first walk of each freshly compiled guide (rows, lexer
  walks and masks are built then), pooled over the repeats; *warm* = ``--walks`` walks
  of the last guide after one untimed warm-up walk. µs p50/p90/p99.
* **states**: regex: NFA states (``len(guide.index.dfa.nfa)``), DFA states created by the
  end of the walks (``dfa.num_states``), token-index rows built (``index.num_built_rows``);
  CFG: LALR parser states (``grammar.num_states``), lexer DFA states
  (``grammar.lexer.num_states``), lexer walks built (``index.nodes_built``).
* **memory**: tracemalloc's peak during one more compile and cold walk, untimed
  (tracemalloc slows Python several-fold), skipped when the timed compile + cold walk
  took over ``--tracemalloc-max-ms``. It sees numpy's buffers and Python objects.
* **blow-up**: in the recursive families the depth grows until the regex compile raises
  ``LimitExceededError`` (at the default ``Limits``; ``.limit`` names the limit) or its
  compile or cold walk takes longer than ``--budget`` seconds; that depth is recorded as
  the blow-up point and deeper ones are not tried. The CFG guide is measured at every
  depth tried (its grammar does not depend on the depth).
* **verdict**: whether each guide takes every token of the tokenizer's own tokenization
  (``tokenize_continuation``, checked to spell the text) and then allows EOS.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import constrain
from bench_schema import expression_tree, place_names, wide_object
from constrain.json_schema.to_grammar import schema_to_grammar

# ---------------------------------------------------------------------- the families


@dataclass(frozen=True)
class Point:
    """One schema of a family, with the option that makes it regular and a valid instance."""

    label: str
    size: int
    schema: Any
    instance: Any
    depth: int | None = None  # max_recursion_depth for the regex guide of a recursive schema


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    parameter: str  # what ``Point.size`` counts
    recursive: bool
    points: Callable[[bool], list[Point]]  # quick -> the points, smallest first


TREE_SCHEMA = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 20},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name", "children"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/Node",
}


def tree_instance(depth: int) -> Any:
    """A node ``depth`` levels deep: each level has a deeper child and a leaf."""
    node: Any = {"name": "leaf", "children": []}
    for level in range(2, depth + 1):
        node = {"name": f"level {level}", "children": [node, {"name": "x", "children": []}]}
    return node


def flat_points(quick: bool) -> list[Point]:
    points = []
    for name in ("tool_get_weather", "tool_book_flight"):
        schema = json.loads((_common.HERE / "schemas" / f"{name}.json").read_text())
        examples = json.loads((_common.HERE / "schemas" / f"{name}.examples.json").read_text())
        points.append(Point(name, len(schema.get("properties", {})), schema, examples["instances"][0]))
    return points


def tree_points(quick: bool) -> list[Point]:
    return [Point(f"depth {d}", d, TREE_SCHEMA, tree_instance(d), d) for d in range(1, (6 if quick else 12) + 1)]


def binary_points(quick: bool) -> list[Point]:
    points = []
    for d in range(1, (10 if quick else 16) + 1):
        schema, options, instance = expression_tree(d)
        points.append(Point(f"depth {d}", d, schema, instance, options["max_recursion_depth"]))
    return points


def enum_points(quick: bool) -> list[Point]:
    points = []
    for n in (10, 100, 1_000) if quick else (10, 100, 1_000, 10_000):
        names = place_names(n)
        points.append(Point(f"{n:,} strings", n, {"type": "string", "enum": names}, names[n // 2]))
    return points


def array_points(quick: bool) -> list[Point]:
    return [
        Point(f"maxItems {n:,}", n, {"type": "array", "items": {"type": "integer"}, "maxItems": n}, list(range(n - 1)))
        for n in ((10, 100) if quick else (10, 100, 1_000))
    ]


def object_points(quick: bool) -> list[Point]:
    points = []
    for n in (10, 50) if quick else (10, 50, 200):
        schema, instance = wide_object(n, 5)
        points.append(Point(f"{n} properties", n, schema, instance))
    return points


FAMILIES = [
    Family("flat", "Flat objects from the corpus", "properties", False, flat_points),
    Family("tree", "Recursive tree (children array): regex unrolled to depth d vs CFG", "depth", True, tree_points),
    Family("binary", "Recursive binary expression: regex unrolled to depth d vs CFG", "depth", True, binary_points),
    Family("enum", "String enum of n values", "values", False, enum_points),
    Family("array", "Array of integers with maxItems n", "maxItems", False, array_points),
    Family("object", "Object of n properties", "properties", False, object_points),
]


# ---------------------------------------------------------------------- one backend at one point


def regex_guide(compiler: constrain.Compiler, point: Point) -> Any:
    options = {} if point.depth is None else {"max_recursion_depth": point.depth}
    guide = compiler.json_schema(point.schema, **options)
    if guide.backend != "regex":
        raise RuntimeError(f"{point.label}: expected the regex backend, got {guide.backend}")
    return guide


def cfg_guide(compiler: constrain.Compiler, point: Point) -> Any:
    grammar = schema_to_grammar(point.schema)  # the grammar json_schema builds for a recursive schema
    return compiler._grammar_of_trees(grammar.text, grammar.terminals, compiler.limits)


def regex_states(guide: Any) -> dict[str, int]:
    return {"nfa": len(guide.index.dfa.nfa), "dfa": guide.index.dfa.num_states, "rows": guide.index.num_built_rows}


def cfg_states(guide: Any) -> dict[str, int]:
    return {
        "parser": guide.grammar.num_states,
        "lexer": guide.grammar.lexer.num_states,
        "walks": guide.index.nodes_built,
    }


BACKENDS: dict[str, tuple[Callable[[constrain.Compiler, Point], Any], Callable[[Any], dict[str, int]]]] = {
    "regex": (regex_guide, regex_states),
    "cfg": (cfg_guide, cfg_states),
}


def measure(backend: str, point: Point, ids: list[int], setup: _common.Setup, args: argparse.Namespace) -> dict[str, Any]:
    build, states = BACKENDS[backend]
    return _common.measure_guide(
        lambda compiler: build(compiler, point), ids, setup, repeats=args.repeats, walks=args.walks,
        budget_s=args.budget, tracemalloc_max_ms=args.tracemalloc_max_ms, states=states,
    )  # fmt: skip


def warm_up(point: Point, ids: list[int], setup: _common.Setup) -> None:
    """Both backends once, untimed: first-use costs (imports, the process-wide cache of parsed regex
    fragments) would otherwise land on the family's first point."""
    bitmask = constrain.allocate_bitmask(setup.vocabulary.size)
    for build, _ in BACKENDS.values():
        _common.timed_walk(build(constrain.Compiler(setup.vocabulary), point), ids, setup.eos_id, bitmask)


def over_budget(result: dict[str, Any], budget_s: float) -> str | None:
    """Why the regex path stops growing here (a limit, or more than the time budget), else None."""
    if result.get("limit"):
        return f"LimitExceededError({result['limit']})"
    if result.get("error"):
        return result["error"]
    slowest = max(result.get("compile_ms") or 0.0, result.get("cold_walk_ms") or 0.0)
    if slowest > budget_s * 1e3:
        return f"over the {budget_s:g} s budget ({slowest / 1e3:.1f} s)"
    return None


def run_family(family: Family, setup: _common.Setup, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"name": family.name, "title": family.title, "parameter": family.parameter,
                           "recursive": family.recursive, "points": [], "blowup": None}  # fmt: skip
    points = family.points(args.quick)
    tokenized = []
    for point in points:
        ids = _common.spelled_ids(setup.tokenizer, setup.vocabulary, json.dumps(point.instance))
        if ids is None:
            raise SystemExit(f"{family.name} {point.label}: the tokenizer's ids do not spell the instance")
        tokenized.append(ids)
    warm_up(points[0], tokenized[0], setup)
    for point, ids in zip(points, tokenized):
        text = json.dumps(point.instance)
        started = time.perf_counter()
        row: dict[str, Any] = {"label": point.label, "size": point.size, "tokens": len(ids), "chars": len(text)}
        for backend in BACKENDS:
            row[backend] = measure(backend, point, ids, setup, args)
        row["seconds"] = time.perf_counter() - started
        out["points"].append(row)
        r, c = row["regex"], row["cfg"]
        print(
            f"  {family.name} {point.label}: regex {_common.fmt(r.get('compile_ms'))} ms"
            f"{' ' + r['error'] if r.get('error') else ''}, cfg {_common.fmt(c.get('compile_ms'))} ms"
            f"{' ' + c['error'] if c.get('error') else ''} ({row['seconds']:.1f} s)",
            file=sys.stderr, flush=True,
        )  # fmt: skip
        reason = over_budget(r, args.budget) if family.recursive else None
        if reason:
            out["blowup"] = {"size": point.size, "label": point.label, "reason": reason}
            break
    return out


# ---------------------------------------------------------------------- report


def pair(stats: dict[str, float] | None) -> str:
    return "–" if not stats else f"{_common.fmt(stats['p50'])} / {_common.fmt(stats['p99'])}"


def states_cell(result: dict[str, Any]) -> str:
    states = result.get("states")
    if not states:
        return "–"
    return " / ".join(f"{value:,}" for value in states.values())


def verdict(result: dict[str, Any]) -> str:
    if result.get("error"):
        return "refused"
    return "✓" if result.get("accepted") else "✗"


def compile_cell(result: dict[str, Any]) -> str:
    if result.get("error"):
        limit = result.get("limit")
        return f"{limit or 'error'} after {_common.fmt(result.get('error_after_ms'))}"
    return _common.fmt(result.get("compile_ms"))


def family_table(family: dict[str, Any]) -> list[str]:
    """The markdown table of one family: regex and CFG side by side at each point."""
    lines = [
        f"| {family['parameter']} | tokens | compile ms regex / CFG | cold µs p50 / p99 regex | cold CFG "
        "| warm µs p50 / p99 regex | warm CFG | states regex NFA / DFA / rows | states CFG parser / lexer / walks "
        "| peak MiB regex / CFG | accepts regex / CFG |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for row in family["points"]:
        r, c = row["regex"], row["cfg"]
        cells = [
            row["label"],
            str(row["tokens"]),
            f"{compile_cell(r)} / {compile_cell(c)}",
            pair(r.get("mask_cold_us")),
            pair(c.get("mask_cold_us")),
            pair(r.get("mask_warm_us")),
            pair(c.get("mask_warm_us")),
            states_cell(r),
            states_cell(c),
            f"{_common.fmt(r.get('peak_mib'))} / {_common.fmt(c.get('peak_mib'))}",
            f"{verdict(r)} / {verdict(c)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def findings(family: dict[str, Any]) -> list[str]:
    """Short statements computed from one family's numbers (no figure is written by hand)."""
    points = [p for p in family["points"] if p["regex"].get("compile_ms") is not None]
    out = []
    if family["recursive"]:
        blowup = family["blowup"]
        last = points[-1] if points else None
        if blowup:
            out.append(f"regex unrolling stops at {blowup['label']} ({blowup['reason']})")
        elif last:
            out.append(f"regex unrolling reached {last['label']} without hitting a limit or the budget")
        if last:
            out.append(
                f"at {last['label']}: regex compile {_common.fmt(last['regex']['compile_ms'])} ms and "
                f"{last['regex']['states']['nfa']:,} NFA states; CFG compile "
                f"{_common.fmt(last['cfg'].get('compile_ms'))} ms"
            )
        if len(points) >= 2 and points[0]["regex"]["states"]["nfa"]:
            first = points[0]["regex"]["states"]["nfa"]
            steps = points[-1]["size"] - points[0]["size"]
            growth = (points[-1]["regex"]["states"]["nfa"] / first) ** (1 / steps) if steps else 1.0
            out.append(f"NFA states grow ×{growth:.2f} per level")
    cfg_p99 = [p["cfg"]["mask_warm_us"]["p99"] for p in family["points"] if p["cfg"].get("mask_warm_us")]
    regex_p99 = [p["regex"]["mask_warm_us"]["p99"] for p in family["points"] if p["regex"].get("mask_warm_us")]
    if regex_p99 and cfg_p99:
        out.append(
            f"warm mask p99: regex {_common.fmt(min(regex_p99))}–{_common.fmt(max(regex_p99))} µs, "
            f"CFG {_common.fmt(min(cfg_p99))}–{_common.fmt(max(cfg_p99))} µs"
        )
    compiled = [p for p in family["points"] if "accepted" in p["regex"] and "accepted" in p["cfg"]]
    disagree = [p["label"] for p in compiled if p["regex"]["accepted"] != p["cfg"]["accepted"]]
    if disagree:
        out.append("the backends disagree on the instance at " + ", ".join(disagree))
    return out


def tables(payload: dict[str, Any]) -> str:
    """Every family's findings and table (also embedded in docs/benchmarks.md by ``run.py``)."""
    lines: list[str] = []
    for family in payload["families"]:
        lines += ["", f"### {family['title']}", ""]
        lines += [f"- {line}" for line in findings(family)]
        lines += [""] + family_table(family)
    return "\n".join(lines).lstrip("\n") + "\n"


def markdown(payload: dict[str, Any]) -> str:
    meta = payload["meta"]
    return "\n".join([
        f"# Hierarchy levels: regex vs CFG backend (constrain {meta['versions']['constrain']})",
        "",
        "- " + _common.machine_line(meta),
        f"- tokenizer: {meta['tokenizer']} ({meta['vocab_size']:,} ids)",
        f"- compile: median of {meta['repeats']} fresh compiles; mask: fill_bitmask + advance per step, µs; cold: "
        f"first walk of each fresh guide; warm: {meta['walks']} walks after a warm-up; blow-up: a limit or more "
        f"than {meta['budget_s']:g} s to compile or walk cold",
        "",
        tables(payload),
    ])  # fmt: skip


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, 2 repeats, 5 warm walks, 1 s budget")
    parser.add_argument("--tokenizer", default="smollm2", choices=list(_common.TOKENIZERS))
    parser.add_argument("--families", help="comma-separated subset of " + ",".join(f.name for f in FAMILIES))
    parser.add_argument("--repeats", type=int, help="compiles (each walked cold) per point (default 3, --quick 2)")
    parser.add_argument("--walks", type=int, help="timed warm walks per point (default 20, --quick 5)")
    parser.add_argument("--budget", type=float, help="seconds a regex compile or cold walk may take before the "
                        "depth stops growing (default 10, --quick 1)")  # fmt: skip
    parser.add_argument("--tracemalloc-max-ms", type=float,
                        help="measure peak memory only where compile + cold walk took at most this long "
                        "(default 3000, --quick 500)")  # fmt: skip
    parser.add_argument("--output-dir", type=Path, default=_common.RESULTS_DIR)
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (2 if args.quick else 3)
    args.walks = args.walks or (5 if args.quick else 20)
    args.budget = args.budget or (1.0 if args.quick else 10.0)
    args.tracemalloc_max_ms = args.tracemalloc_max_ms or (500.0 if args.quick else 3000.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    families = FAMILIES
    if args.families:
        wanted = set(args.families.split(","))
        unknown = wanted - {f.name for f in FAMILIES}
        if unknown:
            raise SystemExit(f"unknown families {sorted(unknown)}; choose from {[f.name for f in FAMILIES]}")
        families = [f for f in FAMILIES if f.name in wanted]
    started = time.perf_counter()
    setup = _common.load_setup(args.tokenizer)
    results = [run_family(family, setup, args) for family in families]
    meta = {
        **_common.machine(),
        "versions": _common.versions("constrain", "lark", "numpy"),
        "tokenizer": args.tokenizer,
        "vocab_size": setup.vocabulary.size,
        "repeats": args.repeats,
        "walks": args.walks,
        "budget_s": args.budget,
        "tracemalloc_max_ms": args.tracemalloc_max_ms,
        "quick": args.quick,
        "total_seconds": time.perf_counter() - started,
    }
    payload = {"meta": meta, "families": results}
    report = markdown(payload)
    print(report)
    _common.write_results("hierarchy", payload, report, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
