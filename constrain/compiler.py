"""The compiler: vocabulary tables built once, shared by every guide it compiles.

Compile once, match many (as in xgrammar): a :class:`Compiler` is made per
tokenizer, holds the byte matrix every token index walks, and caches compiled
guides by their source. The cached guide is never handed out itself: every call
gets its own shallow copy, which shares the compiled tables and caches but carries
that call's ``schema``, ``model_class`` and ``dropped``, so one call can never change
what another call's guide reports or returns.
It also picks the backend: a JSON Schema whose structure is regular compiles to
the regex backend, a recursive one to the Lark CFG backend (``guide.backend``).

With ``cache_dir``, compiled guides also go to disk (see :mod:`constrain.core.diskcache`):
a compilation first looks there, under a hash of the vocabulary and the same key as the
memory cache, and a guide compiled afresh is written there before anyone else sees it.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar, cast

from .errors import ConfigurationError, ConstrainError, GrammarError, UnsupportedSchemaError
from .json_schema.to_grammar import schema_to_grammar
from .json_schema.refs import References
from .json_schema.to_regex import SchemaOptions, WalkResult, load_schema, recursive_refs, schema_walk
from .regex.automaton import DEAD, ByteNFA, LazyDFA
from .core.collector import while_paused
from .core.diskcache import DiskCache, Storable
from .core.limits import Limits
from .regex.guide import RegexGuide
from .unique_items import UniqueItemsGuide
from .regex.index import TokenIndex
from .regex.parse import literal_choice, parse_regex
from .regex.tree import Node
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from .cfg import CFGGuide
    from .triggered import Trigger, TriggeredGuide

__all__ = ["Compiler"]

_G = TypeVar("_G", bound="RegexGuide | CFGGuide | UniqueItemsGuide")


class Compiler:
    """Compiles patterns into guides over one vocabulary.

    ``tokenizer_or_vocabulary`` is a Hugging Face tokenizer or a
    :class:`Vocabulary`; ``vocab_size`` (the model's logits width),
    ``eos_token_ids`` and ``generation_config`` are passed to
    :meth:`Vocabulary.from_tokenizer`. ``limits`` bound every compilation.

    ``cache_dir`` (a directory, made on first store) keeps compiled guides on disk, so
    another process over the same vocabulary reads them instead of compiling (see
    ``docs/serving.md``); ``disk_cache.stats`` counts what it did. A damaged or unreadable
    entry is never an error: the guide is compiled as if there were no cache.
    """

    def __init__(
        self,
        tokenizer_or_vocabulary: Any,
        *,
        vocab_size: int | None = None,
        eos_token_ids: Iterable[int] | None = None,
        generation_config: Any = None,
        limits: Limits | None = None,
        cache_size: int = 128,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(tokenizer_or_vocabulary, Vocabulary):
            if vocab_size is not None or eos_token_ids is not None:
                raise ConstrainError("vocab_size and eos_token_ids apply to tokenizers, not to a Vocabulary")
            self.vocabulary = tokenizer_or_vocabulary
        else:
            self.vocabulary = Vocabulary.from_tokenizer(
                tokenizer_or_vocabulary,
                size=vocab_size,
                eos_token_ids=eos_token_ids,
                generation_config=generation_config,
            )
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"limits must be a constrain.Limits, not {limits!r}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigurationError(f"cache_size must be an integer ≥ 0, not {cache_size!r}")
        if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
            raise ConfigurationError(f"cache_dir must be a path, not {cache_dir!r}")
        self.limits = limits or Limits()
        #: The disk cache of compiled guides, when ``cache_dir`` was given.
        self.disk_cache = None if cache_dir is None else DiskCache(cache_dir, self.vocabulary, _storable)
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @while_paused
    def regex(self, pattern: str, *, limits: Limits | None = None) -> RegexGuide:
        """A guide for text that ``re.fullmatch(pattern, text)`` accepts.

        ``\\d``, ``\\w`` and ``\\s`` are ASCII classes and ``.`` is any character but a
        newline (unless ``(?s)``); lookarounds and backreferences raise
        :class:`~constrain.NonRegularPatternError`.
        """
        return self._cached(("regex", pattern), lambda: parse_regex(pattern), pattern, limits)

    @while_paused
    def choice(self, options: Sequence[str], *, limits: Limits | None = None) -> RegexGuide:
        """A guide for exactly one of ``options``, matched literally (no regex syntax)."""
        options = tuple(options)
        label = "choice(" + ", ".join(repr(o) for o in options[:5]) + (", ...)" if len(options) > 5 else ")")
        return self._cached(("choice", options), lambda: literal_choice(options), label, limits)

    @while_paused
    def json_schema(
        self, schema: Any, *, limits: Limits | None = None, remotes: Mapping[str, Any] | None = None, **options: Any
    ) -> "RegexGuide | CFGGuide | UniqueItemsGuide":
        """A guide for JSON text valid under ``schema`` (dict, JSON text or Pydantic model class).

        ``options`` are those of :class:`~constrain.json_schema.SchemaOptions`
        (``whitespace``, ``lenient``, ``max_recursion_depth``, ``strict_properties``,
        ``any_value_depth``). A keyword that cannot be enforced raises
        :class:`~constrain.UnsupportedSchemaError` naming it and its JSON pointer; with
        ``lenient=True`` it is dropped, listed in ``guide.dropped`` and warned about.

        ``remotes`` maps absolute URIs to the schema documents that remote ``$ref``s
        point to (nothing is fetched). A recursive schema (a ``$ref`` cycle) compiles to the CFG backend, unless
        ``max_recursion_depth`` asks to unroll it into a regex; ``guide.backend`` says
        which ("regex" or "cfg"). Where the schema has ``uniqueItems`` arrays of strings, the
        guide is a :class:`~constrain.UniqueItemsGuide` around that one, which refuses repeats.
        """
        loaded = load_schema(schema)
        settings = SchemaOptions(**options)
        refs = References(loaded, remotes)
        # schema_walk only hands ``remotes`` on to References, which takes any Mapping.
        given_remotes = cast("dict[str, Any] | None", remotes)
        # dict(): json.dumps takes no other Mapping (a MappingProxyType raised TypeError here)
        remotes_json = None if remotes is None else dict(remotes)
        text = json.dumps([loaded, remotes_json], sort_keys=True)
        if settings.max_recursion_depth is None and recursive_refs(loaded, refs):
            # Writing the grammar builds every terminal's automaton (to leave dead ones out), so
            # the whole guide is cached by the schema: a second call only walks for its metadata.
            walks: list[WalkResult] = []

            def build() -> "CFGGuide":
                automata = _TerminalAutomata(self.vocabulary, limits or self.limits)
                grammar = schema_to_grammar(
                    loaded, remotes=remotes, limits=limits or self.limits, alive=automata.alive,
                    delegate_unique=True, **options,
                )
                walks.append(grammar.walk)
                try:
                    return self._build_grammar_of_trees(grammar.text, grammar.terminals, automata)
                except GrammarError as exc:  # our own grammar, so the schema's fault, said in its terms
                    if "LALR" not in str(exc):
                        raise
                    raise UnsupportedSchemaError(
                        "$ref", "#", "the grammar backend's LALR(1) parser cannot tell apart the branches of an "
                        "anyOf or oneOf around the recursive reference whose members share spellings",
                        "no option drops it; max_recursion_depth=N unrolls the recursion into a regex instead",
                    ) from None

            guide: RegexGuide | CFGGuide | UniqueItemsGuide = self._cached_guide(
                ("json_schema_grammar", text, settings, limits or self.limits), build
            )
            walk = walks[0] if walks else schema_walk(
                loaded, settings, rules=True, limits=limits or self.limits, remotes=given_remotes, delegate_unique=True
            )
        else:
            walk = schema_walk(loaded, settings, limits=limits or self.limits, remotes=given_remotes,
                               delegate_unique=True)  # fmt: skip
            key = ("json_schema", text, settings)
            label = f"json_schema({json.dumps(loaded)[:50]}...)"
            guide = self._cached(key, lambda: walk.tree, label, limits)
        if walk.unique:  # the arrays of strings whose items must differ: checked as the text comes
            guide = UniqueItemsGuide(guide, walk.unique, limits or self.limits)
        return _for_call(guide, schema=loaded, dropped=walk.dropped, ignored=walk.ignored,
                         model_class=schema if isinstance(schema, type) else None)

    @while_paused
    def grammar(
        self,
        source: str,
        *,
        start: str = "start",
        always_accept: tuple[str, ...] | None = None,
        limits: Limits | None = None,
    ) -> "CFGGuide":
        """A guide for text that lark's LALR parser accepts: Lark grammar text, or ``"json"`` / ``"sql"``.

        Raises :class:`~constrain.GrammarError` naming the rule or terminal at fault, and
        :class:`~constrain.LimitExceededError` past one of ``limits`` (default: the compiler's).
        """
        from .cfg import compile_grammar

        limits = limits or self.limits
        key = ("grammar", source, start, always_accept, limits)
        return self._cached_guide(
            key,
            lambda: compile_grammar(
                source, self.vocabulary, start=start, always_accept=always_accept, limits=limits
            ),
        )

    @while_paused
    def gbnf(self, text: str, *, start: str = "root", limits: Limits | None = None) -> "RegexGuide | CFGGuide":
        """A guide for text that GBNF grammar ``text`` (llama.cpp's format) derives from rule ``start``.

        A grammar without recursion compiles to the regex backend (one automaton for the
        whole language); a recursive one to the CFG backend, with every recursion-free
        stretch as one regex terminal (``guide.backend`` says which). Raises
        :class:`~constrain.GrammarError` (a :class:`~constrain.gbnf.GBNFError`, with
        ``rule`` and ``line``) for syntax errors, undefined rules, left recursion and
        grammars lark's LALR cannot take; ``docs/cfg.md`` ("GBNF") lists what is supported.
        """
        from .gbnf import translate_gbnf

        limits = limits or self.limits
        translation = translate_gbnf(text, start)
        if translation.tree is not None:
            tree = translation.tree
            return self._cached(("gbnf", text, start), lambda: tree, f"gbnf({text[:50]!r})", limits)
        lark_text = cast(str, translation.lark_text)  # set whenever there is no single tree
        return translation.with_gbnf_names(
            lambda: self._grammar_of_trees(lark_text, translation.terminals, limits)
        )

    @while_paused
    def triggered(self, triggers: "Trigger | Sequence[Trigger]", **options: Any) -> "TriggeredGuide":
        """Free text until a trigger string, then its guide (see :class:`~constrain.TriggeredGuide`).

        ``options`` are the guide's: ``max_free_tokens``, ``require_trigger``, ``then``, ``max_calls``.
        """
        from .triggered import TriggeredGuide

        return TriggeredGuide(triggers, self.vocabulary, **options)

    @while_paused
    def tools(
        self, tools: Any, *, name_key: str = "name", arguments_key: str = "arguments", **options: Any
    ) -> "RegexGuide | CFGGuide | UniqueItemsGuide":
        """A guide for one tool call as JSON, ``{"name": NAME, "arguments": {...}}``, the arguments
        fitting the named tool's parameters (see :func:`~constrain.triggered.tools_schema` for what
        ``tools`` may be). ``options`` are :meth:`json_schema`'s."""
        from .triggered import tools_schema

        return self.json_schema(tools_schema(tools, name_key=name_key, arguments_key=arguments_key), **options)

    @while_paused
    def tool_calls(
        self, tools: Any, *, start: str = "<tool_call>", end: str = "</tool_call>", then: str = "eos",
        require_trigger: bool = True, max_free_tokens: int | None = None, max_calls: int | None = None,
        **options: Any,
    ) -> "TriggeredGuide":
        """Free text, then ``start``, one call of :meth:`tools` and ``end``; ``then="loop"`` allows more
        calls, at most ``max_calls`` of them (None: no bound)."""
        from .triggered import Trigger, TriggeredGuide

        trigger = Trigger(start, self.tools(tools, **options), end)
        return TriggeredGuide(trigger, self.vocabulary, then=then, require_trigger=require_trigger,
                              max_free_tokens=max_free_tokens, max_calls=max_calls)  # fmt: skip

    def _grammar_of_trees(self, text: str, terminals: Mapping[str, Node], limits: Limits) -> "CFGGuide":
        """A grammar guide whose terminals are regex-backend trees (a GBNF grammar's skeleton), cached."""
        return self._cached_guide(
            ("grammar-of-trees", text, tuple(terminals.items()), limits),
            lambda: self._build_grammar_of_trees(text, terminals, _TerminalAutomata(self.vocabulary, limits)),
        )

    def _build_grammar_of_trees(
        self, text: str, terminals: Mapping[str, Node], built: "_TerminalAutomata"
    ) -> "CFGGuide":
        """The guide of Lark ``text`` whose terminals are the trees ``terminals`` names, their automata
        taken from ``built`` (where the grammar writer may have made them already)."""
        from .cfg import compile_grammar

        automata = {name: built.automaton(tree) for name, tree in terminals.items()}
        return compile_grammar(text, self.vocabulary, limits=built.limits, automata=automata)

    @while_paused
    def sql(
        self, tables: Mapping[str, Sequence[str]] | None = None, *, comments: bool = False, canonical: bool = True,
        limits: Limits | None = None,
    ) -> "CFGGuide":
        """A guide for generated SQL: the bundled dialect, its table and column names from ``tables``
        (table name → column names; None: any names), and no comments unless ``comments=True``:
        a model that starts a ``--`` comment can stay in it. Keywords come in capitals, names as
        ``tables`` spells them, one space between tokens, unless ``canonical=False`` (every
        spelling SQL reads: a small model wrote ``InSert`` with blank lines between tokens).
        ``grammar("sql")`` keeps lark's exact bundled grammar."""
        from .cfg import compile_sql

        limits = limits or self.limits
        named = None if tables is None else tuple((table, tuple(columns)) for table, columns in tables.items())
        key = ("sql", named, comments, canonical, limits)
        return self._cached_guide(
            key, lambda: compile_sql(tables, self.vocabulary, comments=comments, canonical=canonical, limits=limits)
        )

    def _cached(
        self, key: tuple[Any, ...], parse: Callable[[], Node], source: str, limits: Limits | None
    ) -> RegexGuide:
        limits = limits or self.limits

        def build() -> RegexGuide:
            tree = parse()
            dfa = LazyDFA(ByteNFA(tree, limits, self.vocabulary.byte_alphabet))
            return RegexGuide(TokenIndex(dfa, self.vocabulary), source, tree)

        return self._cached_guide(key + (limits,), build)

    def _cached_guide(self, key: tuple[Any, ...], build: Callable[[], _G]) -> _G:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                cached: _G = self._cache[key]  # built by the same kind of call: the key says which
                return _for_call(cached)
        guide = self._from_disk(key, build)
        with self._lock:
            guide = self._cache.setdefault(key, guide)  # another thread may have built it meanwhile
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return _for_call(guide)

    def _from_disk(self, key: tuple[Any, ...], build: Callable[[], _G]) -> _G:
        """The guide for ``key`` read from the disk cache, else built (and stored, if it can be).

        It is stored before the memory cache holds it: no other thread can be walking it (and
        filling its caches) while it is written.
        """
        disk = self.disk_cache
        digest = None if disk is None else disk.digest(key)
        if disk is None or digest is None:
            return build()
        loaded = disk.load(digest)
        if loaded is not None:
            found: _G = loaded  # the key names the kind of call, so the kind of guide
            return found
        guide = build()
        disk.store(digest, guide)
        return guide


class _TerminalAutomata:
    """The regex-backend automaton of each terminal tree of a grammar, built once.

    The grammar writer asks whether a tree matches any text (:meth:`alive`) before it names
    a terminal for it; the grammar then uses the same automata.
    """

    def __init__(self, vocabulary: Vocabulary, limits: Limits) -> None:
        self._alphabet = vocabulary.byte_alphabet
        self.limits = limits
        self._deadline = time.monotonic() + limits.timeout_s
        self._built: dict[Node, LazyDFA] = {}

    def automaton(self, tree: Node) -> LazyDFA:
        found = self._built.get(tree)
        if found is None:
            found = self._built[tree] = LazyDFA(ByteNFA(tree, self.limits, self._alphabet, deadline=self._deadline))
        return found

    def alive(self, tree: Node) -> bool:
        return self.automaton(tree).start != DEAD


def _storable() -> Storable:
    """What a disk cache file may hold: the compiled artefacts of both backends, nothing else.

    The list is explicit (the reader creates nothing a file names unless it is here), so a new
    class in a compiled guide makes that guide unencodable, not stored, until it is added; the
    disk cache tests check that the guides they compile are stored. What walks build lazily
    (token index rows, some holding closures; mask index nodes) is not here: guides are stored
    as compiled, before any walk. The vocabulary's own tables are written as references.
    Regex tree nodes leave out their cached hash: it is of str hashes, which differ per process.
    """
    from .cfg import grammar, guide as cfg_guide, index as cfg_index, lark_adapter, lexer, pyregex
    from .core import cache, limits
    from .regex import algebra, automaton, guide as regex_guide, index as regex_index, nested, tree

    nodes: tuple[type, ...] = (
        tree.CharSet, tree.Concat, tree.Alt, tree.Repeat, tree.Literals, tree.Members, tree.RuleRef,
        tree.MemberSet, tree.Multiple, tree.Nested, tree.Intersect, tree.Difference, tree.EndsWith,
        tree.Length, tree.Tick,
    )  # fmt: skip
    plain: tuple[type, ...] = (
        limits.Limits, cache.BoundedCache, regex_guide.RegexGuide, regex_index.TokenIndex, automaton.ByteNFA,
        automaton.LazyDFA, automaton._SetSpec, algebra.ProductDFA, algebra.EndsWithDFA, nested.NestedDFA,
        cfg_guide.CFGGuide,
        grammar.CompiledGrammar, grammar.Stacks, cfg_index.MaskIndex, lexer.EmitTable, lexer.LexerDFA,
        pyregex.PriorityNFA, lark_adapter.TerminalSpec, lark_adapter.RuleSpec, lark_adapter.Reduction,
    )  # fmt: skip
    storable: dict[type, tuple[str, ...]] = {cls: () for cls in plain}
    storable.update({cls: ("_hash",) if issubclass(cls, tree._Composite) else () for cls in nodes})
    return storable


def _for_call(guide: _G, **meta: Any) -> _G:
    """A guide of the caller's own: the compiled tables shared, the per-call metadata not.

    Nothing a guide computes depends on ``schema``, ``model_class``, ``dropped`` or ``ignored``;
    they only say where the guide came from and what ``generate`` returns.
    """
    fresh = copy.copy(guide)
    fresh.schema = meta.get("schema")
    fresh.model_class = meta.get("model_class")
    fresh.dropped = tuple(meta.get("dropped", ()))
    fresh.ignored = tuple(meta.get("ignored", ()))
    return fresh
