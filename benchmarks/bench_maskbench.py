#!/usr/bin/env python
"""MaskBench on real-world schemas: constrain (both property modes) beside llguidance and xgrammar.

Run with ``python benchmarks/bench_maskbench.py [DATA_DIR]`` (default
``../shared/data/maskbench-dev``); ``--limit N`` takes every k-th file so that N remain,
``--engines a,b`` picks engines. It writes ``benchmarks/results/maskbench.json`` and
``maskbench.md``.

Scoring follows MaskBench (the data folder's README), per schema:

* the schema must compile; an error counts against it;
* every instance is serialized with ``json.dumps(data, ensure_ascii=False)`` (default
  separators), tokenized with ``tokenizer.encode(text, add_special_tokens=False)`` and
  walked token by token: each token must be in the mask (``fill`` = one full packed
  mask) and taken by ``advance``, and at the end EOS must be allowed;
* a valid instance must get through, an invalid one must be stopped somewhere;
* a schema *passes* when it compiles and every verdict is right. An invalid instance
  that gets through (*invalid accepted*) is the worst outcome.

Times: compile (fresh compiler, nothing cached) and per-step mask + advance over the
first walk of a freshly compiled guide and the later instances' walks of the same guide,
as a server that sees a new schema per request pays them. Each engine runs in its own
single-threaded worker process (``bench_peers.Worker``), so a schema that hangs an engine
is killed at ``--budget`` seconds and counted as a *timeout*.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import bisect
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_peers import Case, Instance, Worker, write_context

DEFAULT_DATA = _common.REPO.parent / "shared" / "data" / "maskbench-dev"
ENGINES = ["constrain-spec", "constrain", "llguidance", "xgrammar"]


def load_cases(data: Path, tokenizer: Any, limit: int | None) -> list[Case]:
    files = sorted(data.glob("*.json"))
    if limit and limit < len(files):
        stride = len(files) / limit
        files = [files[int(i * stride)] for i in range(limit)]
    cases = []
    for path in files:
        doc = json.loads(path.read_text())
        case = Case(path.stem, "maskbench", doc["schema"])
        for k, test in enumerate(doc.get("tests", [])):
            text = json.dumps(test["data"], ensure_ascii=False)
            ids = tokenizer.encode(text, add_special_tokens=False)
            label = "valid" if test["valid"] else "invalid"
            case.instances.append(Instance(label, test.get("description", str(k)), text, ids))
        cases.append(case)
    return cases


def error_keyword(engine: str, message: str) -> str:
    """Group a refusal: the keyword constrain names, else the error's first words."""
    found = re.search(r"'([$A-Za-z_][\w$]*)' at (#|\S+#|https?:)", message)  # a pointer, or a URI with one
    if engine.startswith("constrain") and found:
        return found.group(1)
    if engine.startswith("constrain") and message.startswith("GrammarError: the grammar is not LALR(1)"):
        return "not LALR(1)"
    if "LimitExceededError" in message or "limit " in message:
        found = re.search(r"limit (\w+)=", message)
        return f"limit {found.group(1)}" if found else "limit"
    return message[:70]  # a peer's own words: "ValueError: Unimplemented keys: [\"not\"]"


def score(case: Case, result: dict[str, Any]) -> dict[str, Any]:
    """One schema's verdict in MaskBench's terms."""
    status = result.get("status")
    out: dict[str, Any] = {"name": case.name, "status": status, "compile_ms": None, "steps_us": []}
    if status != "ok":
        out["error"] = result.get("error", "")
        out["passed"] = False
        return out
    out["compile_ms"] = sorted(result["compile_ms"])[len(result["compile_ms"]) // 2]
    counts: Counter[str] = Counter()
    for inst, record in zip(case.instances, result["instances"]):
        out["steps_us"] += record.get("steps_us", [])
        if record.get("crash"):
            counts["crash"] += 1
        elif not record.get("complete"):
            counts["not reached"] += 1
        elif inst.label == "valid":
            counts["valid ok" if record["accepted"] else "valid rejected"] += 1
        else:
            counts["invalid accepted" if record["accepted"] else "invalid ok"] += 1
    out["counts"] = dict(counts)
    out["passed"] = not (set(counts) - {"valid ok", "invalid ok"})
    if counts["crash"]:
        out["status"] = "crash while walking"
    return out


def summarize(engine: str, scored: list[dict[str, Any]]) -> dict[str, Any]:
    steps = [t for s in scored for t in s["steps_us"]]
    compiles = [s["compile_ms"] for s in scored if s["compile_ms"] is not None]
    totals: Counter[str] = Counter()
    for s in scored:
        totals.update(s.get("counts", {}))
    errors = Counter(error_keyword(engine, s["error"]) for s in scored if s["status"] == "refused")
    return {
        "schemas": len(scored),
        "passed": sum(s["passed"] for s in scored),
        "compiled": sum(s["status"] in ("ok", "crash while walking") for s in scored),
        "refused": sum(s["status"] == "refused" for s in scored),
        "timeouts": sum(s["status"] == "timeout" for s in scored),
        "crashes": sum(s["status"] in ("crash", "crash while walking") for s in scored),
        "valid_rejected": totals["valid rejected"],
        "invalid_accepted": totals["invalid accepted"],
        "schemas_with_invalid_accepted": sum(
            s.get("counts", {}).get("invalid accepted", 0) > 0 for s in scored
        ),
        "instances": sum(totals.values()),
        "compile_ms": _common.percentiles(compiles),
        "step_us": _common.percentiles(steps),
        "step_histogram_us": step_histogram(steps),
        "errors": dict(errors.most_common()),
    }


#: Log-spaced bin edges for per-step times: 0.1 µs to 100 s, ten bins a decade.
_STEP_EDGES = [10 ** (k / 10) for k in range(-10, 81)]


def step_histogram(steps: list[float]) -> dict[str, list[float]]:
    """Per-step mask times as counts over log-spaced bins: enough to draw the whole distribution
    (docs/benchmarks.md plots its CDF) without storing every step."""
    counts = [0] * (len(_STEP_EDGES) - 1)
    for t in steps:
        k = bisect.bisect_right(_STEP_EDGES, t) - 1
        counts[min(max(k, 0), len(counts) - 1)] += 1
    return {"edges": _STEP_EDGES, "counts": counts}


def markdown(meta: dict[str, Any], summaries: dict[str, dict[str, Any]]) -> str:
    f = _common.fmt
    lines = [
        "## MaskBench on real-world schemas",
        "",
        _common.machine_line(meta["machine"]),
        f"{meta['schemas']} schemas of `{meta['data']}`, tokenizer {meta['tokenizer']}; "
        f"timeout {meta['budget_s']:.0f} s per schema. Scored as MaskBench scores: a schema passes "
        "when it compiles and every valid instance is accepted and every invalid one stopped. "
        "`constrain-spec` follows the specification's property semantics (`strict_properties=False`: "
        "undeclared properties allowed, members in any order); "
        "`constrain` is the default (undeclared properties refused). Steps: one full mask + advance, "
        "first walk of a freshly compiled guide included. An error while walking is an exception on a "
        "first visit (for constrain: a `Limits` error, never a raw exception)."
        + (f" Note: {meta['note']}." if meta.get("note") else ""),
        "",
        "| engine | passed | % | refused | timeouts | errors while walking | valid rejected "
        "| invalid accepted (schemas) "
        "| compile p50 / p90 / p99 ms | step p50 / p90 / p99 µs |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for engine, s in summaries.items():
        c, t = s["compile_ms"] or {}, s["step_us"] or {}
        share = 100 * s["passed"] / max(s["schemas"], 1)
        lines.append(
            f"| {engine} {meta['versions'].get(engine, '')} | {s['passed']} | {share:.1f} "
            f"| {s['refused']} | {s['timeouts']} | {s['crashes']} | {s['valid_rejected']} "
            f"| {s['invalid_accepted']} ({s['schemas_with_invalid_accepted']}) "
            f"| {f(c.get('p50'))} / {f(c.get('p90'))} / {f(c.get('p99'))} "
            f"| {f(t.get('p50'))} / {f(t.get('p90'))} / {f(t.get('p99'))} |"
        )
    for engine, s in summaries.items():
        if s["errors"]:
            lines += ["", f"Refusals of {engine}, by keyword or error:", ""]
            lines += [f"- `{k}`: {n}" for k, n in list(s["errors"].items())[:15]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--limit", type=int, default=None, help="score this many files, evenly spread")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per schema before a timeout")
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--details", action="store_true", help="print every schema that does not pass")
    parser.add_argument("--out", default="maskbench", help="results file stem")
    args = parser.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        print(f"no MaskBench data at {data}: pass its folder", file=sys.stderr)
        return 2
    setup = _common.load_setup("smollm2")
    cases = load_cases(data, setup.tokenizer, args.limit)
    context = write_context(setup)
    summaries: dict[str, dict[str, Any]] = {}
    per_schema: dict[str, list[dict[str, Any]]] = {}
    versions: dict[str, str] = {}
    try:
        for engine in args.engines.split(","):
            worker = Worker(engine, context)
            if not worker.start():
                print(f"{engine}: not available ({worker.failed})", flush=True)
                worker.close()
                continue
            versions[engine] = str((worker.info or {}).get("version", ""))
            started = time.monotonic()
            scored = [score(case, worker.run(case, args.budget, args.grace)) for case in cases]
            worker.close()
            summaries[engine] = summarize(engine, scored)
            per_schema[engine] = [{k: v for k, v in s.items() if k != "steps_us"} for s in scored]
            s = summaries[engine]
            print(f"{engine}: {s['passed']}/{s['schemas']} passed, {s['invalid_accepted']} invalid accepted, "
                  f"{s['timeouts']} timeouts, {time.monotonic() - started:.0f} s", flush=True)
            if args.details:
                for item in scored:
                    if not item["passed"]:
                        print(f"  {item['name']}: {item['status']} {item.get('counts', '')} "
                              f"{item.get('error', '')[:200]}")
    finally:
        os.unlink(context)
    machine = _common.machine()
    meta = {"machine": machine, "data": data.name, "schemas": len(cases), "tokenizer": "smollm2",
            "budget_s": args.budget, "versions": versions, "quick": bool(args.limit),
            "date": machine["date"], "load_average": machine["load_average"]}
    text = markdown(meta, summaries)
    print(text)
    _common.write_results(args.out, {"meta": meta, "summaries": summaries, "schemas": per_schema}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
