#!/usr/bin/env python
"""Grammar benchmark: the Lark CFG backend on the bundled JSON and SQL grammars, next to
llguidance, xgrammar and transformers-cfg.

Run with ``python benchmarks/bench_cfg.py`` (``--quick`` for a smaller corpus and shorter
peer budgets, ``--tokenizer mistral|llama3`` for another offline tokenizer,
``--engines constrain,xgrammar`` for a subset, ``--no-peer`` for constrain alone). It
prints markdown tables and writes ``benchmarks/results/cfg.json`` and ``cfg.md``
(``--output DIR/NAME.json`` writes ``NAME.json`` and ``NAME.md`` there instead,
``--no-write`` neither).

Methodology
-----------
* **Corpus.** Documents are generated from fixed seeds: JSON values of random
  shape (nested objects and arrays, escaped and non-ASCII strings, numbers with
  fractions and exponents, compact or indented), and SQL queries from a template
  generator (joins, predicates, grouping, ordering, CTEs, subqueries, set
  operations, CASE/CAST, random keyword case). Every document is checked to parse
  with lark first. Each is tokenized once with ``tokenize_continuation``; every
  engine gets the same ids.
* **Split.** Corpus A warms caches; corpus B (different documents) is measured.
  *cold* = a freshly compiled guide walking corpus B with nothing built yet (every
  lexer walk and mask is computed on first need); *warm* = the same guide, after
  an untimed walk over corpus A, walking corpus B. For a warm guide, a step whose
  exact state (or stack signature) was seen before costs a cache lookup; a new
  one costs a walk over cached lexer nodes plus the parser.
* **Mask time** is the ``fill_bitmask`` call of each step (the packed int32 mask
  a sampler applies), including the closing step where EOS is picked; ``advance``
  is timed separately. The garbage collector is off during timed sections.
* *precomputed* = a fresh guide after ``guide.precompute()`` (the vocabulary walked
  from every lexer context's start; its time is added to the compile column), then
  walking corpus B.
* **Compile time** is the median of ``--repeats`` fresh compiles over a shared
  ``Vocabulary`` (its walk tables, a per-tokenizer one-time cost, are built
  before); lark's own LALR construction is reported alone as well: the bundled
  grammars ship lark's tables (``constrain/cfg/shipped.py``), so their compile builds
  no lark parser, where a grammar of the caller's pays it. Peers likewise get their per-tokenizer preprocessing
  (llguidance's tokenizer, xgrammar's ``TokenizerInfo``, transformers-cfg's token
  trie) built once, outside the compile figure.
* **Verdict** per document and engine: *accepted* when every token was in the mask
  (and taken by the engine's advance) and EOS was in the mask after the last one;
  otherwise *rejected at step k* (k counts from 0; k = the document's token count
  means it could not end). Acceptance is reported per engine because each peer
  reads the grammar with its own semantics (below).
* **Peers.** Each is single-threaded (the thread variables are 1; xgrammar's
  ``GrammarCompiler(max_threads=1, cache_enabled=False)``, so a repeated compile is
  not a cache hit), warms up with an untimed walk over corpus A, then walks corpus B;
  its step time is its mask call. Every peer walk has a time budget
  (``--peer-budget`` s, 60; 4 with ``--quick``): documents left when it runs out are
  *not reached*, and the accepted column then reads ``a/measured of total``.

  - *llguidance* compiles the same ``.lark`` text (``LLMatcher.grammar_from_lark``);
    its step is ``llguidance.numpy.fill_next_token_bitmask`` then ``consume_token``.
    Its lexer is its own (not lark's contextual one).
  - *xgrammar* has no lexer: its grammars are character-level, so a lark grammar has
    to be translated. :func:`lark_to_xgrammar_ebnf` does it mechanically from lark's
    parsed rules: rules keep their ``[x]``/``*``/``+``/alternatives structure, regex
    terminals become ``Regex("...")``, case-insensitive strings become per-letter
    classes, and every terminal is preceded by ``ws``, a loop over the ``%ignore``
    terminals (a whitespace class enters it as ``[...]*``, a form xgrammar handles
    far faster than a rule). That language is a superset of lark's: keywords are not
    reserved where a name also fits, and two tokens may touch where lark's
    longest-match lexer would have read one (``SELECTa``); on valid documents the
    verdicts are comparable. For JSON there are two more rows: :data:`JSON_GBNF`, an RFC 8259
    grammar written by hand in the GBNF style (character classes, no regex; the same
    text transformers-cfg gets), and xgrammar's ``compile_builtin_json_grammar()``
    (objects or arrays at the top level only, whitespace ``[ \\n\\r\\t]*``). For a grammar
    that ignores more than whitespace (SQL's comments) a second translation leaves the
    comments out of ``ws``: a subset language (the corpus has no comments), shown
    because comments allowed before every token dominate xgrammar's mask time. Step:
    ``GrammarMatcher.fill_next_token_bitmask`` then ``accept_token``.
  - *transformers-cfg* takes GBNF only, through ``GrammarConstrainedLogitsProcessor``
    called with ``input_ids`` growing by one token per call, so its step time (the
    processor call) includes advancing by the previous token. It needs GPT-2's
    ``byte_encoder`` on the tokenizer class under transformers 5 and reloads the
    tokenizer files as a class it supports. JSON only: sql.lark is left-recursive
    (``query_body``, ``or_expr``, ``comparison``...) and its stack-based parser
    recurses without end on left recursion (a ``RecursionError`` on
    ``e ::= e "+" t | t``), so its SQL row reads n/a. At milliseconds a step (p99 in
    the hundreds) it is also the engine the time budget cuts short.
* **One thread**: the OpenMP/BLAS/Rayon thread variables are set to 1.
"""

from __future__ import annotations

import _common

_common.single_threaded()

import argparse  # noqa: E402
import ast  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Protocol  # noqa: E402

import lark  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from constrain.cfg import compile_grammar  # noqa: E402
from constrain.cfg.grammar import load_grammar_source  # noqa: E402
from constrain.guide import allocate_bitmask  # noqa: E402
from constrain.testing import cache_dir, load_offline_tokenizer, tokenize_continuation, token_text  # noqa: E402
from constrain.vocabulary import Vocabulary  # noqa: E402

ENGINES = ("constrain", "llguidance", "xgrammar", "transformers-cfg")
ACCEPTED = "accepted"
NOT_REACHED = "not reached"

# ---------------------------------------------------------------------- corpus


def json_documents(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    words = ["alpha", "beta", "Zürich", "naïve café", "東京", "emoji 😀", 'quote "q"', "back\\slash", "tab\tnew\nline"]

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth >= 4 or roll < 0.35:
            return rng.choice([
                rng.randint(-10**6, 10**6), round(rng.uniform(-1e3, 1e3), rng.randint(0, 6)),
                rng.choice([1e-7, 6.02e23, -2.5e-3]), rng.choice(words), True, False, None, "",
            ])  # fmt: skip
        if roll < 0.7:
            return {f"{rng.choice(words).split()[0]}_{i}": value(depth + 1) for i in range(rng.randint(0, 5))}
        return [value(depth + 1) for _ in range(rng.randint(0, 5))]

    docs = []
    for _ in range(count):
        doc = {"id": rng.randint(1, 10**5), "data": value(0), "tags": [rng.choice(words) for _ in range(3)]}
        docs.append(json.dumps(doc, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.3))
    return docs


def sql_queries(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    tables = ["orders", "customer", "lineitem", "part", "supplier", "nation", "events", "users"]
    columns = ["id", "name", "price", "quantity", "created_at", "status", "region", "amount", "o_orderdate",
               "l_discount", "l_extendedprice", "c_acctbal", "total"]  # fmt: skip

    def kw(word: str) -> str:
        return word.upper() if rng.random() < 0.6 else word.lower()

    def col(alias: str | None = None) -> str:
        name = rng.choice(columns)
        return f"{alias}.{name}" if alias and rng.random() < 0.5 else name

    def literal() -> str:
        return rng.choice([str(rng.randint(0, 1000)), f"{rng.uniform(0, 100):.2f}", f"'{rng.choice(tables)}'",
                           f"{kw('date')} '199{rng.randint(0, 9)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}'"])  # fmt: skip

    def expr(alias: str | None, depth: int = 0) -> str:
        roll = rng.random()
        if depth > 1 or roll < 0.4:
            return col(alias) if rng.random() < 0.7 else literal()
        if roll < 0.6:
            return f"{expr(alias, depth + 1)} {rng.choice(['+', '-', '*', '/'])} {expr(alias, depth + 1)}"
        if roll < 0.75:
            return f"{rng.choice(['sum', 'avg', 'min', 'max', 'count'])}({col(alias)})"
        if roll < 0.85:
            return (f"{kw('case')} {kw('when')} {col(alias)} > {literal()} {kw('then')} {expr(alias, depth + 1)} "
                    f"{kw('else')} 0 {kw('end')}")  # fmt: skip
        if roll < 0.92:
            return f"{kw('cast')}({col(alias)} {kw('as')} {rng.choice(['integer', 'decimal(12, 2)', 'text'])})"
        return f"{kw('extract')}({kw('year')} {kw('from')} {col(alias)})"

    def predicate(alias: str | None, depth: int = 0) -> str:
        roll = rng.random()
        if roll < 0.35:
            return f"{col(alias)} {rng.choice(['=', '<', '>', '<=', '>=', '<>'])} {literal()}"
        if roll < 0.45:
            return f"{col(alias)} {kw('between')} {literal()} {kw('and')} {literal()}"
        if roll < 0.55:
            return f"{col(alias)} {kw('in')} ({', '.join(literal() for _ in range(rng.randint(1, 4)))})"
        if roll < 0.62:
            return f"{col(alias)} {kw('like')} '%{rng.choice(tables)}%'"
        if roll < 0.7:
            return f"{col(alias)} {kw('is')} {kw('not')} {kw('null')}"
        if roll < 0.75 and depth == 0:
            return f"{kw('exists')} ({query(depth + 1)})"
        if roll < 0.8 and depth == 0:
            return f"{col(alias)} {kw('in')} ({query(depth + 1)})"
        return f"{predicate(alias, depth + 1)} {kw(rng.choice(['and', 'or']))} {predicate(alias, depth + 1)}"

    def query(depth: int = 0) -> str:
        table = rng.choice(tables)
        alias = table[0] if rng.random() < 0.5 else None
        items = ", ".join(
            expr(alias) + (f" {kw('as')} c{i}" if rng.random() < 0.4 else "") for i in range(rng.randint(1, 4))
        )
        text = f"{kw('select')} {kw('distinct') + ' ' if rng.random() < 0.1 else ''}{items} {kw('from')} {table}"
        if alias:
            text += f" {alias}"
        for _ in range(rng.randint(0, 2) if depth == 0 else 0):
            other = rng.choice(tables)
            join = rng.choice(["join", "left join", "inner join", "right outer join", "full join"])
            text += f" {kw(join)} {other} {kw('on')} {col(alias)} = {other}.{rng.choice(columns)}"
        if rng.random() < 0.7:
            text += f" {kw('where')} {predicate(alias, depth)}"
        if rng.random() < 0.3:
            text += f" {kw('group by')} {col(alias)}"
            if rng.random() < 0.5:
                text += f" {kw('having')} {kw('count')}(*) > {rng.randint(1, 9)}"
        if depth == 0 and rng.random() < 0.4:
            text += f" {kw('order by')} {col(alias)} {kw(rng.choice(['asc', 'desc']))}"
        if depth == 0 and rng.random() < 0.3:
            text += f" {kw('limit')} {rng.randint(1, 100)}"
        return text

    out = []
    for _ in range(count):
        text = query()
        roll = rng.random()
        if roll < 0.15:
            text = f"{kw('with')} recent {kw('as')} ({query(1)}) {text}"
        elif roll < 0.25:
            text = f"{query(1)} {kw(rng.choice(['union all', 'union', 'except', 'intersect']))} {query(1)}"
        out.append(text + (";" if rng.random() < 0.5 else ""))
    return out


# ---------------------------------------------------------------------- grammars for the peers

#: RFC 8259 JSON text in GBNF, the language of grammars/json.lark (whitespace around
#: every token, the same string escapes and number syntax), in the dialect that both
#: xgrammar and transformers-cfg parse. A string's plain characters are one class
#: repeated (``[^...]*``), escapes between such runs: xgrammar handles a repeated class
#: specially, and with a ``char*`` rule instead its p90 mask time was ~18 ms, not ~35 µs.
JSON_GBNF = r"""
root ::= ws value ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" [^"\\\x00-\x1f]* ( "\\" escape [^"\\\x00-\x1f]* )* "\""
escape ::= ["\\/bfnrt] | "u" hex hex hex hex
hex ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws ::= [ \t\n\r]*
"""


def _ebnf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ebnf_literal(text: str, flags: Any) -> str:
    """A string terminal; case-insensitive ones (``"select"i``) as one class per letter."""
    if "i" not in flags:
        return _ebnf_string(text)
    return " ".join(f"[{c.lower()}{c.upper()}]" if c.lower() != c.upper() else _ebnf_string(c) for c in text)


def _escape_controls(regex: str) -> str:
    """Control characters as ``\\xNN`` escapes: xgrammar refuses them raw in a regex or a class."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", regex)


def _split_ignored(compiled: lark.Lark, leave_out: frozenset[str]) -> tuple[list[str], list[str]]:
    """The ``%ignore`` terminals: each repeated character class as ``[...]*``, and the others' names."""
    spaces, others = [], []
    for terminal in compiled.terminals:
        if terminal.name in compiled.ignore_tokens and terminal.name not in leave_out:
            pattern = _escape_controls(terminal.pattern.value)
            if terminal.pattern.type == "re" and re.fullmatch(r"\[(?:\\.|[^\]\\])*\]\+", pattern):
                spaces.append(pattern[:-1] + "*")
            else:
                others.append(terminal.name)
    return spaces, others


def lark_to_xgrammar_ebnf(text: str, leave_out: frozenset[str] = frozenset()) -> str:
    """Translate a lark grammar into xgrammar's EBNF (see the module docstring for the semantics).

    Rules come from lark's own parse of the grammar (before its EBNF is expanded into
    BNF, which would multiply ``[a] [b] [c]`` into eight alternatives); terminal
    patterns from the compiled grammar, where references between terminals are
    resolved. ``ws``, the text every terminal may be preceded by, loops over the
    ``%ignore`` terminals except those named in ``leave_out``. An ignored terminal that
    is one character class repeated (``WS: /[ \t\n\r]+/``) enters it as the class
    itself, ``[ \t\n\r]*``, with the other ignored terminals between such runs: as a
    ``Regex`` rule inside a loop it made xgrammar's SQL masks ~100× slower. Regex
    flags, template rules and repetition ranges raise ``ValueError``.
    """
    from lark.load_grammar import load_grammar

    compiled = lark.Lark(text, parser="lalr")
    parsed, _ = load_grammar(text, "<grammar>", None, False)
    spaces, others = _split_ignored(compiled, leave_out)
    gap = " ".join(spaces)
    loop = f"( ( {' | '.join(others)} ) {gap} )*" if others else ""

    def rhs(node: Any) -> str:
        if isinstance(node, (lark.load_grammar.NonTerminal, lark.load_grammar.Terminal)):
            return node.name
        kind, children = node.data, node.children
        if kind == "expansions":
            return "( " + " | ".join(rhs(c) for c in children) + " )"
        if kind == "expansion":
            return " ".join(rhs(c) for c in children) or '""'
        if kind == "alias":  # `a b -> name`: the tree shape, not the language
            return rhs(children[0])
        if kind == "maybe":
            return rhs(children[0]) + "?"
        if kind == "expr" and len(children) == 2 and children[1] in ("*", "+", "?"):
            return rhs(children[0]) + str(children[1])
        if kind == "value" and isinstance(children[0], lark.Tree):  # an anonymous literal in a rule
            token = children[0].children[0]
            if token.type != "STRING":
                raise ValueError(f"anonymous regex {token} in a rule is not translated")
            close = token.rindex('"')
            return f"( ws {_ebnf_literal(ast.literal_eval(token[: close + 1]), token[close + 1 :])} )"
        if kind == "value":
            return rhs(children[0])
        raise ValueError(f"lark construct {kind!r} is not translated")

    lines = ["root ::= start ws", f"ws ::= {gap} {loop}".rstrip() if gap or loop else 'ws ::= ""']
    for name, params, tree, _options in parsed.rule_defs:
        if params:
            raise ValueError(f"template rule {name} is not translated")
        lines.append(f"{name} ::= {rhs(tree)}")
    for terminal in compiled.terminals:
        pattern = terminal.pattern
        if terminal.name in compiled.ignore_tokens and terminal.name not in others:
            continue  # left out, or inlined into ws
        if pattern.type == "str":
            body = _ebnf_literal(pattern.value, pattern.flags)
        elif pattern.flags:
            raise ValueError(f"regex flags {sorted(pattern.flags)} of {terminal.name} are not translated")
        else:
            body = f"Regex({_ebnf_string(_escape_controls(pattern.value))})"
        lines.append(f"{terminal.name} ::= {'' if terminal.name in compiled.ignore_tokens else 'ws '}{body}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- peers


class PeerMatcher(Protocol):
    """One document's state in one peer engine."""

    def fill(self) -> None:
        """Compute the next-token mask (the timed call)."""

    def allowed(self, token_id: int) -> bool:
        """Whether the last mask allows ``token_id``."""

    def advance(self, token_id: int) -> bool:
        """Feed the token; False when the engine refuses it."""


@dataclass
class PeerRow:
    """One peer row of a grammar's table: a compile function, or the reason it is n/a."""

    engine: str
    label: str
    note: str
    compile: Callable[[], Callable[[], PeerMatcher]] | None = None


class LLGuidanceMatcher:
    def __init__(self, matcher: Any, bitmask: np.ndarray, fill: Callable[..., None]) -> None:
        self.matcher, self.bitmask, self._fill = matcher, bitmask, fill

    def fill(self) -> None:
        self._fill(self.matcher, self.bitmask, 0)

    def allowed(self, token_id: int) -> bool:
        return _common.bit_is_set(self.bitmask[0], token_id)

    def advance(self, token_id: int) -> bool:
        return bool(self.matcher.consume_token(token_id)) and not self.matcher.is_error()


class LLGuidancePeer:
    """llguidance on the grammar's own lark text; a fresh ``LLMatcher`` (its compile) per document."""

    engine = "llguidance"

    def __init__(self, tokenizer: Any, vocabulary: Vocabulary) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg, self.llg_numpy = llguidance, llguidance.numpy
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocabulary.size)
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, vocabulary.size)

    def rows(self, name: str, text: str) -> list[PeerRow]:
        grammar = self.llg.LLMatcher.grammar_from_lark(text)

        def compile_() -> Callable[[], PeerMatcher]:
            first = self.llg.LLMatcher(self.tokenizer, grammar)
            if first.is_error():
                raise ValueError(first.get_error())
            return lambda: LLGuidanceMatcher(self.llg.LLMatcher(self.tokenizer, grammar), self.bitmask,
                                             self.llg_numpy.fill_next_token_bitmask)  # fmt: skip

        label = f"llguidance {_common.version('llguidance')}"
        return [PeerRow(self.engine, label, f"{name}.lark as is (grammar_from_lark)", compile_)]


class XGrammarMatcher:
    def __init__(self, matcher: Any, bitmask: Any) -> None:
        self.matcher, self.bitmask, self.bits = matcher, bitmask, bitmask.numpy()[0]

    def fill(self) -> None:
        self.matcher.fill_next_token_bitmask(self.bitmask)

    def allowed(self, token_id: int) -> bool:
        return _common.bit_is_set(self.bits, token_id)

    def advance(self, token_id: int) -> bool:
        return bool(self.matcher.accept_token(token_id))


class XGrammarPeer:
    """xgrammar on EBNF translations of the grammar and, for JSON, its built-in grammar."""

    engine = "xgrammar"

    def __init__(self, tokenizer: Any, vocabulary: Vocabulary) -> None:
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocabulary.size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgrammar.allocate_token_bitmask(1, vocabulary.size)

    def _row(self, label: str, note: str, ebnf: str | None) -> PeerRow:
        """A row compiling ``ebnf``, or xgrammar's built-in JSON grammar when it is None."""

        def factory() -> Callable[[], PeerMatcher]:
            if ebnf is None:
                compiled = self.compiler.compile_builtin_json_grammar()
            else:
                compiled = self.compiler.compile_grammar(ebnf)
            return lambda: XGrammarMatcher(self.xgr.GrammarMatcher(compiled), self.bitmask)

        return PeerRow(self.engine, f"xgrammar {_common.version('xgrammar')}, {label}", note, factory)

    def rows(self, name: str, text: str) -> list[PeerRow]:
        rows = []
        if name == "json":
            rows.append(self._row("GBNF", "JSON_GBNF, written by hand", JSON_GBNF))
        variants = [(f"from {name}.lark", frozenset())]
        _, others = _split_ignored(lark.Lark(text, parser="lalr"), frozenset())
        if others:  # comments: a variant without them shows what they cost
            variants.append((f"from {name}.lark without {', '.join(others)}", frozenset(others)))
        for label, leave_out in variants:
            try:
                ebnf = lark_to_xgrammar_ebnf(text, leave_out)
            except ValueError as exc:
                rows.append(PeerRow(self.engine, f"xgrammar, {label}", f"n/a: {_common.describe(exc)}"))
                continue
            note = f"lark_to_xgrammar_ebnf, {len(ebnf.splitlines())} rules" + (
                f"; a subset: {', '.join(sorted(leave_out))} not allowed" if leave_out else "")  # fmt: skip
            rows.append(self._row(label, note, ebnf))
        if name == "json":
            rows.append(self._row("built-in JSON", "compile_builtin_json_grammar(): top-level object or array only",
                                  None))  # fmt: skip
        return rows


class TransformersCfgMatcher:
    """transformers-cfg as ``generate`` drives it: the processor gets the whole sequence at every call."""

    def __init__(self, processor: Any, vocab_size: int) -> None:
        import torch

        self.torch, self.processor = torch, processor
        self.ids = [0]  # one token of "prompt": the processor reads the tokens after its first call
        self.scores = torch.zeros(1, vocab_size)
        self.mask = np.zeros(vocab_size, dtype=bool)

    def fill(self) -> None:
        scores = self.processor(self.torch.tensor([self.ids]), self.scores)
        self.mask = self.torch.isfinite(scores[0]).numpy()

    def allowed(self, token_id: int) -> bool:
        return bool(self.mask[token_id])

    def advance(self, token_id: int) -> bool:
        self.ids.append(token_id)  # the next processor call applies it
        return True


def load_transformers_cfg_tokenizer(name: str) -> Any:
    """The offline tokenizer ``name`` as a class transformers-cfg accepts, with GPT-2's byte map.

    transformers-cfg checks the tokenizer's class (transformers 5 loads the cached files
    as a generic backend class) and, for byte-level BPE, asks transformers for
    ``byte_encoder`` (gone in transformers 5, where it tries to download GPT-2 for it).
    The map is set on the base class; SentencePiece tokenizers load as ``LlamaTokenizerFast``.
    """
    import transformers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    encoder = bytes_to_unicode()
    transformers.PreTrainedTokenizerBase.byte_encoder = encoder  # type: ignore[attr-defined]
    decoder = {v: k for k, v in encoder.items()}
    transformers.PreTrainedTokenizerBase.byte_decoder = decoder  # type: ignore[attr-defined]
    load_offline_tokenizer(name)  # makes sure the converted files are cached
    cls = transformers.LlamaTokenizerFast if name == "mistral" else transformers.GPT2TokenizerFast
    return cls.from_pretrained(cache_dir() / "tokenizers" / name)


class TransformersCfgPeer:
    """transformers-cfg on :data:`JSON_GBNF`; its token trie is built once and shared by compiles."""

    engine = "transformers-cfg"

    def __init__(self, tokenizer_name: str, vocabulary: Vocabulary) -> None:
        tokenizer = load_transformers_cfg_tokenizer(tokenizer_name)
        from transformers_cfg.generation.logits_process import GrammarConstrainedLogitsProcessor
        from transformers_cfg.grammar_utils import IncrementalGrammarConstraint

        self.constraint_class, self.processor_class = IncrementalGrammarConstraint, GrammarConstrainedLogitsProcessor
        self.tokenizer, self.vocab_size = tokenizer, vocabulary.size
        seed = IncrementalGrammarConstraint('root ::= "a"\n', "root", tokenizer)
        self.trie, self.homomorphism = seed.byte_trie, seed.homomorphism

    def rows(self, name: str, text: str) -> list[PeerRow]:
        label = f"transformers-cfg {_common.version('transformers-cfg')}"
        if name != "json":
            return [PeerRow(self.engine, label, f"n/a: {name}.lark is left-recursive and transformers-cfg's "
                            "stack-based parser recurses without end on left recursion")]  # fmt: skip

        def compile_() -> Callable[[], PeerMatcher]:
            constraint = self.constraint_class(JSON_GBNF, "root", self.tokenizer, trie=self.trie,
                                               homomorphism=self.homomorphism)  # fmt: skip

            def new() -> PeerMatcher:
                constraint.reset()
                return TransformersCfgMatcher(self.processor_class(constraint), self.vocab_size)

            return new

        return [PeerRow(self.engine, f"{label}, GBNF", "JSON_GBNF, written by hand", compile_)]


def set_up_peers(engines: list[str], tokenizer_name: str, tokenizer: Any, vocabulary: Vocabulary
                 ) -> tuple[list[Any], dict[str, str]]:  # fmt: skip
    """The peers that load, and why the others did not (a peer is optional: it never stops the run)."""
    builders: dict[str, Callable[[], Any]] = {
        "llguidance": lambda: LLGuidancePeer(tokenizer, vocabulary),
        "xgrammar": lambda: XGrammarPeer(tokenizer, vocabulary),
        "transformers-cfg": lambda: TransformersCfgPeer(tokenizer_name, vocabulary),
    }
    peers, unavailable = [], {}
    for engine in engines:
        if engine in builders:
            try:
                peers.append(builders[engine]())
            except Exception as exc:  # noqa: BLE001 - any failure to load makes the peer unavailable
                unavailable[engine] = _common.describe(exc)
                print(f"{engine} unavailable: {unavailable[engine]}", file=sys.stderr)
    return peers, unavailable


# ---------------------------------------------------------------------- timing


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    if not samples_ns:
        return {}
    data = np.array(samples_ns, dtype=np.float64) / 1e3
    return {
        "steps": int(data.size),
        "p50_us": float(np.percentile(data, 50)),
        "p90_us": float(np.percentile(data, 90)),
        "p99_us": float(np.percentile(data, 99)),
        "max_us": float(data.max()),
        "mean_us": float(data.mean()),
    }


def walk_constrain(guide: Any, vocabulary: Vocabulary, docs: list[list[int]], masks: list[int] | None,
                   advances: list[int] | None, cpu: list[int] | None = None) -> list[str]:  # fmt: skip
    """Walk every document; returns each one's verdict. Appends step times (ns) when lists are given.

    ``cpu`` receives the thread CPU time of each mask call: on a shared machine, wall
    time includes waiting for a core; CPU time shows the cost of the work itself.
    """
    out = allocate_bitmask(vocabulary.size)
    eos = min(vocabulary.eos_token_ids)
    verdicts = []
    for ids in docs:
        state = guide.initial_state
        verdict = ACCEPTED
        for step, token in enumerate(ids + [eos]):
            cpu_start = time.thread_time_ns()
            start = time.perf_counter_ns()
            guide.fill_bitmask(state, out)
            middle = time.perf_counter_ns()
            cpu_spent = time.thread_time_ns() - cpu_start
            if masks is not None:
                masks.append(middle - start)
            if cpu is not None:
                cpu.append(cpu_spent)
            if not (out[token >> 5] >> (token & 31)) & 1:
                verdict = f"rejected@{step}"
                break
            if token == eos:
                break
            state = guide.advance(state, token)
            if advances is not None:
                advances.append(time.perf_counter_ns() - middle)
        verdicts.append(verdict)
    return verdicts


def walk_peer(new: Callable[[], PeerMatcher], eos: int, docs: list[list[int]], masks: list[int] | None,
              budget_s: float) -> list[str]:  # fmt: skip
    """Walk every document a peer has time for (``budget_s`` in all); returns each one's verdict."""
    deadline = time.perf_counter() + budget_s
    verdicts = []
    for ids in docs:
        if time.perf_counter() > deadline:
            verdicts.append(NOT_REACHED)
            continue
        matcher = new()
        verdict = ACCEPTED
        for step, token in enumerate(ids + [eos]):
            start = time.perf_counter_ns()
            matcher.fill()
            end = time.perf_counter_ns()
            if masks is not None:
                masks.append(end - start)
            if not matcher.allowed(token) or (token != eos and not matcher.advance(token)):
                verdict = f"rejected@{step}"
                break
        verdicts.append(verdict)
    return verdicts


def summarise(verdicts: list[str]) -> dict[str, Any]:
    """Accepted and measured counts, and ``[document, step]`` of each rejection."""
    rejected = [[doc, int(v.split("@")[1])] for doc, v in enumerate(verdicts) if v.startswith("rejected@")]
    return {"accepted": verdicts.count(ACCEPTED), "measured": len(verdicts) - verdicts.count(NOT_REACHED),
            "rejected": rejected}  # fmt: skip


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure_peer(row: PeerRow, eos: int, tokenized: dict[str, list[list[int]]], repeats: int,
                 budget_s: float) -> dict[str, Any]:  # fmt: skip
    """Compile time, then an untimed walk over corpus A and a timed one over corpus B, each within the budget."""
    result: dict[str, Any] = {"engine": row.engine, "label": row.label, "note": row.note}
    if row.compile is None:
        return result
    masks: list[int] = []
    try:
        result["compile_ms"] = median_ms(row.compile, repeats)
        new = row.compile()
        gc.disable()
        try:
            walk_peer(new, eos, tokenized["train"], None, budget_s)
            verdicts = walk_peer(new, eos, tokenized["test"], masks, budget_s)
        finally:
            gc.enable()
    except Exception as exc:  # noqa: BLE001 - a peer failing on a grammar is a result, not the end of the run
        result["error"] = _common.describe(exc)
        return result
    result.update(summarise(verdicts), verdicts=verdicts, mask=percentiles(masks))
    return result


def measure_constrain(name: str, vocabulary: Vocabulary, tokenized: dict[str, list[list[int]]], repeats: int,
                      entry: dict[str, Any]) -> list[dict[str, Any]]:  # fmt: skip
    """The cold, precomputed and warm rows; per-grammar figures (precompute, advance, sizes) go into ``entry``."""
    compile_ms = median_ms(lambda: compile_grammar(name, vocabulary), repeats)
    rows = []

    def row(mode: str, compile_total: float, verdicts: list[str], masks: list[int], cpu: list[int]) -> None:
        rows.append({"engine": "constrain", "label": f"constrain {mode}", "compile_ms": compile_total,
                     **summarise(verdicts), "verdicts": verdicts, "mask": percentiles(masks),
                     "cpu": percentiles(cpu)})  # fmt: skip

    gc.disable()
    try:
        guide = compile_grammar(name, vocabulary)
        # The bundled grammars' lark tables are shipped (constrain/cfg/shipped.py): no lark build
        entry["tables_shipped"] = guide.grammar._lark is None
        cold: list[int] = []
        cold_cpu: list[int] = []
        row("cold", compile_ms, walk_constrain(guide, vocabulary, tokenized["test"], cold, None, cold_cpu),
            cold, cold_cpu)  # fmt: skip
        guide = compile_grammar(name, vocabulary)
        start_ns = time.perf_counter_ns()
        guide.precompute()
        entry["precompute_ms"] = (time.perf_counter_ns() - start_ns) / 1e6
        pre: list[int] = []
        pre_cpu: list[int] = []
        row("precomputed", compile_ms + entry["precompute_ms"],
            walk_constrain(guide, vocabulary, tokenized["test"], pre, None, pre_cpu), pre, pre_cpu)  # fmt: skip
        guide = compile_grammar(name, vocabulary)
        walk_constrain(guide, vocabulary, tokenized["train"], None, None)
        warm: list[int] = []
        warm_cpu: list[int] = []
        advances: list[int] = []
        row("warm", compile_ms, walk_constrain(guide, vocabulary, tokenized["test"], warm, advances, warm_cpu),
            warm, warm_cpu)  # fmt: skip
        entry["advance"] = percentiles(advances)
        entry["lexer_states"] = guide.grammar.lexer.num_states
        entry["walk_nodes"] = guide.index.nodes_built
    finally:
        gc.enable()
    return rows


# ---------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--quick", action="store_true", help="smaller corpora (12 + 12), fewer compile repeats, 4 s peer walks")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    parser.add_argument("--no-peer", action="store_true", help="constrain alone (--engines constrain)")
    parser.add_argument("--peer-budget", type=float, default=None,
                        help="seconds for each peer walk over a corpus (default 60, --quick 4)")  # fmt: skip
    parser.add_argument("--output", type=Path, default=_common.RESULTS_DIR / "cfg.json",
                        help="the results JSON; the markdown goes beside it (.md)")  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    engines = ["constrain"] if args.no_peer else [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engines {unknown}; choose among {', '.join(ENGINES)}")
    count = 12 if args.quick else 60
    repeats = args.repeats or (3 if args.quick else 5)
    budget_s = args.peer_budget or (4.0 if args.quick else 60.0)

    tokenizer = load_offline_tokenizer(args.tokenizer)
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    start = time.perf_counter()
    vocabulary.walk_tables()
    walk_ms = (time.perf_counter() - start) * 1e3
    eos = min(vocabulary.eos_token_ids)
    peers, unavailable = set_up_peers(engines, args.tokenizer, tokenizer, vocabulary)
    results: dict[str, Any] = {
        "machine": _common.machine(), "tokenizer": args.tokenizer, "vocab_size": vocabulary.size,
        "quick": args.quick, "walk_tables_ms": walk_ms, "peer_budget_s": budget_s, "engines": engines,
        "versions": _common.versions("llguidance", "xgrammar", "transformers-cfg", "lark"),
        "unavailable": unavailable, "grammars": {},
    }  # fmt: skip

    corpora = {
        "json": (json_documents(1, count), json_documents(2, count)),
        "sql": (sql_queries(1, count), sql_queries(2, count)),
    }
    for name, (train, test) in corpora.items():
        text = load_grammar_source(name)[0]
        oracle = lark.Lark(text, parser="lalr")
        for doc in train + test:
            oracle.parse(doc)
        tokenized = {}
        for label, docs in (("train", train), ("test", test)):
            ids = [tokenize_continuation(tokenizer, doc) for doc in docs]
            ids = [i for i, doc in zip(ids, docs) if token_text(vocabulary, i) == doc.encode("utf-8")]
            tokenized[label] = ids
        entry: dict[str, Any] = {"documents": len(tokenized["test"]), "tokens": sum(len(i) for i in tokenized["test"]),
                                 "doc_tokens": [len(i) for i in tokenized["test"]]}  # fmt: skip
        entry["lark_build_ms"] = median_ms(lambda: lark.Lark(text, parser="lalr"), repeats)
        entry["rows"] = []
        if "constrain" in engines:
            entry["rows"] = measure_constrain(name, vocabulary, tokenized, repeats, entry)
        for peer in peers:
            for row in peer.rows(name, text):
                print(f"{name}: {row.label} ...", file=sys.stderr, flush=True)
                entry["rows"].append(measure_peer(row, eos, tokenized, repeats, budget_s))
        results["grammars"][name] = entry
    results["load_average_end"] = _common.machine()["load_average"]

    text = markdown(results)
    print(text)
    if not args.no_write:
        _common.write_results(args.output.stem, results, text, args.output.parent)


STATS = ("p50_us", "p90_us", "p99_us", "max_us", "mean_us")


def _us(value: float) -> str:
    return f"{value:,.0f}"


def markdown(results: dict[str, Any]) -> str:
    """The results as markdown: the mask-time table, constrain's CPU times, per-grammar notes."""
    m = results["machine"]
    lines = [
        f"## Lark CFG backend — {results['tokenizer']} ({results['vocab_size']:,} tokens), one thread",
        "",
        f"`python benchmarks/bench_cfg.py{' --quick' if results['quick'] else ''}` — {m['date']}, {m['cpu_model']}, "
        f"{m['cpu_count']} CPUs, load average {m['load_average']} at the start and {results['load_average_end']} "
        f"at the end (above 0 the machine was shared: wall times include waiting for a core). Peers get "
        f"{results['peer_budget_s']:.0f} s per walk over a corpus.",
        "",
        "| grammar | engine | compile ms | accepted | mask p50 µs | p90 µs | p99 µs | max µs | mean µs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes, rejections, cpu_rows = [], [], []
    for name, e in results["grammars"].items():
        docs = e["documents"]
        for row in e["rows"]:
            if "mask" not in row:  # n/a for this grammar, or an error
                reason = row.get("error") or row["note"]
                lines.append(f"| {name} | {row['label']} | n/a | – | – | – | – | – | – |")
                notes.append(f"* {name}, {row['label']}: {reason}")
                continue
            accepted = f"{row['accepted']}/{row['measured']}" + (f" of {docs}" if row["measured"] < docs else "")
            p = row["mask"]
            cells = [_us(p[k]) for k in STATS] if p else ["–"] * len(STATS)
            lines.append(f"| {name} | {row['label']} | {row['compile_ms']:,.0f} | {accepted} | {' | '.join(cells)} |")
            if row.get("note"):
                notes.append(f"* {name}, {row['label']}: {row['note']}")
            if row["rejected"]:
                where = ", ".join(f"doc {d} at step {k} of {e['doc_tokens'][d]}" for d, k in row["rejected"][:5])
                more = f" (+{len(row['rejected']) - 5} more)" if len(row["rejected"]) > 5 else ""
                rejections.append(f"* {name}, {row['label']}: {where}{more}")
            if "cpu" in row:
                cpu_rows.append(f"| {name} | {row['label']} | {' | '.join(_us(row['cpu'][k]) for k in STATS)} |")
    for engine, reason in results["unavailable"].items():
        notes.append(f"* {engine}: unavailable ({reason})")
    lines += ["", "Rejections (step k counts from 0; k = the token count means EOS was refused):", ""]
    lines += rejections or ["* none: every engine accepted every document it reached."]
    lines += ["", "Engines:", ""] + notes
    if cpu_rows:
        lines += ["", "Thread CPU time of constrain's mask calls (excludes time spent waiting for a core):", "",
                  "| grammar | engine | p50 µs | p90 µs | p99 µs | max µs | mean µs |",
                  "|---|---|---:|---:|---:|---:|---:|"] + cpu_rows  # fmt: skip
    lines.append("")
    for name, e in results["grammars"].items():
        if "advance" in e:
            lines.append(
                f"* {name}: {e['tokens']} steps measured; lark's own LALR build {e['lark_build_ms']:.0f} ms "
                f"({'not in the compile: its tables are shipped' if e.get('tables_shipped') else 'of the compile'}); "
                f"precompute {e['precompute_ms']:.0f} ms; advance p50 {e['advance']['p50_us']:.0f} µs / "
                f"p99 {e['advance']['p99_us']:.0f} µs; {e['lexer_states']} lexer states, {e['walk_nodes']} token "
                f"walks built."
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
