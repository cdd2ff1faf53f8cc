"""Command line: ``constrain generate`` on the offline default model, ``constrain explain`` a constraint.

    constrain generate --model-class examples.models:Person --prompt "Invent a person."
    constrain generate --schema schema.json --prompt "..."
    constrain generate --regex '\\d{3}' --prompt "..."
    constrain generate --grammar sql --prompt "Total sales per customer, as SQL."
    constrain explain --schema schema.json --text '{"name": "Ada"}' --dot dfa.dot
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from . import __version__
from .core.shell import capabilities
from .errors import ConstrainError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="constrain", description="Constrained generation with a local model.")
    parser.add_argument("--version", action="version", version=f"constrain {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", help="generate text that fits a constraint")
    _constraint_arguments(gen)
    gen.add_argument("--prompt", required=True, help="the user message (wrapped in the model's chat template)")
    gen.add_argument("--max-new-tokens", type=int, default=256, help="stop (exit 1) if the output is not done by then")
    gen.add_argument("--temperature", type=float, default=0.0, help="0: greedy (the default); above: sampling")
    gen.add_argument("--top-k", type=int, default=None, help="sample from the k likeliest allowed tokens")
    gen.add_argument("--top-p", type=float, default=None, help="sample from the allowed tokens holding this mass")
    gen.add_argument("--seed", type=int, default=None, help="seed for sampling")

    exp = commands.add_parser("explain", help="show the debugging stages of a constraint")
    _constraint_arguments(exp)
    exp.add_argument("--text", help="log how this text is tokenized and walked through the guide")
    exp.add_argument("--dot", type=Path,
                     help="write the byte DFA (a grammar's: its lexer DFA) as Graphviz DOT (and .png if `dot` exists)")
    exp.add_argument("--max-states", type=int, default=500, help="DFA states to explore and draw at most")

    args = parser.parse_args(argv)
    try:
        return _generate(args) if args.command == "generate" else _explain(args)
    except ConstrainError as exc:
        print(f"constrain: error: {exc}", file=sys.stderr)
        return 2


def _constraint_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--regex", help="a regular expression the whole output must match")
    what.add_argument("--choice", nargs="+", help="the output is exactly one of these strings")
    what.add_argument("--schema", type=Path, help="a JSON Schema file")
    what.add_argument("--model-class", help="a Pydantic model as module:Class (the current folder is importable)")
    what.add_argument("--grammar", help="a bundled Lark grammar ('json', 'sql') or a .lark file")
    what.add_argument("--gbnf", type=Path, help="a GBNF grammar file (llama.cpp's format), start rule 'root'")
    what.add_argument("--sql-tables", type=Path,
                      help="a JSON file {table: [columns]}: SQL restricted to that database schema")  # fmt: skip
    parser.add_argument("--model", default="smollm2", help="'smollm2' (offline default) or a local model directory")
    parser.add_argument("--sql-comments", action="store_true",
                        help="let generated SQL hold -- and /* */ comments (off: a small model loops in them)")
    parser.add_argument("--lenient", action="store_true", help="drop schema keywords that cannot be enforced")
    parser.add_argument("--max-recursion-depth", type=int, default=None,
                        help="unroll a recursive schema this deep into a regex (default: a grammar, any depth)")


def _guide(compiler: Any, args: argparse.Namespace) -> Any:
    if args.regex is not None:
        return compiler.regex(args.regex)
    if args.choice is not None:
        return compiler.choice(args.choice)
    if args.grammar == "sql":  # generated SQL: without comments, a small model's favourite loop
        return compiler.sql(None, comments=args.sql_comments)
    if args.gbnf is not None:
        return compiler.gbnf(_read(args.gbnf))
    if args.grammar is not None:
        source = Path(args.grammar)
        return compiler.grammar(source.read_text() if source.suffix == ".lark" and source.is_file() else args.grammar)
    if args.sql_tables is not None:
        return compiler.sql(json.loads(_read(args.sql_tables)), comments=args.sql_comments)
    options = {"lenient": args.lenient, "max_recursion_depth": args.max_recursion_depth}
    if args.schema is not None:
        return compiler.json_schema(_read(args.schema), **options)
    return compiler.json_schema(_import_class(args.model_class), **options)


def _prompt(args: argparse.Namespace) -> str:
    """The prompt, after the tables of ``--sql-tables``: the model must know the names it may use.

    The grammar lets it write only those names; without them in the prompt a small model
    wanders through the grammar's other names (aliases, functions) instead.
    """
    if args.sql_tables is None:
        return str(args.prompt)
    tables = json.loads(_read(args.sql_tables))
    listed = ", ".join(f"{table}({', '.join(columns)})" for table, columns in tables.items())
    return f"Tables: {listed}. {args.prompt}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise ConstrainError(f"cannot read {path}: {exc}") from None


def _import_class(spec: str) -> object:
    module_name, _, name = spec.partition(":")
    if not name:
        raise ConstrainError(f"--model-class wants module:Class, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        found: object = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConstrainError(f"cannot import {spec!r}: {exc}") from None
    return found


@contextmanager
def _step(what: str) -> Iterator[None]:
    """Say what a slow step is doing, then how long it took (on stderr, so stdout stays the result)."""
    print(f"constrain: {what}…", file=sys.stderr, end="", flush=True)
    start = time.perf_counter()
    try:
        yield
    finally:
        print(f" {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def _generate(args: argparse.Namespace) -> int:
    from . import models
    from .compiler import Compiler
    from .sampling import stream

    # The constraint first: a bad one fails in a second, not after the model's load. The
    # tokenizer and the config files give all a Compiler needs (logits width, EOS ids).
    first = " (converting the offline model, once: about 20 s)" if models.converts_on_load(args.model) else ""
    with _step(f"loading the tokenizer{first}"):
        tokenizer = models.load_tokenizer(args.model)
        config = models.load_model_config(args.model)
    with _step("compiling the constraint"):
        compiler = Compiler(tokenizer, vocab_size=config.vocab_size, generation_config=config.generation_config)
        guide = _guide(compiler, args)
    with _step("loading the model"):
        model, tokenizer = models.load_model(args.model, tokenizer=tokenizer)
    if not _fits(compiler, config, model):  # a head wider than config.vocab_size, or other EOS ids
        with _step("compiling the constraint again, for the loaded model's logits width and EOS ids"):
            width = model.get_output_embeddings().weight.shape[0]
            compiler = Compiler(tokenizer, vocab_size=width, generation_config=model)
            guide = _guide(compiler, args)
    chunks = stream(
        model, tokenizer, _prompt(args), guide, compiler.vocabulary,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        seed=args.seed,
    )  # fmt: skip
    for chunk in chunks:  # the text as the model writes it, each chunk whole characters
        sys.stdout.write(chunk)
        sys.stdout.flush()
    sys.stdout.write("\n")
    result = chunks.generation
    if result is None or not result.complete:
        print(f"constrain: output cut at --max-new-tokens={args.max_new_tokens} before it was complete",
              file=sys.stderr)  # fmt: skip
        return 1
    model_class = capabilities(guide).model_class
    if model_class is not None:  # the text parses as the class: say so
        print(f"constrain: a valid {model_class.__name__}", file=sys.stderr)
    return 0


def _fits(compiler: Any, config: Any, model: Any) -> bool:
    """Whether a compiler built from ``config`` (:func:`constrain.models.load_model_config`) fits the
    loaded ``model``: the same logits width, and the same EOS ids declared by its generation config."""
    width = int(model.get_output_embeddings().weight.shape[0])
    return bool(
        width == compiler.vocabulary.size
        and _eos_ids(getattr(model, "generation_config", None)) == _eos_ids(config.generation_config)
    )


def _eos_ids(generation_config: Any) -> frozenset[int]:
    value = getattr(generation_config, "eos_token_id", None)
    if value is None:
        return frozenset()
    return frozenset([int(value)] if isinstance(value, int) else (int(v) for v in value))


def _explain(args: argparse.Namespace) -> int:
    import shutil
    import subprocess

    from .compiler import Compiler
    from .explain import explain
    from .models import load_tokenizer

    with _step("loading the tokenizer"):
        tokenizer = load_tokenizer(args.model)
    with _step("compiling the constraint"):
        guide = _guide(Compiler(tokenizer), args)
    # A regex guide's five stages, or for a grammar guide (the cfg backend) their analogues.
    report = explain(guide, text=args.text, tokenizer=tokenizer, max_states=args.max_states)
    print(report.format())
    if args.dot is not None:  # the byte DFA, or a grammar's lexer DFA
        args.dot.write_text(report.dot)
        print(f"\nDOT written to {args.dot}")
        if shutil.which("dot"):
            png = args.dot.with_suffix(".png")
            subprocess.run(["dot", "-Tpng", str(args.dot), "-o", str(png)], check=False)
            print(f"picture written to {png}")
    return 0 if report.final in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
