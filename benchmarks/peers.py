"""Peer constrained-decoding engines behind one small interface, for ``bench_peers.py``.

Every engine is driven the way a generation loop drives it, one token at a time::

    engine = ENGINES["xgrammar"](context)        # tokenizer preprocessing, once
    factory = engine.compile(schema, options)    # raises when the engine refuses the schema
    m = factory()                                # a fresh matcher for one sequence
    m.fill()                                     # compute the next-token mask
    m.allowed(token_id)                          # read one bit of that mask
    m.advance(token_id)                          # feed the token; False when the engine rejects it
    m.can_end()                                  # after the last token (and a final fill): may it stop?

``fill`` + ``advance`` is what a decoding step costs. Two peers (lm-format-enforcer,
transformers-cfg) have no separate advance: they take the whole prefix and apply the
newest token inside their mask call, so their ``advance`` only records the token
(``lazy_advance = True``) and their verdict comes from the mask alone.

Each adapter records its settings (``settings``), in particular its whitespace
policy, because that decides whether ``json.dumps`` output (``", "`` and ``": "``
separators) can be spelled at all.

The peers are optional: an adapter imports its package in ``__init__``, so a missing
package surfaces as an ``ImportError`` when the engine is set up.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from _common import bit_is_set as bit
from _common import version as version_of

class Context:
    """What every adapter gets, loaded only when asked for (a worker restart stays cheap).

    ``token_bytes``/``eos_token_ids``/``vocab_size`` are constrain's vocabulary of the
    tokenizer (exact bytes per id, ``None`` for special ids), computed once by the runner.
    """

    def __init__(
        self,
        token_bytes: list[bytes | None],
        eos_token_ids: list[int],
        eos_id: int,
        vocab_size: int,
        tokenizer_name: str,
        tokenizer_dir: str,
    ) -> None:
        self.token_bytes = token_bytes
        self.eos_token_ids = eos_token_ids
        self.eos_id = eos_id  # the tokenizer's eos_token_id
        self.vocab_size = vocab_size
        self.tokenizer_name = tokenizer_name
        self.tokenizer_dir = tokenizer_dir  # transformers-cfg reloads it as GPT2TokenizerFast

    @functools.cached_property
    def tokenizer(self) -> Any:
        from constrain.testing import load_offline_tokenizer

        return load_offline_tokenizer(self.tokenizer_name)

    @functools.cached_property
    def vocabulary(self) -> Any:
        import constrain

        try:
            return constrain.Vocabulary(
                token_bytes=tuple(self.token_bytes),
                eos_token_ids=frozenset(self.eos_token_ids),
                size=self.vocab_size,
            )
        except TypeError:  # its constructor changed: build it from the tokenizer
            return constrain.Compiler(self.tokenizer).vocabulary


class Matcher:
    """One sequence's state in one engine."""

    def fill(self) -> None:
        raise NotImplementedError

    def allowed(self, token_id: int) -> bool:
        raise NotImplementedError

    def advance(self, token_id: int) -> bool:
        raise NotImplementedError

    def can_end(self) -> bool:
        raise NotImplementedError


class Engine:
    name = ""
    distribution = ""
    lazy_advance = False  # True: advance() only records the token, the next fill() applies it
    settings: dict[str, Any] = {}

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def version(self) -> str:
        return version_of(self.distribution)

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        raise NotImplementedError

    def warnings(self) -> list[str]:
        """Warnings the last compile left (schema features ignored, approximations)."""
        return []


class RejectAll(Matcher):
    """The matcher of an empty language (a schema no instance satisfies)."""

    def fill(self) -> None:
        pass

    def allowed(self, token_id: int) -> bool:
        return False

    def advance(self, token_id: int) -> bool:
        return False

    def can_end(self) -> bool:
        return False


# ---------------------------------------------------------------------- constrain


class ConstrainMatcher(Matcher):
    def __init__(self, guide: Any, rejected: type[Exception]) -> None:
        self.guide = guide
        self.rejected = rejected
        self.state = guide.initial_state
        self.mask = np.zeros((guide.vocab_size + 31) // 32, dtype=np.int32)

    def fill(self) -> None:
        self.guide.fill_bitmask(self.state, self.mask)

    def allowed(self, token_id: int) -> bool:
        return bit(self.mask, token_id)

    def advance(self, token_id: int) -> bool:
        try:
            self.state = self.guide.advance(self.state, token_id)
        except self.rejected:
            return False
        return True

    def can_end(self) -> bool:
        return bool(self.guide.is_final(self.state))


class ConstrainEngine(Engine):
    name = "constrain"
    distribution = "constrain"
    settings = {
        "whitespace": 'whitespace="default": at most one space at a token boundary (compact and json.dumps separators)',
        "additionalProperties absent": "closed (strict_properties=True default): only declared properties",
        "property order": "definition order",
        "compile": "fresh Compiler over the shared Vocabulary (empty guide cache); automaton built lazily",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        import constrain

        self.constrain = constrain
        self.vocabulary = ctx.vocabulary

    @property
    def version(self) -> str:
        return version_of("constrain") + " (working tree)"

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        c = self.constrain
        self._warnings: list[str] = []
        try:
            guide = c.Compiler(self.vocabulary).json_schema(schema, whitespace="default", **options)
        except c.EmptyLanguageError as exc:  # a schema nothing satisfies: a guide that accepts nothing
            self._warnings = [f"EmptyLanguageError: {str(exc)[:200]}"]
            return RejectAll
        return lambda: ConstrainMatcher(guide, c.TokenRejected)

    def warnings(self) -> list[str]:
        return self._warnings


class ConstrainSpecEngine(ConstrainEngine):
    """constrain with the specification's property semantics: an absent ``additionalProperties`` is open."""

    name = "constrain-spec"
    settings = {**ConstrainEngine.settings,
                "additionalProperties absent": "open (strict_properties=False: the JSON Schema default)"}

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        return super().compile(schema, {**options, "strict_properties": False})


# ---------------------------------------------------------------------- xgrammar


class XGrammarMatcher(Matcher):
    def __init__(self, xgr: Any, compiled: Any, eos_id: int, vocab_size: int) -> None:
        import torch

        self.m = xgr.GrammarMatcher(compiled)
        self.mask = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)
        self.tensor = torch.from_numpy(self.mask)  # shares memory with self.mask
        self.eos_id = eos_id

    def fill(self) -> None:
        self.m.fill_next_token_bitmask(self.tensor)

    def allowed(self, token_id: int) -> bool:
        return bit(self.mask[0], token_id)

    def advance(self, token_id: int) -> bool:
        return bool(self.m.accept_token(token_id))

    def can_end(self) -> bool:
        return bit(self.mask[0], self.eos_id)  # the stop token is in the last mask


class XGrammarEngine(Engine):
    name = "xgrammar"
    distribution = "xgrammar"
    settings = {
        "whitespace": "any_whitespace=True (its default): any JSON whitespace, unbounded",
        "additionalProperties absent": "closed (strict_mode=True default)",
        "property order": "definition order",
        "compile": "GrammarCompiler(max_threads=1, cache_enabled=False).compile_json_schema; token masks precomputed",
        "can_end": "stop token set in the mask after the last token",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(ctx.tokenizer, vocab_size=ctx.vocab_size)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True)
        return lambda: XGrammarMatcher(self.xgr, compiled, self.ctx.eos_id, self.ctx.vocab_size)


# ---------------------------------------------------------------------- llguidance


class LLGuidanceMatcher(Matcher):
    def __init__(self, llg_numpy: Any, pristine: Any, vocab_size: int) -> None:
        self.fill_mask = llg_numpy.fill_next_token_bitmask
        self.m = pristine.deep_copy()
        self.mask = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)

    def fill(self) -> None:
        self.fill_mask(self.m, self.mask, 0)

    def allowed(self, token_id: int) -> bool:
        return bit(self.mask[0], token_id)

    def advance(self, token_id: int) -> bool:
        ok = self.m.consume_token(token_id)
        return bool(ok) and not self.m.is_error()

    def can_end(self) -> bool:
        return bool(self.m.is_accepting()) and not self.m.is_error()


class LLGuidanceEngine(Engine):
    name = "llguidance"
    distribution = "llguidance"
    settings = {
        "whitespace": "its JSON default (whitespace_flexible): any JSON whitespace",
        "additionalProperties absent": "open (JSON Schema default)",
        "property order": "declared properties in definition order, then others",
        "compile": "grammar_from_json_schema + LLMatcher construction (lexer built lazily); matchers are deep copies",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg = llguidance
        self.llg_numpy = llguidance.numpy
        self.tokenizer = llguidance.hf.from_tokenizer(ctx.tokenizer, n_vocab=ctx.vocab_size)
        self._warnings: list[str] = []

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        pristine = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if pristine.is_error():
            raise ValueError(pristine.get_error())
        self._warnings = list(pristine.get_grammar_warnings())
        return lambda: LLGuidanceMatcher(self.llg_numpy, pristine, self.ctx.vocab_size)

    def warnings(self) -> list[str]:
        return self._warnings


# ---------------------------------------------------------------------- outlines-core


class OutlinesCoreMatcher(Matcher):
    def __init__(self, oc: Any, index: Any, vocab_size: int) -> None:
        self.g = oc.Guide(index)
        self.mask = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)
        self.address = self.mask.ctypes.data

    def fill(self) -> None:
        # what outlines_core.kernels.torch.fill_next_token_bitmask does after checking the tensor
        self.g.write_mask_into(self.address, self.mask.size, 4)

    def allowed(self, token_id: int) -> bool:
        return bit(self.mask[0], token_id)

    def advance(self, token_id: int) -> bool:
        try:
            self.g.advance(token_id, return_tokens=False)
        except ValueError:
            return False
        return True

    def can_end(self) -> bool:
        return bool(self.g.is_finished())


class OutlinesCoreEngine(Engine):
    name = "outlines-core"
    distribution = "outlines_core"
    settings = {
        "whitespace": 'build_regex_from_schema default whitespace_pattern "[ ]?" (at most one space)',
        "additionalProperties absent": "closed: only declared properties",
        "property order": "definition order",
        "recursion": "max_recursion_depth from the schema's options, else its default 3",
        "compile": "build_regex_from_schema + Index (whole token index built eagerly); RAYON_NUM_THREADS=1",
        "mask": "Guide.write_mask_into on a numpy bitmask (the call its torch kernel makes, without torch)",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        self.oc = outlines_core
        self.build_regex = build_regex_from_schema
        eos = ctx.eos_id
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, piece in enumerate(ctx.token_bytes):
            if piece is not None and token_id != eos:
                by_bytes.setdefault(piece, []).append(token_id)
        self.vocabulary = outlines_core.Vocabulary(eos, by_bytes)

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        depth = options.get("max_recursion_depth", 3)
        regex = self.build_regex(json.dumps(schema), None, depth)
        index = self.oc.Index(regex, self.vocabulary)
        return lambda: OutlinesCoreMatcher(self.oc, index, self.ctx.vocab_size)


# ---------------------------------------------------------------------- lm-format-enforcer


def _lmfe_transformers_shim() -> None:
    """lm-format-enforcer's transformers module imports ``transformers.tokenization_utils``, gone in v5."""
    try:
        from transformers.tokenization_utils import PreTrainedTokenizerBase  # noqa: F401
    except ImportError:
        import transformers

        module = types.ModuleType("transformers.tokenization_utils")
        module.PreTrainedTokenizerBase = transformers.PreTrainedTokenizerBase  # type: ignore[attr-defined]
        sys.modules["transformers.tokenization_utils"] = module


class LMFEMatcher(Matcher):
    PROMPT = [0]  # one token of "prompt": its enforcer keys states by the whole sequence

    def __init__(self, enforcer: Any, eos_id: int, vocab_size: int) -> None:
        self.te = enforcer
        self.eos_id = eos_id
        self.seq = list(self.PROMPT)
        self.mask = np.zeros(vocab_size, dtype=bool)

    def fill(self) -> None:
        allowed = self.te.get_allowed_tokens(self.seq).allowed_tokens
        self.mask[:] = False
        self.mask[allowed] = True  # what its integrations do with the id list: a logits mask

    def allowed(self, token_id: int) -> bool:
        return bool(self.mask[token_id])

    def advance(self, token_id: int) -> bool:
        self.seq.append(token_id)  # applied by the next get_allowed_tokens
        return True

    def can_end(self) -> bool:
        return bool(self.mask[self.eos_id])


class LMFEEngine(Engine):
    name = "lm-format-enforcer"
    distribution = "lm-format-enforcer"
    lazy_advance = True
    settings = {
        "whitespace": "up to 12 consecutive whitespace characters (max_consecutive_whitespaces default)",
        "additionalProperties absent": "closed: only declared properties",
        "property order": "any order",
        "arrays": "at most 20 items when the schema sets no maxItems (max_json_array_length default)",
        "compile": "JsonSchemaParser + TokenEnforcer + the first mask (where its schema errors surface); "
        "masks computed on demand (character-level parser over a token trie)",
        "tokenizer data": "build_token_enforcer_tokenizer_data, after a transformers.tokenization_utils import shim",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        _lmfe_transformers_shim()
        from lmformatenforcer import JsonSchemaParser, TokenEnforcer
        from lmformatenforcer.integrations.transformers import build_token_enforcer_tokenizer_data

        self.parser_class = JsonSchemaParser
        self.enforcer_class = TokenEnforcer
        self.data = build_token_enforcer_tokenizer_data(ctx.tokenizer, vocab_size=ctx.vocab_size)

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        self.parser_class(schema)  # fails here on schemas it cannot parse

        def new() -> Matcher:
            # fresh parser and enforcer per sequence: the enforcer caches by token prefix
            enforcer = self.enforcer_class(self.data, self.parser_class(schema))
            return LMFEMatcher(enforcer, self.ctx.eos_id, self.ctx.vocab_size)

        new().te.get_allowed_tokens(LMFEMatcher.PROMPT)  # first mask: surfaces schema errors at compile time
        return new


# ---------------------------------------------------------------------- transformers-cfg


_SIMPLE_ESCAPES = {"0": 0, "a": 7, "b": 8, "f": 12, "v": 11, "e": 27}
_TCFG_KEEPS = set('xuU"[]rnt\\')


def _utf8_escapes(code_point: int) -> str:
    return "".join(f"\\x{b:02x}" for b in chr(code_point).encode("utf-8"))


def _fix_escapes(text: str, in_class: bool) -> str:
    """Rewrite one literal or class body into the escapes transformers-cfg's parser knows."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            if ord(ch) > 0x7F and not in_class:
                out.append(_utf8_escapes(ord(ch)))
            else:
                out.append(ch)
            i += 1
            continue
        esc = text[i + 1]
        if esc in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[esc]
            digits = text[i + 2 : i + 2 + width]
            cp = int(digits, 16)
            if cp > 0x7F and not in_class:
                out.append(_utf8_escapes(cp))  # its byte mode compares bytes: spell the UTF-8
            else:
                out.append(text[i : i + 2 + width])
            i += 2 + width
            continue
        if esc in _TCFG_KEEPS:
            out.append(text[i : i + 2])
        elif esc in _SIMPLE_ESCAPES:
            out.append(f"\\x{_SIMPLE_ESCAPES[esc]:02x}")
        else:
            out.append(f"\\x{ord(esc):02x}")  # \- \' \/ \? ...: the character itself
        i += 2
    return "".join(out)


_TOKEN = re.compile(
    r'\s+|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\(=|[A-Za-z0-9_][A-Za-z0-9_-]*|\{\s*\d+\s*(?:,\s*-?\d+\s*)?\}|[()|*+?]'
)


def _c_unescape(text: str) -> str:
    """Undo xgrammar's C-style escaping of a printed string (``\\?`` is ``?``, ``\\\\`` is ``\\``)."""
    named = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
            continue
        esc = text[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(esc)
        if width:
            out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        else:
            out.append(named.get(esc, esc))
            i += 2
    return "".join(out)


_REGEX_RULE = re.compile(r'^Regex\(("(?:\\.|[^"\\])*")(?:, json_string=(true|false))?\)$')


MAX_EXPANDED_REPEAT = 4096  # its EBNF parser is quadratic in the grammar's length


def xgrammar_ebnf_to_tcfg(
    ebnf: str, regex_to_ebnf: Callable[[str], str] | None = None, notes: list[str] | None = None
) -> str:
    """Rewrite an EBNF grammar as xgrammar prints it into the dialect transformers-cfg parses.

    * lookahead assertions ``(= ...)`` are dropped (they restrict nothing that the
      rule itself does not; xgrammar uses them to prune);
    * ``X{n, m}`` becomes n copies of X and a chain of helper rules
      ``r_k ::= (X r_{k-1})?`` for the m - n optional ones (transformers-cfg expands
      ``{n,m}`` into m - n + 1 flat alternatives and its ``{0,m}`` forgets the empty
      one); ``{0, -1}`` is ``*``, ``{1, -1}`` is ``+``;
    * escapes its parser lacks (``\\0``, ``\\'``, ``\\-``...) become ``\\xNN``, and
      non-ASCII characters in literals become their UTF-8 bytes;
    * a ``Regex("...", json_string=true)`` rule (how xgrammar keeps a ``pattern``) is
      replaced by ``regex_to_ebnf(pattern)`` (xgrammar's ``Grammar.from_regex``), its
      rules renamed under the rule's name. Approximation: the pattern's characters are
      not JSON-escaped (exact for patterns without ``"``, ``\\`` or control characters);
    * a bound above ``MAX_EXPANDED_REPEAT`` (``maxLength: 65536``) is dropped, with a
      line in ``notes``: its parser is quadratic in the grammar's length.
    """
    lines: list[str] = []
    _convert(ebnf, "", regex_to_ebnf, lines, [0], notes if notes is not None else [])
    return "\n".join(lines) + "\n"


def _convert(
    ebnf: str,
    prefix: str,
    regex_to_ebnf: Callable[[str], str] | None,
    lines: list[str],
    counter: list[int],
    notes: list[str],
) -> None:
    helpers: list[str] = []
    for line in ebnf.splitlines():
        if not line.strip():
            continue
        name, _, rhs = line.partition(" ::= ")
        name = prefix + name
        regex = _REGEX_RULE.match(rhs.strip())
        if regex:
            if regex_to_ebnf is None:
                raise ValueError(f"rule {name} is a Regex(...) and no regex converter was given")
            sub_prefix = f"{name}_re_"
            pattern = _c_unescape(regex.group(1)[1:-1])
            _convert(regex_to_ebnf(pattern), sub_prefix, regex_to_ebnf, lines, counter, notes)
            lines.append(f"{name} ::= {sub_prefix}root")
            continue
        tokens: list[str] = []
        pos = 0
        for match in _TOKEN.finditer(rhs):
            if match.start() != pos:
                raise ValueError(f"cannot read xgrammar rule {name} at {rhs[pos : pos + 60]!r}")
            pos = match.end()
            if not match.group().isspace():
                tokens.append(match.group())
        if pos != len(rhs):
            raise ValueError(f"cannot read xgrammar rule {name} at {rhs[pos : pos + 60]!r}")
        out: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok == "(=":  # lookahead: skip to its closing parenthesis
                depth = 1
                i += 1
                while depth:
                    depth += {"(": 1, "(=": 1, ")": -1}.get(tokens[i], 0)
                    i += 1
                continue
            if tok.startswith("{"):
                numbers = [int(x) for x in re.findall(r"-?\d+", tok)]
                low, high = (numbers[0], numbers[0]) if len(numbers) == 1 else (numbers[0], numbers[1])
                # the atom it repeats: the last token, or the group that ends there
                if out[-1] == ")":
                    depth, j = 0, len(out) - 1
                    while True:
                        depth += {")": 1, "(": -1}.get(out[j], 0)
                        if depth == 0:
                            break
                        j -= 1
                    atom = out[j:]
                    del out[j:]
                else:
                    atom = [out.pop()]
                atom_text = " ".join(atom)
                if len(atom) > 1 and (high < 0 or high > 1):
                    counter[0] += 1
                    helpers.append(f"tcfgatom{counter[0]} ::= {atom_text}")
                    atom_text = f"tcfgatom{counter[0]}"
                if high > MAX_EXPANDED_REPEAT:
                    notes.append(f"{{{low}, {high}}} in rule {name} approximated as {{{low}, }} (unbounded)")
                    high = -1
                if high < 0:
                    if low == 0:
                        out += ["(", atom_text, ")", "*"]
                    else:
                        out += [atom_text] * (low - 1) + ["(", atom_text, ")", "+"]
                else:
                    out += [atom_text] * low
                    optional = high - low
                    if optional > 0:
                        counter[0] += 1
                        base = f"tcfgrep{counter[0]}x"
                        helpers.append(f"{base}1 ::= ( {atom_text} )?")
                        for k in range(2, optional + 1):
                            helpers.append(f"{base}{k} ::= ( {atom_text} {base}{k - 1} )?")
                        out.append(f"{base}{optional}")
                    elif low == 0:
                        out.append('""')
                i += 1
                continue
            if tok.startswith('"'):
                out.append('"' + _fix_escapes(tok[1:-1], in_class=False) + '"')
            elif tok.startswith("["):
                negated = tok.startswith("[^")
                body = tok[2:-1] if negated else tok[1:-1]
                out.append(("[^" if negated else "[") + _fix_escapes(body, in_class=True) + "]")
            elif tok[0].isalnum() or tok[0] == "_":  # a rule name
                out.append(prefix + tok)
            else:
                out.append(tok)
            i += 1
        lines.append(f"{name} ::= {' '.join(out)}")
    lines.extend(helpers)


class TransformersCfgMatcher(Matcher):
    PROMPT = [0]

    def __init__(self, torch: Any, processor: Any, eos_id: int, vocab_size: int) -> None:
        self.torch = torch
        self.p = processor
        self.eos_id = eos_id
        self.seq = list(self.PROMPT)
        self.scores = torch.zeros(1, vocab_size)
        self.mask = np.zeros(vocab_size, dtype=bool)

    def fill(self) -> None:
        out = self.p(self.torch.tensor([self.seq]), self.scores)
        self.mask = self.torch.isfinite(out[0]).numpy()

    def allowed(self, token_id: int) -> bool:
        return bool(self.mask[token_id])

    def advance(self, token_id: int) -> bool:
        self.seq.append(token_id)  # the processor applies it on its next call
        return True

    def can_end(self) -> bool:
        return bool(self.mask[self.eos_id])


class TransformersCfgEngine(Engine):
    name = "transformers-cfg"
    distribution = "transformers-cfg"
    lazy_advance = True
    settings = {
        "front end": "no JSON Schema support: the schema goes through xgrammar's converter "
        "(Grammar.from_json_schema, any_whitespace=True) and is rewritten into its EBNF dialect; "
        "patterns via Grammar.from_regex (characters not JSON-escaped)",
        "whitespace": "as xgrammar: any JSON whitespace",
        "additionalProperties absent": "as xgrammar: closed",
        "property order": "as xgrammar: definition order",
        "compile": "conversion + IncrementalGrammarConstraint (token trie and byte mapping built once, shared)",
        "tokenizer": "the same files loaded as GPT2TokenizerFast (its supported class); GPT-2 byte_encoder shim",
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        import torch
        import transformers
        import xgrammar
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        encoder = bytes_to_unicode()
        # it re-loads fast tokenizers as slow ones and wants GPT-2's byte map on them
        transformers.PreTrainedTokenizerBase.byte_encoder = encoder  # type: ignore[attr-defined]
        transformers.PreTrainedTokenizerBase.byte_decoder = {v: k for k, v in encoder.items()}  # type: ignore[attr-defined]
        from transformers_cfg.generation.logits_process import GrammarConstrainedLogitsProcessor
        from transformers_cfg.grammar_utils import IncrementalGrammarConstraint

        self.torch = torch
        self.xgr = xgrammar
        self.constraint_class = IncrementalGrammarConstraint
        self.processor_class = GrammarConstrainedLogitsProcessor
        self.tokenizer = transformers.GPT2TokenizerFast.from_pretrained(ctx.tokenizer_dir)
        seed = IncrementalGrammarConstraint('root ::= "a"\n', "root", self.tokenizer)
        self.trie = seed.byte_trie
        self.homomorphism = seed.homomorphism
        self._notes: list[str] = []

    def warnings(self) -> list[str]:
        return self._notes[:5]

    def compile(self, schema: Any, options: dict[str, Any]) -> Callable[[], Matcher]:
        ebnf = str(self.xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=True))
        self._notes = []
        grammar = xgrammar_ebnf_to_tcfg(
            ebnf, lambda pattern: str(self.xgr.Grammar.from_regex(pattern)), self._notes
        )
        constraint = self.constraint_class(
            grammar, "root", self.tokenizer, trie=self.trie, homomorphism=self.homomorphism
        )

        def new() -> Matcher:
            constraint.reset()
            processor = self.processor_class(constraint)
            return TransformersCfgMatcher(self.torch, processor, self.ctx.eos_id, self.ctx.vocab_size)

        return new


ENGINES: dict[str, type[Engine]] = {
    e.name: e
    for e in (
        ConstrainEngine,
        ConstrainSpecEngine,
        XGrammarEngine,
        LLGuidanceEngine,
        OutlinesCoreEngine,
        LMFEEngine,
        TransformersCfgEngine,
    )
}
