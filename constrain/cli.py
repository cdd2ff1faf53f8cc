"""Command line: ``constrain generate`` on the offline default model."""

from __future__ import annotations

import argparse
import sys

from .errors import ConstrainError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="constrain", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="generate text that fits a constraint")
    what = gen.add_mutually_exclusive_group(required=True)
    what.add_argument("--regex", help="a regular expression the whole output must match")
    what.add_argument("--choice", nargs="+", help="the output is exactly one of these strings")
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--model", default="smollm2", help="'smollm2' (offline default) or a local model directory")
    gen.add_argument("--max-new-tokens", type=int, default=128)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-k", type=int, default=None)
    gen.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        return _generate(args)
    except ConstrainError as exc:
        print(f"constrain: error: {exc}", file=sys.stderr)
        return 2


def _generate(args: argparse.Namespace) -> int:
    from .compiler import Compiler
    from .models import load_model
    from .sampling import generate

    print("loading model…", file=sys.stderr, flush=True)
    model, tokenizer = load_model(args.model)
    compiler = Compiler(tokenizer, vocab_size=model.get_output_embeddings().weight.shape[0], generation_config=model)
    guide = compiler.regex(args.regex) if args.regex is not None else compiler.choice(args.choice)
    result = generate(
        model, tokenizer, args.prompt, guide, compiler.vocabulary,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed,
    )  # fmt: skip
    print(result.text)
    if not result.complete:
        print(f"constrain: output cut at --max-new-tokens={args.max_new_tokens} before it was complete",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
