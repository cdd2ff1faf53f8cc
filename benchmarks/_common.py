"""What every benchmark script shares: one thread, the machine header, timing, percentiles, output.

A script calls :func:`single_threaded` right after importing this module and before
numpy, torch or a peer is imported, because those read their thread-count variables
once, when they load. That is also why this module imports only the standard library
at the top: importing it must not load numpy. constrain itself is imported inside the
functions that need it.

Conventions the scripts follow through these helpers, so that their numbers compare:

* times are measured with :func:`time.perf_counter_ns` around the call alone, after a
  collection and with the collector off (:func:`timed`, :func:`gc_paused`): a
  collection inside a timed call would charge one guide for another's garbage;
* percentiles interpolate linearly between the two nearest samples (numpy's default);
* every results file carries :func:`machine` and :func:`versions` so a number can be
  traced to the CPU, the date and the package versions that produced it.
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import json
import os
import platform
import select
import subprocess
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS_DIR = HERE / "results"
DOCS_DIR = REPO / "docs"

#: The offline tokenizers, smallest vocabulary first (see ``constrain.testing``).
TOKENIZERS = ("mistral", "smollm2", "llama3", "qwen")

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")


# ---------------------------------------------------------------------- environment


def single_threaded() -> None:
    """One thread for OpenMP, BLAS, Rayon and Hugging Face tokenizers; no hub access.

    constrain is single-threaded, so its peers get one thread too; otherwise a peer's
    parallel compile would be compared with constrain's serial one. Values already
    set in the environment win, so a caller can still ask for more.
    """
    for variable in _THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """Where and when a run happened; the load average shows whether the machine was shared."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions(*distributions: str) -> dict[str, str]:
    return {name: version(name) for name in distributions}


# ---------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """One timed call: wall-clock and process CPU time, in nanoseconds.

    CPU time next to wall time shows a call that used more than one core
    (``cpu > wall``) or waited for one on a shared machine (``cpu < wall``).
    """

    wall_ns: int
    cpu_ns: int

    @property
    def wall_ms(self) -> float:
        return self.wall_ns / 1e6

    @property
    def cpu_ms(self) -> float:
        return self.cpu_ns / 1e6


def timed(fn: Callable[[], T]) -> tuple[T, Timing]:
    """``fn()`` and its timing, after a collection and with the collector off during the call."""
    gc.collect()
    with gc_paused():
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        result = fn()
        wall1, cpu1 = time.perf_counter_ns(), time.process_time_ns()
    return result, Timing(wall1 - wall0, cpu1 - cpu0)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block (walks time thousands of short calls in a row)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _interpolated(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100), interpolated linearly as numpy does; None without values."""
    return _interpolated(sorted(values), q) if values else None


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50/p90/p99 and the sample count, the summary every step-time table uses; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    summary = {f"p{q}": _interpolated(ordered, q) for q in (50, 90, 99)}
    return {**summary, "n": len(ordered)}


def describe(exc: BaseException) -> str:
    """An exception as one short line for a table: its class and the first line of its message."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


# ---------------------------------------------------------------------- tokenizers


@dataclass
class Setup:
    """An offline tokenizer, constrain's vocabulary of it, and what building them cost.

    ``eos_id`` is the EOS a sampler would pick: the tokenizer's own when the
    vocabulary counts it as EOS, else the smallest EOS id.
    """

    name: str
    tokenizer: Any
    vocabulary: Any
    eos_id: int
    load_ms: float
    vocabulary_ms: float
    tables_ms: float


def load_setup(name: str) -> Setup:
    """Load tokenizer ``name``, build its ``Vocabulary`` and the tables every guide over it shares.

    Those tables (the walk tables, the byte alphabet) are built on first use; a first
    compile and precompute of a one-byte regex builds them here, once, so that no
    compile timed later pays for them (``tables_ms``).
    """
    from constrain import Compiler, Vocabulary
    from constrain.testing import load_offline_tokenizer

    tokenizer, loading = timed(lambda: load_offline_tokenizer(name))
    vocabulary, building = timed(lambda: Vocabulary.from_tokenizer(tokenizer))
    _, tables = timed(lambda: Compiler(vocabulary).regex("a").precompute())
    eos_id = tokenizer.eos_token_id
    if eos_id not in vocabulary.eos_token_ids:
        eos_id = min(vocabulary.eos_token_ids)
    return Setup(name, tokenizer, vocabulary, eos_id, loading.wall_ms, building.wall_ms, tables.wall_ms)


def spelled_ids(tokenizer: Any, vocabulary: Any, text: str) -> list[int] | None:
    """The tokenizer's own ids for ``text`` as a continuation, or None when they do not spell it exactly."""
    from constrain.testing import token_text, tokenize_continuation

    ids = tokenize_continuation(tokenizer, text)
    try:
        spelled = token_text(vocabulary, ids)
    except ValueError:  # a special token has no bytes
        return None
    return ids if spelled == text.encode("utf-8") else None


def token_map(token_bytes: Sequence[bytes | None], eos_id: int) -> dict[bytes, list[int]]:
    """Token bytes → ids, EOS and special ids left out: the vocabulary outlines-core takes."""
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, piece in enumerate(token_bytes):
        if piece is not None and token_id != eos_id:
            by_bytes.setdefault(piece, []).append(token_id)
    return by_bytes


# ---------------------------------------------------------------------- guide walks


def bit_is_set(bitmask: Any, token_id: int) -> bool:
    """Bit ``token_id`` of a 1-D packed int32 bitmask (the xgrammar/llguidance layout)."""
    return bool((int(bitmask[token_id >> 5]) >> (token_id & 31)) & 1)


@dataclass
class Walk:
    """Per-step times of one walk and whether the guide took every token."""

    steps_ns: list[int] = field(default_factory=list)
    accepted: bool = True
    error: str | None = None
    failed_at: int | None = None  # index of the token that was refused (len(tokens) for EOS)


def timed_walk(guide: Any, token_ids: Sequence[int], eos_id: int, bitmask: Any) -> Walk:
    """Walk a constrain guide over ``token_ids`` as a sampler does, timing each step.

    A step is ``fill_bitmask`` then ``advance``; a closing step fills the mask once more
    (the one a sampler picks EOS from). Only those calls are timed; the check that the
    token was in the mask comes after the clock stops.
    """
    from constrain import TokenRejected

    walk = Walk()
    clock = time.perf_counter_ns
    state = guide.initial_state
    with gc_paused():
        try:
            for position, token_id in enumerate(token_ids):
                start = clock()
                guide.fill_bitmask(state, bitmask)
                state = guide.advance(state, token_id)
                walk.steps_ns.append(clock() - start)
                if not bit_is_set(bitmask, token_id):
                    return Walk(walk.steps_ns, False, "taken but not in the mask", position)
            start = clock()
            guide.fill_bitmask(state, bitmask)
            walk.steps_ns.append(clock() - start)
        except TokenRejected as exc:
            return Walk(walk.steps_ns, False, describe(exc), len(walk.steps_ns))
    if not (guide.is_final(state) and bit_is_set(bitmask, eos_id)):
        return Walk(walk.steps_ns, False, "EOS is not allowed after the last token", len(token_ids))
    return walk


def steps_us(walks: Sequence[Walk]) -> dict[str, float] | None:
    """p50/p90/p99 in µs over every step of ``walks``."""
    return percentiles([t / 1e3 for w in walks for t in w.steps_ns])


def measure_guide(
    build: Callable[[Any], Any],
    ids: list[int],
    setup: Setup,
    *,
    repeats: int,
    walks: int,
    budget_s: float,
    tracemalloc_max_ms: float,
    states: Callable[[Any], dict[str, int]],
) -> dict[str, Any]:
    """Compile fresh guides and walk each one cold, then walk the last one warm; memory apart.

    ``build(compiler)`` compiles the guide on a fresh ``Compiler`` over the shared
    vocabulary (so no guide cache answers). Up to ``repeats`` compile + cold-walk samples,
    fewer once ``budget_s`` is spent (one at least); then one untimed warm-up walk and
    ``walks`` timed ones. The result holds ``compile_ms`` (median) and its samples,
    ``cold_walk_ms``, ``accepted``, ``mask_cold_us`` and ``mask_warm_us`` (µs
    percentiles), ``states(guide)`` and ``peak_mib`` (tracemalloc's peak over one more
    compile and cold walk, skipped above ``tracemalloc_max_ms`` since tracemalloc slows
    Python several-fold); or ``error``, ``limit`` and ``error_after_ms`` when a constrain
    error (a ``LimitExceededError`` above all) ends the compile or a walk.
    """
    import constrain

    bitmask = constrain.allocate_bitmask(setup.vocabulary.size)
    out: dict[str, Any] = {}
    compiles: list[float] = []
    cold: list[Walk] = []
    guide: Any = None
    started = time.perf_counter()
    try:
        for _ in range(repeats):
            compiler = constrain.Compiler(setup.vocabulary)
            guide, timing = timed(lambda: build(compiler))
            compiles.append(timing.wall_ms)
            cold.append(timed_walk(guide, ids, setup.eos_id, bitmask))
            if time.perf_counter() - started > budget_s:
                break
        out["compile_ms"] = median(compiles)
        out["compile_ms_all"] = compiles
        out["cold_walk_ms"] = median([sum(w.steps_ns) / 1e6 for w in cold])
        out["accepted"] = cold[0].accepted
        if cold[0].accepted:
            out["mask_cold_us"] = steps_us(cold)
            timed_walk(guide, ids, setup.eos_id, bitmask)
            out["mask_warm_us"] = steps_us([timed_walk(guide, ids, setup.eos_id, bitmask) for _ in range(walks)])
        else:
            out["reject_reason"] = cold[0].error
        out["states"] = states(guide)
    except constrain.ConstrainError as exc:
        out.update(error=describe(exc), limit=getattr(exc, "limit", None))
        out["error_after_ms"] = (time.perf_counter() - started) * 1e3
        return out
    del guide
    if out["accepted"] and out["compile_ms"] + out["cold_walk_ms"] <= tracemalloc_max_ms:
        out["peak_mib"] = peak_mib(lambda: timed_walk(build(constrain.Compiler(setup.vocabulary)), ids,
                                                      setup.eos_id, bitmask))  # fmt: skip
    return out


def peak_mib(fn: Callable[[], Any]) -> float:
    """tracemalloc's peak, in MiB, while ``fn`` runs (Python objects and numpy buffers; not native heaps)."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------- worker processes


def read_line(proc: "subprocess.Popen[str]", timeout_s: float) -> str | None:
    """The next line a worker writes, or None when it writes none within ``timeout_s`` (or exits)."""
    if proc.stdout is None:
        raise ValueError("the worker was started without stdout=PIPE")
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            line = proc.stdout.readline()
            return line if line else None


# ---------------------------------------------------------------------- output


def fmt(value: float | None, digits: int | None = None) -> str:
    """A number for a markdown cell: "–" for none, no decimals from 100 up (with thousands commas).

    Below 100, ``digits`` decimals; by default 2 below 10 and 1 below 100, so every
    figure keeps two or three significant digits.
    """
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if digits is None:
        digits = 2 if abs(value) < 10 else 1
    return f"{value:.{digits}f}"


def machine_line(meta: dict[str, Any]) -> str:
    """The header line of a results page: CPU, load, platform, Python, date and mode (from :func:`machine`)."""
    return (
        f"machine: {meta['cpu_model']}, {meta['cpu_count']} CPUs, load {meta['load_average']}, {meta['platform']}; "
        f"python {meta['python']}; every engine single-threaded; {meta['date']}" + (" (quick)" if meta.get("quick") else "")
    )


def write_results(stem: str, payload: Any, markdown: str | None = None, directory: Path = RESULTS_DIR) -> None:
    """``<stem>.json`` (and ``<stem>.md`` when given) in the results folder, where ``run.py`` collects them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stem}.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", "utf-8")
    written = [f"{stem}.json"]
    if markdown is not None:
        (directory / f"{stem}.md").write_text(markdown, "utf-8")
        written.append(f"{stem}.md")
    print(f"wrote {' and '.join(str(directory / name) for name in written)}", flush=True)
