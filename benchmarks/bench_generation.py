#!/usr/bin/env python
"""Generation benchmark: fast-forward on/off for JSON-schema generations, against unconstrained
decoding, and every peer engine's logits processor inside ``model.generate``.

Run with ``python benchmarks/bench_generation.py`` (``--quick`` for 2 prompts of at most
64 new tokens, in both parts; ``--max-new-tokens N``, ``--whitespace default,none``,
``--no-baseline``, ``--no-write``; ``--peers`` for the peer comparison alone, merged into
the existing results; ``--engines a,b`` for some of its engines). It prints markdown
tables and writes ``benchmarks/results/generation.json`` and ``generation.md``;
``docs/fast_forward.md`` explains the fast-forward numbers.

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
  - ``coalesce``: ``generate(..., fast_forward=False, coalescence=True)`` — tokens
    that spell the same text as a longer allowed token are masked out
    (``docs/coalescence.md`` has what that does to the outputs);
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

Peers through ``model.generate``
--------------------------------
constrain's ``generate`` loop above is its own; this section puts every engine in one
loop instead: ``model.generate(..., logits_processor=[processor], do_sample=False,
max_new_tokens=N)`` on the same prompts and Pydantic schemas (``model_json_schema()``),
greedy, ``--threads`` torch threads, single-threaded engines.

* **Processors.** constrain: ``constrain.integrations.transformers.LogitsProcessor``
  over ``Compiler.json_schema``; xgrammar: its own ``xgrammar.contrib.hf.LogitsProcessor``
  (``compile_json_schema``, ``GrammarCompiler(max_threads=1)``); transformers-cfg: its
  ``GrammarConstrainedLogitsProcessor`` on ``bench_cfg.JSON_GBNF``, any JSON value (it
  takes no schema, so its outputs can be valid JSON and still fail the schema).
  llguidance (``LLMatcher``), outlines-core (``Guide`` over an ``Index`` of
  ``build_regex_from_schema``) and lm-format-enforcer (``TokenEnforcer``, whose
  transformers module fails to import on transformers 5) ship no processor that works
  here, so :class:`EngineProcessor` wraps them: it advances the engine by the token
  chosen at the previous step, then sets every token outside the engine's mask to -inf.
  Each engine keeps its own whitespace default (listed in the table): what it allows
  between JSON tokens changes what greedy decoding writes.
* **Timing.** Per engine: one untimed warm-up (its own compile of the first schema and
  one generation), then per prompt a fresh compile of the schema (timed apart) and one
  generation, ``perf_counter`` around ``model.generate``. Per-tokenizer preprocessing is
  done once, untimed. Every timed generation thus starts from a fresh guide: lazy
  engines (constrain, llguidance, lm-format-enforcer) build states inside it, eager ones
  (xgrammar, outlines-core) in the compile, so *tokens/s with compile* (tokens over
  compile + generation) is reported beside plain tokens/s. Tokens count every generated
  id, the closing EOS too. The same loop without a processor is the baseline;
  *× unconstrained* is the ratio of tokens/s on the same prompt, median over prompts.
* **Validity.** ``json.loads`` then ``jsonschema.validate`` against the schema.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe, token_map, version
from study_coalescence import PAIRS, Pair, check_valid, prompt_ids, run_generate

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
    model: Any, tokenizer: Any, pair: Pair, guide: Any, vocab: Any, max_new_tokens: int, fast_forward: bool,
    coalescence: bool = False,
) -> dict[str, Any]:
    """One timed greedy ``generate`` (the study's runner); validity is judged by the caller, per configuration."""
    result = run_generate(model, tokenizer, pair, guide, vocab, max_new_tokens=max_new_tokens,
                          fast_forward=fast_forward, coalescence=coalescence)  # fmt: skip
    for key in ("token_ids", "valid"):
        result.pop(key, None)
    return result


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
        "coalesce": config_summary([c["coalesce"] for c in cells]),
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


# ---------------------------------------------------------------------- peers through model.generate

PEER_ENGINES = (
    "constrain", "xgrammar", "llguidance", "outlines-core", "lm-format-enforcer", "transformers-cfg"
)  # fmt: skip


@dataclass
class PeerContext:
    """What every engine's setup gets: the tokenizer, constrain's compiler over it, the logits width."""

    tokenizer: Any
    compiler: Any
    vocab_size: int
    eos_id: int


class EngineProcessor:
    """A logits processor around an engine that has none working with transformers 5.

    ``generate`` calls it once per step with the whole sequence: from the second call
    on, the last id is the token chosen at the previous step, so the engine advances by
    it before the next mask is computed. Tokens outside the engine's mask get -inf,
    through the same packed-bitmask application constrain's own processor uses, so
    that the engines differ only in their own calls. One sequence (batch of 1).
    """

    def __init__(self) -> None:
        from constrain.sampling import apply_bitmask

        self.apply, self.started = apply_bitmask, False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.started:
            self.advance(int(input_ids[0, -1]))
        self.started = True
        self.apply(scores, self.bitmask(input_ids[0].tolist()))
        return scores

    def advance(self, token_id: int) -> None:
        raise NotImplementedError

    def bitmask(self, sequence: list[int]) -> np.ndarray:
        """The packed int32 mask of the tokens the engine allows next."""
        raise NotImplementedError


class LLGuidanceProcessor(EngineProcessor):
    def __init__(self, matcher: Any, vocab_size: int) -> None:
        import llguidance.numpy

        super().__init__()
        self.matcher, self.fill = matcher, llguidance.numpy.fill_next_token_bitmask
        self.mask = llguidance.numpy.allocate_token_bitmask(1, vocab_size)

    def advance(self, token_id: int) -> None:
        if not self.matcher.consume_token(token_id) or self.matcher.is_error():
            raise RuntimeError(f"llguidance refused token {token_id}: {self.matcher.get_error()}")

    def bitmask(self, sequence: list[int]) -> np.ndarray:
        self.fill(self.matcher, self.mask, 0)
        return self.mask


class OutlinesCoreProcessor(EngineProcessor):
    """outlines-core's torch kernel fills the mask (its numpy kernel needs numba)."""

    def __init__(self, guide: Any, vocab_size: int) -> None:
        import outlines_core.kernels.torch as kernels

        super().__init__()
        self.guide, self.fill = guide, kernels.fill_next_token_bitmask
        self.mask = kernels.allocate_token_bitmask(vocab_size)

    def advance(self, token_id: int) -> None:
        self.guide.advance(token_id, return_tokens=False)

    def bitmask(self, sequence: list[int]) -> np.ndarray:
        self.fill(self.guide, self.mask)
        return self.mask.numpy()


class LMFEProcessor(EngineProcessor):
    """lm-format-enforcer keys its state by the whole sequence, so there is nothing to advance."""

    def __init__(self, enforcer: Any, vocab_size: int) -> None:
        super().__init__()
        self.enforcer, self.vocab_size = enforcer, vocab_size

    def advance(self, token_id: int) -> None:
        pass

    def bitmask(self, sequence: list[int]) -> np.ndarray:
        from constrain.guide import bitmask_from_token_ids

        allowed = self.enforcer.get_allowed_tokens(sequence).allowed_tokens
        return bitmask_from_token_ids(np.asarray(allowed, dtype=np.int64), self.vocab_size)


Compile = Callable[[dict[str, Any], Pair], Callable[[], Any]]


def set_up_constrain(ctx: PeerContext) -> Compile:
    import constrain
    from constrain.integrations.transformers import LogitsProcessor

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        # a fresh Compiler over the shared vocabulary: no guide cached by an earlier run
        guide = constrain.Compiler(ctx.compiler.vocabulary).json_schema(pair.constraint)
        return lambda: LogitsProcessor(guide)

    return compile_


def set_up_xgrammar(ctx: PeerContext) -> Compile:
    import xgrammar
    import xgrammar.contrib.hf

    info = xgrammar.TokenizerInfo.from_huggingface(ctx.tokenizer, vocab_size=ctx.vocab_size)
    compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        compiled = compiler.compile_json_schema(json.dumps(schema))
        return lambda: xgrammar.contrib.hf.LogitsProcessor(compiled)

    return compile_


def set_up_llguidance(ctx: PeerContext) -> Compile:
    import llguidance
    import llguidance.hf

    tokenizer = llguidance.hf.from_tokenizer(ctx.tokenizer, n_vocab=ctx.vocab_size)

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return lambda: LLGuidanceProcessor(matcher.deep_copy(), ctx.vocab_size)

    return compile_


def set_up_outlines_core(ctx: PeerContext) -> Compile:
    import outlines_core
    from outlines_core.json_schema import build_regex_from_schema

    token_ids = token_map(ctx.compiler.vocabulary.token_bytes, ctx.eos_id)
    vocabulary = outlines_core.Vocabulary(ctx.eos_id, token_ids)

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        index = outlines_core.Index(build_regex_from_schema(json.dumps(schema)), vocabulary)
        return lambda: OutlinesCoreProcessor(outlines_core.Guide(index), ctx.vocab_size)

    return compile_


def set_up_lm_format_enforcer(ctx: PeerContext) -> Compile:
    from peers import _lmfe_transformers_shim

    _lmfe_transformers_shim()  # its transformers module imports a module transformers 5 removed
    from lmformatenforcer import JsonSchemaParser, TokenEnforcer
    from lmformatenforcer.integrations.transformers import build_token_enforcer_tokenizer_data

    data = build_token_enforcer_tokenizer_data(ctx.tokenizer, vocab_size=ctx.vocab_size)

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        parser = JsonSchemaParser(schema)  # immutable: one per schema; the enforcer is per sequence
        return lambda: LMFEProcessor(TokenEnforcer(data, parser), ctx.vocab_size)

    return compile_


def set_up_transformers_cfg(ctx: PeerContext) -> Compile:
    from bench_cfg import JSON_GBNF, TransformersCfgPeer

    peer = TransformersCfgPeer("smollm2", ctx.compiler.vocabulary)  # the default model's tokenizer files

    def compile_(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
        constraint = peer.constraint_class(JSON_GBNF, "root", peer.tokenizer, trie=peer.trie,
                                           homomorphism=peer.homomorphism)  # fmt: skip

        def new() -> Any:
            constraint.reset()
            return peer.processor_class(constraint)

        return new

    return compile_


#: engine → (setup, what it constrains to, its whitespace between JSON tokens).
PEER_SETUPS: dict[str, tuple[Callable[[PeerContext], Compile], str, str]] = {
    "constrain": (set_up_constrain, "schema", "`[ ]?` (whitespace=\"default\")"),
    "xgrammar": (set_up_xgrammar, "schema", "any (any_whitespace=True)"),
    "llguidance": (set_up_llguidance, "schema", "any (its JSON default)"),
    "outlines-core": (set_up_outlines_core, "schema", "`[ ]?` (build_regex_from_schema default)"),
    "lm-format-enforcer": (set_up_lm_format_enforcer, "schema", "up to 12 consecutive whitespace characters"),
    "transformers-cfg": (set_up_transformers_cfg, "json grammar (any JSON value)", "any (`[ \\t\\n\\r]*`)"),
}


def generate_once(model: Any, tokenizer: Any, prompt: str, processor: Any, max_new_tokens: int,
                  eos_ids: frozenset[int]) -> dict[str, Any]:  # fmt: skip
    """One greedy ``model.generate`` call, timed around the whole call; no processor = unconstrained."""
    import torch

    ids = torch.tensor([prompt_ids(tokenizer, prompt)])
    extra = {} if processor is None else {"logits_processor": [processor]}
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=min(eos_ids), **extra)  # fmt: skip
    wall = time.perf_counter() - start
    new = out[0, ids.shape[1] :].tolist()
    complete = bool(new) and new[-1] in eos_ids
    return {
        "text": tokenizer.decode(new[:-1] if complete else new),
        "tokens": len(new),
        "complete": complete,
        "wall_s": wall,
        "tokens_per_s": len(new) / wall,
        "ms_per_token": 1000 * wall / max(len(new), 1),
    }


def unconstrained(schema: dict[str, Any], pair: Pair) -> Callable[[], Any]:
    """The baseline's "compile": its processor is None, ``model.generate`` as is."""
    return lambda: None


def schema_valid(text: str, schema: dict[str, Any]) -> bool:
    """``json.loads`` then ``jsonschema`` validation: the check every engine's output gets."""
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def measure_peer_engine(engine: str, ctx: PeerContext, model: Any, pairs: list[Pair], max_new_tokens: int
                        ) -> dict[str, Any]:  # fmt: skip
    """Set the engine up, warm it with one untimed generation, then compile and generate once per prompt.

    The warm-up has its own compile of the first schema, so every timed generation
    starts from a freshly compiled guide: an engine that builds its automaton lazily
    pays for that inside the generation, one that builds it eagerly inside its compile;
    *tokens/s with compile* puts both on one footing. Engine ``"unconstrained"`` is
    ``model.generate`` without a processor. A failure to load, compile or generate is
    recorded with its reason; it never stops the run.
    """
    eos_ids = ctx.compiler.vocabulary.eos_token_ids
    result: dict[str, Any] = {"engine": engine}
    try:
        compile_: Compile = unconstrained
        if engine != "unconstrained":
            setup, result["constrains"], result["whitespace"] = PEER_SETUPS[engine]
            result["version"] = version(engine)
            compile_ = setup(ctx)
        warm_up = compile_(pairs[0].constraint.model_json_schema(), pairs[0])
        generate_once(model, ctx.tokenizer, pairs[0].prompt, warm_up(), max_new_tokens, eos_ids)
    except Exception as exc:  # noqa: BLE001 - an engine that does not load or run is a result
        result["error"] = describe(exc)
        return result
    runs = []
    for pair in pairs:
        schema = pair.constraint.model_json_schema()
        run_: dict[str, Any] = {"name": pair.name}
        try:
            start = time.perf_counter()
            new = compile_(schema, pair)
            compile_s = time.perf_counter() - start
            run_.update(generate_once(model, ctx.tokenizer, pair.prompt, new(), max_new_tokens, eos_ids))
            run_["compile_ms"] = 1000 * compile_s
            run_["tokens_per_s_with_compile"] = run_["tokens"] / (run_["wall_s"] + compile_s)
            run_["valid"] = schema_valid(run_["text"], schema)
        except Exception as exc:  # noqa: BLE001 - a failed generation is a result
            run_["error"] = describe(exc)
        runs.append(run_)
        print(f"{engine:18} {pair.name:14} {run_.get('tokens', '-')} tokens {run_.get('wall_s', 0):.2f} s "
              f"valid={run_.get('valid')} {run_.get('error', '')}", file=sys.stderr, flush=True)  # fmt: skip
    good = [r for r in runs if "error" not in r]
    result.update(
        runs=runs,
        compile_ms_p50=med([r["compile_ms"] for r in good]),
        tokens_per_s_p50=med([r["tokens_per_s"] for r in good]),
        tokens_per_s_with_compile_p50=med([r["tokens_per_s_with_compile"] for r in good]),
        ms_per_token_p50=med([r["ms_per_token"] for r in good]),
        tokens_p50=med([r["tokens"] for r in good]),
        complete=sum(r["complete"] for r in good),
        valid=sum(r["valid"] for r in good),
        errors=len(runs) - len(good),
    )
    return result


def run_peers(model: Any, tokenizer: Any, compiler: Any, pairs: list[Pair], max_new_tokens: int,
              engines: list[str]) -> dict[str, Any]:  # fmt: skip
    """Every engine, then unconstrained ``model.generate``, on the same prompts; ratios per prompt."""
    ctx = PeerContext(tokenizer, compiler, compiler.vocabulary.size, min(compiler.vocabulary.eos_token_ids))
    results = [measure_peer_engine(e, ctx, model, pairs, max_new_tokens) for e in [*engines, "unconstrained"]]
    baseline = {r["name"]: r for r in results[-1].get("runs", []) if "error" not in r}
    for result in results[:-1]:
        ratios = [r["tokens_per_s"] / baseline[r["name"]]["tokens_per_s"]
                  for r in result.get("runs", []) if "error" not in r and r["name"] in baseline]  # fmt: skip
        result["ratio_to_unconstrained_p50"] = med(ratios)
    return {"prompts": [p.name for p in pairs], "max_new_tokens": max_new_tokens, "engines": results}


def peers_markdown(peers: dict[str, Any]) -> list[str]:
    n = len(peers["prompts"])
    lines = [
        "## Every engine through `model.generate`",
        "",
        (
            f"`python benchmarks/bench_generation.py --peers{' --quick' if peers['quick'] else ''}` — "
            f"{peers['generated']}, load average "
            f"{peers['machine']['load_average']} at the start (2 CPUs shared with other jobs when above ~1). "
            f"Each engine's logits processor in the same greedy `model.generate(..., logits_processor=[p], "
            f"do_sample=False, max_new_tokens={peers['max_new_tokens']})` loop, {n} prompts "
            f"({', '.join(peers['prompts'])}), one untimed warm-up generation per engine, then per prompt a "
            "fresh compile of its schema and one timed generation. Tokens count every generated id, the "
            "closing EOS too (each one costs a forward pass and a mask). × unconstrained = tokens/s over "
            "`model.generate` without a processor on the same prompt; *with compile* adds the compile to "
            "the generation's time (an engine that builds lazily pays inside the generation, an eager one "
            "in its compile). Valid = `json.loads` + `jsonschema` against the prompt's schema. Medians over "
            "prompts."
        ),
        "",
        "| engine | constrains to | whitespace | compile ms | tokens/s | ms/token | × unconstrained "
        "| tokens/s with compile | tokens | complete | valid |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    notes = []
    for r in peers["engines"]:
        baseline = r["engine"] == "unconstrained"
        name = r["engine"] if baseline else f"{r['engine']} {r['version']}"
        if "runs" not in r:
            lines.append(f"| {name} | {r['constrains']} | {r['whitespace']} | unavailable{' | –' * 7} |")
            notes.append(f"- {name}: {r['error']}")
            continue
        lines.append(
            f"| {name} | {r.get('constrains', '–')} | {r.get('whitespace', '–')} | "
            f"{'–' if baseline else _f(r['compile_ms_p50'])} | {_f(r['tokens_per_s_p50'])} | "
            f"{_f(r['ms_per_token_p50'])} | {_f(r.get('ratio_to_unconstrained_p50'), 2)} | "
            f"{'–' if baseline else _f(r['tokens_per_s_with_compile_p50'])} | "
            f"{_f(r['tokens_p50'], 0)} | "
            f"{r['complete']}/{n} | {r['valid']}/{n} |"
        )
        notes += [f"- {name}, {run_['name']}: {run_['error']}" for run_ in r["runs"] if "error" in run_]
    if notes:
        lines += ["", "Failures:", ""] + notes
    return lines


def fast_forward_study(
    args: argparse.Namespace, model: Any, tokenizer: Any, compiler: Any, pairs: list[Pair]
) -> dict[str, Any]:
    """Fast-forward on/off per whitespace setting, and the unconstrained baselines (the sections above)."""
    vocab = compiler.vocabulary
    free = compiler.regex(r"(.|\n)*")
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
                run(model, tokenizer, pair, guide, vocab, args.max_new_tokens, ff)
            cell = {
                "ff_off": rates(run(model, tokenizer, pair, guide, vocab, args.max_new_tokens, False)),
                "ff_on": rates(run(model, tokenizer, pair, guide, vocab, args.max_new_tokens, True)),
                # coalescence (docs/coalescence.md), fast-forward off: its own effect on tokens/s
                "coalesce": rates(
                    run(model, tokenizer, pair, guide, vocab, args.max_new_tokens, False, coalescence=True)
                ),
            }
            for key in ("ff_off", "ff_on", "coalesce"):
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
                run(model, tokenizer, pair, free, vocab, args.max_new_tokens, False)
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
    return {
        "generated": now(),
        "machine": machine_info(),
        "model": "SmolLM2-135M-Instruct (constrain.models.load_model, float32, CPU)",
        "max_new_tokens": args.max_new_tokens,
        "whitespace_settings": settings,
        "summary": summary,
        "prompts": rows,
    }


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def machine_info() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "load_average": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="2 prompts of at most 64 new tokens (both parts)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--whitespace",
        default="default,none",
        help="comma-separated SchemaOptions.whitespace settings for the schema guides",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the unconstrained runs")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="only the comparison of every engine through model.generate, merged into the existing results",
    )
    parser.add_argument(
        "--engines", default=",".join(PEER_ENGINES), help=f"engines of the peer comparison, of {PEER_ENGINES}"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - set(PEER_ENGINES))
    if unknown:
        parser.error(f"unknown engines {unknown}; choose among {', '.join(PEER_ENGINES)}")

    import torch

    import constrain
    from constrain.models import load_model

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model, tokenizer = load_model()
    compiler = constrain.Compiler(
        tokenizer, vocab_size=model.get_output_embeddings().weight.shape[0], generation_config=model
    )
    pairs: list[Pair] = [p for p in PAIRS if p.kind == "json"]
    free_raw(model, tokenizer, "Say hello.", compiler.vocabulary.eos_token_ids, 8)  # warm torch up

    results_json = RESULTS_DIR / "generation.json"
    if args.peers:  # keep the other sections of the last full run
        report = json.loads(results_json.read_text()) if results_json.exists() else {}
    else:
        if args.quick:
            args.max_new_tokens = min(args.max_new_tokens, 64)
        report = fast_forward_study(args, model, tokenizer, compiler, pairs[:2] if args.quick else pairs)
        report["runtime_s"] = time.perf_counter() - started
    peers_started = time.perf_counter()
    peer_pairs, peer_tokens = (pairs[:2], 64) if args.quick else (pairs, args.max_new_tokens)
    report["peers"] = {
        "generated": now(),
        "quick": args.quick,
        "machine": machine_info(),
        **run_peers(model, tokenizer, compiler, peer_pairs, peer_tokens, engines),
        "runtime_s": time.perf_counter() - peers_started,
    }
    text = markdown(report)
    print(text)
    if not args.no_write:
        RESULTS_DIR.mkdir(exist_ok=True)
        results_json.write_text(json.dumps(report, indent=1) + "\n")
        (RESULTS_DIR / "generation.md").write_text(text + "\n")
    print(f"\nruntime {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    """The fast-forward study's tables (when the report has them) and the peer comparison's."""
    lines = fast_forward_markdown(report) if "summary" in report else ["# Generation benchmark"]
    if "peers" in report:
        lines += ["", *peers_markdown(report["peers"])]
    return "\n".join(lines)


def fast_forward_markdown(report: dict[str, Any]) -> list[str]:
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
    return lines


def _md(text: str) -> str:
    return text.replace("`", "'").replace("\n", "\\n")


if __name__ == "__main__":
    sys.exit(main())
