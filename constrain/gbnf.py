"""GBNF (llama.cpp's grammar format) → the regex backend, or a Lark skeleton over regex terminals.

GBNF describes text character by character: there is no lexer, and a rule may be
used anywhere. Two stages turn it into a guide:

1. :func:`parse_gbnf` reads the text into a small AST (:class:`GBNFGrammar`), with the
   line of every rule and reference so errors can point at them.
2. :func:`translate` looks at the rules reachable from the start rule. Without
   recursion the whole language is regular: every reference is inlined and the result is
   **one** regex tree (:class:`~constrain.regex.tree.Node`), compiled by the regex backend.
   With recursion, only the rules on a reference cycle stay rules; every other rule is
   inlined, and each maximal recursion-free stretch of a rule body becomes one terminal
   whose language is its regex tree — the design of
   :mod:`constrain.json_schema.to_grammar`. Lark's LALR construction then sees only the
   recursive skeleton.

Matching is on Unicode code points (UTF-8 on the wire), as in llama.cpp.

The syntax follows llama.cpp's parser: a rule is ``name ::= body``; names are letters,
digits and ``-``; whitespace and ``#`` comments separate items, and a newline does too
after ``::=``, after ``|`` and inside parentheses — anywhere else a newline ends the
rule. Token references (``<think>``, ``<[123]>``) are refused: a guide constrains text,
not token ids. Left recursion is refused as llama.cpp refuses it, so a grammar
accepted here is one llama.cpp accepts too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, TypeVar, Union

from .errors import GBNFError, GrammarError
from .regex.tree import EMPTY, Alt, CharSet, Concat, Difference, Literals, Node, Repeat, RuleRef, alt, seq
from .core.utf8 import MAX_CODEPOINT, complement_ranges
from .skeleton import SkeletonWriter, has_rule_ref, nullable, terminal_priority

T = TypeVar("T")

__all__ = [
    "GBNFError", "GBNFGrammar", "GBNFRule", "GBNFTranslation",
    "Literal", "CharClass", "AnyChar", "Reference", "Sequence", "Choice", "Repetition", "Expr",
    "parse_gbnf", "translate", "translate_gbnf",
]  # fmt: skip


# ---------------------------------------------------------------------- the AST


@dataclass(frozen=True)
class Literal:
    """A string matched exactly (never empty: ``""`` parses to an empty :class:`Sequence`)."""

    text: str


@dataclass(frozen=True)
class CharClass:
    """One code point in ``ranges`` (or, when ``negated``, outside them)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class AnyChar:
    """``.``: any one code point, newlines included."""


@dataclass(frozen=True)
class Reference:
    """A use of rule ``name``; ``line`` is where the use is, for "undefined rule" errors."""

    name: str
    line: int


@dataclass(frozen=True)
class Sequence:
    items: tuple["Expr", ...]


@dataclass(frozen=True)
class Choice:
    options: tuple["Expr", ...]


@dataclass(frozen=True)
class Repetition:
    """``item`` repeated ``low`` to ``high`` times (``high`` None: unbounded)."""

    item: "Expr"
    low: int
    high: int | None


Expr = Union[Literal, CharClass, AnyChar, Reference, Sequence, Choice, Repetition]


@dataclass(frozen=True)
class GBNFRule:
    name: str
    body: Expr
    line: int


@dataclass(frozen=True)
class GBNFGrammar:
    """The rules in the order they are defined."""

    rules: dict[str, GBNFRule]


# ---------------------------------------------------------------------- parsing

#: How deeply parentheses may nest: the parser and every later pass recurse on it.
MAX_NESTING = 200
#: The largest repetition bound accepted (llama.cpp refuses far smaller ones in practice;
#: past this the automaton would be refused by ``Limits`` anyway, after a long wait).
MAX_REPETITION = 100_000

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def parse_gbnf(text: str) -> GBNFGrammar:
    """The rules of GBNF ``text``; raises :class:`GBNFError` naming the rule and line at fault."""
    if not isinstance(text, str):
        raise GBNFError(f"a GBNF grammar is text, not {type(text).__name__}")
    return _Parser(text).grammar()


@dataclass
class _Parser:
    """Recursive descent over the text; ``rule`` is the rule being read, for error messages."""

    text: str
    pos: int = 0
    rule: str | None = None
    depth: int = 0
    rules: dict[str, GBNFRule] = field(default_factory=dict)

    # -- positions and errors

    @property
    def line(self) -> int:
        return self.text.count("\n", 0, self.pos) + 1

    def fail(self, message: str) -> GBNFError:
        shown = self.text[self.pos:self.pos + 20].split("\n")[0]
        where = f" at {shown!r}" if shown else " at the end of the line" if self.pos < len(self.text) else " at the end"
        return GBNFError(message + where, rule=self.rule, line=self.line)

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def skip_space(self, newlines: bool) -> None:
        """Spaces, tabs and comments; newlines too where ``newlines`` (they end a rule elsewhere)."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t" or (newlines and char in "\r\n"):
                self.pos += 1
            elif char == "#":
                while self.pos < len(text) and text[self.pos] not in "\r\n":
                    self.pos += 1
            else:
                return

    # -- rules

    def grammar(self) -> GBNFGrammar:
        self.skip_space(newlines=True)
        while self.pos < len(self.text):
            self.definition()
        if not self.rules:
            raise GBNFError("the grammar defines no rule")
        return GBNFGrammar(self.rules)

    def definition(self) -> None:
        self.rule = None
        line = self.line
        name = self.name()
        self.rule = name
        if name in self.rules:
            raise GBNFError(f"rule {name!r} is defined twice (first on line {self.rules[name].line})",
                            rule=name, line=line)  # fmt: skip
        self.skip_space(newlines=False)
        if not self.text.startswith("::=", self.pos):
            raise self.fail("expected '::=' after the rule name")
        self.pos += 3
        self.skip_space(newlines=True)
        body = self.alternatives(nested=False)
        if self.peek() == "\r":
            self.pos += 2 if self.peek(1) == "\n" else 1
        elif self.peek() == "\n":
            self.pos += 1
        elif self.pos < len(self.text):
            raise self.fail("expected an item, '|' or the end of the line")
        self.rules[name] = GBNFRule(name, body, line)
        self.skip_space(newlines=True)

    def name(self) -> str:
        start = self.pos
        while self.peek() and self.peek() in _NAME_CHARS:
            self.pos += 1
        if self.pos == start:
            raise self.fail("expected a rule name (letters, digits, '-')")
        return self.text[start:self.pos]

    # -- bodies

    def alternatives(self, nested: bool) -> Expr:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.skip_space(newlines=True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def sequence(self, nested: bool) -> Expr:
        items: list[Expr] = []
        while True:
            char = self.peek()
            if char == '"':
                items.append(self.literal())
            elif char == "[":
                items.append(self.char_class())
            elif char == ".":
                self.pos += 1
                items.append(AnyChar())
            elif char and char in _NAME_CHARS:
                line = self.line
                items.append(Reference(self.name(), line))
            elif char == "(":
                items.append(self.group())
            elif char in ("*", "+", "?", "{"):
                if not items:
                    raise self.fail(f"'{char}' must follow an item")
                items[-1] = self.repetition(items[-1])
            elif char == "<":
                raise self.fail("token references (<...>) are not supported: a guide constrains text")
            else:
                break
            self.skip_space(newlines=nested)
        return items[0] if len(items) == 1 else Sequence(tuple(items))

    def group(self) -> Expr:
        if self.depth >= MAX_NESTING:
            raise self.fail(f"parentheses nest deeper than {MAX_NESTING} levels")
        self.depth += 1
        self.pos += 1
        self.skip_space(newlines=True)
        inner = self.alternatives(nested=True)
        if self.peek() != ")":
            raise self.fail("expected ')'")
        self.pos += 1
        self.depth -= 1
        return inner

    def repetition(self, item: Expr) -> Expr:
        char = self.peek()
        self.pos += 1
        if char != "{":
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
            return Repetition(item, low, high)
        self.skip_space(newlines=False)
        low = self.integer()
        high = low
        self.skip_space(newlines=False)
        if self.peek() == ",":
            self.pos += 1
            self.skip_space(newlines=False)
            high = self.integer() if self.peek().isdigit() else None
            self.skip_space(newlines=False)
        if self.peek() != "}":
            raise self.fail("expected '}' closing the repetition")
        self.pos += 1
        if high is not None and high < low:
            raise self.fail(f"repetition {{{low},{high}}} has its maximum below its minimum")
        return Repetition(item, low, high)

    def integer(self) -> int:
        start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        if self.pos == start:
            raise self.fail("expected a number in the repetition")
        if self.pos - start > len(str(MAX_REPETITION)) or int(self.text[start:self.pos]) > MAX_REPETITION:
            self.pos = start
            raise self.fail(f"a repetition bound above {MAX_REPETITION}")
        return int(self.text[start:self.pos])

    def literal(self) -> Expr:
        self.pos += 1
        chars: list[str] = []
        while self.peek() != '"':
            if not self.peek() or self.peek() in "\r\n":
                raise self.fail("unterminated string literal")
            chars.append(chr(self.char()))
        self.pos += 1
        return Literal("".join(chars)) if chars else Sequence(())

    def char_class(self) -> Expr:
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek() or self.peek() in "\r\n":
                raise self.fail("unterminated character class")
            low = self.char()
            high = low
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self.char()
                if high < low:
                    raise self.fail(f"character range {chr(low)!r}-{chr(high)!r} is reversed")
            ranges.append((low, high))
        self.pos += 1
        return CharClass(_merged(ranges), negated)

    def char(self) -> int:
        """One code point of a literal or class, escapes decoded."""
        char = self.peek()
        if char != "\\":
            self.pos += 1
            if 0xD800 <= ord(char) <= 0xDFFF:
                raise self.fail("a lone surrogate is no character of UTF-8 text")
            return ord(char)
        kind = self.peek(1)
        if kind in _SIMPLE_ESCAPES:
            self.pos += 2
            return ord(_SIMPLE_ESCAPES[kind])
        if kind in _HEX_ESCAPES:
            width = _HEX_ESCAPES[kind]
            digits = self.text[self.pos + 2:self.pos + 2 + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"\\{kind} takes exactly {width} hex digits")
            code = int(digits, 16)
            if code > MAX_CODEPOINT or 0xD800 <= code <= 0xDFFF:
                raise self.fail(f"\\{kind}{digits} is not a Unicode scalar value")
            self.pos += 2 + width
            return code
        raise self.fail(f"unknown escape '\\{kind}'")


def _merged(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


# ---------------------------------------------------------------------- translation


@dataclass(frozen=True)
class GBNFTranslation:
    """What a backend compiles: ``tree`` for a regular grammar, else the Lark skeleton.

    ``lark_text`` (start rule ``start``) names its terminals, ``terminals`` gives each
    one's regex tree, and ``rule_names`` maps each Lark rule back to its GBNF rule.
    """

    tree: Node | None = None
    lark_text: str | None = None
    terminals: dict[str, Node] = field(default_factory=dict)
    rule_names: dict[str, str] = field(default_factory=dict)

    def with_gbnf_names(self, build: Callable[[], T]) -> T:
        """Run ``build`` (the CFG compilation of this skeleton), so that a :class:`GrammarError`
        it raises names the GBNF rule instead of its Lark rule."""
        try:
            return build()
        except GBNFError:
            raise
        except GrammarError as exc:
            rule = self.rule_names.get(exc.rule or "", exc.rule)
            message = str(exc)
            for lark_name, name in self.rule_names.items():
                message = message.replace(lark_name, name)
            raise GBNFError(f"the CFG backend cannot take this grammar: {message}", rule=rule) from None
        except RecursionError:
            raise GBNFError("the grammar's expressions nest too deeply to compile") from None


def translate_gbnf(text: str, start: str = "root") -> GBNFTranslation:
    """:func:`parse_gbnf`, then :func:`translate`."""
    try:
        return translate(parse_gbnf(text), start)
    except RecursionError:
        raise GBNFError("the grammar nests too deeply to translate") from None


def translate(grammar: GBNFGrammar, start: str = "root") -> GBNFTranslation:
    """The regex tree (no recursion) or the Lark skeleton (recursion) of ``grammar`` from ``start``."""
    if start not in grammar.rules:
        raise GBNFError(f"the start rule {start!r} is not defined", rule=start)
    reachable = _reachable(grammar, start)
    recursive = _recursive_rules(grammar, reachable)
    _refuse_left_recursion(grammar, recursive)
    trees = _Trees(grammar, recursive)
    if not recursive:
        return GBNFTranslation(tree=trees.of_rule(start))
    lark_names = {name: f"r{i}_{_lark_safe(name)}" for i, name in enumerate(n for n in reachable if n in recursive)}
    bodies = {name: trees.of_body(name) for name in lark_names}
    writer = _SkeletonWriter(lark_names)
    lines = [f"start: {writer.expansion(_absorb_followers(trees.of_rule(start), bodies))}"]
    for name, lark_name in lark_names.items():
        lines.append(f"{lark_name}: {writer.expansion(_absorb_followers(bodies[name], bodies))}")
    # Lark needs a pattern per terminal; distinct placeholders keep it from merging any two.
    # The priority is the terminal's shortest match: where one terminal's match is a prefix
    # of another's (``f`` and ``f(``), lark's first-match lexer must try the longer first.
    lines += [f'{terminal}.{terminal_priority(tree)}: "<{terminal}>"' for tree, terminal in writer.terminals.items()]
    return GBNFTranslation(
        lark_text="\n".join(lines) + "\n",
        terminals={terminal: tree for tree, terminal in writer.terminals.items()},
        rule_names={lark_name: name for name, lark_name in lark_names.items()},
    )


def _references(expr: Expr) -> list[Reference]:
    if isinstance(expr, Reference):
        return [expr]
    if isinstance(expr, (Sequence, Choice)):
        parts = expr.items if isinstance(expr, Sequence) else expr.options
        return [ref for part in parts for ref in _references(part)]
    if isinstance(expr, Repetition):
        return _references(expr.item)
    return []


def _reachable(grammar: GBNFGrammar, start: str) -> list[str]:
    """Rules reachable from ``start`` in discovery order; an undefined reference is an error."""
    order, seen, stack = [], {start}, [start]
    while stack:
        name = stack.pop()
        order.append(name)
        for ref in _references(grammar.rules[name].body):
            if ref.name not in grammar.rules:
                raise GBNFError(f"rule {ref.name!r} is used but never defined", rule=name, line=ref.line)
            if ref.name not in seen:
                seen.add(ref.name)
                stack.append(ref.name)
    return order


def _recursive_rules(grammar: GBNFGrammar, names: list[str]) -> set[str]:
    """The rules on some reference cycle (Tarjan's strongly connected components, iteratively)."""
    edges = {name: [ref.name for ref in _references(grammar.rules[name].body)] for name in names}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    recursive: set[str] = set()
    for root in names:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                succ = edges[node][i]
                if succ not in index:
                    work.append((succ, 0))
                elif succ in on_stack:
                    low[node] = min(low[node], index[succ])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    recursive.update(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return recursive


def _nullable_rules(grammar: GBNFGrammar) -> set[str]:
    """Rules that derive the empty string (a fixpoint: each round adds rules, at most one round per rule)."""
    nullable: set[str] = set()
    while True:
        found = {name for name, rule in grammar.rules.items()
                 if name not in nullable and _nullable(rule.body, nullable)}  # fmt: skip
        if not found:
            return nullable
        nullable |= found


def _nullable(expr: Expr, nullable: set[str]) -> bool:
    if isinstance(expr, Reference):
        return expr.name in nullable
    if isinstance(expr, Sequence):
        return all(_nullable(item, nullable) for item in expr.items)
    if isinstance(expr, Choice):
        return any(_nullable(option, nullable) for option in expr.options)
    if isinstance(expr, Repetition):
        return expr.low == 0 or _nullable(expr.item, nullable)
    return False


def _left_references(expr: Expr, nullable: set[str]) -> list[Reference]:
    """The references that can come first in ``expr`` (only nullable items before them)."""
    if isinstance(expr, Reference):
        return [expr]
    if isinstance(expr, Sequence):
        found: list[Reference] = []
        for item in expr.items:
            found += _left_references(item, nullable)
            if not _nullable(item, nullable):
                break
        return found
    if isinstance(expr, Choice):
        return [ref for option in expr.options for ref in _left_references(option, nullable)]
    if isinstance(expr, Repetition):
        return _left_references(expr.item, nullable)
    return []


def _refuse_left_recursion(grammar: GBNFGrammar, recursive: set[str]) -> None:
    """Refuse a rule that can reach itself without reading a character, as llama.cpp does."""
    nullable = _nullable_rules(grammar)
    first = {name: _left_references(grammar.rules[name].body, nullable) for name in recursive}
    for name in sorted(recursive, key=lambda n: grammar.rules[n].line):
        seen, stack = set(), [ref.name for ref in first[name]]
        while stack:
            current = stack.pop()
            if current == name:
                rule = grammar.rules[name]
                raise GBNFError(f"rule {name!r} is left-recursive (it can reach itself before any character)",
                                rule=name, line=rule.line)  # fmt: skip
            if current in seen or current not in first:
                continue
            seen.add(current)
            stack += [ref.name for ref in first[current]]


@dataclass
class _Trees:
    """Regex trees of rule bodies: a non-recursive rule is inlined where it is used, a
    recursive one stays a :class:`RuleRef`. Each rule's tree is built once and shared."""

    grammar: GBNFGrammar
    recursive: set[str]
    _inlined: dict[str, Node] = field(default_factory=dict)

    def of_rule(self, name: str) -> Node:
        """What a reference to ``name`` stands for."""
        if name in self.recursive:
            return RuleRef(name)
        if name not in self._inlined:
            self._build_dependencies(name)
        return self._inlined[name]

    def of_body(self, name: str) -> Node:
        return self._tree(self.grammar.rules[name].body)

    def _build_dependencies(self, name: str) -> None:
        """Build the trees of the non-recursive rules ``name`` needs, dependencies first, without
        recursing along the chain of rules (a chain may be thousands long)."""
        order: list[str] = []
        seen = {name}
        stack = [(name, False)]
        while stack:
            current, done = stack.pop()
            if done:
                order.append(current)
                continue
            stack.append((current, True))
            for ref in _references(self.grammar.rules[current].body):
                if ref.name not in seen and ref.name not in self.recursive and ref.name not in self._inlined:
                    seen.add(ref.name)
                    stack.append((ref.name, False))
        for current in order:
            self._inlined[current] = self._tree(self.grammar.rules[current].body)

    def _tree(self, expr: Expr) -> Node:
        if isinstance(expr, Literal):
            return Literals((expr.text.encode("utf-8"),))
        if isinstance(expr, CharClass):
            return _char_set(expr)
        if isinstance(expr, AnyChar):
            return CharSet(((0, MAX_CODEPOINT),))
        if isinstance(expr, Reference):
            return self.of_rule(expr.name)
        if isinstance(expr, Sequence):
            return seq(*(self._tree(item) for item in expr.items)) if expr.items else EMPTY
        if isinstance(expr, Choice):
            return alt(*(self._tree(option) for option in expr.options))
        return Repeat(self._tree(expr.item), expr.low, expr.high)


def _char_set(expr: CharClass) -> CharSet:
    if not expr.negated:
        return CharSet(expr.ranges)
    # Surrogates are never UTF-8 text: a complement made only of them is left out.
    return CharSet(tuple(r for r in complement_ranges(expr.ranges) if not (r[0] >= 0xD800 and r[1] <= 0xDFFF)))


def _absorb_followers(node: Node, bodies: dict[str, Node]) -> Node:
    """Unfold, one level, a recursive rule followed by a reference-free part when every
    alternative of the rule ends in one: the follower joins each alternative's last terminal.

    A lexer cuts text into terminals greedily, so a terminal ending in ``[ \t\n]*``
    followed by the terminal ``"\n"`` could never hand the newline over
    (``arithmetic.gbnf``: ``term "\n"``); joined, the regex automaton resolves the
    choice itself. The language is unchanged.
    """
    if isinstance(node, Concat):
        parts = [_absorb_followers(p, bodies) for p in node.parts]
        out: list[Node] = []
        for part in parts:
            previous = out[-1] if out else None
            if isinstance(previous, RuleRef) and not has_rule_ref(part):
                options = _options(bodies[previous.name])
                if all(_ends_in_leaf(o) for o in options):
                    out[-1] = alt(*(seq(o, part) for o in options))
                    continue
            out.append(part)
        return seq(*out) if out else EMPTY
    if isinstance(node, Alt):
        return alt(*(_absorb_followers(o, bodies) for o in node.options))
    if isinstance(node, Repeat):
        return Repeat(_absorb_followers(node.node, bodies), node.low, node.high)
    return node


def _options(node: Node) -> tuple[Node, ...]:
    return node.options if isinstance(node, Alt) else (node,)


def _ends_in_leaf(node: Node) -> bool:
    last = node.parts[-1] if isinstance(node, Concat) and node.parts else node
    return not has_rule_ref(last)


def _lark_safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower())


@dataclass
class _SkeletonWriter(SkeletonWriter):
    """Lark rule text for a tree with :class:`RuleRef` s (see :class:`~constrain.skeleton.SkeletonWriter`):
    every maximal reference-free part becomes terminals (a nullable one, an optional terminal
    for its non-empty part). No GBNF terminal matches nothing, so no text here is None."""

    lark_names: dict[str, str]
    terminals: dict[Node, str] = field(default_factory=dict)

    def rule_name(self, node: RuleRef) -> str:
        return self.lark_names[node.name]

    def leaf(self, node: Node) -> str:
        """A reference-free part: one terminal, its nullable tail (trailing whitespace, mostly)
        one more, optional, terminal.

        Split so, ``"]" ws`` and ``"]"`` share the terminal ``"]"``: an LALR state that
        may reduce into both contexts lexes with both, and one greedy match would hide the other.
        """
        if node == EMPTY:
            return ""
        parts = list(node.parts) if isinstance(node, Concat) else [node]
        if len(parts) > 1 and all(isinstance(p, Literals) for p in parts):
            # Literals one by one: ``")" ";"`` then shares ``")"`` and ``";"`` with the rules
            # that use them alone, where a merged LALR state lexes with all three.
            return " ".join(self.terminal(p) for p in parts)
        tail: list[Node] = []
        while len(parts) > 1 and nullable(parts[-1]):
            tail.insert(0, parts.pop())
        if tail:
            return f"{self.leaf(seq(*parts))} {self.terminal(_without_empty(seq(*tail)))}?"
        if not nullable(node):
            return self.terminal(node)
        return f"{self.terminal(_without_empty(node))}?"

    def terminal(self, node: Node) -> str:
        if node not in self.terminals:
            self.terminals[node] = f"T{len(self.terminals)}"
        return self.terminals[node]


def _without_empty(node: Node) -> Node:
    """The same language minus the empty string (Lark has no empty terminals)."""
    if isinstance(node, Repeat) and not nullable(node.node):
        return node.node if node.high == 1 else Repeat(node.node, 1, node.high)
    if isinstance(node, Alt):
        solid = [o for o in node.options if o != EMPTY]
        if not any(nullable(o) for o in solid):
            return alt(*solid)
    return Difference(node, (EMPTY,))
