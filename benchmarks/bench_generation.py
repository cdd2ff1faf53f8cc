#!/usr/bin/env python
"""Generation benchmark: fast-forward on/off for JSON-schema generations, against unconstrained decoding.

Run with ``python benchmarks/bench_generation.py`` (``--quick`` for 4 prompts,
``--max-new-tokens N``, ``--whitespace default,none``, ``--no-baseline``,
``--no-write``). It prints markdown tables and writes
``benchmarks/results/generation.json`` and ``generation.md``; ``docs/fast_forward.md``
explains the numbers.

Method
------
* **Model and prompts.** The offline default model (SmolLM2-135M-Instruct, float32,
  CPU, one torch thread) and the JSON-schema pairs of
  ``benchmarks/study_coalescence.py`` (Pydantic classes of realistic objects), each
  prompt wrapped in the chat template as ``generate`` does by default. Greedy.
* **Schema guides.** Each schema is compiled once per ``--whitespace`` setting:
  ``default`` (an optional space between JSON tokens, ``[ ]?``) and ``none`` (compact
  JSON), because the whitespace setting decides where a run of forced bytes ends.
* **Configurations** per prompt:

  - ``ff_off``: ``generate(..., fast_forward=False)`` — one forward pass per token;
  - ``ff_on``: ``generate(..., fast_forward=True)`` (the default) — where the guide
    says the next bytes are forced, the longest allowed tokens spelling them are
    appended and fed in the next pass together with the sampled token;
  - ``free_regex``: ``generate`` with the guide ``compiler.regex(r"(.|\\n)*")`` (any
    text): the masking machinery with a mask that forbids almost nothing;
  - ``free_raw``: a plain greedy loop with the same KV-cache calls and no mask at all
    (:func:`free_raw`), stopping at EOS or ``--max-new-tokens``.
* **Timing.** Before anything is timed, one generation warms torch up. For each
  prompt and whitespace setting, ``ff_off`` and ``ff_on`` each run once untimed (the
  guide builds its rows on first visit; the two paths visit slightly different
  states), then each configuration runs once, timed with ``perf_counter`` around the
  whole call. Throughput is output tokens per second and output characters per
  second; the character rate is the fair one when fast-forward changes the
  tokenization.
* **Outputs.** ``ff_on`` and ``ff_off`` texts are compared byte for byte, then as parsed
  JSON (are the values the same, whitespace aside?), and the first differing
  character is recorded. Validity is checked with the Pydantic class.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from study_coalescence import PAIRS, Pair, check_valid, prompt_ids

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def free_raw(
    model: Any, tokenizer: Any, prompt: str, eos_ids: frozenset[int], max_new_tokens: int
) -> dict[str, Any]:
    """Unconstrained greedy decoding with a KV cache, no mask: the baseline loop."""
    import inspect

    import torch

    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    start = time.perf_counter()
    ids = torch.tensor([prompt_ids(tokenizer, prompt)])
    past, out_ids, passes = None, [], 0
    with torch.no_grad():
        while len(out_ids) < max_new_tokens:
            out = model(input_ids=ids, use_cache=True, **{name: past})
            past, passes = getattr(out, name), passes + 1
            token = int(torch.argmax(out.logits[0, -1].float()))
            if token in eos_ids:
                break
            out_ids.append(token)
            ids = torch.tensor([[token]])
    wall = time.perf_counter() - start
    text = tokenizer.decode(out_ids)
    return {
        "text": text,
        "tokens": len(out_ids),
        "forward_passes": passes,
        "fast_forwarded": 0,
        "complete": len(out_ids) < max_new_tokens,
        "wall_s": wall,
    }


def run(
    model: Any, tokenizer: Any, prompt: str, guide: Any, vocab: Any, max_new_tokens: int, fast_forward: bool
) -> dict[str, Any]:
    from constrain.sampling import generate

    start = time.perf_counter()
    try:
        res = generate(
            model,
            tokenizer,
            prompt,
            guide,
            vocab,
            max_new_tokens=max_new_tokens,
            temperature=0.0,
            fast_forward=fast_forward,
        )
    except Exception as exc:  # record and go on
        return {"error": f"{type(exc).__name__}: {exc}", "wall_s": time.perf_counter() - start}
    wall = time.perf_counter() - start
    return {
        "text": res.text,
        "tokens": len(res.token_ids),
        "forward_passes": res.forward_passes,
        "fast_forwarded": res.fast_forwarded,
        "complete": res.complete,
        "wall_s": wall,
    }


def rates(r: dict[str, Any]) -> dict[str, Any]:
    if "error" in r:
        return r
    r["tokens_per_s"] = r["tokens"] / r["wall_s"]
    r["chars_per_s"] = len(r["text"]) / r["wall_s"]
    r["ms_per_pass"] = 1000 * r["wall_s"] / max(r["forward_passes"], 1)
    return r


def compare(a: str, b: str) -> dict[str, Any]:
    """Byte equality, JSON-value equality and the first differing character of two outputs."""
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    try:
        same_value = json.loads(a) == json.loads(b)
    except ValueError:
        same_value = None  # at least one is not (complete) JSON
    return {
        "identical": a == b,
        "same_json_value": same_value,
        "first_diff_char": first,
        "context": None
        if first is None
        else [a[max(0, first - 25) : first + 25], b[max(0, first - 25) : first + 25]],
    }


def med(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def config_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [g for g in runs if "error" not in g]
    return {
        "tokens_per_s_p50": med([g["tokens_per_s"] for g in good]),
        "chars_per_s_p50": med([g["chars_per_s"] for g in good]),
        "ms_per_pass_p50": med([g["ms_per_pass"] for g in good]),
        "tokens_p50": med([g["tokens"] for g in good]),
        "passes_p50": med([g["forward_passes"] for g in good]),
        "wall_s_p50": med([g["wall_s"] for g in good]),
        "complete": sum(g["complete"] for g in good),
        "valid": sum(g["valid"] for g in good) if all("valid" in g for g in good) else None,
        "errors": len(runs) - len(good),
    }


def summarise_schema(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Fast-forward on vs off over the prompts of one whitespace setting."""
    ok = [c for c in cells if "ff_diff" in c]
    both = [c for c in ok if c["ff_off"]["complete"] and c["ff_on"]["complete"]]
    speedups = [c["speedup_wall"] for c in ok]
    return {
        "ff_off": config_summary([c["ff_off"] for c in cells]),
        "ff_on": config_summary([c["ff_on"] for c in cells]),
        "speedup_wall_p50": med(speedups),
        "speedup_wall_min_max": [min(speedups), max(speedups)] if speedups else None,
        "pass_ratio_p50": med([c["pass_ratio"] for c in ok]),
        "fast_forwarded_p50": med([c["ff_on"]["fast_forwarded"] for c in ok]),
        "fast_forwarded_share_p50": med(
            [c["ff_on"]["fast_forwarded"] / max(c["ff_on"]["tokens"], 1) for c in ok]
        ),
        "outputs_identical": sum(c["ff_diff"]["identical"] for c in ok),
        "outputs_same_json_value": sum(bool(c["ff_diff"]["same_json_value"]) for c in ok),
        "both_complete": len(both),
        "both_complete_speedup_wall_p50": med([c["speedup_wall"] for c in both]),
        "both_complete_chars_per_s_p50": [
            med([c["ff_off"]["chars_per_s"] for c in both]),
            med([c["ff_on"]["chars_per_s"] for c in both]),
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="4 prompts")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--whitespace",
        default="default,none",
        help="comma-separated SchemaOptions.whitespace settings for the schema guides",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the unconstrained runs")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    import torch

    import constrain
    from constrain.models import load_model

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model, tokenizer = load_model()
    compiler = constrain.Compiler(
        tokenizer, vocab_size=model.get_output_embeddings().weight.shape[0], generation_config=model
    )
    vocab = compiler.vocabulary
    pairs: list[Pair] = [p for p in PAIRS if p.kind == "json"]
    if args.quick:
        pairs = pairs[:4]
    free = compiler.regex(r"(.|\n)*")
    free_raw(model, tokenizer, "Say hello.", vocab.eos_token_ids, 8)  # warm torch up

    settings = [w.strip() for w in args.whitespace.split(",") if w.strip()]
    rows = []
    for pair in pairs:
        row: dict[str, Any] = {
            "name": pair.name,
            "prompt": pair.prompt,
            "schema": pair.constraint.__name__,
            "whitespace": {},
        }
        for ws in settings:
            guide = compiler.json_schema(pair.constraint, whitespace=ws)
            for ff in (False, True):  # untimed: build the rows either path visits
                run(model, tokenizer, pair.prompt, guide, vocab, args.max_new_tokens, ff)
            cell = {
                "ff_off": rates(run(model, tokenizer, pair.prompt, guide, vocab, args.max_new_tokens, False)),
                "ff_on": rates(run(model, tokenizer, pair.prompt, guide, vocab, args.max_new_tokens, True)),
            }
            for key in ("ff_off", "ff_on"):
                if "error" not in cell[key]:
                    cell[key]["valid"] = check_valid(pair, cell[key]["text"])
            off, on = cell["ff_off"], cell["ff_on"]
            if "error" not in off and "error" not in on:
                cell["ff_diff"] = compare(off["text"], on["text"])
                cell["speedup_wall"] = off["wall_s"] / on["wall_s"]
                cell["pass_ratio"] = off["forward_passes"] / max(on["forward_passes"], 1)
            row["whitespace"][ws] = cell
            print(
                f"{pair.name:16} [{ws}] off {off.get('tokens')} tok/{off.get('forward_passes')} passes "
                f"{off.get('wall_s', 0):.2f}s | on {on.get('tokens')} tok/{on.get('forward_passes')} passes "
                f"({on.get('fast_forwarded')} ff) {on.get('wall_s', 0):.2f}s | "
                f"identical={cell.get('ff_diff', {}).get('identical')}",
                file=sys.stderr,
                flush=True,
            )
        if not args.no_baseline:
            row["free_regex"] = rates(
                run(model, tokenizer, pair.prompt, free, vocab, args.max_new_tokens, False)
            )
            row["free_raw"] = rates(
                free_raw(model, tokenizer, pair.prompt, vocab.eos_token_ids, args.max_new_tokens)
            )
        rows.append(row)

    summary: dict[str, Any] = {"prompts": len(rows), "whitespace": {}}
    for ws in settings:
        cells = [r["whitespace"][ws] for r in rows]
        summary["whitespace"][ws] = summarise_schema(cells)
    if not args.no_baseline:
        for key in ("free_regex", "free_raw"):
            summary[key] = config_summary([r[key] for r in rows])
        summary["free_regex_equals_raw"] = sum(
            "error" not in r["free_regex"] and r["free_regex"]["text"] == r["free_raw"]["text"] for r in rows
        )
    report = {
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "model": "SmolLM2-135M-Instruct (constrain.models.load_model, float32, CPU)",
        "max_new_tokens": args.max_new_tokens,
        "whitespace_settings": settings,
        "summary": summary,
        "prompts": rows,
        "runtime_s": time.perf_counter() - started,
    }
    text = markdown(report)
    print(text)
    if not args.no_write:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / "generation.json").write_text(json.dumps(report, indent=1) + "\n")
        (RESULTS_DIR / "generation.md").write_text(text + "\n")
    print(f"\nruntime {report['runtime_s']:.0f} s", file=sys.stderr)
    return 0


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    m = report["machine"]
    n = s["prompts"]
    lines = [
        "# Generation benchmark: fast-forward on/off vs unconstrained",
        "",
        (
            f"`python benchmarks/bench_generation.py` — {report['generated']}, SmolLM2-135M-Instruct float32 on CPU, "
            f"{m['torch_threads']} torch thread(s), {m['cpus']} CPUs, torch {m['torch']}, greedy, "
            f"max_new_tokens={report['max_new_tokens']}, {n} JSON-schema prompts. Medians over prompts; "
            f"whitespace = the schema's `SchemaOptions.whitespace` (`default` = `[ ]?` between JSON tokens, "
            f"`none` = compact)."
        ),
        "",
        "| configuration | tokens/s | chars/s | ms/pass | tokens | forward passes | wall s | complete | valid |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    table = [
        (f"schema (whitespace `{ws}`), fast-forward {state}", w[f"ff_{state}"])
        for ws, w in s["whitespace"].items()
        for state in ("off", "on")
    ]
    if "free_regex" in s:
        table += [
            ("unconstrained, guide `(.\\|\\n)*`", s["free_regex"]),
            ("unconstrained, no mask (plain loop)", s["free_raw"]),
        ]
    for label, c in table:
        valid = "–" if c["valid"] is None else f"{c['valid']}/{n}"
        lines.append(
            f"| {label} | {_f(c['tokens_per_s_p50'])} | {_f(c['chars_per_s_p50'])} | {_f(c['ms_per_pass_p50'])} | "
            f"{_f(c['tokens_p50'], 0)} | {_f(c['passes_p50'], 0)} | {_f(c['wall_s_p50'], 2)} | "
            f"{c['complete']}/{n} | {valid} |"
        )
    lines += [
        "",
        (
            "| whitespace | speedup p50 (min–max) | passes off/on p50 | fast-forwarded tokens p50 (share) | "
            "identical outputs | same JSON value | both complete: speedup p50, chars/s off / on |"
        ),
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for ws, w in s["whitespace"].items():
        lo, hi = w["speedup_wall_min_max"] or [None, None]
        cps = w["both_complete_chars_per_s_p50"]
        lines.append(
            f"| `{ws}` | **{_f(w['speedup_wall_p50'], 2)}×** ({_f(lo, 2)}–{_f(hi, 2)}×) | "
            f"{_f(w['pass_ratio_p50'], 2)}× | {_f(w['fast_forwarded_p50'], 0)} "
            f"({100 * (w['fast_forwarded_share_p50'] or 0):.0f}%) | {w['outputs_identical']}/{n} | "
            f"{w['outputs_same_json_value']}/{n} | {w['both_complete']}/{n}: "
            f"{_f(w['both_complete_speedup_wall_p50'], 2)}×, {_f(cps[0])} / {_f(cps[1])} |"
        )
    if "free_regex_equals_raw" in s:
        lines += [
            "",
            f"The `(.|\\n)*` guide gave the same text as the unmasked loop on {s['free_regex_equals_raw']}/{n} prompts.",
        ]
    for ws in s["whitespace"]:
        lines += [
            "",
            f"### Per prompt, whitespace `{ws}`",
            "",
            "| prompt | tokens off / on | passes off / on | fast-forwarded | wall s off / on | speedup | identical | same value |",
            "|---|--:|--:|--:|--:|--:|:-:|:-:|",
        ]
        diffs = []
        for r in report["prompts"]:
            c = r["whitespace"][ws]
            if "ff_diff" not in c:
                lines.append(
                    f"| {r['name']} | error: {c['ff_off'].get('error') or c['ff_on'].get('error')} |||||||"
                )
                continue
            off, on, d = c["ff_off"], c["ff_on"], c["ff_diff"]
            same = "–" if d["same_json_value"] is None else ("✓" if d["same_json_value"] else "✗")
            lines.append(
                f"| {r['name']} | {off['tokens']} / {on['tokens']} | {off['forward_passes']} / {on['forward_passes']} | "
                f"{on['fast_forwarded']} | {off['wall_s']:.2f} / {on['wall_s']:.2f} | {c['speedup_wall']:.2f}× | "
                f"{'✓' if d['identical'] else '✗'} | {same} |"
            )
            if not d["identical"]:
                a, b = d["context"]
                diffs.append(f"- {r['name']} @ {d['first_diff_char']}: `{_md(a)}` → `{_md(b)}`")
        if diffs:
            lines += ["", "First differing characters (off → on):", ""] + diffs
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("`", "'").replace("\n", "\\n")


if __name__ == "__main__":
    sys.exit(main())
