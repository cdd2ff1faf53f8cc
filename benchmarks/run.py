#!/usr/bin/env python
"""The one benchmark command: run every benchmark, then regenerate docs/benchmarks.md and its plots.

    python benchmarks/run.py --quick          # every benchmark in its quick mode (minutes)
    python benchmarks/run.py                  # the full run (about an hour on two cores)
    python benchmarks/run.py --only hierarchy,scaling
    python benchmarks/run.py --render-only    # page and plots from the results already there

Each benchmark script runs as its own subprocess (``--quick`` passed on), writes its JSON
into ``benchmarks/results/`` and its output into ``benchmarks/results/logs/<name>.log``.
A script that fails or runs past its time limit is recorded as such in
``benchmarks/results/run.json`` and the run goes on; its section of the page then shows
the results it left before, if any, with their own date. Then the page and the plots
(``docs/img/*.png``) are rendered from the JSON alone, so ``--render-only`` reproduces
them exactly. Every number on the page comes from a results file: the prose around the
tables says how to read them, the generated lines say what they show.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

RESULTS = _common.RESULTS_DIR
LOGS = RESULTS / "logs"
RUN_JSON = RESULTS / "run.json"
PAGE = _common.DOCS_DIR / "benchmarks.md"
IMAGES = _common.DOCS_DIR / "img"

#: Every engine whose version the page lists, and the other packages the numbers depend on.
PACKAGES = (
    "constrain", "xgrammar", "llguidance", "outlines-core", "lm-format-enforcer", "transformers-cfg",
    "lark", "interegular", "numpy", "torch", "transformers", "tokenizers", "matplotlib",
)  # fmt: skip


@dataclass(frozen=True)
class Script:
    name: str
    path: str
    what: str
    results: str  # its JSON in benchmarks/results/
    report: str  # where its full tables are, relative to docs/
    quick_args: tuple[str, ...] = ("--quick",)
    full_args: tuple[str, ...] = ()


CFG_JSON = str(RESULTS / "cfg.json")
SCRIPTS = [
    Script("regex", "bench_regex.py", "regex compile (lazy, eager) and per-step mask time beside outlines-core",
           "regex.json", "../benchmarks/results/regex.md"),
    Script("schema", "bench_schema.py", "JSON Schema compile time, walk and memory: realistic corpus and scale cases",
           "schema.json", "../benchmarks/results/schema.md"),
    Script("conformance", "conformance.py", "correctness on the JSON Schema Test Suite", "conformance.json",
           "json_schema_conformance.md", ("--quiet",), ("--quiet",)),
    Script("cfg", "bench_cfg.py", "the CFG backend on the bundled JSON and SQL grammars beside llguidance, xgrammar and transformers-cfg",
           "cfg.json", "cfg.md", ("--quick", "--output", CFG_JSON), ("--output", CFG_JSON)),
    Script("peers", "bench_peers.py", "six engines on the same schemas and token ids: speed and verdicts",
           "peers.json", "../benchmarks/results/peers.md"),
    Script("maskbench", "bench_maskbench.py", "MaskBench on 1,500 real-world schemas beside llguidance and xgrammar",
           "maskbench.json", "../benchmarks/results/maskbench.md", ("--limit", "150"), ()),
    Script("hierarchy", "bench_hierarchy.py", "the same language as a regex guide and as a CFG guide",
           "hierarchy.json", "../benchmarks/results/hierarchy.md"),
    Script("scaling", "bench_scaling.py", "vocabulary size 32k → 151k and schema size, every engine",
           "scaling.json", "../benchmarks/results/scaling.md"),
    Script("generation", "bench_generation.py", "end to end with the default model: tokens/s, fast-forward, coalescence, every engine's processor",
           "generation.json", "fast_forward.md"),
]  # fmt: skip
BY_NAME = {script.name: script for script in SCRIPTS}


# ---------------------------------------------------------------------- running


def run_script(script: Script, quick: bool, limit_s: float) -> dict[str, Any]:
    """Run one benchmark script to completion (or its time limit); its output goes to its log."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{script.name}.log"
    command = [sys.executable, str(_common.HERE / script.path), *(script.quick_args if quick else script.full_args)]
    print(f"== {script.name}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    with log.open("w") as handle:
        # its own process group, so a time-out also ends the workers the script started
        process = subprocess.Popen(command, cwd=_common.REPO, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            code: int | None = process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    seconds = time.monotonic() - started
    status = "ok" if code == 0 else "timeout" if code is None else "failed"
    result: dict[str, Any] = {"status": status, "returncode": code, "seconds": round(seconds, 1),
                              "finished": _common.machine()["date"], "command": " ".join(command[1:]),
                              "log": str(log.relative_to(_common.REPO))}  # fmt: skip
    if status != "ok":
        lines = log.read_text(errors="replace").splitlines()
        result["tail"] = lines[-15:]
    print(f"   {status} in {seconds:.0f} s" + ("" if status == "ok" else f" (see {result['log']})"), flush=True)
    return result


def run_all(names: list[str], quick: bool, limit_s: float) -> dict[str, Any]:
    """Run the named scripts; merge their statuses into run.json (a partial run keeps the others')."""
    previous = read_json(RUN_JSON) or {}
    record = {
        "mode": "quick" if quick else "full",
        "machine": _common.machine(),
        "versions": _common.versions(*PACKAGES),
        "scripts": dict(previous.get("scripts", {})),
    }
    started = time.monotonic()
    for name in names:
        record["scripts"][name] = {**run_script(BY_NAME[name], quick, limit_s), "mode": record["mode"]}
        RESULTS.mkdir(parents=True, exist_ok=True)
        RUN_JSON.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    record["seconds"] = round(time.monotonic() - started, 1)
    RUN_JSON.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


# ---------------------------------------------------------------------- plots


def plotting() -> Any:
    """matplotlib's pyplot on the file-only backend (no display is needed or wanted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def save(figure: Any, name: str) -> str:
    """Write the figure to docs/img/<name>.png; returns the markdown that shows it."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(IMAGES / f"{name}.png")
    plotting().close(figure)
    return f"![{name}](img/{name}.png)"


def bars(
    names: list[str], series: dict[str, list[float | None]], title: str, ylabel: str, name: str, *, log: bool = True
) -> str:
    """Grouped bars: one group per name, one bar per series (missing values left out); log axis by default."""
    plt = plotting()
    figure, axes = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / max(len(series), 1)
    for k, (label, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i, v in enumerate(values) if v]
        axes.bar(xs, [v for v in values if v], width, label=label)
    crowded = sum(len(n) for n in names) > 70  # names that would run into each other side by side
    axes.set_xticks(range(len(names)), names, rotation=20 if crowded or log else 0, ha="right" if crowded else "center")
    if crowded:
        figure.subplots_adjust(bottom=0.25)
    if log:
        axes.set_yscale("log")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend()
    return save(figure, name)


def step_cdf(histograms: dict[str, dict[str, list[float]]], name: str) -> str:
    """The cumulative share of steps per engine over a log time axis, from binned counts."""
    plt = plotting()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    for engine, histogram in histograms.items():
        counts, edges = histogram["counts"], histogram["edges"]
        total = sum(counts) or 1
        share, xs, ys = 0, [], []
        for count, upper in zip(counts, edges[1:]):
            share += count
            xs.append(upper)
            ys.append(share / total)
        axes.plot(xs, ys, label=engine.split(" ")[0], drawstyle="steps-post")
    axes.set_xscale("log")
    axes.set_xlim(1, 1e6)
    axes.set_xlabel("mask + advance per step, µs (first walk of a fresh guide)")
    axes.set_ylabel("share of steps ≤ x")
    for q in (0.5, 0.9, 0.99):
        axes.axhline(q, color="grey", linewidth=0.6, linestyle=":")
    axes.set_title("MaskBench: per-step latency, cold walks")
    axes.legend(loc="lower right")
    return save(figure, name)


@dataclass
class Panel:
    """One plot of :func:`lines_plot`: a title, axis labels and named series of (x, y) points."""

    title: str
    xlabel: str
    ylabel: str
    series: dict[str, list[tuple[float, float]]]


def lines_plot(panels: list[Panel], name: str) -> str:
    """Panels side by side; log y, log x where x spans decades, vocabulary-sized x in thousands."""
    plt = plotting()
    from matplotlib.ticker import FuncFormatter

    figure, axes = plt.subplots(1, len(panels), figsize=(3.1 * len(panels) + 0.8, 3.3), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        xs = sorted({x for points in panel.series.values() for x, _ in points})
        for label, points in panel.series.items():
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], marker="o", markersize=3, label=label)
        ax.set_yscale("log")
        if xs and xs[0] > 0 and xs[-1] / xs[0] >= 50:
            ax.set_xscale("log")
        elif xs and xs[-1] >= 10_000:
            ax.set_xticks(xs)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / 1000:.0f}k"))
        ax.set_title(panel.title)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.legend(fontsize=7)
    return save(figure, name)


# ---------------------------------------------------------------------- the page, section by section


def fmt(value: float | None, digits: int | None = None) -> str:
    return _common.fmt(value, digits)


def stamp(meta: dict[str, Any], run: dict[str, Any], name: str) -> str:
    """Where a section's numbers come from: the script's date, mode and the machine's load then."""
    status = run.get("scripts", {}).get(name, {})
    quick = meta.get("quick")
    mode = "quick" if quick else "full" if quick is not None else status.get("mode")
    text = f"*{meta.get('date') or status.get('finished', 'undated')}" + (f", {mode} mode" if mode else "")
    if meta.get("load_average") is not None:
        text += f", load {meta['load_average']}"
    if status.get("status") not in (None, "ok"):
        text += f"; the last run of this script **{status['status']}** (see `{status.get('log')}`), these are older"
    return text + ".*"


def pair(stats: dict[str, float] | None) -> str:
    return "–" if not stats else f"{fmt(stats['p50'])} / {fmt(stats['p99'])}"


def ok(engine: dict[str, Any]) -> str:
    return "refused" if engine.get("error") else "✓" if engine.get("accepts") else "✗"


def section_regex(data: dict[str, Any]) -> Iterator[str]:
    results = data["results"]
    yield "| regex | tokens | compile ms lazy / eager | outlines-core ms | warm step µs p50 / p99 | " \
          "cold step µs p50 / p99 | outlines-core step µs p50 / p99 | accepts c / o |"  # fmt: skip
    yield "|---|--:|--:|--:|--:|--:|--:|:-:|"
    for r in results:
        c, o = r["constrain"], r["outlines_core"]
        yield (f"| {r['name']} | {len(r['token_ids'])} | {fmt(c.get('compile_lazy_ms'))} / "
               f"{fmt(c.get('compile_eager_ms'))} | {fmt(o.get('compile_ms'))} | {pair(c.get('mask_warm_us'))} "
               f"| {pair(c.get('mask_cold_us'))} | {pair(o.get('mask_warm_us'))} | {ok(c)} / {ok(o)} |")  # fmt: skip
    yield ""
    lazy = [r["constrain"]["compile_lazy_ms"] for r in results if r["constrain"].get("compile_lazy_ms")]
    ratios = [r["outlines_core"]["compile_ms"] / r["constrain"]["compile_lazy_ms"] for r in results
              if r["outlines_core"].get("compile_ms") and r["constrain"].get("compile_lazy_ms")]  # fmt: skip
    warm = [r["constrain"]["mask_warm_us"]["p50"] for r in results if r["constrain"].get("mask_warm_us")]
    rejected = [r["name"] for r in results if r["outlines_core"].get("accepts") is False]
    refused_c = [r["name"] for r in results if r["constrain"].get("accepts") is not True]
    if lazy:
        yield f"- Lazy compile: {fmt(min(lazy))}–{fmt(max(lazy))} ms" + (
            f", {fmt(min(ratios))}–{fmt(max(ratios))}× less than outlines-core's eager index." if ratios else ".")
    if warm:
        yield f"- Warm step p50: {fmt(min(warm))}–{fmt(max(warm))} µs whatever the mask density."
    yield f"- constrain took {len(results) - len(refused_c)}/{len(results)} instances" + (
        f"; outlines-core rejected {', '.join(rejected)}." if rejected else "; outlines-core took them all.")
    yield ""
    yield ("Why constrain is lazy: an eager index (`precompute()`, what outlines-core always builds) costs one "
           "token row per reachable state, and most of those states are never visited by a generation. So rows are "
           "built on first visit and cached; the cold column shows that first-visit cost, the warm column the "
           "steady state (a cached bitmask copy and one binary search). outlines-core's step grows with the number "
           "of allowed tokens. Where it rejects an instance, it drops a token that passes through a state where the "
           "match could already end (`ab(cd)?` refuses `ab`,`c`). The patterns spell digits as `[0-9]`: "
           "outlines-core's `\\d` is Unicode, constrain's ASCII.")  # fmt: skip


def section_schema(data: dict[str, Any]) -> Iterator[str]:
    yield "| | cases | compile p50 / p90 / max ms | first mask p50 ms | compile + walk p50 / p90 / max ms " \
          "| outlines-core compile p50 ms (timeouts) |"  # fmt: skip
    yield "|---|--:|--:|--:|--:|--:|"
    for group, label in (("corpus", "realistic corpus"), ("scale", "scale cases")):
        s = data["summary"][group]
        c, w, o = s["compile_ms"], s["compile_walk_ms"], s["outlines_compile_ms"]
        yield (f"| {label} | {s['cases']} | {fmt(c['p50'])} / {fmt(c['p90'])} / {fmt(c['max'])} "
               f"| {fmt(s['first_mask_ms']['p50'])} | {fmt(w['p50'])} / {fmt(w['p90'])} / {fmt(w['max'])} "
               f"| {fmt(o['p50'])} ({s['outlines_unfinished']['timeout']}) |")  # fmt: skip
    yield ""
    for group in ("corpus", "scale"):
        s = data["summary"][group]
        yield (f"- {group}: failed to compile: {', '.join(s['failed']) or 'none'}; compile + walk over 1 s: "
               f"{len(s['walk_over_1s'])} of {s['cases']}; a valid example refused: "
               f"{', '.join(s['instance_refused']) or 'none'}.")  # fmt: skip
    peaks = [r["peak_compile_mib"] for r in data["results"] if r.get("peak_compile_mib") is not None]
    if peaks:
        yield f"- Peak memory of a compile (tracemalloc): at most {fmt(max(peaks))} MiB."
    for demo in data.get("limits_demo", []):
        yield f"- Limit demo, {demo['case']}: {demo.get('limit') or demo['outcome']} after {fmt(demo['ms'])} ms."
    yield ""
    yield ("The automaton is built from the schema tree in linear size: bounded repeats keep one body and a "
           "counter, separated repeats and object members build each item once. A cold walk pays for the first "
           "visit of each DFA state (its token row); the compile + walk column is that cost. A limit ends in a "
           "`LimitExceededError` that names it.")  # fmt: skip


def section_conformance(data: dict[str, Any]) -> Iterator[str]:
    yield "| section | files | cases | correct | over | under | unsupported | skipped | crash |"
    yield "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
    for key, t in data["totals"].items():
        yield (f"| {key} | {t['files']} | {t['cases']} | {t['correct']} | {t['over']} | **{t['under']}** "
               f"| {t['unsupported']} | {t['skipped']} | {t['crash']} |")  # fmt: skip
    yield ""
    yield ("*under* (an invalid instance accepted) is the outcome that must never happen; *unsupported* is a "
           "schema constrain refuses with an error naming the keyword.")  # fmt: skip


def section_cfg(data: dict[str, Any]) -> Iterator[str]:
    yield f"{data.get('tokenizer', '?')} ({data.get('vocab_size', 0):,} tokens); mask = one `fill_bitmask` per step."
    yield ""
    yield "| grammar | engine | compile ms | accepted / measured of documents | mask µs p50 / p90 / p99 |"
    yield "|---|---|--:|--:|--:|"
    for grammar, entry in data["grammars"].items():
        for row in entry["rows"]:
            mask = row.get("mask") or {}
            yield (f"| {grammar} | {row['label']} | {fmt(row.get('compile_ms'))} "
                   f"| {row.get('accepted', '–')} / {row.get('measured', '–')} of {entry['documents']} "
                   f"| {fmt(mask.get('p50_us'))} / {fmt(mask.get('p90_us'))} / {fmt(mask.get('p99_us'))} |")  # fmt: skip
    yield ""
    for grammar, entry in data["grammars"].items():
        rows = [row for row in entry["rows"] if (row.get("mask") or {}).get("p99_us")]
        yield bars([row["label"].replace(", ", "\n") for row in rows],
                   {q: [row["mask"][f"{q}_us"] for row in rows] for q in ("p50", "p90", "p99")},
                   f"{grammar}: per-step mask time", "µs per step (log)", f"cfg_{grammar}")  # fmt: skip
        yield ""
        best = min(rows, key=lambda row: row["mask"]["p99_us"], default=None)
        if best:
            yield (f"- {grammar}: lowest mask p99 {best['label']} ({fmt(best['mask']['p99_us'])} µs) over "
                   f"{entry.get('tokens', '?')} steps.")  # fmt: skip
            yield ""


def section_peers(data: dict[str, Any]) -> Iterator[str]:
    meta = data["meta"]
    yield (f"{meta['n_realistic']} realistic schemas and {meta['n_suite']} JSON Schema Test Suite groups; "
           f"{meta['n_valid']} valid and {meta['n_invalid']} invalid instances, the same token ids for every engine "
           f"({meta['tokenizer']}, {meta['vocab_size']:,} tokens); each engine in its own single-threaded worker "
           f"with its own defaults, {meta['engine_budget_s']:g} s per engine.")  # fmt: skip
    yield ""
    yield ("| engine | version | compiled / refused / timeout / skipped | compile ms p50 / p90 "
           "| step µs p50 / p90 / p99 | valid accepted | invalid rejected | **under-constrained** |")  # fmt: skip
    yield "|---|---|--:|--:|--:|--:|--:|--:|"
    summaries = [s for s in data["summary"] if "compiled" in s]
    for s in data["summary"]:
        if "compiled" not in s:
            yield f"| {s['engine']} | {s.get('version') or '–'} | not available |||||"
            continue
        yield (f"| {s['engine']} | {s['version']} | {s['compiled']} / {s['refused']} / {s['timeout']} / "
               f"{s['skipped']} | {fmt(s['compile_ms_p50'])} / {fmt(s['compile_ms_p90'])} "
               f"| {fmt(s['step_us_p50'])} / {fmt(s['step_us_p90'])} / {fmt(s['step_us_p99'])} "
               f"| {s['valid_accepted']}/{s['valid_judged']} | {s['invalid_rejected']}/{s['invalid_judged']} "
               f"| **{s['under_constrained']}** |")  # fmt: skip
    yield ""
    names = [s["engine"] for s in summaries]
    yield bars(names, {q: [s[f"step_us_{q}"] for s in summaries] for q in ("p50", "p90", "p99")},
               "Per-step mask time (fill + advance), all steps walked", "µs per step (log)", "peers_steps")  # fmt: skip
    yield ""
    yield bars(names, {q: [s[f"compile_ms_{q}"] for s in summaries] for q in ("p50", "p90")},
               "Compile time over the schemas each engine compiled", "ms (log)", "peers_compile")  # fmt: skip
    yield ""
    strict = [s["engine"] for s in summaries if s["under_constrained"] == 0 and s["invalid_judged"]]
    yield f"- Never accepted an invalid instance: {', '.join(strict) or 'none'}."
    examples: dict[str, list[str]] = {}
    for row in data.get("disagreements", []):
        if row["label"] != "invalid":
            continue
        for engine, verdict in row["engines"].items():
            seen = examples.setdefault(engine, [])
            if verdict == "accepted" and len(seen) < 2 and not any(row["case"] in e for e in seen):
                seen.append(f"`{row['case']}` ({row['note']})")
    for engine, cases in examples.items():
        if not cases:
            continue
        yield f"- {engine} accepted invalid instances, e.g. {'; '.join(cases)}."
    fastest = min(summaries, key=lambda s: s["step_us_p50"] or float("inf"), default=None)
    tightest = min(summaries, key=lambda s: s["step_us_p99"] or float("inf"), default=None)
    if fastest and tightest:
        yield (f"- Lowest step p50: {fastest['engine']} ({fmt(fastest['step_us_p50'])} µs); lowest p99: "
               f"{tightest['engine']} ({fmt(tightest['step_us_p99'])} µs).")  # fmt: skip
    yield ""
    yield ("How to read it: engines differ in what they do eagerly. constrain and llguidance build lazily, so their "
           "first visits show in the step percentiles; xgrammar and outlines-core build token masks at compile time. "
           "Engines walk different step sets (they refuse different schemas and reject at different points), so "
           "compare the verdict columns first; the per-schema detail is in the full tables.")  # fmt: skip


def section_maskbench(data: dict[str, Any]) -> Iterator[str]:
    from bench_maskbench import markdown

    lines = markdown(data["meta"], data["summaries"]).splitlines()
    yield from lines[3:]  # without its own heading and machine line (the stamp above says both)
    histograms = {e: s["step_histogram_us"] for e, s in data["summaries"].items() if s.get("step_histogram_us")}
    if histograms:
        yield ""
        yield ("Every step of those first walks, as a distribution (the share of steps at most so long): "
               "the median steps are cached rows for every engine; the tail is each engine's first visits.")
        yield ""
        yield step_cdf(histograms, "maskbench_steps")
    full = RESULTS / "maskbench-full-spec.json"
    if full.exists():  # the whole dev set, one engine (about 40 minutes): run by hand, shown when present
        whole = json.loads(full.read_text())
        yield ""
        yield (f"### All 1,500 dev schemas, constrain with the specification's semantics "
               f"(*{whole['meta'].get('started', whole['meta'].get('date', ''))}*, "
               f"`python benchmarks/bench_maskbench.py --engines constrain-spec --out maskbench-full-spec`; "
               f"[maskbench-full-spec.md](../benchmarks/results/maskbench-full-spec.md) lists every schema "
               f"that does not pass)")
        yield ""
        table = markdown(whole["meta"], whole["summaries"]).splitlines()
        start = next(i for i, line in enumerate(table) if line.startswith("| engine"))
        yield from table[start:start + 3]
        if whole["meta"].get("note"):
            yield ""
            yield f"Note: {whole['meta']['note']}."


def section_hierarchy(data: dict[str, Any]) -> Iterator[str]:
    import bench_hierarchy

    families = {f["name"]: f for f in data["families"]}
    panels_compile, panels_mask = [], []
    for name in ("tree", "binary", "enum", "array", "object"):
        family = families.get(name)
        if family is None:
            continue
        compile_series, mask_series = {}, {}
        for backend, label in (("regex", "regex"), ("cfg", "CFG")):
            compile_series[label] = [(p["size"], p[backend]["compile_ms"]) for p in family["points"]
                                     if p[backend].get("compile_ms")]  # fmt: skip
            for kind in ("cold", "warm"):
                mask_series[f"{label} {kind}"] = [(p["size"], p[backend][f"mask_{kind}_us"]["p99"])
                                                  for p in family["points"] if p[backend].get(f"mask_{kind}_us")]
        panels_compile.append(Panel(name, family["parameter"], "compile ms (log)", compile_series))
        panels_mask.append(Panel(name, family["parameter"], "mask p99 µs (log)", mask_series))
    yield lines_plot(panels_compile, "hierarchy_compile")
    yield ""
    yield lines_plot(panels_mask, "hierarchy_mask")
    yield ""
    yield bench_hierarchy.tables(data)
    yield ("A recursive schema can be unrolled into a regular language to a fixed depth, or kept recursive in a "
           "grammar. Unrolling copies the recursive part once per level: linear growth where a level holds one "
           "copy of the level below (the tree), exponential where it holds two (the binary expression), until a "
           "limit or the time budget stops it. The CFG guide's grammar does not depend on the depth.")  # fmt: skip


def section_scaling(data: dict[str, Any]) -> Iterator[str]:
    import bench_scaling

    points = data.get("vocabulary") or []
    if points:
        setup = {"constrain (vocabulary + tables)": [(p["vocab_size"], p["vocabulary_ms"] + p["tables_ms"])
                                                     for p in points]}  # fmt: skip
        for engine in bench_scaling.ENGINES[1:]:
            setup[engine] = [(p["vocab_size"], p["engines"][engine]["setup_s"] * 1e3) for p in points
                             if p["engines"].get(engine, {}).get("setup_s")]  # fmt: skip
        panels = [Panel("tokenizer setup", "vocabulary size", "ms (log)", setup)]
        for key in ("cold", "warm"):
            series = {engine: [(p["vocab_size"], v) for p in points if (v := bench_scaling.pooled(p, engine, key))]
                      for engine in bench_scaling.ENGINES}  # fmt: skip
            panels.append(Panel(f"schema steps p99, {key}", "vocabulary size", "µs (log)", series))
        yield lines_plot(panels, "scaling_vocabulary")
        yield ""
    growth = data.get("schema_size") or {}
    if growth:
        panels = []
        for axis, axis_data in growth.items():
            series = {engine: [(p["size"], p["engines"][engine]["compile_ms"]) for p in axis_data["points"]
                               if p["engines"].get(engine, {}).get("status") == "ok"]
                      for engine in bench_scaling.ENGINES}  # fmt: skip
            panels.append(Panel(axis, axis_data["counts"], "compile ms (log)", series))
        yield lines_plot(panels, "scaling_schema")
        yield ""
    yield bench_scaling.tables(data)


def config_rows(summary: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every configuration in the generation summary: a dict with a tokens/s median, named by its path."""
    if isinstance(summary, dict):
        if "tokens_per_s_p50" in summary:
            yield " / ".join(path), summary
            return
        for key, value in summary.items():
            yield from config_rows(value, path + (str(key),))


def section_generation(data: dict[str, Any]) -> Iterator[str]:
    summary = data["summary"]
    rows = list(config_rows(summary))
    yield (f"{data.get('model', 'the default model')}, greedy, up to {data.get('max_new_tokens')} new tokens, "
           f"{summary.get('prompts')} JSON-schema prompts; medians over prompts.")  # fmt: skip
    yield ""
    yield "| configuration | tokens/s | chars/s | ms per forward pass | forward passes | complete | valid |"
    yield "|---|--:|--:|--:|--:|--:|--:|"
    for label, c in rows:
        yield (f"| {label} | {fmt(c['tokens_per_s_p50'])} | {fmt(c.get('chars_per_s_p50'))} "
               f"| {fmt(c.get('ms_per_pass_p50'))} | {fmt(c.get('passes_p50'))} | {c.get('complete', '–')} "
               f"| {c.get('valid') if c.get('valid') is not None else '–'} |")  # fmt: skip
    yield ""
    if rows:
        yield bars([label.replace(" / ", "\n") for label, _ in rows],
                   {"tokens/s": [c["tokens_per_s_p50"] for _, c in rows],
                    "chars/s": [c.get("chars_per_s_p50") for _, c in rows]},
                   "End to end, SmolLM2-135M on CPU (medians over prompts)", "per second", "generation",
                   log=False)  # fmt: skip
        yield ""
    for whitespace, w in (summary.get("whitespace") or {}).items():
        if isinstance(w, dict) and w.get("speedup_wall_p50"):
            yield (f"- Fast-forward, whitespace `{whitespace}`: {fmt(w['speedup_wall_p50'])}× wall-clock speed-up "
                   f"(median over prompts), {fmt(w.get('pass_ratio_p50'))}× fewer forward passes.")  # fmt: skip
    peers = data.get("peers")
    if peers and peers.get("engines"):
        yield from section_generation_peers(peers)
    yield from section_llama_cpp()


def section_llama_cpp() -> Iterator[str]:
    """constrain inside llama.cpp beside llama.cpp's own GBNF sampling, when that run's results exist
    (``bench_llama_cpp.py --out llama_cpp``, run by hand where llama-cpp-python is built)."""
    from bench_llama_cpp import table

    data = read_json(RESULTS / "llama_cpp.json")
    if data is None:
        return
    meta = data["meta"]
    yield ""
    yield (f"### llama.cpp: constrain's logits processor beside llama.cpp's GBNF grammar sampling "
           f"(*{meta['date']}, load {fmt(meta.get('load_average'))}*)")
    yield ""
    versions = meta.get("versions", {})
    yield (f"`python benchmarks/bench_llama_cpp.py --out llama_cpp` in an environment with llama-cpp-python "
           f"{versions.get('llama_cpp_python', '?')}: SmolLM2-135M-Instruct straight from its GGUF file (Q4_1), "
           f"greedy, n_threads={meta.get('threads')}, up to {meta.get('max_tokens')} tokens, median of "
           f"{meta.get('repeats')} timed runs; *first run* includes compiling the constraint. The same prompt ids "
           "for every engine; *free* is the unconstrained loop. Method: the script's docstring.")  # fmt: skip
    yield ""
    yield table(data["rows"])


def section_generation_peers(peers: dict[str, Any]) -> Iterator[str]:
    """Every engine's logits processor in the same ``model.generate`` loop (``bench_generation.py --peers``)."""
    n = len(peers["prompts"])
    yield ""
    yield (f"**Every engine through `model.generate`** ({peers['generated'][:16]}, "
           f"{'quick' if peers.get('quick') else 'full'} mode, load {peers['machine'].get('load_average')}): "
           f"each engine's logits processor in the same greedy loop, {n} prompts, up to "
           f"{peers['max_new_tokens']} new tokens, a fresh compile per prompt; medians over prompts. "
           "*valid* = `json.loads` + `jsonschema` against the prompt's schema.")  # fmt: skip
    yield ""
    yield "| engine | constrains to | tokens/s | ms/token | × unconstrained | tokens/s with compile | complete | valid |"
    yield "|---|---|--:|--:|--:|--:|--:|--:|"
    measured = []
    for r in peers["engines"]:
        name = r["engine"] if r["engine"] == "unconstrained" else f"{r['engine']} {r.get('version', '')}".strip()
        if "runs" not in r:
            yield f"| {name} | {r.get('constrains', '–')} | unavailable: {r.get('error', '')[:60]} | | | | | |"
            continue
        measured.append((r["engine"], r))
        yield (f"| {name} | {r.get('constrains', '–')} | {fmt(r['tokens_per_s_p50'])} | {fmt(r['ms_per_token_p50'])} "
               f"| {fmt(r.get('ratio_to_unconstrained_p50'), 2) if r.get('ratio_to_unconstrained_p50') else '–'} "
               f"| {fmt(r.get('tokens_per_s_with_compile_p50')) if r['engine'] != 'unconstrained' else '–'} "
               f"| {r['complete']}/{n} | {r['valid']}/{n} |")  # fmt: skip
    yield ""
    if measured:
        yield bars([engine for engine, _ in measured], {"tokens/s": [r["tokens_per_s_p50"] for _, r in measured]},
                   "Every engine in the same model.generate loop (medians over prompts)", "tokens per second",
                   "generation_peers", log=False)  # fmt: skip
        yield ""
        invalid = [f"{engine} {n - r['valid']}/{n}" for engine, r in measured if engine != "unconstrained" and r["valid"] < n]
        if invalid:
            yield "- Invalid outputs (the engine let the model write JSON the schema rejects, or hit the token limit): " + ", ".join(invalid) + "."


SECTIONS: list[tuple[str, str, Callable[[dict[str, Any]], Iterator[str]]]] = [
    ("regex", "Regex backend beside outlines-core", section_regex),
    ("schema", "JSON Schema compile and walk", section_schema),
    ("conformance", "JSON Schema conformance", section_conformance),
    ("cfg", "CFG backend", section_cfg),
    ("peers", "Peers side by side", section_peers),
    ("maskbench", "MaskBench: real-world schemas", section_maskbench),
    ("hierarchy", "Hierarchy levels: the same language as regex and as CFG", section_hierarchy),
    ("scaling", "Scaling: vocabulary size and schema size", section_scaling),
    ("generation", "End to end", section_generation),
]


def meta_of(data: dict[str, Any]) -> dict[str, Any]:
    """A results file's header, whatever each script calls it."""
    meta = dict(data.get("meta") or {})
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    meta.setdefault("date", data.get("date") or data.get("generated") or machine.get("date"))
    meta.setdefault("load_average", data.get("load_average") or machine.get("load_average"))
    meta.setdefault("quick", data.get("quick"))
    return meta


def methodology(run: dict[str, Any]) -> list[str]:
    machine, versions = run.get("machine") or _common.machine(), run.get("versions") or _common.versions(*PACKAGES)
    lines = [
        "## Methodology",
        "",
        f"- Last run: {machine['date']}, **{run.get('mode', 'unknown')} mode** "
        f"(`python benchmarks/run.py{' --quick' if run.get('mode') == 'quick' else ''}`); "
        f"{machine['cpu_model']}, {machine['cpu_count']} CPUs, load average {machine.get('load_average')} at the "
        f"start; {machine['platform']}; Python {machine['python']}.",
        "- Versions: " + ", ".join(f"{name} {v}" for name, v in versions.items()) + ".",
        "- **One thread.** OpenMP, BLAS, Rayon and tokenizers run one thread (`_common.single_threaded`), "
        "torch is told to use one, xgrammar gets `max_threads=1`: constrain is single-threaded, so a "
        "multi-threaded peer would be measured on more hardware.",
        "- **Same inputs.** Every engine gets the same vocabulary and the same token ids: each instance is "
        "tokenized once, as the tokenizer itself spells it after earlier text, and checked to spell the text "
        "byte for byte.",
        "- **Warm-up.** First-use costs (imports, per-vocabulary tables, caches of parsed fragments) are paid "
        "before anything is timed; each timed compile uses a fresh `Compiler`, so no guide cache answers.",
        "- **Cold and warm.** A *cold* walk is the first walk of a freshly compiled guide (a lazy engine builds "
        "what it needs then); *warm* walks follow an untimed warm-up walk. A step is filling the full packed "
        "bitmask plus advancing by the real token; the closing step (where EOS is picked) is included.",
        "- **Percentiles.** p50/p90/p99 interpolate linearly between the nearest samples (numpy's default), "
        "pooled over every step of the walks; compile times are medians of repeated fresh compiles. The "
        "collector is off during timed calls.",
        "- **Shared machine.** The load average is recorded with every result; on a busy machine read the "
        "timings as noisy and the verdicts as exact.",
        "",
        "| benchmark | what | last run | time | full tables |",
        "|---|---|---|--:|---|",
    ]
    for script in SCRIPTS:
        status = run.get("scripts", {}).get(script.name, {})
        state = f"{status.get('status', 'not run')} ({status.get('mode', '–')})" if status else "not run"
        seconds = fmt(status.get("seconds")) + " s" if status.get("seconds") is not None else "–"
        lines.append(f"| `{script.path}` | {script.what} | {state} | {seconds} | [{Path(script.report).name}]"
                     f"({script.report}) |")  # fmt: skip
    lines.append("| `study_coalescence.py` | what coalescence does to the output distribution (not run by "
                 "`run.py`: it needs a long model run) | – | – | [coalescence.md](coalescence.md) |")  # fmt: skip
    return lines


def render(run: dict[str, Any]) -> str:
    """The whole page, from the results files and run.json; plots are written as a side effect."""
    page = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python benchmarks/run.py`; edit benchmarks/run.py, not this page. -->",
        "",
        "Speed is measured, never asserted in tests. Every number on this page comes from a script in "
        "`benchmarks/`, run by one command, that runs constrain and its peers on the same machine in one run, "
        "on the same tokenizer and the same tokenized instances, single-threaded, with warm-up separated from "
        "timed runs, and reports medians and percentiles; ratios compare engines within one run.",
        "",
        "```sh",
        "python benchmarks/run.py --quick        # every benchmark in its quick mode (minutes)",
        "python benchmarks/run.py                # the full run (about an hour on two cores)",
        "python benchmarks/run.py --only hierarchy,scaling",
        "python benchmarks/run.py --render-only  # this page and docs/img/ from benchmarks/results/*.json",
        "make bench-quick / make bench           # the same, after installing the peers (torch pinned)",
        "```",
        "",
        *methodology(run),
    ]
    for name, title, section in SECTIONS:
        script = BY_NAME[name]
        page += ["", f"## {title}", ""]
        data = read_json(RESULTS / script.results)
        if data is None:
            page.append(f"No results yet: `python benchmarks/run.py --only {name}`.")
            continue
        page += [f"`benchmarks/{script.path}` — {stamp(meta_of(data), run, name)} "
                 f"Full tables: [{Path(script.report).name}]({script.report}).", ""]  # fmt: skip
        try:
            page += list(section(data))
        except (KeyError, TypeError, ValueError, IndexError) as exc:  # results written by an older or newer script
            page.append(f"These results could not be rendered ({_common.describe(exc)}); see the full tables.")
    return "\n".join(page).rstrip() + "\n"


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="every script in its quick mode")
    parser.add_argument("--only", help="comma-separated scripts to run: " + ",".join(BY_NAME))
    parser.add_argument("--render-only", action="store_true", help="run nothing; regenerate the page and plots")
    parser.add_argument("--limit", type=float, help="seconds one script may run (default 2400, --quick 600)")
    args = parser.parse_args(argv)
    args.names = list(BY_NAME) if not args.only else [n for n in args.only.split(",") if n]
    unknown = set(args.names) - set(BY_NAME)
    if unknown:
        parser.error(f"unknown benchmarks {sorted(unknown)}; choose from {list(BY_NAME)}")
    args.limit = args.limit or (600.0 if args.quick else 2400.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        run = read_json(RUN_JSON) or {}
    else:
        run = run_all(args.names, args.quick, args.limit)
    PAGE.write_text(render(run))
    print(f"wrote {PAGE.relative_to(_common.REPO)} and {IMAGES.relative_to(_common.REPO)}/*.png")
    failed = [name for name in args.names if run.get("scripts", {}).get(name, {}).get("status") not in ("ok", None)]
    if failed and not args.render_only:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
