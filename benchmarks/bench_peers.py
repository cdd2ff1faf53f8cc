#!/usr/bin/env python
"""Peers side by side: constrain, outlines-core, xgrammar, llguidance, lm-format-enforcer and
transformers-cfg on the same tokenizer, the same JSON schemas and the same token ids.

Run with ``python benchmarks/bench_peers.py`` (``--quick`` for a few schemas, ``--engines a,b``
for a subset). It prints markdown tables and writes ``benchmarks/results/peers.json`` and
``peers.md``. The adapters live in ``benchmarks/peers.py``; a peer that is not installed is
reported as such and skipped.

Corpus
------
* **realistic**: every ``benchmarks/schemas/<name>.json`` (or ``benchmarks/peer_schemas/``
  when that folder is empty). Valid instances come from the ``<name>.examples.json``
  sibling (``{"instances": [...], "options": {...}}``); each is checked with ``jsonschema``
  (``Draft202012Validator`` with ``FORMAT_CHECKER``) and dropped when not valid. Invalid
  instances are simple mutations of them: drop a key, a value of the wrong type, a
  number far out of range, an extra property, a string outside its enum/pattern/format,
  an over-long string. A mutation is kept only when ``jsonschema`` says it is invalid;
  at most one per kind and schema (picked with a fixed seed among the candidates).
  The ``options`` (``max_recursion_depth``) go to constrain and outlines-core, the
  two engines that unroll recursion.
* **suite**: the groups of ten files of the official JSON Schema Test Suite (draft
  2020-12): type, properties, required, enum, const, minimum, maxLength, items,
  prefixItems, additionalProperties, with their valid/invalid labels. Object keys of
  an instance are put in the schema's ``properties`` order first (every engine here
  that fixes an order uses definition order; the JSON value does not change).

Every instance is serialized with ``json.dumps`` (default separators ``", "``/``": "``,
ASCII escapes) and tokenized as a continuation (``constrain.testing.tokenize_continuation``,
the tokenizer's own segmentation); an instance whose ids do not spell its text byte for
byte is skipped. Every engine walks exactly these ids.

Measurements
------------
Each engine runs in its own worker process (single-threaded: ``RAYON_NUM_THREADS``,
``OMP_NUM_THREADS`` = 1, ``torch.set_num_threads(1)``, xgrammar ``max_threads=1``), one
schema at a time, so an engine that hangs on a schema is killed without stopping the run.
``--jobs`` workers (default 2, one per core of a 2-core machine) run at once, each on a
different engine. Each worker warms its engine up on a tiny schema (untimed) first.

* **compile**: the adapter's ``compile`` (see ``peers.py``: what is eager and what lazy
  differs per engine), median of up to 3 runs (fewer when one run eats the budget).
  An exception there makes the schema **refused**, with its message.
* **step**: per token, ``fill`` (the full next-token mask) + ``advance``; plus the final
  mask after the last token. p50/p90/p99 in µs over all steps the engine walked, with
  the garbage collector off during walks.
* **verdict**: a valid instance is *accepted* when every token is in the mask, the
  engine's advance takes it, and it may end afterwards; an invalid one must be
  *rejected* (a token outside the mask or refused by advance, or it cannot end).
  Invalid and accepted = **under-constrained**; valid and rejected = over-constrained.
  A mask that allows a token its own advance refuses (or the reverse) is counted as
  *inconsistent*.
* **budget**: each engine gets ``--engine-budget`` seconds (240) for the whole corpus,
  shared out evenly over the schemas still to run (never more than ``--budget``, 30 s,
  per schema; restarts after a kill count too). Schemas run smallest first (by the
  length of their JSON), so an engine that runs out loses the biggest ones (*skipped*).
  Instances it has no time left for are *not reached* and count in no verdict; a
  worker that overruns its schema budget by ``--grace`` is killed (*timeout*).
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse
import copy
import gc
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import describe, fmt, percentile

SCHEMA_DIR = _common.HERE / "schemas"
FALLBACK_SCHEMA_DIR = _common.HERE / "peer_schemas"
SUITE_DIR = _common.REPO.parent / "shared" / "data" / "json-schema-test-suite" / "tests" / "draft2020-12"
SUITE_FILES = [
    "type", "properties", "required", "enum", "const",
    "minimum", "maxLength", "items", "prefixItems", "additionalProperties",
]  # fmt: skip
SCHEDULE = ["constrain", "outlines-core", "transformers-cfg", "lm-format-enforcer", "xgrammar", "llguidance"]
ENGINE_ORDER = [
    "constrain",
    "xgrammar",
    "llguidance",
    "outlines-core",
    "lm-format-enforcer",
    "transformers-cfg",
]
TOKENIZER = "smollm2"


# ---------------------------------------------------------------------- corpus


@dataclass
class Instance:
    label: str  # "valid" or "invalid"
    note: str
    text: str
    ids: list[int]


@dataclass
class Case:
    name: str
    group: str  # "realistic" or "suite"
    schema: Any
    options: dict[str, Any] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def resolve_ref(ref: str, root: Any) -> Any:
    if not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def order_like(value: Any, schema: Any, root: Any, depth: int = 0) -> Any:
    """``value`` with object keys in the schema's ``properties`` order first (same JSON value)."""
    if depth > 30 or not isinstance(schema, dict):
        return value
    if isinstance(schema.get("$ref"), str):
        target = resolve_ref(schema["$ref"], root)
        if isinstance(target, dict) and "properties" not in schema and "items" not in schema:
            return order_like(value, target, root, depth + 1)
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: order_like(value[k], props.get(k, extra), root, depth + 1) for k in keys}
    if isinstance(value, list):
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items")
        return [
            order_like(v, prefix[i] if i < len(prefix) else items, root, depth + 1)
            for i, v in enumerate(value)
        ]
    return value


def make_validator(schema: Any) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


WRONG_TYPE_FOR = {
    str: 12345,
    bool: "yes",
    int: "forty-two",
    float: "3.14",
    type(None): 0,
    list: "not-an-array",
    dict: "not-an-object",
}
MUTATION_KINDS = ["drop key", "wrong type", "out of range", "extra property", "bad string", "too long"]


def mutation_candidates(instance: Any) -> list[tuple[str, str, Any]]:
    """(kind, path, mutated instance) for every simple mutation site, shallow sites first."""
    out: list[tuple[str, str, Any]] = []
    queue: list[tuple[list[Any], Any]] = [([], instance)]
    while queue:
        path, node = queue.pop(0)
        where = "/" + "/".join(str(p) for p in path)

        def replaced(value: Any, path: list[Any] = path) -> Any:
            clone = copy.deepcopy(instance)
            if not path:
                return value
            parent = clone
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = value
            return clone

        out.append(("wrong type", where, replaced(WRONG_TYPE_FOR[type(node)])))
        if isinstance(node, bool):
            pass
        elif isinstance(node, int):
            out.append(("out of range", where, replaced(node + 10**9)))
            out.append(("out of range", where, replaced(node - 10**9)))
            out.append(("wrong type", where, replaced(node + 0.5)))
        elif isinstance(node, float):
            out.append(("out of range", where, replaced(node + 1e9)))
            out.append(("out of range", where, replaced(node - 1e9)))
        elif isinstance(node, str):
            out.append(("bad string", where, replaced("zz not~allowed")))
            out.append(("too long", where, replaced(node + " " + "lorem ipsum dolor " * 30)))
        elif isinstance(node, dict):
            for key in node:
                clone = replaced({k: v for k, v in node.items() if k != key})
                out.append(("drop key", f"{where.rstrip('/')}/{key}", clone))
            out.append(("extra property", where, replaced({**node, "unexpected_field": "surprise"})))
            queue.extend((path + [k], v) for k, v in node.items())
        elif isinstance(node, list):
            queue.extend((path + [i], v) for i, v in enumerate(node))
    return out


def invalid_mutations(schema: Any, valid: list[Any], seed: str) -> list[tuple[str, Any]]:
    """One verified-invalid mutation per kind (seeded choice among candidates)."""
    validator = make_validator(schema)
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[str, Any]]] = {kind: [] for kind in MUTATION_KINDS}
    seen: set[str] = {json.dumps(v) for v in valid}
    for instance in valid:
        for kind, where, mutated in mutation_candidates(instance):
            text = json.dumps(mutated)
            if text in seen:
                continue
            seen.add(text)
            if not validator.is_valid(mutated):
                by_kind[kind].append((f"{kind} at {where}", mutated))
    chosen = []
    for kind in MUTATION_KINDS:
        if by_kind[kind]:
            chosen.append(rng.choice(by_kind[kind]))
    return chosen


def tokenized(tokenizer: Any, vocabulary: Any, value: Any) -> tuple[str, list[int] | None]:
    text = json.dumps(value)
    return text, _common.spelled_ids(tokenizer, vocabulary, text)


def load_realistic(tokenizer: Any, vocabulary: Any, only: list[str] | None) -> list[Case]:
    directory = SCHEMA_DIR if any(SCHEMA_DIR.glob("*.json")) else FALLBACK_SCHEMA_DIR
    cases = []
    for path in sorted(directory.glob("*.json")):
        if path.name.endswith(".examples.json"):
            continue
        name = path.name[: -len(".json")]
        if only is not None and name not in only:
            continue
        schema = json.loads(path.read_text())
        extra_path = path.with_name(f"{name}.examples.json")
        extra = json.loads(extra_path.read_text()) if extra_path.exists() else {}
        case = Case(name, "realistic", schema, options=extra.get("options", {}))
        validator = make_validator(schema)
        valid = []
        for i, instance in enumerate(extra.get("instances", [])):
            if validator.is_valid(instance):
                valid.append(instance)
            else:
                case.skipped.append(f"example {i} is not valid per jsonschema")
        labelled = [("valid", f"example {i}", v) for i, v in enumerate(valid)]
        labelled += [("invalid", note, v) for note, v in invalid_mutations(schema, valid, name)]
        for label, note, value in labelled:
            text, ids = tokenized(tokenizer, vocabulary, value)
            if ids is None:
                case.skipped.append(f"{note}: token ids do not spell the text")
                continue
            case.instances.append(Instance(label, note, text, ids))
        cases.append(case)
    return cases


def load_suite(tokenizer: Any, vocabulary: Any, files: list[str]) -> list[Case]:
    cases = []
    for stem in files:
        path = SUITE_DIR / f"{stem}.json"
        if not path.exists():
            continue
        for g, group in enumerate(json.loads(path.read_text())):
            schema = group["schema"]
            case = Case(f"suite/{stem}#{g}", "suite", schema)
            case.skipped = []
            for test in group["tests"]:
                value = order_like(test["data"], schema, schema)
                text, ids = tokenized(tokenizer, vocabulary, value)
                if ids is None:
                    case.skipped.append(f"{test['description']}: token ids do not spell the text")
                    continue
                label = "valid" if test["valid"] else "invalid"
                case.instances.append(Instance(label, test["description"], text, ids))
            cases.append(case)
    return cases


# ---------------------------------------------------------------------- worker (one engine)


def worker_main(engine_name: str, stderr_path: str, context_path: str) -> int:
    """Serve one case per stdin line; answer one ``RESULT`` line each."""
    from peers import ENGINES, Context

    def new_stderr() -> str:
        sys.stderr.flush()
        try:
            with open(stderr_path, "rb") as handle:
                handle.seek(new_stderr.pos)  # type: ignore[attr-defined]
                data = handle.read()
                new_stderr.pos += len(data)  # type: ignore[attr-defined]
            return data.decode("utf-8", "replace")
        except OSError:
            return ""

    new_stderr.pos = 0  # type: ignore[attr-defined]
    info: dict[str, Any] = {}
    with open(context_path, "rb") as handle:
        shared = pickle.load(handle)
    try:
        ctx = Context(**shared["context"])
        start = time.perf_counter()
        engine = ENGINES[engine_name](ctx)
        info = {
            "version": engine.version,
            "settings": engine.settings,
            "setup_s": time.perf_counter() - start,
            "lazy_advance": engine.lazy_advance,
        }
    except Exception as exc:
        print(
            "FAILED " + json.dumps({"error": describe(exc), "traceback": traceback.format_exc()[-2000:]}),
            flush=True,
        )
        return 1
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    try:  # untimed warm-up: first-use costs (shared tables, JIT, caches) stay out of the first schema
        factory = engine.compile({"type": "object", "properties": {"a": {"type": "string"}}}, {})
        m = factory()
        for tid in shared["warm_up_ids"]:
            m.fill()
            m.advance(tid)
        m.fill()
        m.can_end()
    except Exception as exc:
        info["warm_up_error"] = describe(exc)
    new_stderr()
    gc.collect()
    gc.freeze()  # the imported libraries stay out of every later collection
    print("READY " + json.dumps(info), flush=True)

    for line in sys.stdin:
        request = json.loads(line)
        print("RESULT " + json.dumps(run_case(engine, request, new_stderr)), flush=True)
    return 0


def run_case(engine: Any, request: dict[str, Any], new_stderr: Any) -> dict[str, Any]:
    budget = request["budget_s"]
    start = time.perf_counter()
    deadline = start + budget
    out: dict[str, Any] = {"status": "ok", "compile_ms": [], "instances": []}
    factory = None
    gc.collect()
    try:
        while True:
            t0 = time.perf_counter()
            factory = engine.compile(request["schema"], request["options"])
            out["compile_ms"].append((time.perf_counter() - t0) * 1e3)
            spent = time.perf_counter() - start
            if len(out["compile_ms"]) >= 3 or spent > 0.25 * budget:
                break
    except Exception as exc:  # the engine refuses the schema
        out["status"] = "refused"
        out["error"] = describe(exc)
    warnings = [w for w in engine.warnings()] if factory is not None else []
    warnings += [
        line.strip() for line in new_stderr().splitlines() if "warn" in line.lower() and line.strip()
    ]
    out["warnings"] = sorted(set(warnings))[:10]
    if factory is None:
        return out

    check_advance = not engine.lazy_advance
    clock = time.perf_counter_ns
    for inst in request["instances"]:
        record: dict[str, Any] = {"accepted": None, "complete": False}
        out["instances"].append(record)
        if time.perf_counter() > deadline:
            record["reason"] = "not reached (budget)"
            continue
        ids = inst["ids"]
        steps: list[float] = []
        gc.disable()
        try:
            m = factory()
            walked_all = True
            for i, tid in enumerate(ids):
                t0 = clock()
                m.fill()
                t1 = clock()
                in_mask = m.allowed(tid)
                t2 = clock()
                took = m.advance(tid) if (in_mask or check_advance) else False
                t3 = clock()
                steps.append(((t1 - t0) + (t3 - t2)) / 1e3)
                if i == 0:
                    record["first_fill_us"] = (t1 - t0) / 1e3
                if check_advance and in_mask != took:
                    record["inconsistent"] = f"token {i}: mask says {in_mask}, advance says {took}"
                if not (in_mask and took):
                    walked_all = False
                    record.update(accepted=False, complete=True, at=i)
                    record["reason"] = "masked" if not in_mask else "advance refused"
                    break
                if i < len(ids) - 1 and time.perf_counter() > deadline:
                    walked_all = False
                    record["reason"] = "not finished (budget)"
                    break
            if walked_all:
                t0 = clock()
                m.fill()
                steps.append((clock() - t0) / 1e3)
                can_end = bool(m.can_end())
                record.update(accepted=can_end, complete=True)
                if not can_end:
                    record.update(reason="cannot end", at=len(ids))
        except Exception as exc:  # an engine bug while walking: the instance is not judged
            record["reason"] = "crash: " + describe(exc)
            record["crash"] = True
        finally:
            gc.enable()
            record["steps_us"] = [round(x, 2) for x in steps]
    out["wall_s"] = time.perf_counter() - start
    return out


# ---------------------------------------------------------------------- parent side of a worker


class Worker:
    def __init__(self, engine: str, context_path: str) -> None:
        self.engine = engine
        self.context_path = context_path
        self.proc: subprocess.Popen[str] | None = None
        self.info: dict[str, Any] | None = None
        self.failed: str | None = None
        handle = tempfile.NamedTemporaryFile(prefix=f"bench_peers_{engine}_", suffix=".log", delete=False)
        handle.close()
        self.stderr_path = handle.name

    def start(self, timeout_s: float = 180.0) -> bool:
        env = dict(os.environ)
        stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", self.engine, self.stderr_path, self.context_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        stderr.close()
        deadline = time.monotonic() + timeout_s
        while True:
            line = _common.read_line(self.proc, deadline - time.monotonic())
            if line is None:
                self.failed = "worker did not start: " + self.stderr_tail()
                self.kill()
                return False
            if line.startswith("READY "):
                self.info = json.loads(line[6:])
                return True
            if line.startswith("FAILED "):
                self.failed = json.loads(line[7:])["error"]
                self.kill()
                return False

    def stderr_tail(self) -> str:
        try:
            text = Path(self.stderr_path).read_text(errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-500:]

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()
            self.proc = None

    def run(self, case: Case, budget_s: float, grace_s: float) -> dict[str, Any]:
        began = time.monotonic()  # a restart (after a kill) counts against the engine's budget too
        if self.proc is None or self.proc.poll() is not None:
            if not self.start():
                return {
                    "status": "crash",
                    "error": self.failed or "worker did not start",
                    "wall_s": time.monotonic() - began,
                }
        assert self.proc is not None and self.proc.stdin is not None
        request = {
            "schema": case.schema,
            "options": case.options if self.engine in ("constrain", "outlines-core") else {},
            "instances": [{"ids": inst.ids} for inst in case.instances],
            "budget_s": budget_s,
        }
        started = time.monotonic()
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        while True:
            line = _common.read_line(self.proc, budget_s + grace_s - (time.monotonic() - started))
            if line is None:
                crashed = self.proc.poll() is not None
                tail = self.stderr_tail()
                self.kill()
                if crashed:
                    return {
                        "status": "crash",
                        "error": f"worker died: {tail}",
                        "wall_s": time.monotonic() - began,
                    }
                return {
                    "status": "timeout",
                    "error": f"no answer within {budget_s + grace_s:.0f} s (compile or one mask call ran away)",
                    "wall_s": time.monotonic() - began,
                }
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
                result["wall_s"] = time.monotonic() - began
                return result

    def close(self) -> None:
        if self.proc is not None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.kill()
            self.proc = None
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass


# ---------------------------------------------------------------------- the run


def write_context(setup: _common.Setup) -> str:
    """Pickle what every worker's :class:`peers.Context` needs; returns the file's path (the caller unlinks it).

    Workers read the vocabulary from here rather than rebuilding it, so all engines see
    the same token bytes and EOS; the tokenizer itself is reloaded only by the peers
    that need the Hugging Face object.
    """
    from constrain.testing import cache_dir, tokenize_continuation

    shared = {
        "context": {
            "token_bytes": list(setup.vocabulary.token_bytes),
            "eos_token_ids": sorted(setup.vocabulary.eos_token_ids),
            "eos_id": setup.eos_id,
            "vocab_size": setup.vocabulary.size,
            "tokenizer_name": setup.name,
            "tokenizer_dir": str(cache_dir() / "tokenizers" / setup.name),
        },
        "warm_up_ids": tokenize_continuation(setup.tokenizer, '{"a": "x"}'),
    }
    handle = tempfile.NamedTemporaryFile(prefix="bench_peers_context_", suffix=".pkl", delete=False)
    with handle:
        pickle.dump(shared, handle)
    return handle.name


def run_engine(engine: str, cases: list[Case], args: argparse.Namespace, context_path: str) -> dict[str, Any]:
    worker = Worker(engine, context_path)
    started = time.monotonic()
    if not worker.start():
        print(f"  {engine}: not available ({worker.failed})", flush=True)
        worker.close()
        return {"available": False, "error": worker.failed}
    info = worker.info or {}
    print(f"  {engine} {info.get('version')}: setup {info.get('setup_s', 0):.1f} s", flush=True)
    results: list[dict[str, Any]] = []
    spent = 0.0
    for k, case in enumerate(cases):
        left = args.engine_budget - spent
        share = left / (len(cases) - k)
        budget = min(args.budget, max(args.min_budget, share))
        if left <= 0:
            results.append({"status": "skipped", "error": "engine budget spent"})
            continue
        result = worker.run(case, budget, args.grace)
        spent += result.get("wall_s", 0.0)
        results.append(result)
        if result["status"] != "ok":
            print(
                f"    [{engine}] {case.name}: {result['status']}: {result.get('error', '')[:160]}", flush=True
            )
    worker.close()
    total = time.monotonic() - started
    print(f"  {engine}: {total:.0f} s", flush=True)
    return {"available": True, **info, "results": results, "wall_s": total}


def tally(pairs: list[tuple[Instance, dict[str, Any]]]) -> dict[str, Any]:
    """Verdict counts and step percentiles over (instance, record) pairs of compiled schemas."""
    steps: list[float] = []
    valid_steps: list[float] = []
    t = dict(
        valid_judged=0, valid_accepted=0, invalid_judged=0, invalid_rejected=0,
        not_reached=0, inconsistent=0, walk_crash=0,
    )  # fmt: skip
    for inst, rec in pairs:
        steps.extend(rec.get("steps_us", []))
        t["inconsistent"] += bool(rec.get("inconsistent"))
        t["walk_crash"] += bool(rec.get("crash"))
        if not rec.get("complete"):
            t["not_reached"] += 1
            continue
        if inst.label == "valid":
            t["valid_judged"] += 1
            t["valid_accepted"] += bool(rec["accepted"])
            if rec["accepted"]:
                valid_steps.extend(rec.get("steps_us", []))
        else:
            t["invalid_judged"] += 1
            t["invalid_rejected"] += not rec["accepted"]
    t.update(
        under_constrained=t["invalid_judged"] - t["invalid_rejected"],
        over_constrained=t["valid_judged"] - t["valid_accepted"],
        steps=len(steps), step_us_p50=percentile(steps, 50), step_us_p90=percentile(steps, 90),
        step_us_p99=percentile(steps, 99),
        accepted_steps=len(valid_steps), accepted_step_us_p50=percentile(valid_steps, 50),
        accepted_step_us_p90=percentile(valid_steps, 90), accepted_step_us_p99=percentile(valid_steps, 99),
    )  # fmt: skip
    return t


def summarize(
    engine: str, run: dict[str, Any], cases: list[Case], group: str | None = None
) -> dict[str, Any]:
    s: dict[str, Any] = {"engine": engine, "version": run.get("version")}
    if not run.get("available"):
        s["error"] = run.get("error")
        return s
    status: dict[str, int] = {"ok": 0, "refused": 0, "timeout": 0, "skipped": 0, "crash": 0}
    compile_ms: list[float] = []
    pairs: list[tuple[Instance, dict[str, Any]]] = []
    for case, result in zip(cases, run["results"]):
        if group is not None and case.group != group:
            continue
        status[result["status"]] = status.get(result["status"], 0) + 1
        if result["status"] != "ok":
            continue
        compile_ms.append(statistics.median(result["compile_ms"]))
        pairs.extend(zip(case.instances, result["instances"]))
    s.update(
        schemas=sum(status.values()), compiled=status["ok"], refused=status["refused"], timeout=status["timeout"],
        skipped=status["skipped"], crash=status["crash"],
        compile_ms_p50=percentile(compile_ms, 50), compile_ms_p90=percentile(compile_ms, 90),
        **tally(pairs), wall_s=run.get("wall_s") if group is None else None,
    )  # fmt: skip
    return s


def token_context(tokenizer: Any, ids: list[int], at: int) -> str:
    """The text just before token ``at``, and that token, for a readable rejection point."""
    before = tokenizer.decode(ids[max(0, at - 6) : at])
    token = tokenizer.decode(ids[at : at + 1]) if at < len(ids) else "<end>"
    return f"…{before[-40:]}⟨{token}⟩"


def disagreements(cases: list[Case], runs: dict[str, dict[str, Any]], tokenizer: Any) -> list[dict[str, Any]]:
    """Every judged instance an engine got wrong (label vs verdict)."""
    rows = []
    for c, case in enumerate(cases):
        for j, inst in enumerate(case.instances):
            wrong = {}
            for engine, run in runs.items():
                if not run.get("available"):
                    continue
                result = run["results"][c]
                if result["status"] != "ok":
                    continue
                rec = result["instances"][j]
                if not rec.get("complete"):
                    continue
                if rec["accepted"] != (inst.label == "valid"):
                    if rec["accepted"]:
                        wrong[engine] = "accepted"
                    else:
                        where = token_context(tokenizer, inst.ids, rec.get("at", len(inst.ids)))
                        wrong[engine] = f"rejected ({rec.get('reason')}) at {where}"
            if wrong:
                rows.append(
                    {
                        "case": case.name,
                        "label": inst.label,
                        "note": inst.note,
                        "text": inst.text[:300],
                        "engines": wrong,
                    }
                )
    return rows


def markdown(meta: dict[str, Any], summaries: list[dict[str, Any]], by_group: dict[str, list[dict[str, Any]]],
             rows: list[dict[str, Any]], cases: list[Case], runs: dict[str, dict[str, Any]]) -> str:  # fmt: skip
    out = [
        "# Peers side by side",
        "",
        f"Generated by `python benchmarks/bench_peers.py{' --quick' if meta['quick'] else ''}` on {meta['date']} "
        f"({meta['platform']}, Python {meta['python']}, {meta['cpu_count']} CPUs; every engine single-threaded in its own "
        f"worker process, {meta['jobs']} engine(s) at a time; {meta['wall_s']:.0f} s in all). "
        f"Tokenizer: SmolLM2 ({meta['vocab_size']:,} tokens). Corpus: {meta['n_realistic']} realistic schemas "
        f"and {meta['n_suite']} JSON Schema Test Suite groups; {meta['n_valid']} valid and {meta['n_invalid']} invalid "
        f"instances, each serialized with `json.dumps` and tokenized once; every engine walks the same ids. "
        f"Budget: {meta['engine_budget_s']:.0f} s per engine, shared over the schemas (smallest first), at most "
        f"{meta['budget_s']:.0f} s per schema. Method: see the docstring of `benchmarks/bench_peers.py`.",
        "",
        "| engine | version | compiled / refused / timeout / skipped | compile ms p50 / p90 "
        "| step µs p50 / p90 / p99 (steps) | valid accepted | invalid rejected | under-constrained | not reached |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        if "compiled" not in s:
            out.append(
                f"| {s['engine']} | {s.get('version') or '–'} | not available: {s.get('error', '')[:80]} |||||||"
            )
            continue
        crash = f" / {s['crash']} crash" if s["crash"] else ""
        out.append(
            f"| {s['engine']} | {s['version']} | {s['compiled']} / {s['refused']} / {s['timeout']} / {s['skipped']}{crash} "
            f"| {fmt(s['compile_ms_p50'])} / {fmt(s['compile_ms_p90'])} "
            f"| {fmt(s['step_us_p50'])} / {fmt(s['step_us_p90'])} / {fmt(s['step_us_p99'])} ({s['steps']:,}) "
            f"| {s['valid_accepted']}/{s['valid_judged']} | {s['invalid_rejected']}/{s['invalid_judged']} "
            f"| **{s['under_constrained']}** | {s['not_reached']} |"
        )
    out += [
        "",
        "*compile*: each adapter's compile (eager for outlines-core and xgrammar, lazy for constrain and llguidance; "
        "lm-format-enforcer's includes its first mask; see `benchmarks/peers.py`), median of up to 3 runs, over the "
        "schemas it compiled. *step*: one full next-token mask plus advancing by the real token, over every step the "
        "engine walked, closing masks included (engines walk different step sets: they refuse different schemas, "
        "reject at different points, run out of budget). *valid accepted* / *invalid rejected*: instances judged to "
        "the end on schemas the engine compiled; *under-constrained*: invalid instances accepted; *not reached*: "
        "instances of compiled schemas left unjudged when the budget ran out. Accepting a valid instance also needs "
        "the engine to spell `json.dumps`' whitespace, key order and escapes.",
    ]
    inconsistent = [f"{s['engine']} {s['inconsistent']}" for s in summaries if s.get("inconsistent")]
    crashes = [f"{s['engine']} {s['walk_crash']}" for s in summaries if s.get("walk_crash")]
    if inconsistent:
        out += ["", "Mask and advance disagreed (a token in the mask that advance refused, or the reverse) on: "
                + ", ".join(inconsistent) + " instances."]  # fmt: skip
    if crashes:
        out += ["", "Exceptions while walking (instance left unjudged): " + ", ".join(crashes) + "."]
    out += [
        "",
        "## By corpus",
        "",
        "*step on accepted*: step µs over the valid instances the engine accepted (whole walks of real JSON).",
        "",
        "| corpus | engine | compiled / refused / timeout / skipped | valid accepted | invalid rejected "
        "| under-constrained | step on accepted p50 / p90 / p99 (steps) |",
        "|---|---|---|---|---|---|---|",
    ]
    for group, rows_g in by_group.items():
        for s in rows_g:
            if "compiled" not in s:
                continue
            out.append(
                f"| {group} | {s['engine']} | {s['compiled']} / {s['refused']} / {s['timeout']} / {s['skipped']} "
                f"| {s['valid_accepted']}/{s['valid_judged']} | {s['invalid_rejected']}/{s['invalid_judged']} "
                f"| {s['under_constrained']} | {fmt(s['accepted_step_us_p50'])} / {fmt(s['accepted_step_us_p90'])} "
                f"/ {fmt(s['accepted_step_us_p99'])} ({s['accepted_steps']:,}) |"
            )
    out += ["", "## Settings (each engine's defaults unless noted)", ""]
    for s in summaries:
        run = runs.get(s["engine"], {})
        settings = run.get("settings") or {}
        if settings:
            out.append(
                f"* **{s['engine']}** {run.get('version')}: "
                + "; ".join(f"{k}: {v}" for k, v in settings.items())
            )
    out += ["", "## Schemas not compiled", ""]
    for s in summaries:
        run = runs.get(s["engine"], {})
        if not run.get("available"):
            continue
        bad = [(case.name, r) for case, r in zip(cases, run["results"]) if r["status"] != "ok"]
        if bad:
            out.append(f"* **{s['engine']}** ({len(bad)}): " + "; ".join(
                f"`{name}` {r['status']}" + (f" ({r.get('error', '')[:100]})" if r["status"] != "skipped" else "")
                for name, r in bad
            ))  # fmt: skip
    warned = []
    for s in summaries:
        run = runs.get(s["engine"], {})
        if not run.get("available"):
            continue
        notes = [(case.name, r["warnings"]) for case, r in zip(cases, run["results"]) if r.get("warnings")]
        if notes:
            examples = "; ".join(f"`{name}`: {w[0][:140]}" for name, w in notes[:3])
            warned.append(f"* **{s['engine']}** warned on {len(notes)} schemas, e.g. {examples}")
    if warned:
        out += ["", "## Compile warnings (features an engine dropped or approximated)", ""] + warned
    out += ["", f"## Verdicts that differ from the label ({len(rows)} instances)", ""]
    out += ["| case | label | instance | engines that got it wrong |", "|---|---|---|---|"]
    for row in rows:
        engines = "<br>".join(f"{e}: {v}" for e, v in row["engines"].items()).replace("|", "\\|")
        text = row["text"][:90].replace("|", "\\|")
        out.append(f"| `{row['case']}` | {row['label']} | {row['note']}: `{text}` | {engines} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few schemas, smaller budgets")
    parser.add_argument("--engines", default=",".join(ENGINE_ORDER), help="comma-separated engine names")
    parser.add_argument(
        "--budget", type=float, default=30.0, help="at most this many seconds per engine and schema"
    )
    parser.add_argument(
        "--engine-budget", type=float, default=None, help="seconds per engine for the whole corpus"
    )
    parser.add_argument("--min-budget", type=float, default=1.0, help="at least this many seconds per schema")
    parser.add_argument(
        "--grace", type=float, default=3.0, help="a worker this late past its budget is killed"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="engines run at once (each in its own single-threaded worker)"
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", nargs=3, metavar=("ENGINE", "STDERR", "CONTEXT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(*args.worker)
    if args.engine_budget is None:
        args.engine_budget = 30.0 if args.quick else 240.0

    run_start = time.monotonic()
    setup = _common.load_setup(TOKENIZER)
    tokenizer, vocabulary = setup.tokenizer, setup.vocabulary
    quick_realistic = [
        "tool_get_weather", "tool_send_email", "tool_sql_query", "pydantic_person", "api_payment_intent",
        "config_cron_jobs",
    ]  # fmt: skip
    corpus_start = time.monotonic()
    realistic = load_realistic(tokenizer, vocabulary, quick_realistic if args.quick else None)
    suite = load_suite(tokenizer, vocabulary, ["type", "required", "minimum"] if args.quick else SUITE_FILES)
    # smallest schemas first: an engine that runs out of budget loses the biggest ones
    cases = sorted(suite + realistic, key=lambda case: len(json.dumps(case.schema)))
    n_valid = sum(i.label == "valid" for c in cases for i in c.instances)
    n_invalid = sum(i.label == "invalid" for c in cases for i in c.instances)
    print(
        f"{len(realistic)} realistic schemas, {len(suite)} suite groups; {n_valid} valid, {n_invalid} invalid instances"
        f" (corpus built in {time.monotonic() - corpus_start:.0f} s)",
        flush=True,
    )

    context_path = write_context(setup)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    runs: dict[str, dict[str, Any]] = {}
    # the slow engines first, so the fast ones fill the other slot
    queue = sorted(engines, key=lambda e: SCHEDULE.index(e) if e in SCHEDULE else len(SCHEDULE))
    lock = threading.Lock()

    def slot() -> None:
        while True:
            with lock:
                if not queue:
                    return
                engine = queue.pop(0)
            runs[engine] = run_engine(engine, cases, args, context_path)

    threads = [threading.Thread(target=slot) for _ in range(max(1, args.jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os.unlink(context_path)
    summaries = [summarize(engine, runs[engine], cases) for engine in engines]
    by_group = {
        group: [summarize(engine, runs[engine], cases, group) for engine in engines]
        for group in ("realistic", "suite")
    }
    rows = disagreements(cases, runs, tokenizer)

    meta = {
        **_common.machine(),
        "tokenizer": TOKENIZER,
        "vocab_size": vocabulary.size,
        "quick": args.quick,
        "jobs": args.jobs,
        "budget_s": args.budget,
        "engine_budget_s": args.engine_budget,
        "n_realistic": len(realistic),
        "n_suite": len(suite),
        "n_valid": n_valid,
        "n_invalid": n_invalid,
    }
    meta["wall_s"] = time.monotonic() - run_start
    text = markdown(meta, summaries, by_group, rows, cases, runs)
    print()
    print(text)
    if not args.no_write:
        detail = []
        for c, case in enumerate(cases):
            entry: dict[str, Any] = {
                "case": case.name,
                "group": case.group,
                "options": case.options,
                "skipped": case.skipped,
                "instances": [
                    {"label": i.label, "note": i.note, "tokens": len(i.ids)} for i in case.instances
                ],
                "engines": {},
            }
            for engine, run in runs.items():
                if not run.get("available"):
                    continue
                r = run["results"][c]
                steps = [x for rec in r.get("instances", []) for x in rec.get("steps_us", [])]
                entry["engines"][engine] = {
                    "status": r["status"],
                    "error": r.get("error"),
                    "warnings": r.get("warnings", []),
                    "compile_ms": statistics.median(r["compile_ms"]) if r.get("compile_ms") else None,
                    "step_us_p50": percentile(steps, 50),
                    "step_us_p99": percentile(steps, 99),
                    "steps": len(steps),
                    "wall_s": r.get("wall_s"),
                    "verdicts": [
                        {k: v for k, v in rec.items() if k != "steps_us"}
                        | {"steps": len(rec.get("steps_us", []))}
                        for rec in r.get("instances", [])
                    ],
                }
            detail.append(entry)
        payload = {
            "meta": meta,
            "engines": {e: {k: v for k, v in runs[e].items() if k not in ("results",)} for e in engines},
            "summary": summaries,
            "summary_by_corpus": by_group,
            "disagreements": rows,
            "cases": detail,
        }
        _common.write_results("peers", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
