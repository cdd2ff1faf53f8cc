"""JSON Schema (or a Pydantic model) → one regular language, one walker method per keyword group.

The walker follows the documented Outlines path — one regex per schema node, local
``$ref``s inlined — but builds the regex *tree* directly (``constrain.regex.tree``),
so a schema never round-trips through megabytes of regex text; ``to_regex`` renders
the same tree as text. One rule the peers break is kept everywhere: a keyword the
regex cannot enforce is never dropped silently. It raises
:class:`UnsupportedSchemaError` naming the keyword and its JSON pointer, unless
``lenient=True``, which drops it, records it in ``dropped`` and warns.

Where the regex is deliberately *smaller* than the schema's language (never larger:
over-constrained, not under-constrained), ``docs/json_schema.md`` says so: by default
an object admits only its declared properties, in definition order; integers are
written without fraction or exponent; free-form values nest to a bounded depth.
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import itertools
import json
import math
import re
import time
import warnings
import zlib

import numpy as np
from decimal import Decimal
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator, NoReturn, Sequence
from urllib.parse import urldefrag

from ..errors import (
    ConstrainError, LimitExceededError, PatternError, RecursiveSchemaError, SchemaError, UnsupportedSchemaError,
)
from ..regex.algebra import DEAD, ProductDFA
from ..regex.automaton import ByteNFA, LazyDFA, narrowed, surely_nonempty
from ..regex.counting import endless, plain_spellings
from ..core.limits import Limits
from ..regex.nested import HOLE
from ..skeleton import has_rule_ref
from ..regex.parse import Anchored, parse_ecma_anchored, parse_regex
from ..regex.tree import (
    EMPTY, NOTHING, Alt, CharSet, Concat, Difference, EndsWith, Intersect, Length, Literals, Members, MemberSet, Multiple, Nested, Node, Repeat, RuleRef, Tick, alt, literal, optional,
    render, seq,
)  # fmt: skip
from .presence import IN, OUT, Presence, dependent as depends_on, read as read_condition
from .refs import REWRITTEN, References, UnresolvedReference
from .patterns import (
    BOOLEAN, FORMATS, INTEGER, NEAR_DIGITS, NULL, NUMBER, REGEX_ANCHOR, REGEX_ATOM, REGEX_QUANTIFIER, STRING_CHAR,
    ZERO_BOUNDED, decimal_bound, fraction_clear_of, integer_range,
)

__all__ = [
    "SchemaError", "UnsupportedSchemaError", "RecursiveSchemaError",
    "WHITESPACE", "SchemaOptions", "WalkResult", "load_schema", "schema_walk", "to_regex",
]  # fmt: skip

#: Whitespace presets: what may appear between the tokens of the JSON text.
WHITESPACE = {
    # compact JSON and json.dumps' default separators (", " and ": "), nothing longer
    "default": r"[ ]?",
    # everything RFC 8259 allows, in runs of at most 8 characters (no runaway whitespace)
    "any": r"[ \t\n\r]{0,8}",
    "none": "",
}

# Keywords that constrain an instance (or say where constraints live): the walker reads
# these. Every other keyword is an annotation as far as validation goes — the spec's own
# (``title``, ``readOnly``, ...) or one it does not define (``javaName``, ``x-order``) —
# and a validator ignores it, so ignoring it here is exact.
_ASSERTIONS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "allOf", "anyOf", "oneOf",
    "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items", "additionalItems", "contains",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "dependencies", "$ref", "$dynamicRef", "$recursiveRef",
})  # fmt: skip
# Annotations and structure the specification defines: ignored without a note.
_SPEC_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary",
    "contentMediaType", "contentEncoding", "contentSchema", "$defs", "definitions",
})  # fmt: skip
# The formats draft 2020-12 defines (section 7.3). A validator asserting formats checks
# these, so one that is not implemented is refused rather than ignored.
_SPEC_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
})  # fmt: skip
#: The largest integer ``multipleOf`` built as an automaton (one state per remainder).
_MAX_DIVISOR = 100_000
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


#: Required members a grammar tracks in an object around a recursive reference (a rule per subset
#: of them, see ``to_grammar._Writer.member_set``); past it the members keep definition order.
MAX_TRACKED_REQUIRED = 6


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema becomes a regex.

    ``whitespace``: a :data:`WHITESPACE` preset name or a regex of its own.
    ``lenient``: drop unenforceable keywords (recorded) instead of raising.
    ``max_recursion_depth``: unroll ``$ref`` cycles this many levels (None: refuse).
    ``strict_properties``: an object without ``additionalProperties`` admits only its
    declared properties (the usual wish for generation); False follows the spec's
    default (extra properties with any value).
    ``any_value_depth``: how deep a free-form value (``{}``, ``true``) may nest; None
    (the default): to any depth, exactly (a pushdown automaton, see :class:`Nested`).
    A depth keeps the value a plain regular language (``to_regex`` can render it).
    ``property_order``: ``"definition"`` (declared members in the order the schema
    lists them, as xgrammar and llguidance generate them) or ``"any"`` (the
    specification's reading); None picks ``"any"`` with ``strict_properties=False`` and
    ``"definition"`` otherwise. ``"any"`` costs states: inside every member value the
    automaton remembers which required (and counted) members were seen, so first visits
    multiply; optional members may repeat instead (a parser keeps the last copy). In a
    recursive schema an object around a reference takes any order as a member list
    (see ``to_grammar._Writer.member_set``).
    ``formats``: ``"assert"`` checks ``format`` (the formats this library implements; a
    format the specification defines but this library does not is refused), as
    validators with the format-assertion vocabulary do and as generation wants: a
    ``date`` should look like one. ``"annotate"`` follows draft 2020-12's default
    (format-annotation vocabulary): every ``format`` is an annotation, ignored and listed.
    """

    whitespace: str = "default"
    lenient: bool = False
    max_recursion_depth: int | None = None
    strict_properties: bool = True
    any_value_depth: int | None = None
    property_order: str | None = None
    formats: str = "assert"

    def __post_init__(self) -> None:
        if self.property_order not in (None, "definition", "any"):
            raise SchemaError(f"property_order must be 'definition' or 'any', not {self.property_order!r}")
        if self.formats not in ("assert", "annotate"):
            raise SchemaError(f"formats must be 'assert' or 'annotate', not {self.formats!r}")
        for name in ("lenient", "strict_properties"):
            if not isinstance(getattr(self, name), bool):
                raise SchemaError(f"{name} must be True or False, not {getattr(self, name)!r}")
        for name in ("max_recursion_depth", "any_value_depth"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise SchemaError(f"{name} must be None or an integer ≥ 0, not {value!r}")
        _check_whitespace(self.whitespace)


def _check_whitespace(whitespace: Any) -> None:
    """A preset name, or a regex that only ever matches JSON whitespace (else the output is no JSON:
    ``"defualt"``, a typo, would be read as the regex ``defualt``)."""
    if not isinstance(whitespace, str):
        raise SchemaError(f"whitespace must be a preset name or a regex, not {whitespace!r}")
    if whitespace in WHITESPACE:
        return
    try:
        dfa = LazyDFA(ByteNFA(parse_regex(whitespace), Limits()))
        states = dfa.explore(time.monotonic() + 5)
    except ConstrainError as exc:
        raise SchemaError(f"whitespace {whitespace!r} is no preset and no usable regex: {exc}") from None
    allowed = np.zeros(256, dtype=bool)
    allowed[[0x20, 0x09, 0x0A, 0x0D]] = True
    if any((dfa.row(state)[~allowed] != DEAD).any() for state in range(states)):
        close = difflib.get_close_matches(whitespace, list(WHITESPACE), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SchemaError(
            f"whitespace {whitespace!r} is neither a preset ({', '.join(WHITESPACE)}) nor a regex that "
            f"matches only JSON whitespace (space, tab, newline, carriage return){hint}"
        )


@dataclass
class WalkResult:
    """The schema's tree; in rules mode also the trees of its recursive ``$ref`` targets."""

    tree: Node
    dropped: list[tuple[str, str]] = field(default_factory=list)
    rules: dict[str, Node] = field(default_factory=dict)
    #: (keyword, JSON pointer) of the annotations ignored: keywords the spec does not define, unknown formats.
    ignored: list[tuple[str, str]] = field(default_factory=list)
    #: The ``uniqueItems`` arrays left to the guide (``delegate_unique=True``): each one's instance
    #: path (see ``_Walker.path``), the keyword's JSON pointer, and the item's tree where an item
    #: may run out of completions (``maxLength``; None where every prefix has endless ones). The
    #: tree holds them as plain arrays: without a guide that checks them
    #: (``unique_items.UniqueItemsGuide``) it is weaker.
    unique: list[tuple[tuple[Any, ...], str, Node, bool]] = field(default_factory=list)

    @property
    def regex(self) -> str:
        return render(self.tree)


def load_schema(schema: Any) -> dict[str, Any] | bool:
    """Accept a dict, a bool, JSON text or a Pydantic model class."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, str):
        try:
            loaded = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema text is not JSON: {exc}") from None
        return load_schema(loaded) if isinstance(loaded, (dict, bool)) else _not_a_schema(loaded)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        from .pydantic_schema import class_schema  # as strict as the class, where Pydantic's schema is not

        return class_schema(schema)
    return _not_a_schema(schema)


def _not_a_schema(value: Any) -> NoReturn:
    raise SchemaError(f"a schema must be a dict, bool, JSON text or Pydantic model, not {type(value).__name__}")


def to_regex(schema: Any, **options: Any) -> str:
    """Regex text whose full matches are JSON texts valid under ``schema`` (see :class:`SchemaOptions`)."""
    tree = schema_walk(load_schema(schema), SchemaOptions(**options)).tree
    try:
        return render(tree)
    except TypeError as exc:  # the guide enforces it all the same: compile it instead
        raise SchemaError(f"this schema has no regex text ({exc}); Compiler.json_schema enforces it") from None


def schema_walk(
    schema: Any, options: SchemaOptions = SchemaOptions(), *, rules: bool = False, limits: Limits | None = None,
    remotes: dict[str, Any] | None = None, delegate_unique: bool = False,
) -> WalkResult:
    """The regex tree of a loaded schema, plus the (keyword, pointer) pairs lenient mode dropped.

    With ``rules=True`` (the grammar backend), every ``$ref`` on a cycle becomes a
    :class:`RuleRef` to a rule of its own instead of an error or an unrolling. With
    ``delegate_unique=True`` a ``uniqueItems`` array of strings that the walk reaches through
    members and items alone is built as a plain array and listed in ``unique``, for a guide
    that checks it while it generates (no regular language holds it); the caller must wrap
    the guide, so only the compiler asks for it.
    """
    refs = References(schema, remotes)
    if options.formats == "annotate" and _asserts_formats(schema, refs):
        options = dataclasses.replace(options, formats="assert")
    walker = _Walker(schema, options, recursive_refs(schema, refs) if rules else frozenset(), limits or Limits(),
                     refs=refs)  # fmt: skip
    walker.delegate_unique = delegate_unique
    walker._handoff = ()  # the root applies at the root
    try:
        tree = walker.node(schema, "#")
    except RecursionError:  # a deep structure below max_schema_depth: still named, still a limit
        raise LimitExceededError(
            "max_schema_depth", walker.limits.max_schema_depth,
            "the schema nests too deeply for the walk; lower Limits.max_schema_depth or flatten the schema",
        ) from None
    except UnicodeEncodeError as exc:  # a const, enum value or name "\ud800": valid JSON text, no UTF-8
        surrogate = ascii(exc.object[exc.start : exc.end])
        raise SchemaError(f"a string the guide would write holds a lone surrogate ({surrogate}), which no UTF-8 "
                          "text can spell") from None  # fmt: skip
    if walker.dropped:
        listed = ", ".join(f"{k} at {p}" for k, p in walker.dropped)
        warnings.warn(f"lenient mode dropped keywords the regex cannot enforce: {listed}", stacklevel=3)
    return WalkResult(tree, walker.dropped, walker.rules, walker.ignored, walker.unique)


_FORMAT_ASSERTION = "https://json-schema.org/draft/2020-12/vocab/format-assertion"


def _asserts_formats(schema: Any, refs: References) -> bool:
    """Whether the schema's meta-schema (``$schema``, when its document is known) declares the
    format-assertion vocabulary: then ``format`` asserts, whatever ``formats`` says (draft 2020-12,
    7.2.2; a validator that knows the vocabulary treats ``false`` like ``true``)."""
    meta = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(meta, str):
        return False
    try:
        document, _ = refs.lookup(meta)
    except UnresolvedReference:  # an unknown meta-schema: the default vocabularies
        return False
    vocabulary = document.get("$vocabulary") if isinstance(document, dict) else None
    return isinstance(vocabulary, dict) and _FORMAT_ASSERTION in vocabulary


def recursive_refs(schema: Any, refs: References | None = None) -> frozenset[str]:
    """The ``$ref`` targets (absolute URIs) that can reach themselves through other ``$ref``s."""
    refs = refs or References(schema)
    edges: dict[str, set[str]] = {}

    def refs_in(node: Any) -> set[str]:
        found: set[str] = set()
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                ref = item.get("$ref")
                if isinstance(ref, str):
                    found.add(refs.absolute(ref, refs.base_of(item, refs.root_base)))
                stack.extend(v for k, v in item.items() if k not in ("$defs", "definitions", "const", "enum"))
            elif isinstance(item, list):
                stack.extend(item)
        return found

    frontier = list(refs_in(schema))
    while frontier:
        ref = frontier.pop()
        if ref in edges:
            continue
        try:
            edges[ref] = refs_in(refs.lookup(ref)[0])
        except UnresolvedReference:
            edges[ref] = set()
        frontier.extend(edges[ref])

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), list(edges.get(start, ()))
        while stack:
            ref = stack.pop()
            if ref == goal:
                return True
            if ref not in seen:
                seen.add(ref)
                stack.extend(edges.get(ref, ()))
        return False

    return frozenset(ref for ref in edges if reaches(ref, ref))


@lru_cache(maxsize=512)
def _fragment(pattern: str) -> Node:
    """Parse one of our own regex fragments once."""
    return parse_regex(pattern)


@lru_cache(maxsize=None)
def _regex_format() -> Node:
    """``format: regex`` as JSON text (see ``patterns.REGEX_ATOM``): groups nested
    ``_REGEX_DEPTH`` deep, each level built around the one inside it. A DAG built once, so the
    automaton builder copies a shared level instead of rebuilding it, and its per-node caches
    (``_estimate``, ``_nests``) hold across every use."""
    atom = _json_escaped(_fragment(REGEX_ATOM))
    quantified = optional(_json_escaped(_fragment(REGEX_QUANTIFIER)))
    anchor = _json_escaped(_fragment(REGEX_ANCHOR))
    alternation: Node | None = None
    for _ in range(_REGEX_DEPTH + 1):
        unit = atom if alternation is None else alt(atom, seq(literal("("), optional(literal("?:")), alternation,
                                                              literal(")")))  # fmt: skip
        pieces = Repeat(alt(seq(unit, quantified), anchor), 0, None)
        alternation = seq(pieces, Repeat(seq(literal("|"), pieces), 0, None))
    return alternation  # type: ignore[return-value]  # the loop runs at least once


#: String formats over the string's *value*, built as trees (see ``type_string``).
_VALUE_FORMATS = {"regex": _regex_format}
#: How deep ``format: regex`` nests groups.
_REGEX_DEPTH = 3


class _Walker:
    def __init__(
        self, root: Any, options: SchemaOptions, rule_refs: frozenset[str], limits: Limits, *, over: bool = False,
        refs: References | None = None, distinct_keys: bool = False,
    ) -> None:
        self.root = root
        self.limits = limits
        self.refs = refs or References(root)
        self.base = self.refs.root_base  # the base URI in effect where the walk is
        #: $ref target → its tree, built once (a DAG, not 2^n copies), with the ``uniqueItems``
        #: arrays it left to the guide (paths relative to the target, see ``leave_unique``)
        self._expanded: dict[str, tuple[Node, list[tuple[tuple[Any, ...], str, Node, bool]]]] = {}
        self._deadline = time.monotonic() + limits.timeout_s
        #: How deep the walk is, shared by this walker's superset and unordered walkers (one recursion).
        self._depth = [0]
        self._calls = 0
        #: Build a *superset* of each schema's texts instead of a subset: what ``not`` and
        #: ``oneOf`` subtract must hold every text the guide could write for a value the
        #: subtracted schema accepts (see :meth:`superset`).
        self.over = over
        #: Whether a superset only has to hold texts with distinct keys (see :meth:`distinct_keys_superset`).
        self.distinct_keys = distinct_keys
        self._superset: _Walker | None = None
        self._unordered: _Walker | None = None
        self._distinct_superset: _Walker | None = None
        # a superset takes every order
        order = options.property_order or ("definition" if options.strict_properties else "any")
        self.any_order = over or order == "any"
        self.options = options
        self.rule_refs = rule_refs
        self.rules: dict[str, Node] = {}
        self.ws = _fragment(WHITESPACE.get(options.whitespace, options.whitespace) or "(?:)")
        self.sep = seq(self.ws, literal(","), self.ws)
        self.colon = seq(self.ws, literal(":"), self.ws)
        self.dropped: list[tuple[str, str]] = []
        #: Whether a key language has keys of a group (``grouped_options``), by its ``EndsWith`` node.
        self._key_groups: dict[Node, bool] = {}
        self.ignored: list[tuple[str, str]] = []
        self._ignored_seen: set[tuple[str, str]] = set()
        self._ref_stack: list[str] = []
        #: What ``facts`` read from the document's objects, by (id, depth, base).
        self._facts: dict[tuple[int, int, str], _Facts] = {}
        #: Where in the instance the schema being walked applies, if it applies there whatever
        #: the instance holds elsewhere: the steps from the root, ``("prop", name)`` for a
        #: declared member's value, ``("items", k)`` for the items from index k on, ``("index",
        #: i)`` for a prefix item, ``("keys", matched, unmatched, declared)`` for an undeclared member
        #: whose key the ``matched`` key automata match, the ``unmatched`` ones do not (a class of
        #: ``patternProperties``, or ``additionalProperties``). None below anything conditional (a
        #: branch of ``anyOf``/``oneOf`` unless it alone admits objects or arrays (``typed_alone``),
        #: ``not``, ``if``, ``contains``, a rule, another walker): a node
        #: starts at None unless its caller hands it a path (``node_here``), so a call site that
        #: forgets to is conservative.
        self.path: tuple[Any, ...] | None = None
        self._handoff: tuple[Any, ...] | None = None
        #: Whether a ``uniqueItems`` array of strings is left to the guide (see ``schema_walk``).
        self.delegate_unique = False
        #: The arrays left to the guide: (instance path, pointer), as ``WalkResult.unique``.
        self.unique: list[tuple[tuple[Any, ...], str, Node, bool]] = []

    # ------------------------------------------------------------------ helpers

    def node_here(self, schema: Any, pointer: str, step: tuple[Any, ...] | None = None) -> Node:
        """:meth:`node` for a schema that applies wherever the one being walked does, one ``step``
        further into the instance (a member's value, an item) or, without one, at the same place
        (an ``allOf`` part, a ``$ref`` target)."""
        self._handoff = None if self.path is None else self.path if step is None else (*self.path, step)
        return self.node(schema, pointer)

    def superset(self) -> "_Walker":
        """A walker for the same document that builds supersets (sharing the notes on ignored keywords).

        Where this walker keeps a language *smaller* than the schema's (closed objects,
        definition order, bounded free-form values, numbers without exponents, one
        spelling per string), the superset walker keeps it larger: objects open and in
        any order, free-form values as any text, every spelling of a number or string
        value added, and keywords it cannot build dropped. ``A ∖ superset(B)`` is then
        inside ``A ∖ B``: over-constrained at worst, never weaker.
        """
        if self._superset is None:
            self._superset = _Walker(self.root, self.options, frozenset(), self.limits, over=True, refs=self.refs,
                                     distinct_keys=self.distinct_keys)
            self._superset.ignored, self._superset._ignored_seen = self.ignored, self._ignored_seen
            self._superset._depth = self._depth
        return self._superset

    def unordered(self) -> "_Walker":
        """This walker's polarity with members in any order: for languages that are only
        intersected with (or subtracted from) another object's, whose order then decides."""
        if self.any_order:
            return self
        if self._unordered is None:
            options = dataclasses.replace(self.options, property_order="any")
            self._unordered = _Walker(self.root, options, frozenset(), self.limits, over=self.over, refs=self.refs,
                                      distinct_keys=self.distinct_keys)
            self._unordered.ignored, self._unordered._ignored_seen = self.ignored, self._ignored_seen
            self._unordered._depth = self._depth
        return self._unordered

    def subset(self) -> "_Walker":
        """For a superset walker: a walker that builds subsets again (``not`` inside ``not``).

        It never drops a keyword (no lenient mode): it raises, and the superset walker
        then leaves the negation out instead.
        """
        if self._superset is None:
            options = dataclasses.replace(self.options, lenient=False)
            self._superset = _Walker(self.root, options, frozenset(), self.limits, over=False, refs=self.refs,
                                     distinct_keys=self.distinct_keys)
            self._superset.ignored, self._superset._ignored_seen = self.ignored, self._ignored_seen
            self._superset._depth = self._depth
        return self._superset

    def distinct_keys_superset(self) -> "_Walker":
        """:meth:`superset` for texts that hold no key twice: what a ``not`` subtracts from listed
        values (``enum``/``const``), which the guide writes with each key once.

        For the guide's texts in general a superset of ``maxProperties`` must drop the bound (a
        repeated key counts twice in the text, once in the value), so ``{"enum": [{"a": 1, "b":
        2, "c": 3}], "not": {"maxProperties": 2}}`` lost its only value (MaskBench Synthesized
        maxProperties not_2); where every key is there once, the text has as many members as
        its value, and the bound stays.
        """
        if self.distinct_keys:
            return self.superset()
        if self._distinct_superset is None:
            walker = _Walker(self.root, self.options, frozenset(), self.limits, over=True, refs=self.refs,
                             distinct_keys=True)  # fmt: skip
            walker.ignored, walker._ignored_seen, walker._depth = self.ignored, self._ignored_seen, self._depth
            self._distinct_superset = walker
        return self._distinct_superset

    def unsupported(self, keyword: str, pointer: str, reason: str) -> None:
        if self.over:
            return  # dropping a keyword only widens a superset
        if not self.options.lenient:
            raise UnsupportedSchemaError(keyword, pointer, reason)
        self.dropped.append((keyword, pointer or "#"))

    def resolve(self, ref: str, pointer: str) -> Any:
        """The schema ``ref`` points to from the current base URI (see ``refs.py``)."""
        return self.locate(self.refs.absolute(ref, self.base), ref, pointer)[0]

    def locate(self, absolute: str, ref: str, pointer: str) -> tuple[Any, str]:
        """The target of an absolute reference and the base URI in effect there."""
        try:
            return self.refs.lookup(absolute)
        except UnresolvedReference as exc:
            if urldefrag(absolute)[0] in self.refs.resources:
                raise SchemaError(f"$ref {ref!r} at {pointer} does not resolve: {exc}") from None
            raise UnsupportedSchemaError(
                "$ref", pointer, f"{ref!r} is a remote reference: pass its document in remotes={{uri: schema}}"
            ) from None

    def wrap(self, open_: str, body: Node, close: str) -> Node:
        return seq(literal(open_), self.ws, body, self.ws, literal(close))

    # ------------------------------------------------------------------ schema nodes

    def node(self, schema: Any, pointer: str) -> Node:
        path, self._handoff = self._handoff, None  # (taken first: no later node inherits it)
        if schema is True:
            return self.any_value()
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"schema at {pointer} must be an object or a boolean, not {schema!r}")
        self._calls += 1
        if self._calls % 256 == 0 and time.monotonic() > self._deadline:
            raise LimitExceededError("timeout_s", self.limits.timeout_s,
                                     f"walking the schema took too long (at {pointer})")  # fmt: skip
        if self._depth[0] >= self.limits.max_schema_depth:
            raise LimitExceededError("max_schema_depth", self.limits.max_schema_depth,
                                     f"the schema nests deeper than allowed (at {pointer[:200]}); "
                                     "raise Limits.max_schema_depth")  # fmt: skip
        outer, self.base = self.base, self.refs.base_of(schema, self.base)
        outer_path, self.path = self.path, path
        self._depth[0] += 1
        try:
            return self.schema_node(self.constraints(schema, pointer), pointer)
        finally:
            self._depth[0] -= 1
            self.base = outer
            self.path = outer_path

    def node_at(self, schema: Any, base: str, pointer: str) -> Node:
        """:meth:`node_here` for a reference's target, from the base URI in effect there."""
        outer, self.base = self.base, base
        try:
            return self.node_here(schema, pointer)
        finally:
            self.base = outer

    def schema_node(self, schema: dict[str, Any], pointer: str) -> Node:
        """A schema object's language, its keywords already read by :meth:`constraints`."""
        if "$ref" in schema:
            return self.ref(schema, pointer)
        if "allOf" in schema:
            merged, apart = self.merge_all_of(schema, pointer)
            presence = self.presence(merged, pointer, apart) if apart and not self.over else None
            if presence is not None:  # the branches that stayed apart are conditions on members
                return self.with_presence(merged, presence, pointer)
            side = self.unordered() if apart else self
            nodes = [self.node_here(merged, pointer)] + [side.node(b, f"{pointer}/allOf/{i}") for i, b in apart]
            return NOTHING if NOTHING in nodes else nodes[0] if len(nodes) == 1 else Intersect(tuple(nodes))
        presence = None if self.over else self.presence(schema, pointer)
        if presence is not None:  # which members are there, as the object's own bits, not a product
            return self.with_presence(schema, presence, pointer)
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                return self.any_of(schema, keyword, pointer)
        if "not" in schema:
            return self.negation(schema, pointer)
        if "if" in schema:
            return self.conditional(schema, pointer)
        if "dependentSchemas" in schema:
            return self.dependent_schemas(schema, pointer)
        for keyword in ("unevaluatedProperties", "unevaluatedItems"):
            if keyword in schema:
                self.unsupported(keyword, f"{pointer}/{keyword}", "the regex backend does not implement it")
                schema.pop(keyword)
        if "const" in schema or "enum" in schema:
            return self.literals(schema, pointer)
        return self.typed_union(schema, pointer)

    def constraints(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        """The keywords of ``schema`` that constrain, in 2020-12 spelling; the rest noted in ``ignored``.

        Older drafts' spellings are rewritten to their 2020-12 equivalents: boolean
        ``exclusiveMinimum``/``exclusiveMaximum`` (draft 4), ``dependencies`` (draft 7),
        array ``items`` with ``additionalItems`` (draft 2019-09 and before). ``then`` or
        ``else`` without ``if``, and ``if`` alone, constrain nothing (the spec says so).
        """
        out: dict[str, Any] = {}
        lacks = self.refs.lacks_in(schema)
        for key, value in schema.items():
            if key in _ASSERTIONS and key not in lacks:
                out[key] = value
            elif key not in _SPEC_ANNOTATIONS:
                self.ignore(key, pointer)
        if isinstance(out.get("$ref"), str) and len(out) > 1 and self.refs.ref_overrides:
            for key in out:
                if key != "$ref":
                    self.ignore(key, pointer)  # drafts 3 to 7: beside a $ref it means nothing
            return {"$ref": out["$ref"]}
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(key), bool):
                if out.pop(key) and bound in out:
                    out[key] = out.pop(bound)
        if "dependencies" in out:
            dependencies = out.pop("dependencies")
            if not isinstance(dependencies, dict):
                raise SchemaError(f"dependencies at {pointer} must be an object")
            required = {k: v for k, v in dependencies.items() if isinstance(v, list)}
            schemas = {k: v for k, v in dependencies.items() if not isinstance(v, list)}
            for key, part in (("dependentRequired", required), ("dependentSchemas", schemas)):
                if part:
                    out[key] = {**part, **out.get(key, {})} if isinstance(out.get(key), dict) else part
        if isinstance(out.get("items"), list):
            out["prefixItems"] = out.pop("items")
            if "additionalItems" in out:
                out["items"] = out.pop("additionalItems")
        out.pop("additionalItems", None)  # beside a single-schema (or no) items it constrains nothing
        if "unevaluatedProperties" in out or "unevaluatedItems" in out:
            out = self.unevaluated(out, pointer)
        if "if" not in out:
            out.pop("then", None)
            out.pop("else", None)
        elif "then" not in out and "else" not in out:
            out.pop("if")
        return out

    # ------------------------------------------------------------------ unevaluated*

    def unevaluated(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        """``unevaluatedProperties``/``unevaluatedItems`` rewritten into keywords walked as usual.

        What counts as evaluated is read from the schema (:meth:`evaluation_cases`): the
        names and patterns of ``properties``/``patternProperties`` (everything, with
        ``additionalProperties`` or a nested ``unevaluatedProperties``), the ``prefixItems``
        count, ``items``, ``contains``, through ``allOf`` and ``$ref``. Where that depends on
        which subschemas hold (``anyOf``/``oneOf`` branches, ``if``, ``dependentSchemas``),
        the instance is split into cases: each case states which of them hold and adds
        "whatever that case leaves unevaluated matches the keyword's schema"
        (``additionalProperties`` beside the evaluated names, ``items`` past the prefix),
        and the object must fit one case. Exact; refused (``UnsupportedSchemaError``)
        beyond 16 cases.
        """
        out = dict(schema)
        wanted = {key: out.pop(key) for key in ("unevaluatedProperties", "unevaluatedItems") if key in out}
        wanted = {key: value for key, value in wanted.items() if value is not True}  # true demands nothing
        if not wanted:
            return out
        cases = self.evaluation_cases(out, pointer, next(iter(wanted)))
        if "if" in out and "then" not in out and "else" not in out:
            out.pop("if")  # alone it constrains nothing; the cases carry its annotations
        alternatives = []
        for conds, foot in cases:
            demands = [d for key, value in wanted.items() if (d := foot.demand(key, value)) is not None]
            alternatives.append({"allOf": conds + demands} if conds or len(demands) != 1 else demands[0])
        if any(a == {"allOf": []} for a in alternatives):
            return out  # some case evaluates everything it could demand
        extra = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        out["allOf"] = [*out.get("allOf", []), extra]
        return out

    def evaluation_cases(
        self, schema: Any, pointer: str, keyword: str, seen: frozenset[str] = frozenset()
    ) -> list[tuple[list[Any], "_Footprint"]]:
        """``(conditions, footprint)`` pairs: whenever ``schema`` holds, the conditions of some
        pair hold, and that pair's footprint is what ``schema`` evaluates (or less).

        A branch of ``anyOf``/``oneOf`` is either assumed (its schema becomes a condition,
        its footprint adds) or not: a smaller footprint only demands more, so a case that
        leaves out a holding branch is never the one an instance needs. ``if`` splits into
        holding (with ``then``) and failing (with ``else``); a ``dependentSchemas`` entry into
        present and absent.
        """
        none: list[tuple[list[Any], _Footprint]] = [([], _Footprint())]
        if not isinstance(schema, dict):
            return none

        def cross(left: list[Any], right: list[Any]) -> list[Any]:
            product = [(a + c, f.union(g)) for a, f in left for c, g in right]
            if len(product) > 16:
                raise UnsupportedSchemaError(keyword, f"{pointer}/{keyword}", "what it sees as evaluated "
                                             "depends on too many subschemas (over 16 cases)")  # fmt: skip
            return product

        def assumed(condition: list[Any], sub: Any, where: str) -> list[Any]:
            return [(condition + conds, foot) for conds, foot in self.evaluation_cases(sub, where, keyword, seen)]

        if "$ref" in schema:  # in place: what the target evaluates counts here
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in self.refs.lacks_in(schema)}
            ref = schema["$ref"]
            absolute = self.refs.absolute(ref, self.refs.base_of(schema, self.base)) if isinstance(ref, str) else ""
            if not absolute or absolute in seen:
                return self.evaluation_cases(rest, pointer, keyword, seen)
            target, base = self.locate(absolute, ref, pointer)
            outer, self.base = self.base, base
            try:
                inner = self.evaluation_cases(target, pointer, keyword, seen | {absolute})
            finally:
                self.base = outer
            return cross(inner, self.evaluation_cases(rest, pointer, keyword, seen))
        lacks = self.refs.lacks_in(schema)
        own = {k: v for k, v in schema.items() if k in _ASSERTIONS and k not in lacks}
        if isinstance(own.get("items"), list):  # before 2020-12: items as a list, additionalItems after it
            own["prefixItems"] = own.pop("items")
            if "additionalItems" in own:
                own["items"] = own.pop("additionalItems")
        cases: list[tuple[list[Any], _Footprint]] = [([], _Footprint(
            names=frozenset(own.get("properties") or {}),
            patterns=tuple(own.get("patternProperties") or {}),
            all_properties="additionalProperties" in own or "unevaluatedProperties" in own,
            prefix=len(own.get("prefixItems") or []),
            all_items="items" in own or "unevaluatedItems" in own,
            contains=(own["contains"],) if "contains" in own else (),
        ))]
        for i, branch in enumerate(own.get("allOf") or []):
            cases = cross(cases, self.evaluation_cases(branch, f"{pointer}/allOf/{i}", keyword, seen))
        for key in ("anyOf", "oneOf"):
            for i, branch in enumerate(own.get(key) or []):
                options = assumed([branch], branch, f"{pointer}/{key}/{i}")
                if any(not foot.empty or len(conds) > 1 for conds, foot in options):  # else it changes nothing
                    cases = cross(cases, none + options)
        if "if" in own:
            test, then, otherwise = own["if"], own.get("then", True), own.get("else", True)
            holds = cross(assumed([test], test, f"{pointer}/if"), assumed([then], then, f"{pointer}/then"))
            fails = assumed([{"not": test}, otherwise], otherwise, f"{pointer}/else")
            if any(not foot.empty or len(conds) > 2 for conds, foot in holds + fails):
                cases = cross(cases, holds + fails)
        dependent = own.get("dependentSchemas")
        for name, sub in (dependent.items() if isinstance(dependent, dict) else ()):
            where = f"{pointer}/dependentSchemas/{_escape_pointer(name)}"
            present = assumed([{"required": [name]}, sub], sub, where)
            if any(not foot.empty or len(conds) > 2 for conds, foot in present):
                cases = cross(cases, present + [([{"not": {"required": [name]}}], _Footprint())])
        return cases

    def ignore(self, keyword: str, pointer: str) -> None:
        """Note a keyword that is an annotation for validation (``guide.ignored`` lists them)."""
        entry = (keyword, f"{pointer}/{_escape_pointer(keyword)}" if pointer else keyword)
        if entry not in self._ignored_seen:
            self._ignored_seen.add(entry)
            self.ignored.append(entry)

    def ref(self, schema: dict[str, Any], pointer: str) -> Node:
        ref = schema.pop("$ref")
        if not isinstance(ref, str):
            raise SchemaError(f"$ref at {pointer} must be a string")
        if schema:  # 2020-12: $ref applies beside its siblings
            return self.node_here({"allOf": [{"$ref": ref}, schema]}, pointer)
        ref = self.refs.absolute(ref, self.base)  # one name per target, whatever base it was written from
        if ref in self.rule_refs:
            return self.rule(ref, pointer)
        depth = self._ref_stack.count(ref)
        if depth and self.over and self.options.max_recursion_depth is None:
            return _ANY_TEXT  # a superset may stop at a cycle: any text holds every deeper value
        if depth:
            if self.options.max_recursion_depth is None:
                cycle = " → ".join(self.refs.short(r) for r in self._ref_stack[self._ref_stack.index(ref) :] + [ref])
                raise RecursiveSchemaError(
                    "$ref", pointer,
                    f"the schema is recursive ({cycle}); pass max_recursion_depth=k to unroll it k levels "
                    "into the regex, or use the grammar backend for unbounded depth",
                )  # fmt: skip
            if depth > self.options.max_recursion_depth:
                # deeper nesting is cut off: over-constrained, never invalid (a superset takes anything)
                return _ANY_TEXT if self.over else NOTHING
        memo = self.options.max_recursion_depth is None  # else the tree depends on how deep we are
        if memo and ref in self._expanded:
            tree, left = self._expanded[ref]
            self.leave_unique(left)
            return tree
        self._ref_stack.append(ref)
        here, listed = self.path, len(self.unique)
        try:
            tree = self.node_at(*self.locate(ref, ref, pointer), ref)
        finally:
            self._ref_stack.pop()
        if memo:  # with the arrays it left to the guide, relative to here: a reuse elsewhere leaves them again
            left = ([(path[len(here):], at, item, endless) for path, at, item, endless in self.unique[listed:]]
                    if here is not None else [])  # fmt: skip
            self._expanded[ref] = (tree, left)
        return tree

    def leave_unique(self, arrays: list[tuple[tuple[Any, ...], str, Node, bool]]) -> None:
        """A reused tree's ``uniqueItems`` arrays (paths relative to it), left to the guide from here
        too, or refused where here is not one place in the instance."""
        for relative, at, item, endless in arrays:
            if self.path is None:
                self.unsupported("uniqueItems", at, _UNIQUE_CONDITIONAL)
            else:
                self.unique.append(((*self.path, *relative), at, item, endless))

    def rule(self, ref: str, pointer: str) -> Node:
        """A recursive target as a rule of its own, built once (its body may refer to itself)."""
        name = _rule_name(ref)
        if name not in self.rules:
            self.rules[name] = NOTHING  # placeholder while the body (which refers to it) is built
            outer, self.path = self.path, None  # a rule applies at every depth of its recursion: at no one place
            try:
                self.rules[name] = self.node_at(*self.locate(ref, ref, pointer), ref)
            finally:
                self.path = outer
        return RuleRef(name)

    def deref(self, schema: Any, pointer: str) -> Any:
        """Follow a chain of bare ``$ref``s."""
        seen = set()
        while isinstance(schema, dict) and "$ref" in schema and (
            self.refs.ref_overrides or set(schema) & _ASSERTIONS == {"$ref"}
        ):
            if schema["$ref"] in seen:
                raise SchemaError(f"$ref {schema['$ref']!r} at {pointer} refers only to itself")
            seen.add(schema["$ref"])
            base = self.refs.base_of(schema, self.base)
            schema = self.locate(self.refs.absolute(schema["$ref"], base), schema["$ref"], pointer)[0]
        return schema

    def merge_all_of(self, schema: dict[str, Any], pointer: str) -> tuple[Any, list[tuple[int, Any]]]:
        """Merge ``allOf`` branches into one schema where the merge has a closed form.

        A branch whose keywords clash with what is merged so far (two different
        ``pattern``s, two ``not``s) stays apart, with its index: the caller intersects
        its language with the merged one.
        """
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        apart: list[tuple[int, Any]] = []
        for i, branch in enumerate(schema["allOf"]):
            where = f"{pointer}/allOf/{i}"
            branch = self.deref(branch, where)
            if branch is True:
                continue
            if branch is False:
                return False, []
            if not isinstance(branch, dict):
                raise SchemaError(f"{where} must be a schema")
            branch = self.constraints(branch, where)
            if "allOf" in branch:
                branch, inner = self.merge_all_of(branch, where)
                if branch is False:
                    return False, []
                apart += inner
            try:
                merged = _merge(merged, branch)
            except _Clash:
                apart.append((i, branch))
        return merged, apart

    def conditional(self, schema: dict[str, Any], pointer: str) -> Node:
        """``if``/``then``/``else`` as (rest ∧ if ∧ then) ∨ ((rest ∧ else) minus a superset of if).

        Texts the ``if`` schema's subset holds take the ``then`` side; texts outside its
        superset take the ``else`` side; the few in between are left out (stricter,
        never weaker). A superset keeps both sides without the subtraction.
        """
        test, then, otherwise = schema.pop("if"), schema.pop("then", True), schema.pop("else", True)
        rest = self.node(schema or True, pointer)
        side = self.unordered()
        yes = Intersect((rest, side.node(test, f"{pointer}/if"), side.node(then, f"{pointer}/then")))
        no: Node = Intersect((rest, side.node(otherwise, f"{pointer}/else")))
        if not self.over:
            excluded = self.superset().node(test, f"{pointer}/if")
            no = Difference(no, (excluded,)) if excluded != NOTHING else no
        return alt(yes, no)

    def dependent_schemas(self, schema: dict[str, Any], pointer: str) -> Node:
        """``dependentSchemas``: objects holding a key must also match its schema.

        The rest's texts minus those that hold the key (a superset of them) and do
        not match its schema (a subset of those that do). A superset drops it.
        """
        dependent = schema.pop("dependentSchemas")
        if not isinstance(dependent, dict):
            raise SchemaError(f"dependentSchemas at {pointer} must be an object")
        rest = self.node(schema or True, pointer)
        if self.over:
            return rest
        excluded = []
        for name, sub in dependent.items():
            where = f"{pointer}/dependentSchemas/{_escape_pointer(name)}"
            holding = self.superset().node({"type": "object", "required": [name]}, where)
            excluded.append(Difference(holding, (self.unordered().node(sub, where),)))
        return Difference(rest, tuple(excluded)) if excluded else rest

    def presence(
        self, schema: dict[str, Any], pointer: str, apart: Sequence[tuple[int, Any]] = ()
    ) -> Presence | None:
        """``anyOf``/``oneOf``/``not``/``if``/``dependentSchemas`` beside an object's member
        keywords (and ``allOf`` branches kept ``apart`` from the merge) that only say which
        members are there and of which class their values are, as a truth table (see
        :mod:`.presence`).

        ``oneOf: [{required: [image]}, {required: [build]}]`` says "exactly one of the two":
        a difference of whole object languages (a product searched on every first visit),
        though all it reads is two of the member set's seen bits. Here the object's member
        set checks the table (``MemberSet.condition``). Only where that is exact and small:
        within the bounds of :mod:`.presence`, and no keyword beside the condition that it
        would need. None otherwise: the general way. (A name the object does not declare is
        tracked by ``type_object`` as a member of its own, with the schema it would take.)
        """
        keys = [k for k in _CONDITION_KEYS if k in schema]
        dependent = schema.get("dependentSchemas", {})
        needs = schema.get("dependentRequired", {})
        rest = set(schema) - set(keys) - {"dependentSchemas", "dependentRequired"}
        if not (keys or apart or dependent) or rest - _PRESENCE_SIBLINGS:
            return None
        if not isinstance(schema.get("properties", {}), dict) or not isinstance(dependent, dict):
            return None
        if not isinstance(needs, dict) or not all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in needs.values()
        ):
            return None  # type_object names the error
        if "required" in rest and not isinstance(schema["required"], list):
            return None
        if any(REWRITTEN & set(branch) for _, branch in apart if isinstance(branch, dict)):
            return None  # the walker's own dependentRequired, dependentSchemas, prefixItems: not a condition
        own = {k: schema[k] for k in keys}
        whole = {"allOf": [own, *(branch for _, branch in apart)]}
        texts: dict[str, str] = {}
        classes: dict[str, Any] = {}
        assertions = _ASSERTIONS - self.refs.lacks  # the draft's keywords
        formula = read_condition(whole, assertions, texts, classes)
        if formula is None:
            return None
        # dependentSchemas (or draft 7's dependencies, which the walker renamed): an object
        # holding the name satisfies its schema; the same reading, guarded by the name's bit
        parts = [formula]
        for name, sub in dependent.items():
            inner = read_condition(sub, assertions, texts, classes)
            if inner is None:
                return None
            parts.append(depends_on(name, inner))
        # dependentRequired too: the member set checks it on plain members only, and a name the
        # condition reads by class is two items (MaskBench o11666's "type" lost its dependency)
        parts += [depends_on(name, ("required", tuple(dict.fromkeys(names)))) for name, names in needs.items()]
        where = f"{pointer}/dependentSchemas"
        self.note_unread([(own, pointer), *((branch, f"{pointer}/allOf/{i}") for i, branch in apart),
                          *((sub, f"{where}/{_escape_pointer(name)}") for name, sub in dependent.items())])  # fmt: skip
        return Presence.of(("all", tuple(parts)) if len(parts) > 1 else formula, classes)

    def note_unread(self, pending: list[tuple[Any, str]]) -> None:
        """List in ``ignored`` the unknown keywords inside a condition read as a truth table:
        :mod:`.presence` reads only the assertions, and the walk never visits these subschemas."""
        while pending:
            sub, at = pending.pop()
            if not isinstance(sub, dict):
                continue
            for key, value in sub.items():
                if key not in _ASSERTIONS and key not in _SPEC_ANNOTATIONS:
                    self.ignore(key, at)
                elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                    pending.extend((branch, f"{at}/{key}/{i}") for i, branch in enumerate(value))
                elif key in ("not", "if", "then", "else"):
                    pending.append((value, f"{at}/{key}"))
                elif key == "properties" and isinstance(value, dict):
                    pending.extend((v, f"{at}/properties/{_escape_pointer(name)}") for name, v in value.items())

    def with_presence(self, schema: dict[str, Any], presence: Presence, pointer: str) -> Node:
        """``schema`` without its condition keywords, the condition handed to its object type."""
        for keyword in (*_CONDITION_KEYS, "dependentSchemas", "dependentRequired"):
            schema.pop(keyword, None)
        schema[_PRESENCE] = presence
        return self.typed_union(schema, pointer)

    def any_of(self, schema: dict[str, Any], keyword: str, pointer: str) -> Node:
        branches = schema.pop(keyword)
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{keyword} at {pointer} must be a non-empty list")
        # S ∧ (A ∨ B) = (S ∧ A) ∨ (S ∧ B): siblings move into every branch.
        combined = [{"allOf": [schema, branch]} if schema else branch for branch in branches]
        # oneOf, exactly one branch: each branch minus (supersets of) the others it may overlap;
        # a pair known to be disjoint needs no difference.
        overlaps: list[list[int]] = [[] for _ in branches]
        apart: dict[tuple[int, int], frozenset[str]] = {}  # names whose presence tells two branches apart
        if keyword == "oneOf" and len(branches) > 1:
            facts = [self.facts(b, f"{pointer}/oneOf/{i}") for i, b in enumerate(combined)]
            for i, j in itertools.combinations(range(len(branches)), 2):
                if not facts[i].disjoint(facts[j]):
                    overlaps[i].append(j)
                    overlaps[j].append(i)
                    apart[i, j] = apart[j, i] = facts[i].separators(facts[j])
        if self.over:
            return alt(*(self.over_one_of(combined, overlaps, pointer) if keyword == "oneOf"
                         else [self.node(b, f"{pointer}/{keyword}/{i}") for i, b in enumerate(combined)]))  # fmt: skip
        supersets: dict[int, Node] = {}

        def minus(option: Node, others: list[int]) -> Node:
            """``option`` minus supersets of the branches ``others``."""
            if any(branches[j] is True or (isinstance(branches[j], dict) and not set(branches[j]) & _ASSERTIONS)
                   for j in others):  # fmt: skip
                return NOTHING  # every value matches that branch too (oneOf [true, true]): no search to say so
            parts = []
            for j in others if option != NOTHING else ():
                if j not in supersets:
                    supersets[j] = self.superset().node(branches[j], f"{pointer}/oneOf/{j}")
                if supersets[j] != NOTHING:
                    parts.append(supersets[j])
            return Difference(option, tuple(parts)) if parts else option

        alone = self.typed_alone(combined, f"{pointer}/{keyword}") if self.path is not None and self.delegate_unique \
            else set()  # fmt: skip
        options = []
        for i, branch in enumerate(combined):
            where = f"{pointer}/{keyword}/{i}"
            if self.rule_refs and overlaps[i]:
                kept = self.kept_apart(branch, [(combined[j], facts[j].required - facts[i].required, f"{pointer}/{keyword}/{j}")
                                                for j in overlaps[i]], where)  # fmt: skip
                if kept is not None:
                    options.append(kept)
                    continue
            counts = collections.Counter(name for j in overlaps[i] for name in apart[i, j])
            if not counts:
                options += self.clear_of(branch, [facts[j].required - facts[i].required for j in overlaps[i]], where)
                option = self.node_here(branch, where) if i in alone else self.node(branch, where)
                options.append(minus(option, overlaps[i]))
                continue
            # A tag that is not required (a discriminator left optional: "protocol": {"enum":
            # ["d0"]}) splits the branch. Objects that hold it match no branch whose tag differs,
            # so only the rest is subtracted there; and only objects without it are subtracted
            # from every overlapping branch. The same language, but a difference's liveness
            # search need not find the tag by itself behind every optional member (o21819: ten
            # meters, the search ran out of budget and refused valid instances).
            name = max(counts, key=lambda n: (counts[n], n))
            holding = self.node({"allOf": [branch, {"type": "object", "required": [name]}]}, where)
            lacking = self.node({"allOf": [branch, {"properties": {name: False}}]}, where)
            options.append(minus(holding, [j for j in overlaps[i] if name not in apart[i, j]]))
            options.append(minus(lacking, overlaps[i]))
        return alt(*options)

    def typed_alone(self, branches: list[Any], where: str) -> set[int]:
        """The branches that alone admit objects, or alone arrays: an object (array) at this place
        is valid by that branch or not at all, so what lies inside it applies at one place in the
        instance (``path``) as the branch's own members and items do. (grunt-task: ``files`` is
        an object of arrays of unique strings, or an array.)"""
        kinds = [self.facts(b, f"{where}/{i}").admitted() for i, b in enumerate(branches)]
        return {i for i, k in enumerate(kinds) if k is not None and len(k) == 1 and k <= {"object", "array"}
                and all(j == i or (other is not None and not k & other) for j, other in enumerate(kinds))}

    def kept_apart(self, branch: Any, others: list[tuple[Any, frozenset[str], str]], where: str) -> Node | None:
        """A ``oneOf`` branch around a recursive reference, without the objects that hold a
        name each overlapping branch requires (stricter), or None where that is not needed or
        not possible.

        The grammar backend has no difference (a context-free language's complement is not
        one), so a branch that must subtract an overlapping one holding a recursive reference
        was refused. Where every overlapping branch requires a name this one does not, the
        objects without those names match no other branch: ``allowLogin`` objects without
        ``injectRoles`` and the reverse (MaskBench o79474). An object holding both, valid where
        exactly one branch matches it, is refused: over-constrained, never weaker. Only where
        the exact difference would hold a rule reference: elsewhere the difference stays.
        """
        if any(not names for _, names, _ in others):
            return None
        if not has_rule_ref(self.node(branch, where)) and not any(
                has_rule_ref(self.node(other, at)) for other, _, at in others):
            return None
        absent = sorted(set().union(*(names for _, names, _ in others)))
        # objects only: a required name says nothing of other values, which may match every branch
        return self.node({"allOf": [branch, {"type": "object", "properties": {name: False for name in absent}}]}, where)

    def clear_of(self, branch: Any, required: list[frozenset[str]], where: str) -> list[Node]:
        """The objects of a ``oneOf`` branch that lack, for each overlapping branch, one name it
        requires: they match no other branch, so they need no difference. Beside the exact
        difference they change nothing in the language, but they are live without a search.

        Where a difference's liveness search runs out of budget its start counts as dead (the
        product is kept, see ``ProductDFA``), and a whole branch was refused: Vega-Lite's
        ``LayerSpec`` beside ``UnitSpec`` and ``FacetSpec``, whose other members are free-form
        values (MaskBench o19343, where ``{"layers": []}`` was refused). With these, what is
        refused is at most the objects that hold a name of every other branch. Only objects: a
        branch's required names say nothing of other values. One option per
        choice of an absent name from each branch's required ones, up to ``_CLEAR_CHOICES``;
        none where a branch requires no name this one lacks (``required`` holds an empty set).
        """
        if not required or any(not names for names in required):
            return []
        choices = {frozenset(choice) for choice in itertools.islice(
            itertools.product(*(sorted(names) for names in required)), _CLEAR_CHOICES + 1)}  # fmt: skip
        if len(choices) > _CLEAR_CHOICES or math.prod(len(names) for names in required) > _CLEAR_CHOICES:
            return []
        # objects only: ``required`` says nothing of other values ("x" matches two branches
        # that require names of objects and say nothing else)
        return [self.node({"allOf": [branch, {"type": "object", "properties": {n: False for n in sorted(absent)}}]}, where)
                for absent in sorted(choices, key=sorted)]  # fmt: skip

    def over_one_of(self, branches: list[Any], overlaps: list[list[int]], pointer: str) -> list[Node]:
        """A superset of ``oneOf``: each branch's superset minus (subsets of) its overlaps with
        the others, for no value that matches two branches matches the ``oneOf``.

        The anyOf of the supersets would hold too, but a ``oneOf`` beside ``true`` (an
        unknown keyword's branch) would then be any value, and the ``not`` or ``oneOf``
        that subtracts it would refuse everything. A subset this walker cannot build
        exactly (``UnsupportedSchemaError``) is left out: the superset only stays larger.
        """
        options = []
        for i, branch in enumerate(branches):
            option = self.node(branch, f"{pointer}/oneOf/{i}")
            minus = []
            for j in overlaps[i] if option != NOTHING else ():
                try:
                    both = self.subset().node({"allOf": [branch, branches[j]]}, f"{pointer}/oneOf/{j}")
                except UnsupportedSchemaError:
                    continue
                if both != NOTHING:
                    minus.append(both)
            options.append(Difference(option, tuple(minus)) if minus else option)
        return options

    def facts(self, schema: Any, pointer: str, depth: int = 0, base: str | None = None) -> "_Facts":
        """What every instance of ``schema`` must satisfy, read from a few keywords through
        ``allOf`` and ``$ref``: enough to prove two ``oneOf`` branches disjoint. A keyword
        it does not read only makes the facts weaker (fewer pairs proved disjoint), never wrong.

        An object of the document is read once per depth and base: the same definitions are
        reached through every ``$ref`` to them (Github_ultra o48661: 13,966 reads of 1,397
        objects, 0.8 s of its 2.4 s compile). The walker's own objects change as it goes (it
        pops what it has read), so only the document's, which it never changes, are kept."""
        if schema is False:
            return _Facts(empty=True)
        if not isinstance(schema, dict) or depth > 16:
            return _Facts()
        if not self.refs.in_documents(schema):
            return self._read_facts(schema, pointer, depth, base)
        key = (id(schema), depth, self.base if base is None else base)
        found = self._facts.get(key)
        if found is None:
            found = self._facts[key] = self._read_facts(schema, pointer, depth, base)
        return found

    def _read_facts(self, schema: dict[str, Any], pointer: str, depth: int, base: str | None) -> "_Facts":
        base = self.refs.base_of(schema, self.base if base is None else base)
        if self.refs.ref_overrides and isinstance(schema.get("$ref"), str):
            schema = {"$ref": schema["$ref"]}  # its siblings mean nothing (drafts 3 to 7)
        lacks = self.refs.lacks
        if lacks:
            schema = {k: v for k, v in schema.items() if k not in lacks}  # annotations in this draft
        found = _Facts()
        names = [schema["type"]] if isinstance(schema.get("type"), str) else schema.get("type")
        if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
            found = found.meet(_Facts(types=frozenset().union(*(_expand_type(n) for n in names if isinstance(n, str)))))
        if "const" in schema:
            found = found.meet(_Facts(values=frozenset([_json_key(schema["const"])]),
                                      value_types=frozenset([_json_type(schema["const"])])))  # fmt: skip
        if isinstance(schema.get("enum"), list):
            enum = schema["enum"]
            found = found.meet(_Facts(values=frozenset(_json_key(v) for v in enum),
                                      value_types=frozenset(_json_type(v) for v in enum)))  # fmt: skip
        required = schema.get("required")
        properties = schema.get("properties")
        tags: dict[str, frozenset[str]] = {}
        untags: dict[str, frozenset[str]] = {}
        members: dict[str, _Facts] = {}
        if isinstance(properties, dict):
            for name, sub in properties.items():
                if depth < _MEMBER_FACTS_DEPTH:  # a member's own facts, one level down
                    members[name] = self.facts(sub, pointer, depth + _MEMBER_FACTS_DEPTH, base)
                try:
                    sub = self.deref(sub, pointer)
                    negated = self.deref(sub.get("not"), pointer) if isinstance(sub, dict) else None
                except ConstrainError:
                    continue
                listed = _listed_values(sub, lacks)
                if listed is not None:
                    tags[name] = listed
                unlisted = _listed_values(negated, lacks)
                if unlisted is not None:
                    untags[name] = unlisted
        # an object of this schema holds declared names only (patterns would admit more)
        closed = (frozenset(properties) if schema.get("additionalProperties") is False and isinstance(properties, dict)
                  and not schema.get("patternProperties") else None)  # fmt: skip
        if isinstance(required, list) or tags or untags or closed is not None or members:
            names = frozenset(n for n in required if isinstance(n, str)) if isinstance(required, list) else frozenset()
            found = found.meet(_Facts(required=names, tags=tags or None, untags=untags or None, closed=closed,
                                      members=members or None))  # fmt: skip
        for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
            found = found.meet(self.facts(sub, pointer, depth + 1, base))
        # Every instance satisfies some branch: what the branches share holds. Read near the
        # top only (``_BRANCH_FACTS_DEPTH``): nested alternatives would multiply the reads.
        for keyword in ("anyOf", "oneOf") if depth < _BRANCH_FACTS_DEPTH else ():
            branches = schema.get(keyword)
            if isinstance(branches, list) and branches:
                shared = self.facts(branches[0], pointer, depth + 1, base)
                for sub in branches[1:]:
                    shared = shared.join(self.facts(sub, pointer, depth + 1, base))
                found = found.meet(shared)
        if isinstance(schema.get("$ref"), str):
            try:
                target, there = self.locate(self.refs.absolute(schema["$ref"], base), schema["$ref"], pointer)
            except ConstrainError:
                return found
            found = found.meet(self.facts(target, pointer, depth + 1, there))
        return found

    def negation(self, schema: dict[str, Any], pointer: str) -> Node:
        """``not``: the siblings' texts minus a superset of the negated schema's texts (exact where that is)."""
        inner = self.deref(schema.pop("not"), pointer)
        listed = "enum" in schema or "const" in schema  # the rest's texts hold each key once
        # (listed values are exact below, and a superset walker subtracts a subset, which keeps the bound)
        flipped = None if listed or self.over else _flipped_max_properties(inner)
        if flipped is not None and isinstance(schema.get("allOf", []), list):
            # the same schema with the negation's positive form beside it
            return self.node({**schema, "allOf": [*schema.pop("allOf", []), flipped]}, pointer)
        rest = self.node(schema or True, pointer)
        if inner is False:
            return rest
        if inner is True or (isinstance(inner, dict) and not set(inner) & _ASSERTIONS):
            return NOTHING
        if self.over:  # a superset subtracts a subset of the negated texts, or nothing
            try:
                excluded = self.subset().node(inner, f"{pointer}/not")
            except ConstrainError:
                return rest
        else:
            excluded = (self.distinct_keys_superset() if listed else self.superset()).node(inner, f"{pointer}/not")
        return rest if excluded == NOTHING else Difference(rest, (excluded,))

    def literals(self, schema: dict[str, Any], pointer: str) -> Node:
        """``const``/``enum``: the listed values that the sibling keywords also accept."""
        if "const" in schema:
            values = [schema.pop("const")]
            if "enum" in schema:
                values = [v for v in values if _json_in(v, schema.pop("enum"))]
        else:
            values = schema.pop("enum")
            if not isinstance(values, list):
                raise SchemaError(f"enum at {pointer} must be a list")
        if schema:  # filter by the siblings' own automaton: exact when it is, and never backtracking
            rest = LazyDFA(ByteNFA(self.node(schema, pointer), self.limits, subtracted=self.over))
            values = [v for v in values
                      if rest.matches(json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode())]  # fmt: skip
        if not values:
            return NOTHING
        scalars = [v for v in values if not isinstance(v, (dict, list))]
        options: list[Node] = []
        if scalars:
            options.append(Literals(tuple(dict.fromkeys(_scalar_spellings(scalars)))))
        if self.over:  # every other spelling of the same values
            options += [_number_spellings(v) for v in scalars if _is_number(v)]
            if any(isinstance(v, str) for v in scalars):
                options.append(_fragment(_ESCAPED_STRING))
        options += [self.literal_value(v) for v in values if isinstance(v, (dict, list))]
        return alt(*options)

    def literal_value(self, value: Any) -> Node:
        """An object/array constant, with the configured whitespace between its tokens.

        Members come in any order where objects do (a parser does not tell orders
        apart); a superset also respells every number and string in it and lets a key
        repeat before its last copy, so that it holds every text of an equal value.
        """
        if isinstance(value, dict):
            items = tuple(seq(literal(json.dumps(k, ensure_ascii=False)), self.colon, self.literal_value(v))
                          for k, v in value.items())  # fmt: skip
            body: Node
            if (self.any_order and len(items) > 1) or (self.over and items):
                body = MemberSet(items, tuple(range(len(items))), self.sep, repeats=self.repeated_keys(list(value)))
            else:
                body = _join(list(items), self.sep)
            return self.wrap("{", body, "}")
        if isinstance(value, list):
            return self.wrap("[", _join([self.literal_value(v) for v in value], self.sep), "]")
        if self.over:
            return self.literals({"const": value}, "")
        return Literals(tuple(dict.fromkeys(_scalar_spellings([value]))))

    def typed_union(self, schema: dict[str, Any], pointer: str) -> Node:
        types = schema.pop("type", list(_TYPES))
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list):
            raise SchemaError(f"type at {pointer} must be a string or a list of strings, not {types!r}")
        for t in types:
            if not isinstance(t, str) or t not in _TYPES:
                raise SchemaError(f"unknown type {t!r} at {pointer}/type")
        # Each type reads its own keywords from a copy (``minimum`` binds integer and number
        # alike); a keyword that no type consumed is one this backend does not know.
        options, unused = [], set(schema)
        presence = schema.pop(_PRESENCE, None)
        for t in dict.fromkeys(types):
            own = dict(schema)
            if presence is not None and t != "object":
                if not presence.others:
                    continue  # `required` and `properties` hold for every non-object: does the condition?
            elif presence is not None:
                own[_PRESENCE] = presence
            option = getattr(self, f"type_{t}")(own, pointer)
            if self.over and t in _OTHER_SPELLINGS:
                option = _OTHER_SPELLINGS[t](option)
            options.append(option)
            unused &= set(own)
        for key in sorted(unused - _TYPE_KEYWORDS - {_PRESENCE}):  # another type's keyword constrains nothing here
            self.unsupported(key, f"{pointer}/{key}", "the regex backend does not implement it")
        return alt(*options) if options else NOTHING

    # ------------------------------------------------------------------ typed values

    def type_null(self, schema: dict[str, Any], pointer: str) -> Node:
        return _fragment(NULL)

    def type_boolean(self, schema: dict[str, Any], pointer: str) -> Node:
        return _fragment(BOOLEAN)

    def type_integer(self, schema: dict[str, Any], pointer: str) -> Node:
        low, high = self.integer_bounds(schema, pointer)
        step = schema.pop("multipleOf", None)
        if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or not step > 0):
            raise SchemaError(f"multipleOf at {pointer} must be a number greater than 0, not {step!r}")
        values = _fragment(INTEGER) if low is None and high is None else _fragment(integer_range(low, high))
        if step is None:
            return values
        digits, scale = _decimal_step(step)
        # An integer x is a multiple of digits / 10**scale when x * 10**scale is one of digits,
        # i.e. when x is one of digits / gcd(digits, 10**scale) (1.5 → 3; 0.5, 1e-8 → 1).
        divisor = digits // math.gcd(digits, 10**scale)
        if divisor == 1:
            return values
        if divisor > _MAX_DIVISOR:
            self.unsupported("multipleOf", f"{pointer}/multipleOf",
                             f"divisibility is implemented for steps up to {_MAX_DIVISOR}")  # fmt: skip
            return values
        return Intersect((values, Multiple(divisor))) if low is not None or high is not None else Multiple(divisor)

    def integer_bounds(self, schema: dict[str, Any], pointer: str) -> tuple[int | None, int | None]:
        low: int | None = None
        high: int | None = None
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if key not in schema:
                continue
            value = schema.pop(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SchemaError(f"{key} at {pointer} must be a finite number")
            if key == "minimum":
                candidate = math.ceil(value)
            elif key == "exclusiveMinimum":
                candidate = math.floor(value) + 1
            elif key == "maximum":
                candidate = math.floor(value)
            else:
                candidate = math.ceil(value) - 1
            if key.endswith("inimum"):
                low = candidate if low is None else max(low, candidate)
            else:
                high = candidate if high is None else min(high, candidate)
        return low, high

    def type_number(self, schema: dict[str, Any], pointer: str) -> Node:
        bounded = [k for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema]
        step = schema.pop("multipleOf", None)
        multiple = None
        if step is not None:
            digits, scale = _decimal_step(step, pointer)
            if scale == 0:  # a multiple of an integer step is an integer: reuse the exact integer path
                schema["multipleOf"] = step
                return self.type_integer(schema, pointer)
            if digits * (scale + 1) > _MAX_DIVISOR:
                self.unsupported("multipleOf", f"{pointer}/multipleOf",
                                 f"divisibility is implemented for steps whose digits times scale stay under "
                                 f"{_MAX_DIVISOR}")  # fmt: skip
            else:
                multiple = Multiple(digits, scale)
        if multiple is not None:
            bounds = self.type_number(schema, pointer) if bounded else None
            return multiple if bounds is None else Intersect((bounds, multiple))
        if not bounded:
            return _fragment(NUMBER)
        sides = {k.endswith("inimum") for k in bounded}
        if len(sides) == 1 and all(_is_number(schema[k]) and schema[k] == 0 for k in bounded):
            # Bounds at 0 on one side only: every spelling, exponents too (see ZERO_BOUNDED).
            strict = any(k.startswith("exclusive") for k in bounded)
            for key in bounded:
                del schema[key]
            return _fragment(ZERO_BOUNDED[(sides.pop(), strict)])
        if all(_integral(schema[k]) for k in bounded):
            for key in bounded:
                schema[key] = int(schema[key])
            return self.bounded_number(schema, pointer)
        # Non-integer bounds: each bound is a language over the decimal digits (no exponent,
        # as for integer bounds), and several bounds intersect.
        parts = []
        for key in bounded:
            value = schema.pop(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SchemaError(f"{key} at {pointer}/{key} must be a finite number")
            above, strict = key.endswith("inimum"), key.startswith("exclusive")
            exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
            if strict:  # json.loads rounds a long decimal onto the bound: ≥ the first double past it
                exact, strict = _past_rounding(value, above), False
            parts.append(_fragment(decimal_bound(exact, above=above, strict=strict)))
        return parts[0] if len(parts) == 1 else Intersect(tuple(parts))

    def bounded_number(self, schema: dict[str, Any], pointer: str) -> Node:
        """Numbers between integer bounds: exact integers, plus decimals by their integer part.

        Exponents are left out (over-constrained): with them, digits alone no longer say
        the magnitude.
        """
        exclusive_low = "exclusiveMinimum" in schema and (
            "minimum" not in schema or schema["exclusiveMinimum"] >= schema["minimum"]
        )
        exclusive_high = "exclusiveMaximum" in schema and (
            "maximum" not in schema or schema["exclusiveMaximum"] <= schema["maximum"]
        )
        low, high = self.integer_bounds(schema, pointer)  # bounds on the integer values
        # A decimal d.f with f > 0 lies strictly between floor and floor + 1.
        floor_low = None if low is None else (low if not exclusive_low else low - 1)
        floor_high = None if high is None else (high - 1 if not exclusive_high else high)
        # Next to a strict bound b, json.loads rounds a long decimal onto b (4.99999999999999999999
        # reads as 5.0): the floor beside b takes only fractions clear of it (``fraction_clear_of``).
        # Each entry: (floor's sign, its text's integer part, the fraction regex or None).
        edges: list[tuple[bool, int, str | None]] = []
        if exclusive_low and low is not None:
            b = low - 1  # x > b
            edges.append((True, b, fraction_clear_of(b, above=True)) if b >= 0 else
                         (False, -b - 1, fraction_clear_of(-b, above=False)))  # fmt: skip
        if exclusive_high and high is not None:
            b = high + 1  # x < b
            edges.append((True, b - 1, fraction_clear_of(b, above=False)) if b >= 1 else
                         (False, -b, fraction_clear_of(-b, above=True)))  # fmt: skip
        if any(fraction is None for _, _, fraction in edges):  # past 2**52 even "b+1.0" may read as b
            return _fragment(integer_range(low, high))  # the exact integers only: stricter
        # integers, also as json.dumps writes whole floats ("24.0")
        options = [seq(_fragment(integer_range(low, high)), optional(_fragment(r"\.0+")))]
        fraction = _fragment(r"\.[0-9]*[1-9][0-9]*")  # trailing zeros too: 2.50 is 2.5
        if floor_high is None or floor_low is None or floor_low <= floor_high:
            # non-negative floors n ≥ 0: the text is "n.f"; negative floors -(m+1): the text is "-m.f"
            edge = {(positive, part) for positive, part, _ in edges}
            if floor_high is None or floor_high >= 0:
                n_low, n_high = max(floor_low or 0, 0), floor_high
                n_low += (True, n_low) in edge
                n_high = None if n_high is None else n_high - ((True, n_high) in edge)
                if n_high is None or n_low <= n_high:
                    options.append(seq(_fragment(integer_range(n_low, n_high)), fraction))
            if floor_low is None or floor_low < 0:
                m_low = 0 if floor_high is None or floor_high >= -1 else -floor_high - 1
                m_high = None if floor_low is None else -floor_low - 1
                m_low += (False, m_low) in edge
                m_high = None if m_high is None else m_high - ((False, m_high) in edge)
                if m_high is None or m_low <= m_high:
                    options.append(seq(literal("-"), _fragment(integer_range(m_low, m_high)), fraction))
            for positive, part in edge:  # the floors beside a strict bound (both bounds' where they meet)
                clear = [_fragment(f) for p, m, f in edges if (p, m) == (positive, part) and f is not None]
                digits = clear[0] if len(clear) == 1 else Intersect(tuple(clear))
                options.append(seq(literal(("" if positive else "-") + f"{part}."), digits))
        return alt(*options)

    def type_string(self, schema: dict[str, Any], pointer: str) -> Node:
        low = _count(schema.pop("minLength", 0), "minLength", pointer)
        high = _count(schema.pop("maxLength", None), "maxLength", pointer)
        pattern, fmt = schema.pop("pattern", None), schema.pop("format", None)
        if fmt is not None and self.over:
            fmt = None  # a format regex may be narrower than the format: a superset leaves it out
        if fmt is not None and self.options.formats == "annotate":
            self.ignore("format", pointer)
            fmt = None
        if fmt is not None and fmt not in FORMATS and fmt not in _VALUE_FORMATS:
            if fmt in _SPEC_FORMATS:  # the spec defines it and validators check it: never pass it silently
                self.unsupported("format", f"{pointer}/format", f"the format {fmt!r} is not implemented")
            else:
                self.ignore("format", pointer)  # a format no specification defines is an annotation (7.2.3)
            fmt = None
        if high is not None and low > high:
            return NOTHING  # contradictory bounds: no string at all (not a guide that ignores one)
        if pattern is not None and fmt is None and (low or high is not None) and low <= 1:
            content = self.string_pattern(pattern, f"{pointer}/pattern")
            counted = _ticked(content)
            if counted is not None:  # the count beside the pattern's own counters, not a product
                product = Intersect((Repeat(_ANY_CHAR, low, high), content))
                return seq(literal('"'), Length(counted, low, high, product), literal('"'))
        parts: list[Node] = []
        if low or high is not None:
            parts.append(Repeat(_ANY_CHAR, low, high))
        if fmt in _VALUE_FORMATS:
            parts.append(_VALUE_FORMATS[fmt]())
        elif fmt is not None:
            parts.append(_fragment(FORMATS[fmt]))
        if pattern is not None:
            parts.append(self.string_pattern(pattern, f"{pointer}/pattern"))
        # Several constraints on one string: the intersection of their languages (exact).
        body = Repeat(_ANY_CHAR, 0, None) if not parts else parts[0] if len(parts) == 1 else (
            Intersect(tuple(parts)))
        return seq(literal('"'), body, literal('"'))

    def string_pattern(self, pattern: Any, pointer: str) -> Node:
        """A ``pattern`` (ECMA-262, unanchored: a *search*) as the string's content (see ``_pattern_content``)."""
        if not isinstance(pattern, str):
            raise SchemaError(f"pattern at {pointer} must be a string")
        try:
            return _pattern_content(pattern)
        except PatternError as exc:
            raise UnsupportedSchemaError("pattern", pointer, str(exc)) from None

    def type_array(self, schema: dict[str, Any], pointer: str) -> Node:
        prefix = [self.node_here(s, f"{pointer}/prefixItems/{i}", ("index", i))
                  for i, s in enumerate(schema.pop("prefixItems", []))]  # fmt: skip
        items = schema.pop("items", True)
        item = None if items is False else self.node_here(items, f"{pointer}/items", ("items", len(prefix)))
        low = _count(schema.pop("minItems", 0), "minItems", pointer)
        high = _count(schema.pop("maxItems", None), "maxItems", pointer)
        if schema.get("uniqueItems") is False:
            schema.pop("uniqueItems")
        contains = self.contains(schema, items, item, prefix, low, high, pointer)
        if "uniqueItems" in schema:
            schema.pop("uniqueItems")
            values = _finite_values(items)
            at_most_one = (high is not None and high <= 1) or (item is None and len(prefix) <= 1)
            if not at_most_one:  # (with one item at most there are no two to compare)
                if not self.over and values is not None and not prefix and contains is None and item is not None:
                    return self.unique_array(items, values, low, high, pointer)
                checked = self.leaves_unique(items, item, prefix, contains, low, pointer)
                if self.path is not None and checked is not None:
                    self.unique.append((self.path, f"{pointer}/uniqueItems", *checked))
                else:
                    self.unsupported("uniqueItems", f"{pointer}/uniqueItems", "not expressible by the regex backend "
                                     f"unless the items are one of at most {_UNIQUE_VALUES} values (enum, const, "
                                     "boolean, null), with no prefixItems or contains beside; the guide checks it as "
                                     "it generates where the items are strings and the array lies at one place in "
                                     "the instance (through properties, patternProperties, additionalProperties, "
                                     "items and allOf)")  # fmt: skip
        if contains is not None and contains[1]:
            return contains[0]
        # An empty element the array must hold empties the array (liveness, blind to counts, would not see it)
        if any(self.empty_scalar(node) for node in prefix[:low]):
            return NOTHING
        if item is not None and low > len(prefix) and self.empty_scalar(item):
            item = None  # (then no array is long enough)
        if item is None:
            high = len(prefix) if high is None else min(high, len(prefix))
        if high is not None and low > high:
            return NOTHING
        array = self.plain_array(item, prefix, low, high)
        return array if contains is None else Intersect((array, contains[0]))

    def leaves_unique(
        self, items: Any, item: Node | None, prefix: list[Node], contains: Any, low: int, pointer: str
    ) -> tuple[Node, bool] | None:
        """Whether a ``uniqueItems`` array can be left to the guide (``unique_items``): asked for, at
        one place in the instance, with no prefix or ``contains`` beside, of strings only. None
        where not; else the item's tree, and whether every prefix of an item has endless
        completions. Where one may have finitely many (``maxLength``: ``"a"`` under ``maxLength:
        1`` can only end as ``"a"``) the guide reads the tree's automaton to keep a way to end, and
        the items must have at least ``low`` (``minItems``) values, counted here by their spellings
        without escapes (fewer would leave an array that needs another item and has none; such
        an array stays refused); elsewhere refusing the tokens that close a repeat is all it takes."""
        if not (self.delegate_unique and self.path is not None and not self.over and item is not None
                and not prefix and contains is None and item != NOTHING):
            return None
        kinds = self.facts(items, f"{pointer}/items").admitted()  # strings, and words (null, true, false)
        if kinds is None or not kinds <= {"string", "null", "boolean"}:
            return None
        try:
            automaton = LazyDFA(ByteNFA(item, self.limits))
            if endless(automaton, self._deadline):
                return item, True
            return (item, False) if plain_spellings(automaton, low, self._deadline) >= low else None
        except LimitExceededError:
            return None

    def empty_scalar(self, node: Node) -> bool:
        """Whether ``node`` is a string or number value (``_counted_scalar``) that matches nothing.

        The tree cannot vouch for every scalar (a pattern under ``maxLength``, beside a
        ``format``; a ``oneOf`` of integers), and the automaton's liveness, blind to counts,
        takes an object or array for live although a value it must hold is empty: a walk
        would then go on forever or stop nowhere. A scalar's own automaton is small, so it is
        built here to decide; other values are left to their automata (building a large object
        twice made o19343 compile 7.7 s instead of 1.7 s)."""
        return node == NOTHING or _counted_scalar(node) and not surely_nonempty(node) and (
            LazyDFA(ByteNFA(node, self.limits)).start == DEAD)

    def unique_array(self, items: Any, values: list[Any], low: int, high: int | None, pointer: str) -> Node:
        """``uniqueItems`` over items from a small finite set: each value at most once, in any order.

        An array whose items are distinct values is a member set of the values (the automaton's
        seen bits, as for an object's members), each item the spellings of one value that the
        items schema takes; values equal as JSON (``1``, ``1.0``) are one value, so two of its
        spellings never both appear.
        """
        nodes = tuple(self.node({"allOf": [items, {"const": value}]}, f"{pointer}/items") for value in values)
        if len([n for n in nodes if n != NOTHING]) < low:
            return NOTHING  # fewer distinct values than minItems: no array (a count liveness does not see)
        return self.wrap("[", MemberSet(nodes, (), self.sep, min_count=low, max_count=high), "]")

    def plain_array(self, item: Node | None, prefix: list[Node], low: int, high: int | None) -> Node:
        """Arrays of ``prefix`` elements, then ``item`` ones (None: no more), ``low`` to ``high`` long."""
        sep = self.sep
        if high == 0:  # (the first prefix element came before any bound was read: [null] under maxItems 0)
            return self.wrap("[", EMPTY, "]")
        if not prefix:  # the common case: one separated repeat, the item built once
            return self.wrap("[", Repeat(item, low, high, sep), "]")  # type: ignore[arg-type]

        def rest(i: int) -> Node:
            """Elements from i on (i ≥ 1), each after a separator; those at or past ``low`` optional."""
            if high is not None and i >= high:
                return EMPTY
            if i >= len(prefix):
                if item is None:
                    return EMPTY
                tail = Repeat(item, max(low - i, 1), None if high is None else high - i, sep)
                return seq(sep, tail) if i < low else optional(seq(sep, tail))
            here = seq(sep, prefix[i], rest(i + 1))
            return here if i < low else optional(here)

        body = seq(prefix[0], rest(1))
        return self.wrap("[", body if low else optional(body), "]")

    def contains(
        self, schema: dict[str, Any], items: Any, item: Node | None, prefix: list[Node], low: int,
        high: int | None, pointer: str,
    ) -> tuple[Node, bool] | None:
        """``contains`` with ``minContains``/``maxContains``: (node, whether it is the whole array).

        Alone (no prefixItems, maxItems or maxContains, minItems at most minContains) it is
        I* C (I* C)… I*, the whole array. Otherwise it is a *counting* array language to
        intersect with the plain one: every element either matches ``contains`` or is an
        element minus it, and the matches number minContains to maxContains. Both
        languages split a text into the same elements (JSON values delimit themselves),
        so the intersection is exact.
        """
        if "contains" not in schema:
            schema.pop("minContains", None)
            schema.pop("maxContains", None)  # without contains they constrain nothing
            return None
        wanted = _count(schema.pop("minContains", 1), "minContains", pointer)
        most = _count(schema.pop("maxContains", None), "maxContains", pointer)
        inner = schema.pop("contains")
        if most is not None and wanted > most:
            return NOTHING, True
        if wanted == 0 and most is None:
            return None  # zero matches required and no ceiling: contains constrains nothing
        sep = self.sep
        if not prefix and high is None and low <= wanted and most is None:
            match = self.node(_conjoin(items, inner), f"{pointer}/contains")
            if match == NOTHING:
                return NOTHING, True
            item = self.node(items, f"{pointer}/items")
            others = Repeat(seq(sep, item), 0, None)
            body = seq(Repeat(seq(item, sep), 0, None), match, *[seq(others, sep, match)] * (wanted - 1), others)
            return self.wrap("[", body, "]"), True
        element = alt(*prefix, *([] if item is None else [item]))
        match = self.node(inner, f"{pointer}/contains")
        if self.over:  # a superset: elements minus a subset of the matches, or all elements
            try:
                excluded = self.subset().node(inner, f"{pointer}/contains")
            except ConstrainError:
                excluded = NOTHING
        else:
            excluded = self.superset().node(inner, f"{pointer}/contains")
        other = element if excluded == NOTHING else Difference(element, (excluded,))
        # zero matches: only others; k ≥ 1 matches: others, then each match followed by others
        options = [optional(seq(other, Repeat(seq(sep, other), 0, None)))] if wanted == 0 else []
        if most is None or most >= 1:
            group = seq(match, Repeat(seq(sep, other), 0, None))
            more = Repeat(seq(sep, group), max(wanted, 1) - 1, None if most is None else most - 1)
            options.append(seq(Repeat(seq(other, sep), 0, None), group, more))
        return self.wrap("[", alt(*options), "]"), False

    def type_object(self, schema: dict[str, Any], pointer: str) -> Node:
        properties = schema.pop("properties", {})
        if not isinstance(properties, dict):
            raise SchemaError(f"properties at {pointer} must be an object, not {properties!r}"[:200])
        properties = dict(properties)
        required = list(dict.fromkeys(schema.pop("required", [])))
        additional = schema.pop("additionalProperties", None)
        if additional is None and (self.over or not self.options.strict_properties):
            additional = True
        patterns = schema.pop("patternProperties", {})
        names_schema = schema.pop("propertyNames", True)
        if not isinstance(properties, dict) or not isinstance(patterns, dict):
            raise SchemaError(f"properties and patternProperties at {pointer} must be objects")
        if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
            raise SchemaError(f"required at {pointer} must be a list of strings")
        low = _count(schema.pop("minProperties", 0), "minProperties", pointer)
        high = _count(schema.pop("maxProperties", None), "maxProperties", pointer)
        presence: Presence | None = schema.pop(_PRESENCE, None)
        dependent = schema.pop("dependentRequired", {})
        if not isinstance(dependent, dict) or not all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in dependent.values()
        ):
            raise SchemaError(f"dependentRequired at {pointer} must map names to lists of names")
        if high is not None and (low > high or len(required) > high):
            return NOTHING  # contradictory counts: no object at all
        if self.over and not self.distinct_keys and high:
            # A text that repeats a key (declared or not) holds more members than its value. Not
            # for none: a text with a member has a property, so "no member" stays exact, and
            # `not: {maxProperties: 0}` (an object with a property, or no object) is no empty language.
            high = None
        counted = bool(low or high is not None or dependent or presence)
        keys = [(self.key_pattern(p, f"{pointer}/patternProperties/{_escape_pointer(p)}"), sub, p)
                for p, sub in patterns.items()]  # fmt: skip
        names_node = None if names_schema is True else self.node(names_schema, f"{pointer}/propertyNames")
        names_check = None if names_node is None else LazyDFA(ByteNFA(names_node, self.limits, subtracted=self.over))

        def matching(name: str) -> list[Any]:
            spelled = json.dumps(name, ensure_ascii=False)
            return [sub for (content, sub, _) in keys if content[1].matches(spelled[1:-1].encode())]

        def value_schema(name: str) -> Any:
            """A named member's schema: its property's and every matching pattern's, else additionalProperties."""
            matching_patterns = matching(name)
            if name in properties:
                return _conjoin_all([properties[name], *matching_patterns])
            if matching_patterns:
                return _conjoin_all(matching_patterns)
            return False if additional is False else True if additional is None else additional

        # (member, required, name, kind): kind None, or for a name whose value the presence
        # condition reads by class, IN or OUT (two items with one key; the rows keep them apart)
        members: list[tuple[Node, bool, str, str | None]] = []
        # every name dependentRequired mentions is a tracked member (an extra sets no bit)
        for name in [*dependent, *(n for names in dependent.values() for n in names)]:
            properties.setdefault(name, value_schema(name))
        for name in presence.names if presence is not None else ():  # a condition's names: tracked too,
            if name not in properties and (additional not in (None, False) or matching(name)):  # where allowed
                properties[name] = value_schema(name)
        # the names something asks for (required, a condition, a dependency): only where a value of
        # theirs is empty does the object lose a way to end (an optional member is left unused)
        asked = {*required, *(presence.names if presence is not None else ()), *dependent,
                   *(n for names in dependent.values() for n in names)}  # fmt: skip
        for name in list(dict.fromkeys([*properties, *required])):
            if names_check is not None and not names_check.matches(json.dumps(name, ensure_ascii=False).encode()):
                if name in required:
                    return NOTHING  # a required key that propertyNames forbids
                continue
            where = f"{pointer}/properties/{_escape_pointer(name)}"
            key = literal(json.dumps(name, ensure_ascii=False))
            value_class = None if presence is None else presence.class_of(name)
            kinds: list[tuple[str | None, Any]]
            if value_class is None:
                kinds = [(None, value_schema(name))]
            else:
                inside, outside = _class_split(value_class)
                kinds = [(IN, {"allOf": [value_schema(name), inside]}), (OUT, {"allOf": [value_schema(name), outside]})]
            # a member's value applies at the member, one step on (a classed half depends on a condition)
            values = [(kind, self.node_here(sub, where, ("prop", name)) if kind is None else self.node(sub, where))
                      for kind, sub in kinds]  # fmt: skip
            # A classed value may be empty (P ⊆ X: no OUT item), and so may a required scalar the tree
            # cannot vouch for (a pattern under maxLength, beside a format): an empty required value empties the
            # object, which the member set's liveness, blind to its counts, would not see. Only
            # scalars: checking every required object built its whole automaton a second time
            # (o19343: 1.8 s -> 7.7 s to compile); an empty product or object stays a known gap.
            values = [(kind, value) for kind, value in values if value != NOTHING and not (
                self.empty_scalar(value) if kind is None and (name in asked or low)
                else kind is not None and not has_rule_ref(value)  # (no automaton holds a rule: a grammar's value stays)
                and LazyDFA(ByteNFA(value, self.limits, subtracted=self.over)).start == DEAD)]  # fmt: skip
            if not values and name in required:
                return NOTHING
            for kind, value in values:
                members.append((seq(key, self.colon, value), name in required and kind is None, name, kind))
        declared = list(dict.fromkeys([*properties, *required]))
        extra = self.extra_members(declared, keys, additional, names_node, pointer, counted=bool(low))
        if not (self.any_order or counted):
            return self.wrap("{", Members(tuple((m, r) for m, r, _, _ in members), self.sep, extra), "}")
        present = {name for _, _, name, _ in members}
        for name, needs in _fixpoint_drops(dependent, present):  # members that need an impossible one
            if name in required:
                return NOTHING
        members = [m for m in members if m[2] in present]
        ordered_grammar = bool(self.rule_refs) and len([m for m in members if m[1]]) > MAX_TRACKED_REQUIRED
        if not self.over and not low and not ordered_grammar:
            # Only what must be counted needs a bit: required members and those dependentRequired
            # names. Every other member is free: it may come again, like an extra, for a parser
            # keeps a repeated key's last value and each copy's value is checked (json.dumps never
            # repeats one). Without their bits the states inside an object with 80 optional
            # members are shared by every subset of them seen so far (dockerd's 2,516 key-trie
            # states per member ran past max_dfa_states). minProperties counts members, which a
            # repeated key would inflate, so there every member keeps its bit. A recursive
            # schema's object with more required members than its grammar tracks keeps every
            # member an item: the grammar writes them in definition order (to_grammar.member_set).
            # Below that the free members form one alternation, one grammar terminal: as items,
            # two objects that share an optional member made LALR reduce/reduce collisions.
            tracked = set(required) | set(dependent) | {n for names in dependent.values() for n in names}
            tracked |= set(presence.names) if presence is not None else set()
            free = [m for m, _, name, _ in members if name not in tracked]
            if free:
                extra = alt(*free, *([extra] if extra is not None else []))
                members = [m for m in members if m[2] in tracked]
        index = {name: i for i, (_, _, name, kind) in enumerate(members) if kind is None}
        dependencies = [(name, needs) for name, needs in dependent.items() if name in index]
        required_bits = sum(1 << i for i, (_, r, _, _) in enumerate(members) if r)
        condition = () if presence is None else presence.clauses(
            {(name, kind): i for i, (_, _, name, kind) in enumerate(members)}, set(required), high, required_bits)
        if presence is not None and not condition:
            return NOTHING  # no way to have the members the condition asks for
        groups: tuple[Node, ...] = ()
        checked: tuple[tuple[Node, Node], ...] = ()
        if self.over and extra is not None:
            checked = self.checked_groups(declared, keys, additional, names_node, pointer)
            extra = None if checked else extra
        if low >= 2 and not self.over and extra is not None:
            # minProperties counts distinct keys, and two undeclared keys may be one (a repeated
            # key): they count apart only where their last bytes differ (MemberSet.extra_groups)
            groups = self.extra_groups(declared, keys, additional, names_node, pointer)
            if len({name for _, _, name, _ in members}) + len(groups) < low:
                self.unsupported("minProperties", f"{pointer}/minProperties", (
                    f"{low} members need undeclared keys that surely differ, and these keys fall into "
                    f"{len(groups)} groups by their last byte only (a repeated key is one member; keys "
                    "that end alike may repeat)"))
                low, groups = 0, ()  # dropped (lenient): the extras need no groups
            else:
                extra = None
        depends = tuple((index[n], tuple(index[x] for x in needs)) for n, needs in dependencies)
        if not _counts_reachable([(name, r) for _, r, name, _ in members], depends, condition, low, high,
                                 None if extra is not None or checked else len(groups)):  # fmt: skip
            return NOTHING
        body = MemberSet(
            tuple(m for m, _, _, _ in members), tuple(i for i, (_, r, _, _) in enumerate(members) if r), self.sep, extra,
            low, high, depends,
            repeats=self.repeated_keys([name for _, _, name, _ in members]), condition=condition,
            extra_groups=groups, checked_groups=checked,
        )  # any order: a counted object tracks its members anyway, so order would only refuse values
        return self.wrap("{", body, "}")

    def key_pattern(self, pattern: Any, pointer: str) -> tuple[Node, LazyDFA]:
        """A ``patternProperties`` pattern as key content in its canonical spelling, and its automaton."""
        content = Intersect((self.string_pattern(pattern, pointer), _CANONICAL_TEXT))
        return content, LazyDFA(ByteNFA(content, self.limits))

    def repeated_keys(self, names: list[str]) -> tuple[tuple[int, Node], ...]:
        """A superset's members also repeat tracked keys: earlier copies, with any value.

        A parser keeps a repeated key's last value (``json.loads`` does), so
        ``{"a": 1, "a": 2}`` is ``{"a": 2}``, and a superset must hold it wherever it holds
        ``{"a": 2}``. The earlier copies may come only before the tracked member, which
        must then come (``MemberSet.repeats``): the value a parser keeps is still checked.
        Undeclared keys repeat as extra members, which in a superset take any value
        (:meth:`extra_members`): no automaton can tell which copy of such a key comes last.
        Stricter, so: ``not`` around ``additionalProperties: {"type": "integer"}`` refuses
        every object with an extra member (docs/json_schema.md, "Repeated keys").
        """
        if not self.over:
            return ()
        any_value = self.node(True, "")
        return tuple((i, seq(literal(json.dumps(name, ensure_ascii=False)), self.colon, any_value))
                     for i, name in enumerate(names))  # fmt: skip

    def extra_options(
        self, declared: list[str], keys: list[tuple[tuple[Node, LazyDFA], Any, str]], additional: Any,
        names: Node | None, pointer: str,
    ) -> list[tuple[Node, Node, bool]]:
        """Members whose key is not declared, as (key, value, whether the value is free) triples:
        one class per set of matching patterns, then the rest.

        A key takes the schema of every pattern it matches (and ``additionalProperties``
        only when it matches none), so each subset of the patterns is a key language of
        its own: matched by those patterns, by none of the others, and no declared name.
        Keys are spelled canonically (as ``json.dumps`` writes them), so one decoded key
        has one spelling and the differences are exact.
        """
        sets = _pattern_sets(len(keys), self.disjoint_patterns(keys))
        if sets is None:
            self.unsupported("patternProperties", f"{pointer}/patternProperties",
                             f"patterns that keys match together in more than {_KEY_CLASSES} ways "
                             "(one key language per set of them)")  # fmt: skip
            keys, sets = keys[:0], []
        declared_keys = Literals(tuple(json.dumps(n, ensure_ascii=False)[1:-1].encode() for n in declared))
        # each class's step into the instance: a key its patterns match, the others' do not, no declared name
        classes: list[tuple[Node, Any, str, tuple[Any, ...]]] = []
        automata = [k[0][1] for k in keys]
        for chosen, others in sets:
            inside = Intersect(tuple(keys[i][0][0] for i in chosen)) if len(chosen) > 1 else keys[chosen[0]][0][0]
            minus = tuple(keys[i][0][0] for i in others) + ((declared_keys,) if declared else ())
            where = f"{pointer}/patternProperties/{_escape_pointer(keys[chosen[0]][2])}"
            step = ("keys", tuple(automata[i] for i in chosen), tuple(automata[i] for i in others), frozenset(declared))
            classes.append((Difference(inside, minus) if minus else inside,
                            _conjoin_all([keys[i][1] for i in chosen]), where, step))  # fmt: skip
        if additional not in (None, False):
            rest = _other_key(tuple(declared))
            if keys:
                rest = Difference(rest, tuple(k[0][0] for k in keys))
            step = ("keys", (), tuple(automata), frozenset(declared))
            classes.append((rest, additional, f"{pointer}/additionalProperties", step))
        options = []
        for content, sub, where, step in classes:
            key = seq(literal('"'), content, literal('"'))
            if names is not None:
                key = Intersect((key, names))
            value = self.node_here(sub, where, step)
            if value != NOTHING:
                options.append((key, value, sub is True or sub == {}))
        return options

    def disjoint_patterns(self, keys: list[tuple[tuple[Node, LazyDFA], Any, str]]) -> set[tuple[int, int]]:
        """Pairs ``(i, j)``, ``i < j``, of patterns no key matches both (their product is empty)."""
        limits = self.limits
        return {(i, j) for i, j in itertools.combinations(range(len(keys)), 2)
                if ProductDFA([keys[i][0][1], keys[j][0][1]], subtract=False, max_states=limits.max_dfa_states,
                              timeout_s=limits.timeout_s).start == DEAD}  # fmt: skip

    def extra_members(
        self, declared: list[str], keys: list[tuple[tuple[Node, LazyDFA], Any, str]], additional: Any,
        names: Node | None, pointer: str, *, counted: bool = False,
    ) -> Node | None:
        """The members whose key is not declared, as one alternation (see :meth:`extra_options`).
        A superset's take any value: an earlier copy of a repeated key is not kept (see
        :meth:`checked_groups` for where the value is checked all the same). Where members are
        ``counted`` (minProperties), an extra whose value is empty is none (see ``empty_scalar``)."""
        options = self.extra_options(declared, keys, additional, names, pointer)
        if counted and not self.over:
            options = [(key, value, name) for key, value, name in options if not self.empty_scalar(value)]
        return alt(*(seq(key, self.colon, self.any_value() if self.over else value)
                     for key, value, _ in options)) if options else None  # fmt: skip

    def extra_groups(
        self, declared: list[str], keys: list[tuple[tuple[Node, LazyDFA], Any, str]], additional: Any,
        names: Node | None, pointer: str,
    ) -> tuple[Node, ...]:
        """The members whose key is not declared, one alternation per group of the key's last
        character byte (``MemberSet.extra_groups``, groups ``_KEY_BYTE_GROUPS``; the empty key
        is a group of its own). Groups no key can end in are left out, so every group the
        guards count on can come."""
        by_group: dict[int, list[Node]] = {}
        options = self.extra_options(declared, keys, additional, names, pointer)
        for group, key, value, _ in self.grouped_options(options):
            by_group.setdefault(group, []).append(seq(key, self.colon, value))
        return tuple(alt(*members) for members in by_group.values())

    def checked_groups(
        self, declared: list[str], keys: list[tuple[tuple[Node, LazyDFA], Any, str]], additional: Any,
        names: Node | None, pointer: str,
    ) -> tuple[tuple[Node, Node], ...]:
        """A superset's members whose key is not declared, where some of them constrain their
        value (``MemberSet.checked_groups``): the members with a value of the (superset of the)
        schema, and those with any other value, which leave the object pending until a checked
        member comes. One group for all keys: split by the key's last byte (as ``extra_groups``)
        it told more keys apart, but a product searched 18 alternatives wherever a member may
        start (Handwritten oneofpr2: 71 s instead of 6.7). Empty where no value is constrained:
        then any value will do (:meth:`extra_members`)."""
        options = self.extra_options(declared, keys, additional, names, pointer)
        if all(free for _, _, free in options):
            return ()
        checked = alt(*(seq(key, self.colon, value) for key, value, _ in options))
        unchecked = alt(*(seq(key, self.colon, self.any_value()) for key, _, free in options if not free))
        return ((checked, unchecked),)

    def grouped_options(self, options: list[tuple[Node, Node, bool]]) -> list[tuple[int, Node, Node, bool]]:
        """:meth:`extra_options` split by the group of the key's last byte (``_KEY_BYTE_GROUPS``):
        (group, key of that group, value, whether the value is free), groups no key of the
        option can end in left out (which is known per key language, once)."""
        out: list[tuple[int, Node, Node, bool]] = []
        for key, value, free in options:
            for group, (last, none) in enumerate(_KEY_BYTE_GROUPS):
                tagged = EndsWith(key, last, _QUOTE, none)
                live = self._key_groups.get(tagged)
                if live is None:
                    live = self._key_groups[tagged] = LazyDFA(ByteNFA(tagged, self.limits)).start != DEAD
                if live:
                    out.append((group, tagged, value, free))
        return out

    def any_value(self) -> Node:
        """Any JSON value: nested to any depth (exact), or at most ``any_value_depth`` levels.

        Unbounded nesting is a :class:`Nested` node: one level of value in which each
        nested array or object is a hole filled by the same level again (a pushdown
        automaton with a stack of bracket contexts, built lazily). A superset walker
        needs every value, however deep, and products stay small if it stays finite:
        below the same levels (none without a depth), an opening bracket may be followed
        by any text at all.
        """
        scalar = alt(_fragment(f'"{STRING_CHAR}*"'), _fragment(NUMBER), _fragment(BOOLEAN), _fragment(NULL))
        # Keys are spelled as json.dumps spells them, as declared names are: a key written with
        # an escape ("\u0061" for "a") would be the same key to a parser but another text to
        # the supersets that `not`, `oneOf` and dependentSchemas subtract. Values keep every
        # spelling: a superset of a value lists its other spellings.
        key = seq(literal('"'), _CANONICAL_TEXT, literal('"'))
        if self.options.any_value_depth is None and not self.over:
            inner = alt(scalar, _HOLE)
            array = self.wrap("[", Repeat(inner, 0, None, self.sep), "]")
            obj = self.wrap("{", Repeat(seq(key, self.colon, inner), 0, None, self.sep), "}")
            return Nested(alt(scalar, array, obj))
        level = alt(scalar, seq(literal("["), _ANY_TEXT), seq(literal("{"), _ANY_TEXT)) if self.over else scalar
        # A superset spells its first levels exactly: "[" then anything would also swallow the
        # members after the value, so {"2": [1], "1": 2} under a `not` of "no key is 1" was
        # refused (the subtracted superset took the whole text)
        depth = self.options.any_value_depth or (_SUPERSET_LEVELS if self.over else 0)
        for _ in range(depth):
            array = self.wrap("[", Repeat(level, 0, None, self.sep), "]")
            member = seq(key, self.colon, level)
            obj = self.wrap("{", Repeat(member, 0, None, self.sep), "}")
            level = alt(scalar, array, obj)
        return level


#: The groups that tell undeclared keys apart (see ``_Walker.extra_groups``), as ``(last, none)``
#: for :class:`EndsWith` with the quotes skipped: the key's last byte modulo ``_KEY_GROUPS`` (so
#: "feed1" to "feed6", or "a" to "h", each end a group of their own), and the empty key. Any
#: function of the key's text is sound; the last byte tells numbered keys apart, which the first
#: byte does not (MaskBench o48619, o84199). More groups tell more keys apart, but each is one
#: more alternative wherever a member may start, and a product's liveness search tries them
#: all: o84199 walked in 58 s with 16 groups, 12 s with 8.
_QUOTE = ((0x22, 0x22),)
_KEY_GROUPS = 8
_KEY_BYTE_GROUPS: tuple[tuple[tuple[tuple[int, int], ...], bool], ...] = (
    *((tuple((b, b) for b in range(r, 256, _KEY_GROUPS) if b != 0x22), False) for r in range(_KEY_GROUPS)),
    ((), True),  # no byte but quotes: the empty key
)
#: Levels of a free-form value a superset spells exactly before "anything" (see ``any_value``).
_SUPERSET_LEVELS = 2

#: Where a free-form value nests another array or object (see :class:`Nested`).
_HOLE = Literals((bytes([HOLE]),))


class _Clash(Exception):
    """Two ``allOf`` branches hold a keyword whose values have no closed-form conjunction."""


def _merge(merged: dict[str, Any], branch: dict[str, Any]) -> dict[str, Any]:
    """Conjunction of two schemas, for the keywords where it has a closed form.

    Keywords that read each other (``items`` after ``prefixItems``,
    ``additionalProperties`` beside ``properties``) are merged position by position
    and name by name, since one branch's rule for "the rest" also judges what the
    other branch lists explicitly.
    """
    out = dict(merged)
    positional = {"prefixItems", "items", "properties", "additionalProperties"}
    for one, other in ((merged, branch), (branch, merged)):
        # the other side's patterns would exempt keys from the merged rest that this side's rest
        # judges (two different pattern sets clash below, as any two different values do)
        if other.get("patternProperties") and not one.get("patternProperties") and (
            _json_key(one.get("additionalProperties", True)) != "true"
        ):
            raise _Clash("patternProperties")
    for key, value in branch.items():
        if key in positional:
            continue
        if key not in out or _json_key(out[key]) == _json_key(value):  # JSON equality: 1 == 1.0, true != 1
            out[key] = value
        elif key in _TAKE_MAX:
            out[key] = max(out[key], value)
        elif key in _TAKE_MIN:
            out[key] = min(out[key], value)
        elif key == "required":
            out[key] = list(dict.fromkeys(out[key] + value))
        elif key == "type":
            a = {out[key]} if isinstance(out[key], str) else set(out[key])
            b = {value} if isinstance(value, str) else set(value)
            both = a & b
            if ("number" in a and "integer" in b) or ("integer" in a and "number" in b):
                both.add("integer")
            out[key] = sorted(both)
        elif key == "enum":
            out[key] = [v for v in out[key] if _json_in(v, value)]
        elif key == "const":
            return {"not": {}}  # two different constants: nothing satisfies both
        elif key == "anyOf" and len(out[key]) * len(value) <= 64:
            # (a1 ∨ a2) ∧ (b1 ∨ b2) = ∨ (ai ∧ bj)
            out[key] = [_conjoin(a, b) for a in out[key] for b in value]
        else:
            raise _Clash(key)
    if any(k in merged or k in branch for k in ("prefixItems", "items")):
        length = max(len(merged.get("prefixItems", [])), len(branch.get("prefixItems", [])))
        if length:
            out["prefixItems"] = [_conjoin(_item_at(merged, i), _item_at(branch, i)) for i in range(length)]
        if "items" in merged or "items" in branch:
            out["items"] = _conjoin(merged.get("items", True), branch.get("items", True))
    if any(k in merged or k in branch for k in ("properties", "additionalProperties")):
        names = list(dict.fromkeys([*merged.get("properties", {}), *branch.get("properties", {})]))
        if names:
            out["properties"] = {n: _conjoin(_property(merged, n), _property(branch, n)) for n in names}
        if "additionalProperties" in merged or "additionalProperties" in branch:
            out["additionalProperties"] = _conjoin(
                merged.get("additionalProperties", True), branch.get("additionalProperties", True)
            )
    return out


# Keywords that apply to one type only: for a value of another type they are vacuous.
#: The internal key that carries a :class:`~.presence.Presence` from ``schema_node`` to
#: ``type_object`` (never a user's: ``constraints`` keeps only the specification's keywords).
_PRESENCE = "$constrain:presence"
#: The keywords a presence condition is read from, beside ``allOf`` branches.
_CONDITION_KEYS = ("anyOf", "oneOf", "not", "if", "then", "else")
#: Keywords beside a presence condition that leave it exact (``_Walker.presence``).
_PRESENCE_SIBLINGS = frozenset({
    "type", "properties", "required", "additionalProperties", "maxProperties", "minProperties", "patternProperties",
    "propertyNames",
})  # fmt: skip


def _past_rounding(value: float, above: bool) -> Decimal:
    """A decimal bound, not strict, whose numbers ``json.loads`` reads as past ``value`` (above:
    greater): the first double past it, or where that needs more digits than
    ``NEAR_DIGITS`` places, ``value`` ± 10**-NEAR_DIGITS (stricter, and still past it)."""
    nearest = float(value)
    if (nearest <= value) if above else (nearest >= value):
        nearest = math.nextafter(nearest, math.inf if above else -math.inf)
    first = Decimal(repr(nearest))
    if -first.as_tuple().exponent <= NEAR_DIGITS + 5:  # type: ignore[operator]
        return first
    step = Decimal(10) ** -NEAR_DIGITS
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    short = exact + step if above else exact - step
    return max(short, first) if above else min(short, first)


#: The most tracked members whose subsets ``_counts_reachable`` enumerates (2^12 masks).
_COUNTED_SUBSETS = 12


def _counts_reachable(
    items: list[tuple[str, bool]], dependencies: tuple[tuple[int, tuple[int, ...]], ...],
    condition: tuple[tuple[int, int], ...], low: int, high: int | None, extras: int | None,
) -> bool:
    """Whether some set of a member set's items (``(name, required)``) meets all of its rules at
    once: every required item, each item's dependencies, one ``(present, absent)`` pair of the
    condition, at most one item per name, and between ``low`` and ``high`` members counting up to
    ``extras`` undeclared ones (None: any number).

    The automaton's liveness follows the member set's edges, blind to these counts, so an object
    whose rules contradict each other only by counting (``not: {required: [a]}`` beside
    ``minProperties: 2`` with two declared names) would open and then allow nothing: the schema
    fuzzer's dead ends after ``{``. Past ``_COUNTED_SUBSETS`` items only the names are counted
    against ``low`` (otherwise unsure: True).
    """
    if len(items) > _COUNTED_SUBSETS:
        return extras is None or len({name for name, _ in items}) + extras >= low
    needed = sum(1 << i for i, (_, required) in enumerate(items) if required)
    same_name = [sum(1 << j for j, (other, _) in enumerate(items) if other == name and j != i)
                 for i, (name, _) in enumerate(items)]  # fmt: skip
    for mask in range(1 << len(items)):
        if mask & needed != needed:
            continue
        present = [i for i in range(len(items)) if mask >> i & 1]
        if any(mask & same_name[i] for i in present):
            continue
        if any(mask >> i & 1 and any(not mask >> j & 1 for j in others) for i, others in dependencies):
            continue
        if condition and not any(mask & (want | avoid) == want for want, avoid in condition):
            continue
        most = None if extras is None else len(present) + extras
        if (most is None or most >= low) and (high is None or len(present) <= high):
            return True
    return False


def _counted_scalar(node: Node, memo: dict[int, bool] | None = None) -> bool:
    """Whether ``node`` is a string or number value (characters, counts, lengths, multiples, and
    products of them: ``pattern`` beside ``format``, a ``oneOf`` of integers): no member, item
    set, nested level or grammar rule, so its automaton is small. ``memo`` is keyed by node
    identity (a tree shares nodes: through ``$ref`` a billion-laughs schema holds 2^29 paths)."""
    memo = {} if memo is None else memo
    known = memo.get(id(node))
    if known is not None:
        return known
    parts: tuple[Node, ...] = ()
    if isinstance(node, (Intersect, Difference)) and narrowed(node) is not node:
        # as the automaton builds it: a string's not subtracts strings, not a free-form value
        result, parts = True, (narrowed(node),)
    elif isinstance(node, (CharSet, Literals, Tick, Multiple)):
        result = True
    elif isinstance(node, (Intersect, Difference, Concat, Alt)):
        result = True
        parts = (node.parts if isinstance(node, (Intersect, Concat)) else node.options if isinstance(node, Alt)
                 else (node.base, *node.minus))  # fmt: skip
    elif isinstance(node, (Repeat, Length)):
        result = not isinstance(node, Repeat) or node.separator is None
        parts = (node.node,)
    else:
        result = False
    result = result and all(_counted_scalar(part, memo) for part in parts)
    memo[id(node)] = result
    return result


def _class_split(value_class: Any) -> tuple[Any, Any]:
    """A value class and its complement, as schemas. A class that only names types (``const:
    null`` is ``type: null``) has the other types as its complement, which merges with the
    member's own schema; ``not`` would stand beside that schema's own conditions and send the
    member the general way (a product), where the complement keeps it to bits."""
    if isinstance(value_class, dict) and set(value_class) <= {"const", "enum", "type"}:
        if value_class in ({"const": None}, {"enum": [None]}):
            value_class = {"type": "null"}
        types = value_class.get("type")
        types = [types] if isinstance(types, str) else types
        if (set(value_class) == {"type"} and isinstance(types, list) and set(types) <= set(_TYPES)
                and not ("integer" in types and "number" not in types)):  # (no type is "non-integer number")
            others = [t for t in _TYPES if t not in types and not (t == "integer" and "number" in types)]
            return value_class, {"type": others} if others else False
    return value_class, {"not": value_class}


_TYPE_KEYWORDS = frozenset({
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains",
    "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    "patternProperties", "propertyNames", "dependentRequired",
})  # fmt: skip
_TAKE_MAX = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_TAKE_MIN = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})


#: Any text at all: a superset of every JSON value, however deep.
_ANY_TEXT = Repeat(CharSet(((0, 0x10FFFF),)), 0, None)
# Number spellings a bounded or integer regex leaves out: exponents, texts long enough (16+
# digits) that json.loads rounds them to a float of another value, and -0 (zero, whatever the
# bounds say of zero). A superset of numbers adds them all.
_LOOSE_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+|-?[0-9][0-9.]{15,}|-0(?:\.0+)?"
# A string holding an escape json.dumps would not write (\/ or any \u): another spelling.
_ESCAPED_STRING = (
    rf'"{STRING_CHAR}*(?:\\/|\\u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{{3}}|[dD][0-7][0-9a-fA-F]{{2}})'
    rf'|\\u[dD][89abAB][0-9a-fA-F]{{2}}\\u[dD][c-fC-F][0-9a-fA-F]{{2}}){STRING_CHAR}*"'
)
_OTHER_SPELLINGS: dict[str, Callable[[Node], Node]] = {
    "integer": lambda node: alt(seq(node, optional(_fragment(r"\.0+"))), _fragment(_LOOSE_NUMBER)),
    "number": lambda node: alt(seq(node, optional(_fragment(r"\.0+"))), _fragment(_LOOSE_NUMBER)),
    "string": lambda node: alt(node, _fragment(_ESCAPED_STRING)),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_spellings(value: Any) -> Node:
    """Every spelling of a number constant (a superset): trailing zeros, exponents, long texts.

    A decimal of at most 15 significant digits reads back as the one double nearest it, and
    two such decimals never share one, so a spelling of ``0.5`` without an exponent and under
    16 characters is ``0.5`` with trailing zeros: only exponents and long texts (which may
    round onto it) need the loose forms. Before, any decimal constant stood for every number,
    so ``contains: {enum: [0.5]}`` counted a 0 as a match.
    """
    if isinstance(value, float) and not value.is_integer():
        text = repr(value)
        if "e" in text or len(text.lstrip("-").replace(".", "").lstrip("0")) > 15:
            return _fragment(NUMBER)  # its shortest spelling is already a loose one
        return alt(_fragment(re.escape(text) + "0*"), _fragment(_LOOSE_NUMBER))
    digits = str(int(value))
    sign = "-?" if digits == "0" else ""
    return alt(_fragment(sign + re.escape(digits) + r"(?:\.0+)?"), _fragment(_LOOSE_NUMBER))


def _anchored_alternatives(pattern: str) -> list[tuple[bool, str, bool]]:
    """``(anchored at the start, body, anchored at the end)`` per top-level alternative.

    A group that spans a whole alternative is opened (``(^a$)`` reads as ``^a$``), so
    anchors written inside it count too. A ``$`` after an odd run of backslashes is a
    literal dollar, not an anchor.
    """
    out = []
    stack = [(False, pattern, False)]
    while stack:
        starts, body, ends = stack.pop()
        parts = _split_top_level(body)
        if len(parts) > 1:
            stack.extend((starts, part, ends) for part in reversed(parts))
            continue
        changed = True
        while changed:
            changed = False
            if body.startswith("^"):
                body, starts, changed = body[1:], True, True
            if body.endswith("$") and (len(body) - 1 - len(body[:-1].rstrip("\\"))) % 2 == 0:
                body, ends, changed = body[:-1], True, True
        inner = _whole_group(body)
        if inner is not None and ("^" in inner or "$" in inner):
            stack.append((starts, inner, ends))
            continue
        if body.startswith("$"):  # the end of the string, then only what matches nothing: ``^$[a-z]*$``
            rest = body.lstrip("$")
            if rest and not _matches_empty(rest):
                continue  # this alternative can never match
            body, ends = "", True
        out.append((starts, body, ends))
    return out


def _leading_lookaround(body: str) -> tuple[bool, str, str] | None:
    """``(positive, inside, rest)`` for a body that opens with ``(?=…)`` or ``(?!…)``, else None.

    Right after ``^`` a lookahead is an intersection (or a difference) with the strings
    that start with what it matches: ``^(?!@@)[@a-z]+$`` is ``[@a-z]+`` minus ``@@.*``,
    ``^(?=[^=]+$).+$`` is ``.+`` ∩ ``[^=]+``. Elsewhere it stays refused as non-regular
    syntax (it is regular, but needs the rest of the pattern at that point)."""
    if not body.startswith(("(?=", "(?!")):
        return None
    for index, _, depth in _structure(body):
        if depth == 0:
            return body[2] == "=", body[3:index], body[index + 1 :]
    return None


def _matches_empty(pattern: str) -> bool:
    """Whether a pattern (no anchors) matches the empty string, by our own automaton."""
    try:
        return LazyDFA(ByteNFA(parse_regex(pattern, ecma=True), Limits())).matches(b"")
    except PatternError:
        return False  # it cannot be parsed here either: the caller's parse will say why


def _structure(pattern: str) -> Iterator[tuple[int, str, int]]:
    """``(index, character, group depth after it)`` outside escapes and character classes."""
    depth, i, in_class = 0, 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += pattern[i + 1 : i + 2] == "^"
            i += pattern[i + 1 : i + 2] == "]"  # a ']' first in a class is a literal
        else:
            depth += (char == "(") - (char == ")")
            yield i, char, depth
        i += 1


def _split_top_level(pattern: str) -> list[str]:
    """Split at ``|`` outside groups and character classes."""
    cuts = [i for i, char, depth in _structure(pattern) if char == "|" and depth == 0]
    return [pattern[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)])]


def _whole_group(pattern: str) -> str | None:
    """The inside of a plain or non-capturing group that spans all of ``pattern``, else None."""
    if not pattern.startswith("(") or not pattern.endswith(")") or pattern.startswith("(?") and not (
        pattern.startswith("(?:")
    ):
        return None
    inside = pattern[3:-1] if pattern.startswith("(?:") else pattern[1:-1]
    depths = [depth for _, _, depth in _structure(inside)]
    return inside if all(d >= 0 for d in depths) and (not depths or depths[-1] == 0) else None


def _fixpoint_drops(dependent: dict[str, list[str]], present: set[str]) -> list[tuple[str, list[str]]]:
    """Remove from ``present`` every member that depends on one that cannot appear; returns those."""
    dropped = []
    changed = True
    while changed:
        changed = False
        for name, needs in dependent.items():
            if name in present and any(n not in present for n in needs):
                present.discard(name)
                dropped.append((name, needs))
                changed = True
    return dropped


def _conjoin_all(schemas: list[Any]) -> Any:
    result: Any = True
    for schema in schemas:
        result = _conjoin(result, schema)
    return result


def _conjoin(a: Any, b: Any) -> Any:
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    if a is False or b is False:
        return False
    return {"allOf": [a, b]}


def _item_at(schema: dict[str, Any], i: int) -> Any:
    prefix = schema.get("prefixItems", [])
    return prefix[i] if i < len(prefix) else schema.get("items", True)


def _property(schema: dict[str, Any], name: str) -> Any:
    return schema.get("properties", {}).get(name, schema.get("additionalProperties", True))


@dataclass(frozen=True)
class _Footprint:
    """What a schema evaluates when it holds: property names and patterns, or all of them;
    the count of leading items, or all of them, and the schemas of ``contains``."""

    names: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = ()
    all_properties: bool = False
    prefix: int = 0
    all_items: bool = False
    contains: tuple[Any, ...] = ()

    @property
    def empty(self) -> bool:
        return self == _Footprint()

    def union(self, *others: "_Footprint") -> "_Footprint":
        out = self
        for o in others:
            out = _Footprint(
                out.names | o.names, out.patterns + tuple(p for p in o.patterns if p not in out.patterns),
                out.all_properties or o.all_properties, max(out.prefix, o.prefix), out.all_items or o.all_items,
                out.contains + tuple(c for c in o.contains if c not in out.contains),
            )
        return out

    def demand(self, keyword: str, value: Any) -> dict[str, Any] | None:
        """The schema that makes what this footprint leaves unevaluated match ``value``."""
        if keyword == "unevaluatedProperties":
            if self.all_properties:
                return None
            return {"properties": dict.fromkeys(sorted(self.names), True),
                    "patternProperties": dict.fromkeys(self.patterns, True), "additionalProperties": value}  # fmt: skip
        if self.all_items:
            return None
        rest = {"anyOf": [*self.contains, value]} if self.contains else value
        return {"prefixItems": [True] * self.prefix, "items": rest} if self.prefix else {"items": rest}


def _decimal_step(step: Any, pointer: str = "") -> tuple[int, int]:
    """``multipleOf`` as ``(digits, scale)`` with step = digits / 10**scale, read as the decimal
    the schema wrote (0.1 is one tenth, not the binary float nearest to it)."""
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not step > 0 or step == math.inf:
        raise SchemaError(f"multipleOf at {pointer or '#'} must be a number greater than 0, not {step!r}")
    exact = (Decimal(repr(step)) if isinstance(step, float) else Decimal(step)).normalize()
    sign, digit_tuple, exponent = exact.as_tuple()
    if not isinstance(exponent, int):  # NaN and infinities were refused above
        raise SchemaError(f"multipleOf at {pointer or '#'} must be a finite number, not {step!r}")
    digits = int("".join(map(str, digit_tuple)))
    if exponent >= 0:
        return digits * 10**exponent, 0
    return digits, -exponent


def _integral(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


def _count(value: Any, keyword: str, pointer: str) -> Any:
    """A non-negative integer keyword value; 2.0 counts as 2 (JSON has one number type)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not float(value).is_integer():
        raise SchemaError(f"{keyword} at {pointer} must be a non-negative integer, not {value!r}")
    return int(value)


#: Most options ``_Walker.clear_of`` adds for one ``oneOf`` branch: each is a copy of the branch.
_CLEAR_CHOICES = 8


@dataclasses.dataclass(frozen=True)
class _Facts:
    """Necessary conditions of a schema (see ``_Walker.facts``); None: not known.

    ``types`` holds the JSON types an instance may have (``number`` admits integers too),
    ``values`` the JSON keys of the only values allowed, ``tags`` the
    keys a property's value must have when present, ``required`` names that must be
    present in an object.
    """

    empty: bool = False
    types: frozenset[str] | None = None
    values: frozenset[str] | None = None
    value_types: frozenset[str] | None = None
    required: frozenset[str] = frozenset()
    tags: dict[str, frozenset[str]] | None = None
    #: The keys a property's value must not have when present (``not: {enum: [...]}``).
    untags: dict[str, frozenset[str]] | None = None
    #: The only names an object may hold (``additionalProperties: false``), or None.
    closed: frozenset[str] | None = None
    #: The facts of a property's value when present (read one level down), by name.
    members: dict[str, "_Facts"] | None = None

    def meet(self, other: "_Facts") -> "_Facts":
        """The facts of both schemas at once (an ``allOf``)."""
        def both(a: Any, b: Any) -> Any:
            return b if a is None else a if b is None else a & b

        tags = dict(self.tags or {})
        for name, keys in (other.tags or {}).items():
            tags[name] = tags[name] & keys if name in tags else keys
        untags = dict(self.untags or {})
        for name, keys in (other.untags or {}).items():
            untags[name] = untags[name] | keys if name in untags else keys
        members = dict(self.members or {})
        for name, facts in (other.members or {}).items():
            members[name] = members[name].meet(facts) if name in members else facts
        return _Facts(self.empty or other.empty, both(self.types, other.types), both(self.values, other.values),
                      both(self.value_types, other.value_types), self.required | other.required, tags or None,
                      untags or None, both(self.closed, other.closed), members or None)  # fmt: skip

    def join(self, other: "_Facts") -> "_Facts":
        """What holds for instances of either schema (an ``anyOf`` or ``oneOf``): its types, values
        and required names where both know them; tags, members and closed names are not kept."""
        if self.empty or other.empty:
            return other if self.empty else self

        def either(a: Any, b: Any) -> Any:
            return None if a is None or b is None else a | b

        return _Facts(False, either(self.types, other.types), either(self.values, other.values),
                      either(self.value_types, other.value_types), self.required & other.required)  # fmt: skip

    def admits(self, key: str) -> bool:
        """Whether the value whose JSON key is ``key`` may satisfy these facts (False: surely not)."""
        value = json.loads(key)
        kinds = self.admitted()
        if self.empty or (self.values is not None and key not in self.values) or (
            kinds is not None and _json_type(value) not in kinds
        ):
            return False
        if not isinstance(value, dict):
            return True
        if not self.required <= set(value) or (self.closed is not None and not set(value) <= self.closed):
            return False
        for name, member in value.items():
            member_key = _json_key(member)
            if (self.tags and name in self.tags and member_key not in self.tags[name]) or (
                self.untags and name in self.untags and member_key in self.untags[name]
            ):
                return False
        return True

    def admitted(self) -> frozenset[str] | None:
        """The JSON types an instance may have, or None for any."""
        kinds = self.types
        if self.value_types is not None:
            kinds = self.value_types if kinds is None else kinds & self.value_types
        return kinds

    def separators(self, other: "_Facts") -> frozenset[str]:
        """The names that no object satisfying both holds: tags whose values lie apart, or
        members whose values are disjoint (``{"_attributes": {"required": ["system"], ...}}``
        with ``system`` listed as ``rpm`` in one branch, ``dpkg`` in the other)."""
        names = set()
        for one, two in ((self, other), (other, self)):
            for name, keys in (one.tags or {}).items():
                if (two.tags and name in two.tags and not keys & two.tags[name]) or (
                    two.untags and name in two.untags and keys <= two.untags[name]
                ):
                    names.add(name)
        mine, theirs = self.members or {}, other.members or {}
        names.update(name for name in mine.keys() & theirs.keys() if mine[name].disjoint(theirs[name]))
        return frozenset(names)

    def disjoint(self, other: "_Facts") -> bool:
        """No instance satisfies both: proved by types, by values, or by a tag property."""
        if self.empty or other.empty:
            return True
        mine, theirs = self.admitted(), other.admitted()
        if mine is not None and theirs is not None and not mine & theirs:
            return True
        if self.values is not None and other.values is not None and not self.values & other.values:
            return True
        for one, two in ((self, other), (other, self)):  # a listed value that the other side excludes
            if one.values is not None and not any(two.admits(key) for key in one.values):
                return True
        # A tag tells objects apart only: a non-object satisfies required and properties alike.
        if (mine is not None and mine <= {"object"}) or (theirs is not None and theirs <= {"object"}):
            for one, two in ((self, other), (other, self)):
                if two.closed is not None and not one.required <= two.closed:  # a name the other never holds
                    return True
            if self.separators(other) & (self.required | other.required):  # a required tag apart
                return True
        return False


#: How deep ``_Walker.facts`` reads members' own facts: a branch's properties, through its
#: ``allOf`` and ``$ref``, and no further (their members are not read).
_MEMBER_FACTS_DEPTH = 4
#: How deep ``_Walker.facts`` reads the branches of an ``anyOf``/``oneOf`` (a ``$ref`` to a
#: recursive ``oneOf`` of objects, beside an array: MaskBench o81108).
_BRANCH_FACTS_DEPTH = 4


def _expand_type(name: str) -> frozenset[str]:
    return frozenset({"number", "integer"}) if name == "number" else frozenset({name})


def _json_type(value: Any) -> str:
    """The JSON Schema type of a value (``1.0`` is an integer, ``true`` is not)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "?")


#: The most distinct values ``uniqueItems`` tracks, one seen bit each (see ``unique_array``).
_UNIQUE_VALUES = 32
_UNIQUE_CONDITIONAL = ("the same subschema also applies at a place in the instance that depends on the rest of it "
                       "(a branch of anyOf or oneOf, not, if, contains): the guide checks uniqueItems only at places "
                       "reached through properties, patternProperties, additionalProperties, items and allOf")


#: The most key languages ``patternProperties`` builds: one per set of patterns keys match together.
_KEY_CLASSES = 24


def _pattern_sets(count: int, disjoint: set[tuple[int, int]]) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """The sets of patterns that one key may match together, largest first, each with the other
    patterns that may still match its keys; None past ``_KEY_CLASSES`` sets.

    A key matches a set of patterns and none of the others, so each set is a key language
    of its own. A set with two disjoint patterns holds no key, and a pattern disjoint from
    one in the set matches none of its keys: only sets of pairwise overlapping patterns
    count, and only patterns that overlap all of a set are subtracted from it (19 patterns
    with distinct literal prefixes are 19 classes, not 2^19).
    """
    overlap = [[i != j and (min(i, j), max(i, j)) not in disjoint for j in range(count)] for i in range(count)]
    sets: list[tuple[int, ...]] = []
    stack: list[tuple[int, ...]] = [(i,) for i in reversed(range(count))]
    while stack:
        chosen = stack.pop()
        sets.append(chosen)
        if len(sets) > _KEY_CLASSES:
            return None
        stack.extend(chosen + (j,) for j in reversed(range(chosen[-1] + 1, count)) if all(overlap[i][j] for i in chosen))
    sets.sort(key=len, reverse=True)
    return [(chosen, tuple(j for j in range(count) if j not in chosen and all(overlap[i][j] for i in chosen)))
            for chosen in sets]  # fmt: skip


def _finite_values(items: Any) -> list[Any] | None:
    """The distinct JSON values (JSON equality) an items schema allows at most, where it names
    them itself (``enum``, ``const``, ``type`` boolean or null); None otherwise or past ``_UNIQUE_VALUES``."""
    if not isinstance(items, dict):
        return None
    if "const" in items:
        values = [items["const"]]
    elif isinstance(items.get("enum"), list):
        values = items["enum"]
    elif items.get("type") == "boolean":
        values = [True, False]
    elif items.get("type") == "null":
        values = [None]
    else:
        return None
    distinct = list({_json_key(v): v for v in values}.values())
    return distinct if len(distinct) <= _UNIQUE_VALUES else None


def _listed_values(schema: Any, lacks: frozenset[str]) -> frozenset[str] | None:
    """The JSON keys of the only values ``schema`` allows (its ``const`` or ``enum``), or None."""
    if isinstance(schema, dict) and "const" in schema and "const" not in lacks:
        return frozenset([_json_key(schema["const"])])
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        return frozenset(_json_key(v) for v in schema["enum"])
    return None


def _json_key(value: Any) -> str:
    """A text equal for JSON-equal values: ``1`` and ``1.0`` alike, ``true`` and ``1`` not, keys unordered."""

    def normal(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: normal(x) for k, x in v.items()}
        if isinstance(v, list):
            return [normal(x) for x in v]
        return v

    return json.dumps(normal(value), sort_keys=True)


def _flipped_max_properties(inner: Any) -> dict[str, Any] | None:
    """The negation of ``inner`` as a positive schema, where ``inner`` asserts ``maxProperties: k``
    alone or beside ``type: "object"``, else None.

    A ``not`` subtracts a superset of its schema, and for texts that may repeat a key the
    superset of ``maxProperties: k`` (k ≥ 1) is every object (a repeated key makes more
    members than properties), so ``not: {maxProperties: 1}`` was empty, and as a member's
    value a dead end after the comma before it (schema fuzzer, seed 19 at f5b0509). Every
    non-object satisfies ``maxProperties``, so its negation is exactly an object with more than
    ``k`` properties (and, where ``inner`` also asks for an object, every non-object besides):
    open in both modes, as the free-form value it replaces, with ``minProperties``' documented
    count of undeclared keys (once per group of their last byte).
    """
    asserted = set(inner) & _ASSERTIONS if isinstance(inner, dict) else set()
    if not {"maxProperties"} <= asserted <= {"maxProperties", "type"}:
        return None
    bound, kind = inner["maxProperties"], inner.get("type")
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0 or kind not in (None, "object"):
        return None  # a bad bound or type: the usual path names it; other types: the usual path
    larger = {"type": "object", "minProperties": bound + 1, "additionalProperties": True}
    if kind is None:
        return larger
    return {"anyOf": [{"type": ["null", "boolean", "number", "string", "array"]}, larger]}


def _json_in(value: Any, values: list[Any]) -> bool:
    key = _json_key(value)
    return any(_json_key(v) == key for v in values)


def _scalar_spellings(values: list[Any]) -> list[bytes]:
    spellings = []
    for value in values:
        spellings.append(json.dumps(value, ensure_ascii=False).encode("utf-8"))
        if isinstance(value, str):
            spellings.append(json.dumps(value).encode("utf-8"))  # json.dumps' default \u escapes
        if isinstance(value, float) and value.is_integer():
            spellings.append(str(int(value)).encode("utf-8"))  # 1.0 == 1 in JSON Schema
    return spellings


@lru_cache(maxsize=1024)
def _pattern_content(pattern: str) -> Node:
    """A ``pattern`` (ECMA-262, unanchored: a *search*) as JSON string content.

    Anchors are read per top-level alternative (``^01$|^07$``, ``^(a$)|(^b$)``):
    an anchored side matches at the string's edge, an open side after or before
    any other characters. Cached by the pattern's text: a definition that ``$ref`` uses in
    many places repeats its patterns (o3895 parsed one 3,676-character pattern 74 times, most
    of its compile), and the tree depends on nothing else; trees are immutable, so every use
    shares one (the automaton builder's per-node caches hold across them too).
    """
    anything = Repeat(_ANY_CHAR, 0, None)
    options = []
    for starts, body, ends in _anchored_alternatives(pattern):
        looks = []
        while starts and (peeled := _leading_lookaround(body)) is not None:
            positive, inner, body = peeled
            looks.append((positive, _pattern_content(f"^(?:{inner})")))
        tree = parse_ecma_anchored(body) if body else Anchored(EMPTY, EMPTY, EMPTY, EMPTY)
        if tree.whole is tree.free:  # no anchor inside: text around it where this side is open
            option = seq(EMPTY if starts else anything, _json_escaped(tree.free), EMPTY if ends else anything)
        else:  # an anchor inside may be used only where nothing stands on its side
            sides = [_json_escaped(tree.whole)]
            if not ends:
                sides.append(seq(_json_escaped(tree.starting), anything))
            if not starts:
                sides.append(seq(anything, _json_escaped(tree.ending)))
            if not starts and not ends:
                sides.append(seq(anything, _json_escaped(tree.free), anything))
            option = alt(*sides)
        wanted = [look for positive, look in looks if positive]
        unwanted = [alt(look, _RESPELLED_TEXT) for positive, look in looks if not positive]
        if wanted:
            option = Intersect((option, *wanted))
        options.append(Difference(option, tuple(unwanted)) if unwanted else option)
    return alt(*options) if options else NOTHING


def _join(items: list[Node], separator: Node) -> Node:
    parts: list[Node] = []
    for i, item in enumerate(items):
        if i:
            parts.append(separator)
        parts.append(item)
    return seq(*parts) if parts else EMPTY


def _json_escaped(tree: Node) -> Node:
    """Spell a pattern's characters as JSON string content: '"', '\\' and controls escaped.

    ``pattern`` constrains the decoded string; the generated text is its JSON encoding,
    so a quote the pattern allows must be written ``\\"``. Other escapes JSON permits
    (``\\u0041`` for ``A``) are not offered — over-constrained, never invalid.
    """
    from ..regex.tree import Alt, Concat

    if isinstance(tree, CharSet):
        raw = _subtract(tree.ranges, [0x22, 0x5C, *range(0x20)])
        escaped = [_escape_char(code) for lo, hi in tree.ranges for code in range(lo, min(hi, 0x5C) + 1)
                   if code in _SPECIAL]  # fmt: skip
        return alt(*([CharSet(raw)] if raw else []), *escaped) if raw or escaped else NOTHING
    if isinstance(tree, Literals):
        return Literals(tuple(json.dumps(o.decode("utf-8"), ensure_ascii=False)[1:-1].encode() for o in tree.options))
    if isinstance(tree, Concat):
        return seq(*(_json_escaped(p) for p in tree.parts))
    if isinstance(tree, Alt):
        return alt(*(_json_escaped(o) for o in tree.options))
    if isinstance(tree, Repeat):
        return Repeat(_json_escaped(tree.node), tree.low, tree.high, tree.separator)
    raise TypeError(f"unexpected pattern node {tree!r}")


_SPECIAL = frozenset([0x22, 0x5C, *range(0x20)])


def _ticked(content: Node) -> Node | None:
    """A pattern's string content with a ``Tick`` after each character, for ``Length``; None
    where that would not be exact.

    The content is what ``string_pattern`` builds: characters (``_json_escaped``'s sets,
    literals spelled as JSON) and ``_ANY_CHAR`` for the unanchored sides. A lookaround
    makes a product, whose inside no tick reaches.
    """
    from ..regex.tree import Alt, Concat

    if content is _ANY_CHAR:
        return seq(content, Tick(1))
    if isinstance(content, CharSet):  # one raw character (quotes, backslashes and controls are literals)
        return seq(content, Tick(1)) if content.ranges else content
    if isinstance(content, Literals):
        by_units: dict[int, list[bytes]] = {}
        for option in content.options:
            try:
                units = len(json.loads(b'"' + option + b'"'))
            except ValueError:
                return None  # not whole JSON string characters
            by_units.setdefault(units, []).append(option)
        return alt(*(seq(Literals(tuple(options)), Tick(units)) if units else Literals(tuple(options))
                     for units, options in by_units.items()))  # fmt: skip
    if isinstance(content, (Concat, Alt)):
        parts = [_ticked(p) for p in (content.parts if isinstance(content, Concat) else content.options)]
        if any(p is None for p in parts):
            return None
        return seq(*parts) if isinstance(content, Concat) else alt(*parts)  # type: ignore[arg-type]
    if isinstance(content, Repeat) and content.separator is None:
        inner = _ticked(content.node)
        return None if inner is None else Repeat(inner, content.low, content.high)
    return None


def _escape_char(code: int) -> Node:
    return literal(json.dumps(chr(code))[1:-1])


def _canonical_unit(char: str) -> str:
    """One character of a JSON string as ``json.dumps(..., ensure_ascii=False)`` spells it."""
    return json.dumps(char, ensure_ascii=False)[1:-1]


#: One character of a JSON string, any spelling (``STRING_CHAR``), parsed once.
_ANY_CHAR = _fragment(STRING_CHAR)
_RAW = CharSet(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)))
_ESCAPED = tuple(_canonical_unit(chr(c)).encode() for c in [0x22, 0x5C, *range(0x20)])
#: One character of a JSON string in its canonical spelling, and any run of them.
_CANONICAL_CHAR = alt(_RAW, Literals(_ESCAPED))
_CANONICAL_TEXT = Repeat(_CANONICAL_CHAR, 0, None)
#: String content that spells some character with an escape JSON does not need: a pattern's
#: characters are written canonically (``_json_escaped``), so a negative lookahead subtracts
#: these too, and what remains is canonical text, where the lookahead is exact.
_RESPELLED_TEXT = _fragment(_ESCAPED_STRING[1:-1])


@lru_cache(maxsize=256)
def _other_key(names: tuple[str, ...]) -> Node:
    """Canonically spelled JSON key content that is none of ``names``: a trie complement.

    Kept per list of names: one node for every object that declares the same names (a
    ``oneOf`` subtracts supersets of its branches, walked again), so the automaton builder
    copies its states instead of building them again (o48661: 196 calls, 0.8 s).

    Keys spelled any other way (``"\\u0061"`` for ``a``) are left out entirely: that
    spelling of a declared name would slip past the declared property's own schema.

    A key that is no name either stops short of one (a proper prefix that is no name
    itself: a finite set), or leaves the trie at some unit and then runs on freely.
    The free run is the same text wherever the key left, so it is built once, after
    the trie of the ways to leave, not once per trie node: with the escapes as one
    shared tail too, an object with a hundred declared names costs a few thousand
    states instead of tens of thousands (and every ``oneOf`` difference rebuilt them).
    """
    trie: dict[str, Any] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(_canonical_unit(char), {})
        node[""] = {}
    if any(len(unit) > 1 for unit in _units(trie)):
        return _other_key_by_node(trie)  # a name with an escaped character: rare, built node by node
    short: list[bytes] = []  # proper prefixes that are no name
    escaping: list[bytes] = []  # every prefix, then the backslash of an escape

    def leave(node: dict[str, Any], prefix: str) -> Node:
        """Ways to leave the trie below ``node`` on a raw character (escapes: ``escaping``)."""
        if "" not in node:
            short.append(prefix.encode())
        escaping.append(prefix.encode() + b"\\")
        options: list[Node] = [CharSet(_subtract(_RAW.ranges, [ord(u) for u in node if u]))]
        for unit in sorted(u for u in node if u):
            options.append(seq(literal(unit), leave(node[unit], prefix + unit)))
        return alt(*options)

    left = alt(leave(trie, ""), seq(Literals(tuple(escaping)), Literals(tuple(e[1:] for e in _ESCAPED))))
    return alt(seq(left, _CANONICAL_TEXT), *([Literals(tuple(short))] if short else []))


def _units(trie: dict[str, Any]) -> Iterator[str]:
    for unit, child in trie.items():
        yield unit
        yield from _units(child)


def _other_key_by_node(trie: dict[str, Any]) -> Node:
    """:func:`_other_key` with the free run built at each trie node (names with escapes)."""

    def complement(node: dict[str, Any]) -> Node:
        options: list[Node] = []
        if "" not in node:
            options.append(EMPTY)
        raw_children = sorted(ord(u) for u in node if len(u) == 1)
        others = _subtract(_RAW.ranges, raw_children)
        if others:
            options.append(seq(CharSet(others), _CANONICAL_TEXT))
        escapes = tuple(e for e in _ESCAPED if e.decode() not in node)
        if escapes:
            options.append(seq(Literals(escapes), _CANONICAL_TEXT))
        for unit in sorted(u for u in node if u):
            options.append(seq(literal(unit), complement(node[unit])))
        return alt(*options) if options else NOTHING

    return complement(trie)


def _subtract(ranges: tuple[tuple[int, int], ...], points: list[int]) -> tuple[tuple[int, int], ...]:
    """``ranges`` without ``points``; the points are taken in ascending order whatever their order here
    (unsorted, a range kept every point below the first one it cut at: raw control bytes in a string)."""
    out = []
    ordered = sorted(set(points))
    for lo, hi in ranges:
        for p in ordered:
            if lo <= p <= hi:
                if lo < p:
                    out.append((lo, p - 1))
                lo = p + 1
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def _rule_name(ref: str) -> str:
    """A Lark-safe rule name for a ``$ref`` (lowercase letters, digits, underscores)."""
    tail = re.sub(r"[^a-z0-9]+", "_", ref.lower()).strip("_") or "root"
    return f"ref_{tail}_{zlib.crc32(ref.encode()) % 10**6}"


def _escape_pointer(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
