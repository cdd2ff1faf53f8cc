#!/usr/bin/env python
"""Coalescence study: what keeping only the longest of prefix-sharing tokens does to generation.

Run with ``python benchmarks/study_coalescence.py`` (``--quick`` for a third of the
pairs, ``--max-new-tokens N``, ``--no-write``). It prints markdown tables and writes
``benchmarks/results/coalescence.json`` (per-pair rows, per-step measurements and
the summaries); ``docs/coalescence.md`` explains the numbers.

Method
------
* **Model and pairs.** The offline default model (SmolLM2-135M-Instruct, float32,
  CPU) and :data:`PAIRS`: realistic prompt/constraint pairs — JSON schemas given as
  Pydantic classes, regexes (dates, phones, emails, ...) and choices. Prompts go
  through the chat template, as :func:`constrain.sampling.generate` does by default.
* **(a) Outputs.** Each pair is generated greedily with the full mask and with
  ``coalescence=True``, fast-forward off (to isolate coalescence) and then on
  (``generate``'s default). The coalesced text is compared with the full-mask one,
  and checked independently of the guide: ``re.fullmatch`` (ASCII classes) for
  regexes, membership for choices, ``model_validate_json`` for schemas.
  ``complete`` means the guide ended with EOS within ``--max-new-tokens``. Both
  outputs are also scored by the full-mask model (fast-forward off): NLL per output
  byte of the tokens as generated, each under the full allowed set, EOS included.
* **(b) Distribution shift.** Along the full-mask greedy trajectory (fast-forward
  off), the logits of every step come from one teacher-forced forward pass over
  prompt + generated tokens. At each step ``A`` is the guide's allowed set and
  ``C`` = ``coalesce(A minus EOS) + EOS`` (exactly what ``generate`` keeps).
  ``p_full`` = softmax over ``A``, ``p_coal`` = softmax over ``C`` (that is,
  ``p_full`` restricted to ``C`` and renormalised). Recorded per step: the
  probability mass coalescence removes, ``m = p_full(A minus C)``; whether the
  full-mask argmax is removed (then greedy decoding must pick another token);
  ``KL(p_full || p_coal)``, which is infinite as soon as ``m > 0`` (``p_coal`` has
  no mass on removed tokens), so such steps are counted rather than averaged;
  the finite reverse ``KL(p_coal || p_full) = -log(1 - m)``; the Jensen-Shannon
  divergence; and a string-level measure: the distribution of the next *byte*
  (each token's first byte, EOS as its own symbol) under either mask, and the KL
  between them, which stays finite because a removed token's first byte is still
  spelled by the longer token that removed it.
* **(c) Cost.** Tokens per output, forward passes and wall time of every
  ``generate`` call; the time of constrain's ``coalesce`` per mask (measured once
  per distinct guide state in (b)).
* **Timing.** One torch thread (``--threads``): on a 2-core machine shared with other
  jobs, two threads made each forward pass ~8x slower than one. Before the timed calls
  each pair runs one untimed full-mask generation so the guide's lazily built rows
  are warm. Coalesced runs still visit some states first (their rows are built
  during the timed call), which is small next to the coalescing itself.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

# ---------------------------------------------------------------------- the pairs


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    age: int = Field(ge=0, le=120)
    occupation: Literal["engineer", "doctor", "teacher", "artist", "other"]
    city: str = Field(max_length=40)


class Book(BaseModel):
    title: str
    author: str
    year: int = Field(ge=1000, le=2100)
    genres: list[str] = Field(max_length=3)


class Product(BaseModel):
    name: str
    price: float = Field(ge=0)
    currency: Literal["USD", "EUR", "GBP"]
    in_stock: bool


class Weather(BaseModel):
    city: str
    temperature_c: float
    condition: Literal["sunny", "cloudy", "rainy", "snowy", "windy"]
    humidity: int = Field(ge=0, le=100)


class CalendarEvent(BaseModel):
    title: str = Field(max_length=60)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    start_time: str = Field(pattern=r"^\d{2}:\d{2}$")
    attendees: list[str] = Field(max_length=4)


class MovieReview(BaseModel):
    movie: str
    rating: int = Field(ge=1, le=5)
    summary: str = Field(max_length=120)
    recommend: bool


class Address(BaseModel):
    street: str
    city: str
    postal_code: str = Field(pattern=r"^\d{5}$")
    country: str


class Recipe(BaseModel):
    name: str
    servings: int = Field(ge=1, le=12)
    ingredients: list[str] = Field(max_length=5)
    vegetarian: bool


class SupportTicket(BaseModel):
    subject: str = Field(max_length=80)
    priority: Literal["low", "medium", "high", "urgent"]
    category: Literal["billing", "technical", "account", "other"]
    description: str = Field(max_length=150)


class Employee(BaseModel):
    first_name: str
    last_name: str
    email: str = Field(pattern=r"^[a-z0-9._]+@[a-z0-9.-]+\.[a-z]{2,6}$")
    department: Literal["sales", "engineering", "marketing", "finance", "hr"]
    salary: int = Field(ge=0)


class Flight(BaseModel):
    origin: str = Field(pattern=r"^[A-Z]{3}$")
    destination: str = Field(pattern=r"^[A-Z]{3}$")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    passengers: int = Field(ge=1, le=9)
    cabin: Literal["economy", "business", "first"]


class Country(BaseModel):
    name: str
    capital: str
    population: int = Field(ge=0)
    languages: list[str] = Field(max_length=4)
    currency: str | None = None


@dataclass(frozen=True)
class Pair:
    name: str
    kind: str  # "json", "regex" or "choice"
    prompt: str
    constraint: Any  # a Pydantic class, a regex, or a list of options


PAIRS: list[Pair] = [
    # JSON schemas of realistic objects
    Pair("json_person", "json", "Invent a fictional person and describe them as JSON.", Person),
    Pair("json_book", "json", "Describe the novel 'Pride and Prejudice' as JSON.", Book),
    Pair(
        "json_product",
        "json",
        "Give a JSON record for a pair of wireless headphones sold in an online shop.",
        Product,
    ),
    Pair("json_weather", "json", "Report today's weather in Paris as JSON.", Weather),
    Pair(
        "json_event",
        "json",
        "Create a calendar event as JSON for a team meeting next Monday at 10am.",
        CalendarEvent,
    ),
    Pair("json_review", "json", "Write a short review of the movie 'Inception' as JSON.", MovieReview),
    Pair("json_address", "json", "Give the address of a bakery in Chicago as JSON.", Address),
    Pair("json_recipe", "json", "Give a simple pancake recipe as JSON.", Recipe),
    Pair(
        "json_ticket",
        "json",
        "A customer says: 'I was charged twice for my subscription this month.' File a support ticket as JSON.",
        SupportTicket,
    ),
    Pair("json_employee", "json", "Create an employee record for a new software engineer as JSON.", Employee),
    Pair("json_flight", "json", "Book a flight from New York to London for two people as JSON.", Flight),
    Pair("json_country", "json", "Describe Canada as JSON.", Country),
    # regexes
    Pair(
        "re_date",
        "regex",
        "On what date did Apollo 11 land on the Moon? Answer as YYYY-MM-DD.",
        r"\d{4}-\d{2}-\d{2}",
    ),
    Pair("re_phone", "regex", "Give me a US phone number for a pizza place.", r"\(\d{3}\) \d{3}-\d{4}"),
    Pair(
        "re_email",
        "regex",
        "Write an email address for the support team of a company called Acme.",
        r"[a-z0-9._+-]{1,30}@[a-z0-9-]{1,20}(\.[a-z0-9-]{1,20}){0,2}\.[a-z]{2,6}",
    ),
    Pair(
        "re_time",
        "regex",
        "At what time does a typical office open? Answer as HH:MM.",
        r"([01]\d|2[0-3]):[0-5]\d",
    ),
    Pair(
        "re_ipv4",
        "regex",
        "What is the IP address of a typical home router?",
        r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)",
    ),
    Pair("re_hex_color", "regex", "What is the hex color code for pure red?", r"#[0-9a-fA-F]{6}"),
    Pair("re_price", "regex", "How much does a cup of coffee cost in New York?", r"\$\d{1,4}\.\d{2}"),
    Pair("re_zip", "regex", "What is the ZIP code of the White House?", r"\d{5}(-\d{4})?"),
    Pair(
        "re_sentence", "regex", "Describe the weather today in one sentence.", r"[A-Z][a-z]+( [a-z]+){3,12}\."
    ),
    Pair("re_capitals", "regex", "Name three European capitals.", r"[A-Z][a-z]{2,12}(, [A-Z][a-z]{2,12}){2}"),
    Pair(
        "re_url",
        "regex",
        "Give the URL of a website about gardening.",
        r"https://(www\.)?[a-z0-9-]{1,20}\.(com|org|net)(/[a-z0-9-]{1,15}){0,2}",
    ),
    # choices
    Pair(
        "choice_sentiment",
        "choice",
        "Review: 'The battery died after two days and support never answered.' Is the sentiment positive, "
        "negative or neutral?",
        ["positive", "negative", "neutral"],
    ),
    Pair("choice_yes_no", "choice", "Is the sky blue on a clear day? Answer yes or no.", ["yes", "no"]),
    Pair(
        "choice_language",
        "choice",
        "Which language is this: 'Je voudrais un café, s'il vous plaît'?",
        ["English", "French", "German", "Spanish", "Italian"],
    ),
    Pair(
        "choice_rain",
        "choice",
        "Will it rain in Seattle tomorrow? Answer yes, no or not sure.",
        ["yes", "no", "not sure"],
    ),
    Pair(
        "choice_ticket",
        "choice",
        "Route this message: 'I cannot log into my account since yesterday.'",
        ["billing", "technical issue", "account access", "feature request", "other"],
    ),
]


def compile_guide(compiler: Any, pair: Pair) -> Any:
    if pair.kind == "json":
        return compiler.json_schema(pair.constraint)
    if pair.kind == "regex":
        return compiler.regex(pair.constraint)
    return compiler.choice(pair.constraint)


def check_valid(pair: Pair, text: str) -> bool:
    """Validity checked without the guide: re / membership / Pydantic."""
    if pair.kind == "regex":
        return re.fullmatch(pair.constraint, text, flags=re.ASCII) is not None
    if pair.kind == "choice":
        return text in pair.constraint
    try:
        pair.constraint.model_validate_json(text)
        return True
    except ValidationError:
        return False


# ---------------------------------------------------------------------- helpers


def pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (0–100) of the finite values: an infinite KL is counted apart, never averaged."""
    return _common.percentile([v for v in values if v is not None and math.isfinite(v)], q)


def median(values: list[float]) -> float | None:
    return pct(values, 50)


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if value != 0 and abs(value) < 10**-digits:
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The prompt ids exactly as ``generate`` builds them (chat template, no extra specials)."""
    if getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    return tokenizer.encode(prompt, add_special_tokens=False)


def run_generate(
    model: Any,
    tokenizer: Any,
    pair: Pair,
    guide: Any,
    vocab: Any,
    *,
    max_new_tokens: int,
    fast_forward: bool,
    coalescence: bool,
) -> dict[str, Any]:
    from constrain.sampling import generate

    start = time.perf_counter()
    try:
        res = generate(
            model,
            tokenizer,
            pair.prompt,
            guide,
            vocab,
            max_new_tokens=max_new_tokens,
            temperature=0.0,
            fast_forward=fast_forward,
            coalescence=coalescence,
        )
    except Exception as exc:  # a crash is a finding, not the end of the run
        return {"error": f"{type(exc).__name__}: {exc}", "wall_s": time.perf_counter() - start}
    wall = time.perf_counter() - start
    return {
        "text": res.text,
        "token_ids": list(res.token_ids),
        "tokens": len(res.token_ids),
        "complete": res.complete,
        "valid": check_valid(pair, res.text),
        "forward_passes": res.forward_passes,
        "fast_forwarded": res.fast_forwarded,
        "wall_s": wall,
        "ms_per_pass": 1000 * wall / max(res.forward_passes, 1),
    }


# ---------------------------------------------------------------------- (b) per step


def first_bytes(vocab: Any) -> np.ndarray:
    """Each token's first byte; EOS ids are the symbol 256, byteless tokens -1."""
    out = np.full(vocab.size, -1, dtype=np.int64)
    for token_id, piece in enumerate(vocab.token_bytes):
        if piece:
            out[token_id] = piece[0]
    for eos in vocab.eos_token_ids:
        out[eos] = 256
    return out


def step_shift(
    logits: np.ndarray, allowed: np.ndarray, kept: np.ndarray, fbytes: np.ndarray
) -> dict[str, Any]:
    """Compare softmax over ``allowed`` with softmax over ``kept`` (a subset) at one step."""
    z = logits[allowed].astype(np.float64)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
    p = np.exp(logp)
    in_kept = np.isin(allowed, kept)
    log_kept = np.logaddexp.reduce(logp[in_kept]) if in_kept.any() else -np.inf  # log(1 - m), stably
    lost = float(p[~in_kept].sum())
    q = np.where(in_kept, np.exp(logp - log_kept), 0.0)
    top = int(np.argmax(p))
    mix = 0.5 * (p + q)
    js = 0.5 * float(np.sum(p * (logp - np.log(mix)))) + 0.5 * float(
        np.sum(np.where(q > 0, q * (np.log(np.where(q > 0, q, 1)) - np.log(mix)), 0.0))
    )
    # string level: the distribution of the next byte (EOS a symbol of its own)
    fb = fbytes[allowed]
    pb = np.bincount(fb, weights=p, minlength=257)
    qb = np.bincount(fb, weights=q, minlength=257)
    support = pb > 0
    byte_kl = (
        float(np.sum(pb[support] * np.log(pb[support] / qb[support])))
        if np.all(qb[support] > 0)
        else math.inf
    )
    q_top = int(np.argmax(q))
    return {
        "allowed": len(allowed),
        "kept": int(in_kept.sum()),
        "lost_mass": lost,
        "argmax_removed": bool(not in_kept[top]),
        "p_argmax": float(p[top]),
        "kl_full_coal_infinite": lost > 0,
        "kl_coal_full": float(-log_kept),
        "js": max(js, 0.0),
        "byte_kl": byte_kl,
        "full_argmax": int(allowed[top]),
        "coal_argmax": int(allowed[q_top]),
    }


def teacher_forced_logits(
    model: Any, tokenizer: Any, prompt: str, generated: list[int], steps: int
) -> np.ndarray:
    """The logits of every generation step, from one forward pass over prompt + generated tokens."""
    import torch

    ids = prompt_ids(tokenizer, prompt)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids + generated]), use_cache=False)
    return out.logits[0, len(ids) - 1 : len(ids) - 1 + steps].float().numpy()


def trajectory_nll(
    model: Any, tokenizer: Any, pair: Pair, guide: Any, vocab: Any, run: dict[str, Any]
) -> float:
    """Negative log-probability per output byte of a generated trajectory under the *full* mask (EOS step included).

    Scores the tokens as they were generated, so a coalesced trajectory is scored in its own
    (longest-token) segmentation: what the full-mask model thinks of that path.
    """
    generated = run["token_ids"]
    steps = len(generated) + (1 if run["complete"] else 0)
    logits = teacher_forced_logits(model, tokenizer, pair.prompt, generated, steps)
    state, total = guide.initial_state, 0.0
    for t in range(steps):
        allowed = np.asarray(guide.allowed_token_ids(state), dtype=np.int64)
        z = logits[t][allowed].astype(np.float64)
        chosen = generated[t] if t < len(generated) else min(vocab.eos_token_ids)
        total -= z[np.searchsorted(allowed, chosen)] - np.logaddexp.reduce(z)
        if t < len(generated):
            state = guide.advance(state, generated[t])
    return total / max(len(run["text"].encode()), 1)


def analyse_trajectory(
    model: Any,
    tokenizer: Any,
    pair: Pair,
    guide: Any,
    vocab: Any,
    run: dict[str, Any],
    fbytes: np.ndarray,
    coalesce_cache: dict[Any, tuple[np.ndarray, float]],
) -> dict[str, Any]:
    from constrain.sampling import coalesce

    generated = run["token_ids"]
    steps = len(generated) + (1 if run["complete"] else 0)  # the EOS step too
    logits = teacher_forced_logits(model, tokenizer, pair.prompt, generated, steps)
    eos_ids = np.array(sorted(vocab.eos_token_ids), dtype=np.int64)
    state = guide.initial_state
    rows, mismatches = [], 0
    for t in range(steps):
        allowed = np.asarray(guide.allowed_token_ids(state), dtype=np.int64)
        key = (id(guide), state)
        if key not in coalesce_cache:
            start = time.perf_counter()
            kept = coalesce(np.setdiff1d(allowed, eos_ids), vocab)
            coalesce_cache[key] = (
                np.union1d(kept, np.intersect1d(allowed, eos_ids)),
                time.perf_counter() - start,
            )
        kept, _ = coalesce_cache[key]
        row = step_shift(logits[t], allowed, kept, fbytes)
        chosen = generated[t] if t < len(generated) else min(vocab.eos_token_ids)
        mismatches += row["full_argmax"] != chosen
        row["coal_pick_extends_full"] = _extends(vocab, row["coal_argmax"], row["full_argmax"])
        rows.append(row)
        if t < len(generated):
            state = guide.advance(state, generated[t])
    return {"steps": rows, "teacher_forcing_mismatches": mismatches}


def piece(vocab: Any, token_id: int) -> str:
    """A token's bytes as readable text (EOS as <eos>)."""
    if token_id in vocab.eos_token_ids:
        return "<eos>"
    return (vocab.token_bytes[token_id] or b"").decode("utf-8", errors="backslashreplace")


def _extends(vocab: Any, longer: int, shorter: int) -> bool:
    a, b = vocab.token_bytes[longer], vocab.token_bytes[shorter]
    return bool(a and b and a != b and a.startswith(b))


# ---------------------------------------------------------------------- summaries


def summarise_steps(steps: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(steps)
    if not n:
        return {"steps": 0}
    shrunk = [s for s in steps if s["kept"] < s["allowed"]]
    removed_top = [s for s in steps if s["argmax_removed"]]
    lost = [s["lost_mass"] for s in steps]
    lost_shrunk = [s["lost_mass"] for s in shrunk]
    return {
        "steps": n,
        "steps_mask_shrunk": len(shrunk),
        "share_mask_shrunk": len(shrunk) / n,
        "steps_kl_infinite": sum(s["kl_full_coal_infinite"] for s in steps),
        "steps_argmax_removed": len(removed_top),
        "share_argmax_removed": len(removed_top) / n,
        "argmax_removed_pick_extends": sum(s["coal_pick_extends_full"] for s in removed_top),
        "allowed_p50": median([s["allowed"] for s in steps]),
        "kept_p50": median([s["kept"] for s in steps]),
        "lost_mass": {
            "mean": float(np.mean(lost)),
            "p50": pct(lost, 50),
            "p90": pct(lost, 90),
            "p99": pct(lost, 99),
            "max": float(np.max(lost)),
        },
        "lost_mass_when_shrunk": {"p50": pct(lost_shrunk, 50), "p90": pct(lost_shrunk, 90)},
        "lost_mass_when_argmax_removed": {"p50": pct([s["lost_mass"] for s in removed_top], 50)},
        "p_argmax_when_removed": {"p50": pct([s["p_argmax"] for s in removed_top], 50)},
        "kl_coal_full": {
            "mean": float(np.mean([s["kl_coal_full"] for s in steps])),
            "p50": pct([s["kl_coal_full"] for s in steps], 50),
            "p90": pct([s["kl_coal_full"] for s in steps], 90),
            "p99": pct([s["kl_coal_full"] for s in steps], 99),
        },
        "js": {
            "mean": float(np.mean([s["js"] for s in steps])),
            "p50": pct([s["js"] for s in steps], 50),
            "p90": pct([s["js"] for s in steps], 90),
        },
        "byte_kl": {
            "mean": float(np.mean([s["byte_kl"] for s in steps])),
            "p50": pct([s["byte_kl"] for s in steps], 50),
            "p90": pct([s["byte_kl"] for s in steps], 90),
            "p99": pct([s["byte_kl"] for s in steps], 99),
            "infinite": sum(not math.isfinite(s["byte_kl"]) for s in steps),
        },
    }


def summarise_outputs(rows: list[dict[str, Any]], full: str, coal: str) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r[full] and "error" not in r[coal]]
    both_complete = [r for r in ok if r[full]["complete"] and r[coal]["complete"]]
    return {
        "pairs": len(rows),
        "errors": len(rows) - len(ok),
        "text_changed": sum(r[full]["text"] != r[coal]["text"] for r in ok),
        "full_complete": sum(r[full]["complete"] for r in ok),
        "full_valid": sum(r[full]["valid"] for r in ok),
        "coal_complete": sum(r[coal]["complete"] for r in ok),
        "coal_valid": sum(r[coal]["valid"] for r in ok),
        "both_complete": len(both_complete),
        "tokens_full_p50": median([r[full]["tokens"] for r in both_complete]),
        "tokens_coal_p50": median([r[coal]["tokens"] for r in both_complete]),
        "token_ratio_p50": median([r[coal]["tokens"] / max(r[full]["tokens"], 1) for r in both_complete]),
        "passes_full_p50": median([r[full]["forward_passes"] for r in both_complete]),
        "passes_coal_p50": median([r[coal]["forward_passes"] for r in both_complete]),
        "wall_full_p50": median([r[full]["wall_s"] for r in ok]),
        "wall_coal_p50": median([r[coal]["wall_s"] for r in ok]),
        "ms_per_pass_full_p50": median([r[full]["ms_per_pass"] for r in ok]),
        "ms_per_pass_coal_p50": median([r[coal]["ms_per_pass"] for r in ok]),
        "wall_full_total": sum(r[full]["wall_s"] for r in ok),
        "wall_coal_total": sum(r[coal]["wall_s"] for r in ok),
        "nll_per_byte_full_p50": median([r[full]["nll_per_byte"] for r in ok if "nll_per_byte" in r[full]]),
        "nll_per_byte_coal_p50": median([r[coal]["nll_per_byte"] for r in ok if "nll_per_byte" in r[coal]]),
    }


def summarise_outputs_by_kind(rows: list[dict[str, Any]], full: str, coal: str) -> dict[str, Any]:
    kinds = {"all": rows} | {k: [r for r in rows if r["kind"] == k] for k in ("json", "regex", "choice")}
    return {k: summarise_outputs(v, full, coal) for k, v in kinds.items() if v}


# ---------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=80)
    parser.add_argument("--quick", action="store_true", help="every third pair only")
    parser.add_argument("--only", default=None, help="only pairs whose name contains this")
    parser.add_argument("--no-ff", action="store_true", help="skip the fast-forward-on runs")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (default 1: robust on a shared machine)"
    )
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
    fbytes = first_bytes(vocab)
    pairs = PAIRS[::3] if args.quick else PAIRS
    if args.only:
        pairs = [p for p in pairs if args.only in p.name]
    configs = [("full", False, False), ("coal", False, True)]
    if not args.no_ff:
        configs += [("full_ff", True, False), ("coal_ff", True, True)]

    rows: list[dict[str, Any]] = []
    all_steps: list[dict[str, Any]] = []
    steps_by_kind: dict[str, list[dict[str, Any]]] = {"json": [], "regex": [], "choice": []}
    coalesce_cache: dict[Any, tuple[np.ndarray, float]] = {}
    for pair in pairs:
        guide = compile_guide(compiler, pair)
        run_generate(
            model,
            tokenizer,
            pair,
            guide,
            vocab,
            max_new_tokens=args.max_new_tokens,
            fast_forward=False,
            coalescence=False,
        )  # warm-up: build the visited rows
        row: dict[str, Any] = {
            "name": pair.name,
            "kind": pair.kind,
            "prompt": pair.prompt,
            "constraint": pair.constraint.__name__ if pair.kind == "json" else pair.constraint,
        }
        for label, ff, co in configs:
            row[label] = run_generate(
                model,
                tokenizer,
                pair,
                guide,
                vocab,
                max_new_tokens=args.max_new_tokens,
                fast_forward=ff,
                coalescence=co,
            )
        if "error" not in row["full"]:
            analysis = analyse_trajectory(
                model, tokenizer, pair, guide, vocab, row["full"], fbytes, coalesce_cache
            )
            row["teacher_forcing_mismatches"] = analysis["teacher_forcing_mismatches"]
            row["step_summary"] = summarise_steps(analysis["steps"])
            row["steps"] = [
                [
                    s["allowed"],
                    s["kept"],
                    round(s["lost_mass"], 6),
                    int(s["argmax_removed"]),
                    round(s["kl_coal_full"], 6),
                    round(s["js"], 6),
                    round(s["byte_kl"], 6) if math.isfinite(s["byte_kl"]) else None,
                    piece(vocab, s["full_argmax"]),
                    piece(vocab, s["coal_argmax"]),
                ]
                for s in analysis["steps"]
            ]
            all_steps += analysis["steps"]
            steps_by_kind[pair.kind] += analysis["steps"]
        for label in ("full", "coal"):
            if "error" not in row[label]:
                row[label]["nll_per_byte"] = trajectory_nll(model, tokenizer, pair, guide, vocab, row[label])
        for label, _, _ in configs:
            row[label].pop("token_ids", None)
        rows.append(row)
        c, f = row["coal"], row["full"]
        print(
            f"{pair.name:18} full {f.get('tokens', '!'):>4} tok {f.get('wall_s', 0):6.2f}s | coal "
            f"{c.get('tokens', '!'):>4} tok {c.get('wall_s', 0):6.2f}s complete={c.get('complete')} "
            f"valid={c.get('valid')} same={c.get('text') == f.get('text')}",
            file=sys.stderr,
            flush=True,
        )

    wide = [seconds for _, seconds in coalesce_cache.values()]  # one call per distinct guide state
    outputs = {"no_ff": summarise_outputs_by_kind(rows, "full", "coal")}
    if not args.no_ff:
        outputs["ff"] = summarise_outputs_by_kind(rows, "full_ff", "coal_ff")
    summary = {
        "outputs": outputs,
        "steps": summarise_steps(all_steps),
        "steps_by_kind": {k: summarise_steps(v) for k, v in steps_by_kind.items()},
        "coalesce_call_ms": {
            "p50": 1000 * pct(wide, 50),
            "p90": 1000 * pct(wide, 90),
            "max": 1000 * max(wide),
            "calls": len(wide),
        }
        if wide
        else {},
        "teacher_forcing_mismatches": sum(r.get("teacher_forcing_mismatches", 0) for r in rows),
        "removed_argmax_top": [
            {"full_argmax": a, "coal_argmax": b, "steps": n}
            for (a, b), n in Counter(
                (st[7], st[8]) for r in rows for st in r.get("steps", []) if st[3]
            ).most_common(25)
        ],
    }
    machine = _common.machine()
    report = {
        "generated": machine["date"],
        "machine": {**machine, "torch": torch.__version__, "torch_threads": torch.get_num_threads()},
        "model": "SmolLM2-135M-Instruct (constrain.models.load_model, float32, CPU)",
        "max_new_tokens": args.max_new_tokens,
        "step_columns": [
            "allowed",
            "kept",
            "lost_mass",
            "argmax_removed",
            "kl_coal_full",
            "js",
            "byte_kl",
            "full_argmax",
            "coal_argmax",
        ],
        "summary": summary,
        "pairs": rows,
        "runtime_s": time.perf_counter() - started,
    }
    print(markdown(report))
    if not args.no_write:
        _common.RESULTS_DIR.mkdir(exist_ok=True)
        (_common.RESULTS_DIR / "coalescence.json").write_text(
            json.dumps(report, indent=1, allow_nan=False, default=_json_default) + "\n"
        )
    print(f"\nruntime {report['runtime_s']:.0f} s", file=sys.stderr)
    return 0


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    raise TypeError(type(value))


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    lines = [
        "## (a) outputs",
        "",
        (
            "| fast-forward | pairs | count | text changed | full complete / valid | "
            "coalesced complete / valid | NLL/byte full / coal (p50) | errors |"
        ),
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for label, by_kind in s["outputs"].items():
        for kind, o in by_kind.items():
            lines.append(
                f"| {'on' if label == 'ff' else 'off'} | {kind} | {o['pairs']} | {o['text_changed']} | "
                f"{o['full_complete']} / {o['full_valid']} | {o['coal_complete']} / {o['coal_valid']} | "
                f"{fmt(o['nll_per_byte_full_p50'], 2)} / {fmt(o['nll_per_byte_coal_p50'], 2)} | "
                f"{o['errors']} |"
            )
    lines += [
        "",
        "## (a) per pair (fast-forward off)",
        "",
        "| pair | full text | coalesced text | complete | valid |",
        "|---|---|---|:-:|:-:|",
    ]
    for r in report["pairs"]:
        f, c = r["full"], r["coal"]
        lines.append(
            f"| {r['name']} | `{_short(f.get('text', f.get('error')))}` | "
            f"`{_short(c.get('text', c.get('error')))}` | {_yn(c.get('complete'))} | {_yn(c.get('valid'))} |"
        )
    lines += [
        "",
        "## (b) distribution shift along the full-mask greedy trajectory",
        "",
        (
            "| steps | count | mask shrunk (KL(p_full‖p_coal)=∞) | argmax removed | lost mass p50 / p90 / p99 / mean | "
            "KL(p_coal‖p_full) p50 / p90 / mean | JS mean | next-byte KL p50 / p90 / mean |"
        ),
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label, st in [("all", s["steps"])] + list(s["steps_by_kind"].items()):
        if not st.get("steps"):
            continue
        lm, kl, bk = st["lost_mass"], st["kl_coal_full"], st["byte_kl"]
        lines.append(
            f"| {label} | {st['steps']} | {st['steps_mask_shrunk']} ({100 * st['share_mask_shrunk']:.0f}%) | "
            f"{st['steps_argmax_removed']} ({100 * st['share_argmax_removed']:.0f}%) | "
            f"{fmt(lm['p50'])} / {fmt(lm['p90'])} / {fmt(lm['p99'])} / {fmt(lm['mean'])} | "
            f"{fmt(kl['p50'])} / {fmt(kl['p90'])} / {fmt(kl['mean'])} | {fmt(st['js']['mean'])} | "
            f"{fmt(bk['p50'])} / {fmt(bk['p90'])} / {fmt(bk['mean'])} |"
        )
    lines += [
        "",
        "## (c) cost",
        "",
        (
            "| fast-forward | pairs | tokens full / coal (p50, both complete) | "
            "passes full / coal | wall s full / coal (p50) | ms per pass full / coal (p50) | total wall s full / coal |"
        ),
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for label, kind, o in [(lb, k, o) for lb, bk in s["outputs"].items() for k, o in bk.items()]:
        lines.append(
            f"| {'on' if label == 'ff' else 'off'} | {kind} | {fmt(o['tokens_full_p50'], 0)} / {fmt(o['tokens_coal_p50'], 0)} | "
            f"{fmt(o['passes_full_p50'], 0)} / {fmt(o['passes_coal_p50'], 0)} | "
            f"{fmt(o['wall_full_p50'], 2)} / {fmt(o['wall_coal_p50'], 2)} | "
            f"{fmt(o['ms_per_pass_full_p50'], 0)} / {fmt(o['ms_per_pass_coal_p50'], 0)} | "
            f"{fmt(o['wall_full_total'], 1)} / {fmt(o['wall_coal_total'], 1)} |"
        )
    if s.get("coalesce_call_ms"):
        cc = s["coalesce_call_ms"]
        lines.append(
            f"\n`coalesce` per mask: p50 {cc['p50']:.2f} ms, p90 {cc['p90']:.2f} ms, max {cc['max']:.1f} ms "
            f"over {cc['calls']} distinct states."
        )
    lines.append(f"\nTeacher-forced argmax vs generated token mismatches: {s['teacher_forcing_mismatches']}.")
    lines += ["", "Most frequent removed argmax → coalesced argmax (full-mask trajectory):", ""]
    lines += [
        f"- `{_short(t['full_argmax'])}` → `{_short(t['coal_argmax'])}` × {t['steps']}"
        for t in s["removed_argmax_top"]
    ]
    return "\n".join(lines)


def _short(text: str | None, width: int = 70) -> str:
    text = (text or "").replace("|", "\\|").replace("\n", "\\n").replace("`", "'")
    return text if len(text) <= width else text[: width - 1] + "…"


def _yn(value: Any) -> str:
    return "✓" if value else "✗"


if __name__ == "__main__":
    sys.exit(main())
