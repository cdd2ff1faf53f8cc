#!/usr/bin/env python
"""JSON Schema benchmark: compile time, size and memory of constrain's schema guides at scale.

Run with ``python benchmarks/bench_schema.py`` (``--quick`` for every other case, fewer
repeats and a shorter outlines-core timeout). It prints markdown tables and writes
``benchmarks/results/schema.json`` and ``schema.md``.

Cases
-----
* **Corpus**: every ``benchmarks/schemas/<name>.json`` (tool/function-calling
  schemas, API payloads, configuration files, Pydantic-generated models with
  ``$defs``/``$ref`` and ``anyOf``-null optionals, deep and recursive ones). A
  sibling ``<name>.examples.json`` holds ``{"instances": [...], "options": {...}}``:
  valid instances (checked with ``jsonschema`` before use; properties in
  definition order, since the guide emits declared properties in that order) and
  the ``Compiler.json_schema`` options the schema needs (``max_recursion_depth``).
* **Scale**: generated here: enums of 1k/10k strings; objects of 50/200/500
  properties, all optional or every fifth required; objects of arrays of objects
  nested 2/4/8 deep; strings with maxLength 100/1000; arrays with maxItems 50/500;
  a binary recursive schema unrolled to depth 1..4.

Measurements
------------
* Each schema is compiled strictly first. A keyword constrain cannot enforce makes
  it raise ``UnsupportedSchemaError``; that keyword and pointer are recorded and the
  schema is measured with ``lenient=True`` (its ``guide.dropped`` is recorded too).
  A compile that fails (``LimitExceededError`` at the default ``Limits``) is
  recorded with the time it took to fail.
* **compile** is ``Compiler.json_schema`` on a fresh ``Compiler`` over the shared
  ``Vocabulary`` (empty guide cache, shared byte tables), median of ``--repeats``
  samples; **first mask** is the ``allowed_tokens(initial_state)`` that follows each.
  The process-wide cache of parsed regex fragments is warmed once beforehand (as in
  a server), and the long-lived tokenizer objects are frozen out of the collector,
  which is off during every timed call.
* **compile+walk** = compile + first mask + a walk over one example's tokens (the
  tokenizer's own tokenization, via ``tokenize_continuation``): per token
  ``fill_bitmask`` then ``advance``, plus the closing mask; every row it needs is
  built then, cold. Median over fresh guides, up to ``--repeats`` but stopping
  once the case has spent ``--case-budget`` seconds (one sample at least). The
  first example is the canonical one (``json.dumps`` of the data); if constrain
  refuses it, that is reported and the next example it takes is timed. Every
  example gets a verdict from ``constrain.testing.accepts``; every example is
  first checked valid by ``jsonschema`` (draft 2020-12, formats asserted).
* **regex** is the length of ``to_regex`` (the text form; constrain itself never
  renders it, the automaton is built from the tree). **NFA** is
  ``len(guide.index.dfa.nfa)``; **DFA** the deterministic states created by the end
  of the walk. **peak MiB** is tracemalloc's peak during one extra compile
  (skipped above ``--tracemalloc-max-ms``, as tracemalloc slows a compile several-fold).
* **outlines-core** runs in a worker process (``RAYON_NUM_THREADS=1``, as constrain
  is single-threaded) so a compile that runs away can be killed:
  ``build_regex_from_schema(schema, whitespace_pattern="[ ]?")`` (constrain's
  default whitespace, so both accept ``json.dumps`` output) then
  ``Index(regex, vocabulary)``, which builds the whole index eagerly; so its
  figure compares with constrain's compile *and* with its compile+walk. It is
  skipped when its regex exceeds ``--outlines-max-regex`` (200 kB) and killed at
  ``--outlines-timeout``; its verdict on the same token ids is recorded. To keep
  the run within minutes the worker runs beside the constrain measurements, on
  the other core (``--serial-outlines`` runs it after each case instead).
* ``limits_demo`` compiles big cases under small ``Limits`` and prints the
  ``LimitExceededError`` each ends in, with the time it took.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import gc
import json
import os
import pickle
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from _common import describe, median, percentile

T = TypeVar("T")

SCHEMA_DIR = _common.HERE / "schemas"
WHITESPACE = "[ ]?"  # constrain's default; json.dumps' separators ", " and ": " fit it


# ---------------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    group: str  # "corpus" or "scale"
    schema: Any
    options: dict[str, Any] = field(default_factory=dict)
    instances: list[Any] = field(default_factory=list)
    note: str = ""


def load_corpus(directory: Path) -> list[Case]:
    cases = []
    for path in sorted(directory.glob("*.json")):
        if path.name.endswith(".examples.json"):
            continue
        name = path.name[: -len(".json")]
        extra_path = path.with_name(f"{name}.examples.json")
        extra = json.loads(extra_path.read_text()) if extra_path.exists() else {}
        cases.append(
            Case(
                name=name,
                group="corpus",
                schema=json.loads(path.read_text()),
                options=extra.get("options", {}),
                instances=extra.get("instances", []),
            )
        )
    return cases


def place_names(count: int, seed: int = 11) -> list[str]:
    """``count`` distinct made-up place names ("Velmora", "Port Ashkel"), the same on every run."""
    rng = random.Random(seed)
    starts = "b br c ch d dr f g gr h k l m n p pr r s sh st t th tr v w z".split()
    vowels = "a e i o u ae ei ia io ou".split()
    ends = ["", "", "", *"l n r s th nd rk sh m".split()]
    prefixes = ["", "", "", "", "", "Port ", "San ", "New ", "Upper ", "Lake ", "Fort "]
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        word = "".join(rng.choice(starts) + rng.choice(vowels) + rng.choice(ends) for _ in range(rng.randint(2, 3)))
        name = rng.choice(prefixes) + word.capitalize()
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def property_schema(i: int) -> Any:
    """The i-th property of a wide object: a rotation of the usual field kinds."""
    kind = i % 6
    if kind == 0:
        return {"type": "string", "maxLength": 40}
    if kind == 1:
        return {"type": "integer", "minimum": 0, "maximum": 10_000}
    if kind == 2:
        return {"type": "boolean"}
    if kind == 3:
        return {"type": "string", "enum": ["none", "low", "medium", "high", "critical"]}
    if kind == 4:
        return {"anyOf": [{"type": "number"}, {"type": "null"}]}
    return {"type": "string", "format": "date"}


def property_value(i: int) -> Any:
    return ["value %d" % i, i * 7 % 10_000, i % 2 == 0, "medium", None if i % 4 else 3.25, "2024-05-%02d" % (i % 28 + 1)][i % 6]


def wide_object(n: int, required_every: int | None) -> tuple[Any, Any]:
    names = [f"field_{i:03d}" for i in range(n)]
    required = [] if required_every is None else [names[i] for i in range(0, n, required_every)]
    schema = {
        "type": "object",
        "properties": {name: property_schema(i) for i, name in enumerate(names)},
        "required": required,
        "additionalProperties": False,
    }
    present = set(required) | {names[i] for i in range(3, n, 7)}
    instance = {name: property_value(i) for i, name in enumerate(names) if name in present}
    return schema, instance


def nested(depth: int, bounded: bool = False) -> tuple[Any, Any]:
    """Objects of arrays of objects, ``depth`` object levels; arrays unbounded or ``maxItems: 8``."""
    schema: Any = {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "label": {"type": "string", "maxLength": 30},
            "weight": {"type": "number"},
        },
        "required": ["id", "label"],
        "additionalProperties": False,
    }
    instance: Any = {"id": depth, "label": f"leaf at {depth}", "weight": 0.5}
    for level in range(depth - 1, 0, -1):
        schema = {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "label": {"type": "string", "maxLength": 30},
                "kind": {"type": "string", "enum": ["group", "folder", "section", "bundle"]},
                "children": {"type": "array", "items": schema, **({"maxItems": 8} if bounded else {})},
            },
            "required": ["id", "label", "children"],
            "additionalProperties": False,
        }
        instance = {"id": level, "label": f"level {level}", "kind": "group", "children": [instance]}
    return schema, instance


def expression_tree(depth: int) -> tuple[Any, dict[str, Any], Any]:
    schema = {
        "$defs": {
            "Expr": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["add", "sub", "mul", "div", "min", "max"]},
                    "left": {"anyOf": [{"$ref": "#/$defs/Expr"}, {"type": "number"}, {"type": "string", "pattern": "^[a-z]{1,8}$"}]},
                    "right": {"anyOf": [{"$ref": "#/$defs/Expr"}, {"type": "number"}, {"type": "string", "pattern": "^[a-z]{1,8}$"}]},
                },
                "required": ["op", "left", "right"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/Expr",
    }
    instance: Any = {"op": "mul", "left": "rate", "right": 1.5}
    for level in range(1, depth):
        instance = {"op": ["add", "sub", "max"][level % 3], "left": instance, "right": level * 2}
    return schema, {"max_recursion_depth": depth}, instance


PROSE = (
    "The committee reviewed the quarterly figures and agreed that the new warehouse in the north "
    "should open in spring, provided the access road is finished; otherwise the opening moves to "
    "early summer and the temporary lease is extended by three months. "
)


def build_scale_cases() -> list[Case]:
    cases: list[Case] = []
    for n in (1_000, 10_000):
        names = place_names(n)
        cases.append(Case(f"enum_{n // 1000}k_strings", "scale", {"type": "string", "enum": names}, instances=[names[n // 2]]))
    for n in (50, 200, 500):
        for label, every in (("optional", None), ("req1in5", 5)):
            schema, instance = wide_object(n, every)
            cases.append(Case(f"object_{n}_props_{label}", "scale", schema, instances=[instance]))
    for bounded in (False, True):
        for depth in (2, 4, 8):
            schema, instance = nested(depth, bounded)
            suffix = "_maxItems8" if bounded else ""
            cases.append(Case(f"nesting_depth_{depth}{suffix}", "scale", schema, instances=[instance]))
    for n in (100, 1000):
        text = (PROSE * (n // len(PROSE) + 1))[: n - 5].rstrip()
        cases.append(Case(f"string_maxLength_{n}", "scale", {"type": "string", "maxLength": n}, instances=[text]))
    for n in (50, 500):
        item = {
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
            "required": ["sku", "qty"],
            "additionalProperties": False,
        }
        instance = [{"sku": f"ABC-{1000 + i}", "qty": i % 99 + 1} for i in range(n - 3)]
        cases.append(Case(f"array_maxItems_{n}_objects", "scale", {"type": "array", "items": item, "maxItems": n}, instances=[instance]))
        ints = list(range(1, n - 1))
        cases.append(
            Case(f"array_maxItems_{n}_integers", "scale", {"type": "array", "items": {"type": "integer"}, "maxItems": n}, instances=[ints])
        )
    for depth in (1, 2, 3, 4):
        schema, options, instance = expression_tree(depth)
        cases.append(Case(f"recursive_binary_depth_{depth}", "scale", schema, options, [instance]))
    return cases


# ---------------------------------------------------------------------- timing helpers


def warm_up(vocabulary: Any) -> None:
    """Compile one small schema using every format and value type once, so the process-wide
    cache of parsed regex fragments is warm (as in a long-running server) before any timing."""
    import constrain
    from constrain.json_schema.patterns import FORMATS

    properties: dict[str, Any] = {f"f_{name}": {"type": "string", "format": name} for name in FORMATS}
    properties.update(
        s={"type": "string", "maxLength": 3}, i={"type": "integer", "minimum": 0, "maximum": 9}, n={"type": "number"},
        b={"type": "boolean"}, z={"type": "null"}, e={"enum": ["a", 1]}, a={"type": "array", "items": {"type": "integer"}},
        o={"anyOf": [{"type": "string"}, {"type": "null"}]}, x={},
    )
    guide = constrain.Compiler(vocabulary).json_schema({"type": "object", "properties": properties})
    guide.allowed_tokens(guide.initial_state)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and its wall time in ms (after a collection, with the collector off)."""
    result, timing = _common.timed(fn)
    return result, timing.wall_ms


# ---------------------------------------------------------------------- outlines-core worker


def outlines_worker(vocab_path: str) -> int:
    """Serve compile requests on stdin, one JSON line each; answer one ``RESULT`` JSON line each."""
    import outlines_core
    from outlines_core.json_schema import build_regex_from_schema

    with open(vocab_path, "rb") as handle:
        eos_id, by_bytes = pickle.load(handle)
    vocabulary = outlines_core.Vocabulary(eos_id, by_bytes)
    print("READY", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        out: dict[str, Any] = {}
        try:
            start = time.perf_counter()
            regex = build_regex_from_schema(request["schema"], WHITESPACE, request["max_recursion_depth"])
            out["regex_ms"] = (time.perf_counter() - start) * 1e3
            out["regex_chars"] = len(regex)
            print("REGEX " + json.dumps(out), flush=True)  # so a later timeout still reports the regex
            if len(regex) > request["max_regex"]:
                out["skipped"] = f"regex {len(regex) / 1e3:.0f} kB > {request['max_regex'] / 1e3:.0f} kB"
            else:
                index_ms: list[float] = []
                for _ in range(request["repeats"]):
                    gc.collect()
                    start = time.perf_counter()
                    index = outlines_core.Index(regex, vocabulary)
                    index_ms.append((time.perf_counter() - start) * 1e3)
                    if index_ms[0] > 1000:
                        break
                out["index_ms"] = index_ms
                out["states"] = len(index.get_transitions())
                if request["token_ids"] is not None:
                    guide = outlines_core.Guide(index)
                    start = time.perf_counter()
                    try:
                        for token_id in request["token_ids"]:
                            guide.advance(token_id, return_tokens=False)
                        out["accepts"] = bool(guide.is_finished())
                    except ValueError as exc:
                        out["accepts"] = False
                        out["reject_reason"] = describe(exc)
                    out["walk_ms"] = (time.perf_counter() - start) * 1e3
        except Exception as exc:  # outlines-core raises ValueError and friends for schemas it refuses
            out["error"] = describe(exc)
        print("RESULT " + json.dumps(out), flush=True)
    return 0


class OutlinesRunner:
    """The parent side of the worker: one request at a time, killed and restarted on a timeout.

    With ``parallel`` the requests queue up and a thread feeds them to the worker while the
    main thread goes on measuring constrain (the thread only waits on the worker's pipe).
    """

    def __init__(self, vocabulary: Any, eos_id: int, timeout_s: float, max_regex: int, parallel: bool) -> None:
        self.timeout_s = timeout_s
        self.max_regex = max_regex
        self.results: dict[str, dict[str, Any]] = {}
        self.queue: queue.Queue[tuple[str, dict[str, Any], int] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True) if parallel else None
        if self.thread is not None:
            self.thread.start()
        handle = tempfile.NamedTemporaryFile(prefix="bench_schema_vocab_", suffix=".pkl", delete=False)
        with handle:
            pickle.dump((eos_id, _common.token_map(vocabulary.token_bytes, eos_id)), handle)
        self.vocab_path = handle.name
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ, RAYON_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, __file__, "--outlines-worker", self.vocab_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        line = _common.read_line(proc, 60.0)
        if line is None or line.strip() != "READY":
            self._kill(proc)
            raise RuntimeError("the outlines-core worker did not start")
        return proc

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        proc.kill()  # our own child, by its handle
        proc.wait()

    def submit(self, name: str, request: dict[str, Any], repeats: int) -> None:
        if self.thread is not None:
            self.queue.put((name, request, repeats))
        else:
            self.results[name] = self.measure(request, repeats)

    def _serve(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            name, request, repeats = item
            self.results[name] = self.measure(request, repeats)

    def finish(self) -> dict[str, dict[str, Any]]:
        """Wait for every queued request; stop the worker."""
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
        self.close()
        return self.results

    def measure(self, request: dict[str, Any], repeats: int) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            o = self.run(request["schema"], request["depth"], request["token_ids"], repeats)
        except Exception as exc:  # the worker died or would not start
            o = {"error": describe(exc)}
        if "index_ms" in o:
            o["compile_ms"] = o["regex_ms"] + median(o["index_ms"])  # type: ignore[operator]
        o["wall_s"] = time.perf_counter() - start
        return o

    def run(self, schema: Any, max_recursion_depth: int, token_ids: list[int] | None, repeats: int) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        request = {
            "schema": json.dumps(schema),
            "max_recursion_depth": max_recursion_depth,
            "token_ids": token_ids,
            "repeats": repeats,
            "max_regex": self.max_regex,
        }
        assert self.proc.stdin is not None
        started = time.perf_counter()
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        partial: dict[str, Any] = {}
        while True:
            line = _common.read_line(self.proc, self.timeout_s - (time.perf_counter() - started))
            if line is None:
                self._kill(self.proc)
                self.proc = None
                return {**partial, "timeout": f"no result after {self.timeout_s:.0f} s (killed)"}
            if line.startswith("REGEX "):
                partial = json.loads(line[len("REGEX "):])
            elif line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill(self.proc)
        self.proc = None
        try:
            os.unlink(self.vocab_path)
        except OSError:
            pass


# ---------------------------------------------------------------------- one case


def check_instances(case: Case) -> list[str]:
    """Why an example is unusable (schema-invalid), checked by jsonschema independently of both engines."""
    import jsonschema

    problems = []
    cls = jsonschema.Draft202012Validator
    validator = cls(case.schema, format_checker=cls.FORMAT_CHECKER)
    for i, instance in enumerate(case.instances):
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
        if errors:
            problems.append(f"instance {i}: {errors[0].message[:200]} at {'/'.join(map(str, errors[0].path))}")
    return problems


def walk(guide: Any, token_ids: Sequence[int], bitmask: Any) -> None:
    """The per-step work of a sampler: fill the mask, advance; then the closing mask."""
    state = guide.initial_state
    for token_id in token_ids:
        guide.fill_bitmask(state, bitmask)
        state = guide.advance(state, token_id)
    guide.fill_bitmask(state, bitmask)


def rejected_at(guide: Any, vocabulary: Any, token_ids: Sequence[int]) -> str | None:
    """Where a walk goes wrong, for the report (None when the guide takes every token and may end)."""
    import constrain

    state = guide.initial_state
    text = b""
    for position, token_id in enumerate(token_ids):
        if not guide.allowed_tokens(state)[token_id]:
            return (
                f"token {position + 1}/{len(token_ids)} {vocabulary.token_bytes[token_id]!r} "
                f"refused after ...{text[-70:].decode(errors='replace')!r}"
            )
        try:
            state = guide.advance(state, token_id)
        except constrain.TokenRejected as exc:
            return describe(exc)
        text += vocabulary.token_bytes[token_id]
    return None if guide.is_final(state) else "EOS not allowed after the last token"


def run_case(case: Case, ctx: dict[str, Any], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Measure one case; also return the outlines-core request for it (None when it has no compile)."""
    import constrain
    from constrain.json_schema import to_regex
    from constrain.testing import accepts

    vocabulary, tokenizer = ctx["vocabulary"], ctx["tokenizer"]
    result: dict[str, Any] = {"name": case.name, "group": case.group, "options": case.options, "note": case.note}
    gc.collect()
    problems = check_instances(case)
    if problems:
        result["bad_examples"] = problems
    tokenized: list[list[int]] = []
    for instance in [] if problems else case.instances:
        text = json.dumps(instance, ensure_ascii=False)
        ids = _common.spelled_ids(tokenizer, vocabulary, text)
        if ids is None:
            raise SystemExit(f"{case.name}: the tokens do not spell the instance")
        tokenized.append(ids)
    request = {"schema": case.schema, "depth": case.options.get("max_recursion_depth") or 3,
               "token_ids": tokenized[0] if tokenized else None}

    options = dict(case.options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        def compile_fresh() -> Any:
            compiler = constrain.Compiler(vocabulary)
            return timed(lambda: compiler.json_schema(case.schema, **options))

        # 1. Strict first: a keyword constrain cannot enforce is recorded (which and where),
        #    then the schema is measured with lenient=True.
        start = time.perf_counter()
        try:
            try:
                guide, first = compile_fresh()
            except constrain.UnsupportedSchemaError as exc:
                if isinstance(exc, constrain.RecursiveSchemaError):
                    raise
                result["rejected"] = {"keyword": exc.keyword, "pointer": exc.pointer, "message": describe(exc)}
                options["lenient"] = True
                start = time.perf_counter()
                guide, first = compile_fresh()
        except constrain.ConstrainError as exc:
            result["error"] = describe(exc)
            result["error_after_ms"] = (time.perf_counter() - start) * 1e3
            if isinstance(exc, constrain.LimitExceededError):
                result["limit"] = exc.limit
            return result, None
        result["lenient"] = bool(options.get("lenient"))

        # 2. Compile samples: fresh compiler, compile, first mask; `repeats` of them.
        compile_ms: list[float] = [first]
        first_mask_ms: list[float] = []
        while True:
            _, m_ms = timed(lambda: guide.allowed_tokens(guide.initial_state))
            first_mask_ms.append(m_ms)
            if len(compile_ms) >= args.repeats:
                break
            guide, c_ms = compile_fresh()
            compile_ms.append(c_ms)
        result["compile_ms"] = median(compile_ms)
        result["compile_ms_all"] = compile_ms
        result["first_mask_ms"] = median(first_mask_ms)
        result["dropped"] = [list(d) for d in guide.dropped]
        result["nfa_states"] = len(guide.index.dfa.nfa)

        # 3. Walk samples: compile + first mask + a cold walk over one example, on fresh guides
        #    (the last compile sample's guide is the first), until `repeats` or the case budget.
        #    The first example is the canonical one; if constrain refuses it (reported), the
        #    next example it takes is timed instead.
        candidates = list(range(len(tokenized)))
        bitmask = constrain.allocate_bitmask(vocabulary.size)
        walk_ms: list[float] = []
        spent = 0.0
        walk_index: int | None = None
        reusable = True  # the last compile sample's guide: compiled fresh, only its first row built
        guide_walked: Any = None
        while candidates or walk_index is not None:
            if walk_index is None:
                walk_index = candidates.pop(0)
                walk_ms.clear()
            if reusable:
                c_ms, m_ms = compile_ms[-1], first_mask_ms[-1]
                reusable = False
            else:
                guide, c_ms = compile_fresh()
                _, m_ms = timed(lambda: guide.allowed_tokens(guide.initial_state))
            start = time.perf_counter()
            try:
                _, w_ms = timed(lambda: walk(guide, tokenized[walk_index], bitmask))
            except constrain.TokenRejected:
                result.setdefault("walk_refused", []).append(walk_index)
                walk_index = None
                continue
            except constrain.ConstrainError as exc:  # a limit reached while walking
                result["walk_error"] = describe(exc)
                walk_index = None
                break
            spent += time.perf_counter() - start + (c_ms + m_ms) / 1e3
            walk_ms.append(c_ms + m_ms + w_ms)
            guide_walked = guide
            if len(walk_ms) >= args.repeats or spent > args.case_budget:
                break
        if walk_index is not None and walk_ms:
            result["walk_instance"] = walk_index
            result["tokens"] = len(tokenized[walk_index])
            result["walk_samples"] = len(walk_ms)
            result["compile_walk_ms"] = median(walk_ms)
            result["compile_walk_ms_all"] = walk_ms
            result["dfa_states"] = guide_walked.index.dfa.num_states
            result["rows_built"] = guide_walked.index.num_built_rows
            request["token_ids"] = tokenized[walk_index]
            verdict_guide = guide_walked
        else:
            verdict_guide = compile_fresh()[0]
        if tokenized:  # verdicts on every example, untimed
            result["accepts"] = [accepts(verdict_guide, ids) for ids in tokenized]
            result["reject_reasons"] = {
                str(i): rejected_at(verdict_guide, vocabulary, ids) for i, ids in enumerate(tokenized) if not result["accepts"][i]
            }
        del verdict_guide
        guide = guide_walked = None

        try:
            regex, result["to_regex_ms"] = timed(lambda: to_regex(case.schema, **options))
            result["regex_chars"] = len(regex)
            del regex
        except Exception as exc:
            result["regex_error"] = describe(exc)

        # 4. Memory: one more, untimed compile and first mask under tracemalloc (which slows a
        #    compile several-fold, hence the cap).
        gc.collect()
        if result["compile_ms"] <= args.tracemalloc_max_ms:
            tracemalloc.start()
            try:
                guide = constrain.Compiler(vocabulary).json_schema(case.schema, **options)
                result["peak_compile_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.reset_peak()
                guide.allowed_tokens(guide.initial_state)
                result["peak_first_mask_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
            finally:
                tracemalloc.stop()
            del guide
    return result, request


# ---------------------------------------------------------------------- limits demonstration


def limits_demo(ctx: dict[str, Any], cases: dict[str, Case]) -> list[dict[str, Any]]:
    """Compile under small limits: each must end in a LimitExceededError that names the limit."""
    import constrain

    vocabulary = ctx["vocabulary"]
    wide, _ = wide_object(500, None)
    items = {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
             "qty": {"type": "integer", "minimum": 1, "maximum": 99}}, "required": ["sku", "qty"]}, "maxItems": 500}
    demos: list[tuple[str, Any, constrain.Limits | None, bool]] = [
        ("object_500_props_optional, max_nfa_states=10000", wide, constrain.Limits(max_nfa_states=10_000), False),
        ("enum_10k_strings, max_nfa_states=5000", {"enum": place_names(10_000)}, constrain.Limits(max_nfa_states=5_000), False),
        ("string_maxLength_1000 + precompute(), max_dfa_states=500", {"type": "string", "maxLength": 1000},
         constrain.Limits(max_dfa_states=500), True),
        ("array_maxItems_500_objects + precompute(), timeout_s=1", items, constrain.Limits(timeout_s=1.0), True),
    ]
    weather = cases.get("tool_get_weather")
    if weather is not None:
        demos.append(("tool_get_weather + precompute(), max_index_entries=100000", weather.schema,
                      constrain.Limits(max_index_entries=100_000), True))
    out = []
    for label, schema, limits, eager in demos:
        entry: dict[str, Any] = {"case": label}
        start = time.perf_counter()
        try:
            guide = constrain.Compiler(vocabulary).json_schema(schema, limits=limits)
            entry["compile_ms"] = (time.perf_counter() - start) * 1e3
            if eager:
                entry["states"] = guide.precompute()
            entry["outcome"] = "no error (limit not reached)"
        except constrain.LimitExceededError as exc:
            entry["outcome"] = "LimitExceededError"
            entry["limit"] = exc.limit
            entry["message"] = str(exc)
        except constrain.ConstrainError as exc:
            entry["outcome"] = describe(exc)
        entry["ms"] = (time.perf_counter() - start) * 1e3
        out.append(entry)
    return out


# ---------------------------------------------------------------------- report


ms = _common.fmt


def size(chars: int | None) -> str:
    if chars is None:
        return "–"
    return f"{chars / 1e6:.1f} MB" if chars >= 1e6 else f"{chars / 1e3:.1f} kB"


def outlines_cell(o: dict[str, Any] | None) -> tuple[str, str, str]:
    """(regex size, compile ms, verdict) cells for outlines-core."""
    if o is None:
        return "–", "not run", "–"
    regex = size(o.get("regex_chars"))
    if "timeout" in o:
        return regex, "timeout", "–"
    if "error" in o:
        return regex, "refused", "–"
    if "skipped" in o:
        return regex, "skipped", "–"
    verdict = "–" if "accepts" not in o else ("✓" if o["accepts"] else "✗")
    return regex, ms(o.get("compile_ms")), verdict


def summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "max": max(values) if values else None,
    }


def summary_line(label: str, s: dict[str, Any]) -> str:
    return f"{label}: p50 {ms(s['p50'])} ms, p90 {ms(s['p90'])} ms, max {ms(s['max'])} ms (n={s['n']})"


def group_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    def values(key: str) -> list[float]:
        return [r[key] for r in results if r.get(key) is not None]

    failed = [r for r in results if r.get("error")]
    outlines = [r.get("outlines") or {} for r in results]
    return {
        "cases": len(results),
        "compile_ms": summary(values("compile_ms")),
        # what a caller waits for: a guide, or the error (failures counted at their time to error)
        "guide_or_error_ms": summary([r.get("compile_ms") or r.get("error_after_ms") for r in results
                                      if r.get("compile_ms") or r.get("error_after_ms")]),
        "first_mask_ms": summary(values("first_mask_ms")),
        "compile_walk_ms": summary(values("compile_walk_ms")),
        "outlines_compile_ms": summary([o["compile_ms"] for o in outlines if o.get("compile_ms") is not None]),
        "outlines_unfinished": {
            "timeout": sum("timeout" in o for o in outlines),
            "refused": sum("error" in o for o in outlines),
            "skipped": sum("skipped" in o for o in outlines),
        },
        "slow": [r["name"] for r in results if max(r.get("compile_ms") or 0, r.get("compile_walk_ms") or 0) > 1000],
        "failed": [f"{r['name']} ({r['error'].split(':')[0]} after {r.get('error_after_ms', 0) / 1e3:.1f} s)" for r in failed],
        "strict_rejected": [r["name"] for r in results if r.get("rejected")],
        "instance_refused": [r["name"] for r in results if r.get("accepts") and not all(r["accepts"])],
        "walk_over_1s": [r["name"] for r in results if (r.get("compile_walk_ms") or 0) > 1000],
    }


def notes_for(r: dict[str, Any]) -> str:
    notes = []
    if r.get("error"):
        notes.append(f"**{r['error']}** (after {r.get('error_after_ms', 0) / 1e3:.1f} s)")
    if r.get("rejected"):
        notes.append(f"strict: `{r['rejected']['keyword']}` at `{r['rejected']['pointer']}`")
    if r.get("dropped"):
        notes.append("lenient dropped " + ", ".join(f"`{k}` at `{p}`" for k, p in r["dropped"]))
    if r.get("options", {}).get("max_recursion_depth"):
        notes.append(f"max_recursion_depth={r['options']['max_recursion_depth']}")
    if r.get("bad_examples"):
        notes.append("bad example: " + r["bad_examples"][0])
    refused = [i for i, ok in enumerate(r.get("accepts", [])) if not ok]
    if refused:
        notes.append(f"example {', '.join(map(str, refused))} refused (see below)")
        if r.get("walk_instance"):
            notes.append(f"walk times example {r['walk_instance']}")
    if r.get("walk_error"):
        notes.append(f"walk: {r['walk_error']}")
    if r.get("walk_samples") and r["walk_samples"] < 3:
        notes.append(f"{r['walk_samples']} walk sample{'s' if r['walk_samples'] > 1 else ''}")
    o = r.get("outlines") or {}
    for key in ("timeout", "error", "skipped"):
        if o.get(key):
            notes.append(f"outlines {key}: {o[key]}")
    return "; ".join(notes)


def markdown(meta: dict[str, Any], results: list[dict[str, Any]], summaries: dict[str, Any], demos: list[dict[str, Any]]) -> str:
    v = meta["versions"]
    lines = [
        f"# JSON Schema benchmark: constrain {v['constrain']} (outlines-core {v['outlines-core']} alongside)",
        "",
        f"- machine: {meta['cpu_model']}, {meta['cpu_count']} CPUs, {meta['platform']}; python {meta['python']}; "
        "both engines single-threaded",
        f"- tokenizer: {meta['tokenizer']} ({meta['vocab_size']} ids); one-time vocabulary + walk tables "
        f"{meta['setup_ms']:.0f} ms (in no figure below)",
        f"- compile: `Compiler.json_schema` on a fresh `Compiler` each time, median of {meta['repeats']}; "
        "1st mask: `allowed_tokens(initial_state)` right after; compile+walk: compile + 1st mask + "
        "`fill_bitmask`/`advance` over every token of one valid example (rows built cold) + the closing mask, "
        f"median of up to {meta['repeats']} fresh guides (fewer once a case has spent {meta['case_budget_s']:.1f} s)",
        "- regex: `to_regex` length (constrain builds its automaton from the tree and never renders that text); "
        "NFA: `len(guide.index.dfa.nfa)`; DFA: states created by the end of the walk; peak MiB: tracemalloc peak "
        f"of one more compile (skipped for compiles over {meta['tracemalloc_max_ms']:.0f} ms)",
        f"- outlines-core: `build_regex_from_schema(schema, whitespace_pattern='{WHITESPACE}')` + `Index` "
        f"(eager, whole index), median of up to {meta['repeats']}, in a worker "
        f"{'beside the constrain measurements (other core)' if meta['outlines_parallel'] else 'run after each case'}, killed after "
        f"{meta['outlines_timeout_s']:.0f} s, skipped above {meta['outlines_max_regex'] / 1e3:.0f} kB of regex; "
        "o ✓: it took the same token ids",
        "",
        "## Summary",
        "",
    ]
    for group in ("corpus", "scale"):
        s = summaries[group]
        u = s["outlines_unfinished"]
        lines += [
            f"- **{group}** ({s['cases']} cases)",
            "  - " + summary_line("compile (successful)", s["compile_ms"]),
            "  - " + summary_line("time to a guide or to the error (all)", s["guide_or_error_ms"]),
            "  - " + summary_line("first mask", s["first_mask_ms"]),
            "  - " + summary_line("compile+walk", s["compile_walk_ms"]),
            "  - " + summary_line("outlines-core compile (where it finished)", s["outlines_compile_ms"])
            + f"; timed out {u['timeout']}, refused {u['refused']}, skipped {u['skipped']}",
            f"  - compile over 1 s: {', '.join(n for n in s['slow'] if n not in s['walk_over_1s']) or 'none'}"
            f"; compile+walk over 1 s: {', '.join(s['walk_over_1s']) or 'none'}",
            f"  - failed to compile: {', '.join(s['failed']) or 'none'}",
            f"  - refused in strict mode: {', '.join(s['strict_rejected']) or 'none'}",
            f"  - a valid example refused: {', '.join(s['instance_refused']) or 'none'}",
        ]
    lines.append("")
    for group, title in (("corpus", "Realistic corpus"), ("scale", "Scale cases")):
        lines += [
            f"## {title}",
            "",
            "| schema | regex | NFA | compile ms | 1st mask ms | tokens | compile+walk ms | DFA | peak MiB "
            "| ok | outlines regex | outlines ms | o ok | notes |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|:-:|---|",
        ]
        for r in (r for r in results if r["group"] == group):
            o_regex, o_ms, o_ok = outlines_cell(r.get("outlines"))
            verdicts = r.get("accepts")
            ok = "–" if not verdicts else "".join("✓" if a else "✗" for a in verdicts)
            peak = r.get("peak_compile_mib")
            peak_cell = "–" if peak is None else f"{peak:.1f}"
            cells = [
                r["name"],
                size(r.get("regex_chars")),
                f"{r['nfa_states']:,}" if r.get("nfa_states") is not None else "–",
                ms(r.get("compile_ms")),
                ms(r.get("first_mask_ms")),
                str(r.get("tokens", "–")),
                ms(r.get("compile_walk_ms")),
                f"{r['dfa_states']:,}" if r.get("dfa_states") is not None else "–",
                peak_cell,
                ok,
                o_regex,
                o_ms,
                o_ok,
                notes_for(r),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Limits end in a clear error", ""]
    for d in demos:
        detail = d.get("message", d["outcome"])
        extra = f"; compile {d['compile_ms']:.0f} ms" if "compile_ms" in d else ""
        lines.append(f"- {d['case']} — after {d['ms']:.0f} ms{extra}: `{detail}`")
    rejected = [r for r in results if r.get("rejected")]
    if rejected:
        lines += ["", "## Keywords constrain refused in strict mode (then measured with lenient=True)", ""]
        for r in rejected:
            dropped = ", ".join(f"`{k}` at `{p}`" for k, p in r.get("dropped", []))
            lines.append(f"- {r['name']}: {r['rejected']['message'].split(': ', 1)[1]} — lenient dropped {dropped}")
    refused = [(r, i, why) for r in results for i, why in (r.get("reject_reasons") or {}).items()]
    if refused:
        lines += ["", "## Valid examples constrain refused (jsonschema accepts them)", ""]
        lines += [f"- {r['name']} example {i}: {why}" for r, i, why in refused]
    o_rejects = [r for r in results if (r.get("outlines") or {}).get("accepts") is False]
    if o_rejects:
        lines += ["", "## Examples outlines-core refused", ""]
        lines += [f"- {r['name']}: {r['outlines'].get('reject_reason', 'not finished after the last token')}" for r in o_rejects]
    lines += ["", f"Total benchmark time {meta['total_seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "mistral", "llama3", "qwen"])
    parser.add_argument("--quick", action="store_true", help="every other case, 2 repeats, outlines-core timeout 2 s")
    parser.add_argument("--repeats", type=int, help="compile repeats (default 5, --quick 2)")
    parser.add_argument(
        "--case-budget", type=float, default=2.0,
        help="stop taking compile+walk samples of a case once they took this many seconds (at least one)",
    )
    parser.add_argument(
        "--tracemalloc-max-ms", type=float, default=2000.0,
        help="measure peak memory (tracemalloc, several-fold slower) only for compiles up to this long",
    )
    parser.add_argument("--only", nargs="*", help="run only the cases whose name contains one of these")
    parser.add_argument("--no-outlines", action="store_true", help="leave outlines-core out")
    parser.add_argument(
        "--serial-outlines", action="store_true",
        help="run outlines-core after each case instead of beside the constrain measurements (slower, no overlap)",
    )
    parser.add_argument("--outlines-timeout", type=float, help="seconds per schema (default 4, --quick 2)")
    parser.add_argument("--outlines-max-regex", type=int, default=200_000, help="skip outlines-core above this regex size")
    parser.add_argument("--schemas", type=Path, default=SCHEMA_DIR)
    parser.add_argument("--output-dir", type=Path, default=_common.RESULTS_DIR)
    parser.add_argument("--outlines-worker", metavar="VOCAB", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.outlines_worker:
        return outlines_worker(args.outlines_worker)

    repeats = args.repeats = args.repeats or (2 if args.quick else 5)
    outlines_timeout = args.outlines_timeout or (2.0 if args.quick else 4.0)
    started = time.perf_counter()

    corpus = load_corpus(args.schemas)
    cases = corpus + build_scale_cases()
    if args.quick:  # every other case: both groups and every kind of scale case stay represented
        cases = cases[::2]
    if args.only:
        cases = [c for c in cases if any(part in c.name for part in args.only)]

    setup = _common.load_setup(args.tokenizer)
    tokenizer, vocabulary, eos_id = setup.tokenizer, setup.vocabulary, setup.eos_id
    warm_up(vocabulary)
    import jsonschema  # noqa: F401  (its first import builds grammars for seconds: not inside a case)

    # The tokenizer and vocabulary tables are millions of long-lived objects: a full collection
    # would take most of a second. Freezing them keeps the collection at the start of each case cheap.
    gc.collect()
    gc.freeze()
    ctx = {"tokenizer": tokenizer, "vocabulary": vocabulary}
    outlines = None
    if not args.no_outlines:
        outlines = OutlinesRunner(vocabulary, eos_id, outlines_timeout, args.outlines_max_regex, not args.serial_outlines)

    results = []
    try:
        for case in cases:
            case_start = time.perf_counter()
            result, request = run_case(case, ctx, args)
            if outlines is not None and request is not None:
                outlines.submit(case.name, request, repeats)
            result["seconds"] = time.perf_counter() - case_start
            results.append(result)
            print(
                f"  {case.name}: compile {ms(result.get('compile_ms'))} ms, compile+walk "
                f"{ms(result.get('compile_walk_ms'))} ms ({result['seconds']:.1f} s)"
                + (f" {result['error']}" if result.get("error") else ""),
                file=sys.stderr,
            )
    finally:
        if outlines is not None:
            print("  waiting for outlines-core ...", file=sys.stderr)
            o_results = outlines.finish()
            for result in results:
                if result["name"] in o_results:
                    result["outlines"] = o_results[result["name"]]

    demos = limits_demo(ctx, {c.name: c for c in corpus})
    for d in demos:
        print(f"  limits: {d['case']}: {d.get('message', d['outcome'])} ({d['ms']:.0f} ms)", file=sys.stderr)

    summaries = {g: group_summary([r for r in results if r["group"] == g]) for g in ("corpus", "scale")}
    meta = {
        **_common.machine(),
        "versions": _common.versions("constrain", "outlines-core", "jsonschema", "pydantic"),
        "tokenizer": args.tokenizer,
        "vocab_size": vocabulary.size,
        "setup_ms": setup.vocabulary_ms + setup.tables_ms,
        "repeats": repeats,
        "case_budget_s": args.case_budget,
        "outlines_parallel": not args.serial_outlines,
        "tracemalloc_max_ms": args.tracemalloc_max_ms,
        "whitespace": WHITESPACE,
        "outlines_timeout_s": outlines_timeout,
        "outlines_max_regex": args.outlines_max_regex,
        "quick": args.quick,
        "total_seconds": time.perf_counter() - started,
    }
    report = markdown(meta, results, summaries, demos)
    print(report)
    for group in ("corpus", "scale"):
        s = summaries[group]
        print(
            f"SUMMARY {group}: " + summary_line("compile", s["compile_ms"]) + "; "
            + summary_line("compile+walk", s["compile_walk_ms"]) + f"; failed {len(s['failed'])}"
        )
    payload = {"meta": meta, "summary": summaries, "limits_demo": demos, "results": results}
    _common.write_results("schema", payload, report, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
