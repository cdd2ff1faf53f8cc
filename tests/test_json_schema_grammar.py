"""Recursive JSON Schemas → Lark grammars, checked with Lark's own parser and jsonschema."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import lark
import pytest

import constrain
from constrain.testing import accepts, finished_walks, random_walk, token_text, tokenize_continuation

from constrain.json_schema import RecursiveSchemaError, to_regex
from constrain.json_schema.to_grammar import schema_to_grammar
from constrain.json_schema.to_regex import recursive_refs
from constrain.regex.tree import render

TREE = {
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer", "minimum": 0},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
        "required": ["value"]}},
    "$ref": "#/$defs/node",
}  # fmt: skip
EXPRESSION = {  # mutually recursive: an expression is a number or an operation on expressions
    "$defs": {
        "expr": {"anyOf": [{"type": "number"}, {"$ref": "#/$defs/op"}]},
        "op": {"type": "object", "properties": {
            "op": {"enum": ["+", "-", "*"]},
            "args": {"type": "array", "items": {"$ref": "#/$defs/expr"}, "minItems": 2, "maxItems": 2}},
            "required": ["op", "args"]},
    },
    "$ref": "#/$defs/expr",
}  # fmt: skip
LINKED_LIST = {
    "type": "object",
    "properties": {"head": {"type": "string", "maxLength": 8}, "tail": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
    "required": ["head", "tail"],
}

CASES = [
    (TREE, [{"value": 1}, {"value": 0, "children": []}, {"value": 5, "children": [{"value": 1, "children": [{"value": 2}]}]}],
     ['{"children": []}', '{"value": -1}', '{"value": 1, "children": [{}]}', '{"value": 1, "children": [{"value": 1}, {"value": 1}, {"value": 1}, {"value": 1}]}']),
    (EXPRESSION, [1.5, {"op": "+", "args": [1, 2]}, {"op": "*", "args": [{"op": "-", "args": [3, 4]}, 2e3]}],
     ['{"op": "/", "args": [1, 2]}', '{"op": "+", "args": [1]}', '"x"']),
    (LINKED_LIST, [{"head": "a", "tail": None}, {"head": "a", "tail": {"head": "b", "tail": {"head": "c", "tail": None}}}],
     ['{"head": "a"}', '{"head": "a", "tail": {"head": "b"}}', '{"head": "toolongvalue", "tail": null}']),
]  # fmt: skip


def _lark_text(schema: dict) -> str:
    """The schema's grammar with every placeholder terminal replaced by its tree rendered as a regex:
    the same language, for lark's own parser to check independently of the guide's lexer."""
    grammar = schema_to_grammar(schema)
    assert grammar.walk.dropped == []
    lines = [line for line in grammar.text.splitlines() if not line.startswith("T")]
    for name, tree in grammar.terminals.items():
        regex = "".join("\\/" if c == "/" and (i == 0 or render(tree)[i - 1] != "\\") else c
                        for i, c in enumerate(render(tree)))
        lines.append(f"{name}: /{regex}/")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES, ids=["tree", "expression", "linked-list"])
def test_grammar_accepts_exactly_the_valid_instances(schema: dict, valid: list, invalid: list) -> None:
    assert recursive_refs(schema)
    with pytest.raises(RecursiveSchemaError):
        to_regex(schema)
    parser = lark.Lark(_lark_text(schema), parser="lalr")
    for instance in valid:
        jsonschema.validate(instance, schema)
        for text in (json.dumps(instance), json.dumps(instance, separators=(",", ":"))):
            parser.parse(text)
    for text in invalid:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(text), schema)
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(text)


def test_non_recursive_schema_is_one_terminal() -> None:
    grammar = schema_to_grammar({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert grammar.text.splitlines()[0] == "start: T0" and list(grammar.terminals) == ["T0"]


def test_lark_sees_only_the_recursive_skeleton() -> None:
    """Each non-recursive piece is one placeholder terminal, however large its language."""
    grammar = schema_to_grammar(TREE)
    terminal_lines = [line for line in grammar.text.splitlines() if line.startswith("T")]
    assert all(line.endswith(f'"<{line.split(":")[0].split(".")[0]}>"') for line in terminal_lines)  # "T3.2: ..."
    assert len(grammar.text) < 1000 and len(grammar.terminals) < 10


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES, ids=["tree", "expression", "linked-list"])
def test_recursive_schema_guides_through_the_cfg_backend(
    compiler: "constrain.Compiler", tokenizer: object, schema: dict, valid: list, invalid: list
) -> None:
    guide = compiler.json_schema(schema)
    assert guide.backend == "cfg" and guide.schema == schema
    for instance in valid:
        for text in (json.dumps(instance), json.dumps(instance, separators=(",", ":"))):
            assert accepts(guide, tokenize_continuation(tokenizer, text)), text
    for text in invalid:
        assert not accepts(guide, tokenize_continuation(tokenizer, text)), text
    texts = finished_walks(guide, compiler.vocabulary, random.Random(7), count=8)
    for text in texts:
        jsonschema.validate(json.loads(text), schema)
    assert texts


def _forced_by_bytes(guide: "constrain.CFGGuide", state: object, alphabet: bytes, limit: int = 256) -> bytes:
    """Forced bytes the slow way: while the text may not end, try every byte and keep going where
    exactly one can continue it (the guide's lexer and parser emulation, fed byte by byte)."""
    out = bytearray()
    while len(out) < limit and not guide.is_final(state):
        nexts = [(b, guide.feed_bytes(state, bytes([b]))) for b in range(256) if alphabet[b]]
        alive = [(b, s) for b, s in nexts if s is not None and guide.viable(s)]
        if len(alive) != 1:
            break
        out.append(alive[0][0])
        state = alive[0][1]
    return bytes(out)


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES, ids=["tree", "expression", "linked-list"])
def test_grammar_guides_know_their_forced_bytes(
    compiler: "constrain.Compiler", tokenizer: object, schema: dict, valid: list, invalid: list
) -> None:
    """Fast-forward for recursive schemas: ``forced_bytes`` (read off the masks: what every allowed
    token starts with) equals trying every byte, at each state of valid texts and random walks."""
    guide = compiler.json_schema(schema, whitespace="none")
    vocabulary = compiler.vocabulary
    rng = random.Random(3)
    paths = [tokenize_continuation(tokenizer, json.dumps(v, separators=(",", ":"))) for v in valid]
    paths += [random_walk(guide, vocabulary, rng, max_tokens=40, eos_probability=0.5)[0] for _ in range(4)]
    seen = 0
    for ids in paths:
        state = guide.initial_state
        for token_id in [None, *ids]:
            if token_id is not None:
                state = guide.advance(state, token_id)
            forced = guide.forced_bytes(state)
            assert forced == _forced_by_bytes(guide, state, vocabulary.byte_alphabet), token_text(vocabulary, ids)
            seen += bool(forced)
    assert seen  # compact objects force their keys and colons


def test_unrolling_stays_on_the_regex_backend(compiler: "constrain.Compiler") -> None:
    assert compiler.json_schema(TREE, max_recursion_depth=2).backend == "regex"
    assert compiler.json_schema({"type": "integer"}).backend == "regex"


COUNTED_INSIDE = {  # a counted object without a reference inside a recursive schema: a regex terminal
    "$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
        "meta": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
                 "minProperties": 1, "maxProperties": 2}}, "required": ["meta"]}},
    "$ref": "#/$defs/n",
}  # fmt: skip
TWO_REQUIRED = {
    "type": "object",
    "properties": {"kind": {"enum": ["list"]}, "items": {"type": "array", "items": {"$ref": "#"}}, "note": {"type": "string", "maxLength": 3}},
    "required": ["kind", "items"],
}
#: Two objects in an anyOf share an optional member (o69210, a CWL schema): as separate grammar
#: items they made an LALR reduce/reduce collision, so free members stay one alternation.
SHARED_OPTIONAL = {"$defs": {"node": {"anyOf": [
    {"type": "object", "properties": {"label": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
     "required": ["kids"]},
    {"type": "object", "properties": {"label": {"type": "string"}, "value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
     "required": ["value"]},
]}}, "$ref": "#/$defs/node"}  # fmt: skip
SPEC_CASES = [
    (TREE, [{"children": [], "value": 0}, {"children": [{"children": [], "value": 2}], "value": 1}, {"value": 1, "x": [1]}],
     ['{"children": []}', '{"children": [{"value": -1}], "value": 1}', '{"children": [{"x": 1}], "value": 1}']),
    (COUNTED_INSIDE, [{"meta": {"a": 1}}, {"kids": [{"meta": {"b": 1, "c": 2}}], "meta": {"a": 1}}],
     ['{"meta": {}}', '{"kids": [{"meta": {"a": 1, "b": 2, "c": 3}}], "meta": {"a": 1}}', '{"kids": []}']),
    (TWO_REQUIRED, [{"items": [], "kind": "list"}, {"note": "n", "items": [{"kind": "list", "items": []}], "kind": "list"}],
     ['{"items": []}', '{"kind": "list"}', '{"kind": "list", "items": [{"items": []}]}', '{"items": [], "kind": "other"}']),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "valid", "invalid"), SPEC_CASES, ids=["tree", "counted-inside", "two-required"])
def test_recursive_objects_take_members_in_any_order_with_the_spec_semantics(
    compiler: "constrain.Compiler", tokenizer: object, schema: dict, valid: list, invalid: list
) -> None:
    """Members of an object around a recursive reference come in any order (a list of members with
    rules tracking the required ones); counted objects without a reference are regex terminals."""
    _takes_exactly(compiler.json_schema(schema, strict_properties=False), tokenizer, schema, valid, invalid)
    closed = _closed(schema)  # random walks in open objects wander off in long keys
    guide = compiler.json_schema(closed, strict_properties=False)
    rng = random.Random(11)
    finished = 0
    for _ in range(12):
        ids, ended = random_walk(guide, compiler.vocabulary, rng, max_tokens=300, eos_probability=0.9)
        if ended:
            finished += 1
            jsonschema.validate(json.loads(token_text(compiler.vocabulary, ids)), closed)  # repeats parse to the last
    assert finished


def _takes_exactly(guide: "constrain.CFGGuide", tokenizer: object, schema: dict, valid: list, invalid: list) -> None:
    """A grammar guide that takes ``valid`` and refuses ``invalid``, both as jsonschema judges them."""
    assert guide.backend == "cfg"
    for instance in valid:
        jsonschema.validate(instance, schema)
        assert accepts(guide, tokenize_continuation(tokenizer, json.dumps(instance))), instance
    for text in invalid:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(text), schema)
        assert not accepts(guide, tokenize_continuation(tokenizer, text)), text


def _closed(schema: object) -> object:
    """``schema`` with ``additionalProperties: false`` beside every ``properties``."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def test_objects_that_share_an_optional_member_compile_and_stay_sound(smollm2: object) -> None:
    compiler = constrain.Compiler(smollm2)
    guide = compiler.json_schema(SHARED_OPTIONAL, strict_properties=False)  # a GrammarError at 8012f8a
    assert guide.backend == "cfg"
    for instance in ({"kids": []}, {"kids": [], "label": "a"}, {"value": 1}):
        assert accepts(guide, tokenize_continuation(smollm2, json.dumps(instance))), instance
    for text in ('{"label": "a"}', '{"kids": [{"label": "b"}]}', '{"value": 1, "next": {"label": 1, "kids": []}}'):
        assert not accepts(guide, tokenize_continuation(smollm2, text)), text
    # (closed with additionalProperties: false, both objects' only untracked member is "label": two rules
    # deriving one terminal, still an LALR collision; see the xfail below for the open form's gap)


@pytest.mark.xfail(strict=True, reason="known gap: where two anyOf branches' member terminals match the same "
                   "text, the LALR lexer commits to one branch (sound, but it can refuse a valid instance)")
def test_a_member_both_branches_lex_leaves_both_branches_open(smollm2: object) -> None:
    """``"label": "a"`` is the second branch's label terminal and the first branch's "any other
    member" terminal: the lexer takes the one tried first (the longer, see the next test), and
    ``"kids"`` after it cannot follow."""
    guide = constrain.Compiler(smollm2).json_schema(SHARED_OPTIONAL, strict_properties=False)
    assert accepts(guide, tokenize_continuation(smollm2, '{"label": "a", "kids": []}'))


#: A closed object kept whole as one terminal beside a recursive one that opens with "{" (MaskBench o71453).
WHOLE_BESIDE_RECURSIVE = {"$defs": {"item": {"oneOf": [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
     "required": ["name", "items"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "x": {"type": "integer"}},
     "required": ["name", "x"], "additionalProperties": False},
]}}, "$ref": "#/$defs/item"}  # fmt: skip


def test_a_whole_object_terminal_is_tried_before_the_brace_of_a_recursive_one(smollm2: object) -> None:
    """Lark's lexer takes the first terminal of its order that matches; the recursive branch's
    ``{`` came first and matched every object, so the closed branch, one terminal from ``{``
    to ``}``, was never lexed and its every instance refused. Terminals go longest-first now,
    and a text the whole-object terminal does not match falls back on the ``{``."""
    valid = [{"name": "a", "x": 1}, {"name": "g", "items": [{"name": "a", "x": 1}, {"name": "h", "items": []}]},
             {"x": 2, "name": "b"}]
    invalid = ['{"name": "a"}', '{"name": "a", "x": 1, "items": []}', '{"name": "g", "items": [{"x": 1}]}']
    _judged_as_jsonschema_judges(smollm2, WHOLE_BESIDE_RECURSIVE, valid, invalid, seed=3)


#: Two branches with the same optional member, told apart by their required ones.
SAME_OPTIONAL = {"$defs": {"node": {"anyOf": [
    {"type": "object", "properties": {"label": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
     "required": ["kids"], "additionalProperties": False},
    {"type": "object", "properties": {"label": {"type": "string"},
                                      "value": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/node"}]}},
     "required": ["value"], "additionalProperties": False},
]}}, "$ref": "#/$defs/node"}  # fmt: skip


def _judged_as_jsonschema_judges(tokenizer: object, schema: dict, valid: list, invalid: list, seed: int) -> None:
    """The schema compiles to a grammar guide that takes ``valid``, refuses ``invalid`` (both as
    jsonschema says), and whose random walks jsonschema accepts."""
    compiler = constrain.Compiler(tokenizer)
    guide = compiler.json_schema(schema, strict_properties=False)
    _takes_exactly(guide, tokenizer, schema, valid, invalid)
    texts = finished_walks(guide, compiler.vocabulary, random.Random(seed), count=12, max_tokens=200)
    assert texts
    for text in texts:
        jsonschema.validate(json.loads(text), schema)


def test_branches_with_the_same_optional_members_share_their_rules(smollm2: object) -> None:
    """Written as two rules with one body, the branches' "label" members put a reduce/reduce
    conflict in the LALR table (a GrammarError before: MaskBench o48661); one rule per body does not."""
    valid = [{"kids": []}, {"label": "a", "value": {"kids": []}}, {"kids": [{"value": 2, "label": "b"}], "label": "a"}]
    invalid = ['{"label": "a"}', '{"kids": [], "value": 1}', '{"kids": [{"label": "b"}]}']
    _judged_as_jsonschema_judges(smollm2, SAME_OPTIONAL, valid, invalid, seed=5)


def _kind(tag: str, member: str) -> dict:
    return {"type": "object", "properties": {"condition": {"type": "string"}, "name": {"type": "string"},
            member: {"$ref": "#/$defs/node"}, "type": {"const": tag}}, "required": ["type"]}  # fmt: skip


#: Tagged branches whose optional members differ (MaskBench accelerator, reduced): written as
#: rules with different bodies, both take "condition" first, and an LALR(1) table cannot choose.
TAGGED_LATE = {"$defs": {"node": {"anyOf": [_kind("A", "body"), _kind("B", "items"), {"type": "string"}]}},
               "$ref": "#/$defs/node"}  # fmt: skip


def test_branches_an_lalr_parser_cannot_tell_apart_are_refused_by_keyword(smollm2: object) -> None:
    """Was a GrammarError naming rules the caller never wrote; now the schema's terms, a remedy
    that works, and that remedy (unrolling) compiles and judges as jsonschema does."""
    compiler = constrain.Compiler(smollm2)
    with pytest.raises(constrain.UnsupportedSchemaError, match="max_recursion_depth") as caught:
        compiler.json_schema(TAGGED_LATE, strict_properties=False)
    assert caught.value.keyword == "$ref" and "lenient" not in str(caught.value)
    unrolled = compiler.json_schema(TAGGED_LATE, strict_properties=False, max_recursion_depth=2)
    validator = jsonschema.Draft202012Validator(TAGGED_LATE)
    for value in [{"condition": "c", "type": "A", "body": "x"}, {"name": "n", "items": {"type": "A"}, "type": "B"},
                  {"condition": "c", "type": "A", "items": 1}, {"type": "C"}]:  # fmt: skip
        text = json.dumps(value)
        assert accepts(unrolled, tokenize_continuation(smollm2, text)) is validator.is_valid(value), text


#: Every key matches ".*", so no key is left to ``additionalProperties`` (absent: any value): the
#: walk writes a terminal for such keys whose language is empty (MaskBench o48661's "drillDownMap").
ALL_KEYS_BY_PATTERN = {
    "$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}},
                       "patternProperties": {".*": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/node"}]}}}},
    "$ref": "#/$defs/node",
}  # fmt: skip


def test_a_terminal_that_matches_nothing_is_left_out_with_what_needs_it(smollm2: object) -> None:
    """A GrammarError ("matches no string") before: the dead terminal is now dropped from the grammar."""
    valid = [{}, {"a": 1}, {"a": 1, "b": {"c": 2}}, {"b": {"b": {}}}]
    invalid = ['{"a": "x"}', '{"b": {"c": null}}', '{"name": "x"}']  # "name" matches ".*" too
    _judged_as_jsonschema_judges(smollm2, ALL_KEYS_BY_PATTERN, valid, invalid, seed=3)


def test_subtrees_shared_many_times_are_written_once() -> None:
    """Each level refers to the one below twice: 2**40 paths through a small tree without a rule
    reference. Asked afresh at every step whether a subtree holds one (as the grammar writer did),
    the walk over it never ended."""
    levels = 40
    defs: dict = {"l0": {"type": "integer"}}
    for i in range(1, levels + 1):
        below = {"$ref": f"#/$defs/l{i - 1}"}
        defs[f"l{i}"] = {"type": "object", "properties": {"a": below, "b": below}}
    schema = {"$defs": defs, "type": "object",
              "properties": {"top": {"$ref": f"#/$defs/l{levels}"}, "again": {"$ref": "#"}}}  # fmt: skip
    grammar = schema_to_grammar(schema)
    assert len(grammar.terminals) < 20  # the levels make one terminal


#: "d" is required and matches no string (a pattern minus itself), so the recursive object can
#: never be written: its rule dies, and so does every rule that needs it; the integer remains.
DYING_RULE = {
    "$defs": {"n": {"type": "object", "additionalProperties": False, "required": ["d"],
                    "properties": {"k": {"$ref": "#/$defs/n"},
                                   "d": {"type": "string", "pattern": "^a$", "not": {"type": "string", "pattern": "^a$"}}}}},
    "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/n"}],
}  # fmt: skip


def test_a_rule_that_can_never_finish_is_left_out(smollm2: object) -> None:
    """Once a rule was dead the writer looped for ever (it asked again whether any rule was dead);
    then it wrote the dead rule's body as the text "None"."""
    guide = constrain.Compiler(smollm2).json_schema(DYING_RULE, strict_properties=False)
    for text, valid in (("1", True), ('{"d": "a"}', False), ("{}", False), ('"a"', False)):
        assert jsonschema.Draft202012Validator(DYING_RULE).is_valid(json.loads(text)) is valid
        assert accepts(guide, tokenize_continuation(smollm2, text)) is valid, text


#: Two open objects told apart by the name each requires, both around a recursive reference (MaskBench o79474).
REQUIRED_APART = {"$defs": {"cond": {"oneOf": [
    {"type": "object", "properties": {"not": {"$ref": "#/$defs/cond"}}, "required": ["not"], "additionalProperties": False},
    {"type": "boolean"},
]}}, "type": "array", "items": {"oneOf": [
    {"type": "object", "properties": {"allow": {"$ref": "#/$defs/cond"}}, "required": ["allow"]},
    {"type": "object", "properties": {"inject": {"$ref": "#/$defs/cond"}}, "required": ["inject"]},
]}}  # fmt: skip


def test_overlapping_one_of_branches_around_a_reference_keep_apart_by_their_required_names(smollm2: object) -> None:
    """The grammar backend has no difference, and each branch had to subtract the other: refused.
    Every branch requires a name the other does not, so objects without the other's name match
    one branch only; an object holding both is refused, the valid ones among them too (stricter)."""
    valid = [[{"allow": True}], [{"inject": {"not": False}, "x": 1}, {"allow": {"not": {"not": True}}}], []]
    invalid = ['[{"allow": true, "inject": true}]', '[{"allow": 1}]', '[{"inject": {"not": 2}}]', '[{"x": 1}]']
    _judged_as_jsonschema_judges(smollm2, REQUIRED_APART, valid, invalid, seed=5)
    guide = constrain.Compiler(smollm2).json_schema(REQUIRED_APART, strict_properties=False)
    both = [{"allow": True, "inject": 5}]  # valid: "inject" is no condition, so only the first branch matches
    jsonschema.validate(both, REQUIRED_APART)
    assert not accepts(guide, tokenize_continuation(smollm2, json.dumps(both)))


def test_untyped_branches_kept_apart_are_a_named_refusal_not_a_raw_error(smollm2: object) -> None:
    """Without ``"type": "object"`` the branches match every non-object value too. The member set's
    emptiness check built an automaton of a value holding a rule reference and raised a raw
    ``TypeError``; it now leaves such values to the grammar, which refuses the counted object by name."""
    untyped = copy.deepcopy(REQUIRED_APART)
    for branch in untyped["items"]["oneOf"]:
        del branch["type"]
    with pytest.raises(constrain.UnsupportedSchemaError, match="oneOf"):
        constrain.Compiler(smollm2).json_schema(untyped, strict_properties=False)


#: An array of nodes or one node, where a node is a recursive oneOf of objects (MaskBench o81108).
ARRAY_OR_NODE = {"$defs": {"node": {"oneOf": [
    {"type": "object", "properties": {"leaf": {"type": "string", "maxLength": 3}}, "required": ["leaf"], "additionalProperties": False},
    {"type": "object", "properties": {"args": {"oneOf": [{"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                                                         {"$ref": "#/$defs/node"}]}},
     "required": ["args"], "additionalProperties": False},
]}}, "$ref": "#/$defs/node"}  # fmt: skip


def test_a_one_of_beside_a_recursive_alternative_is_told_apart_by_what_its_branches_share(smollm2: object) -> None:
    """``oneOf: [array, {$ref: node}]`` had to subtract the reference (its facts were unknown),
    which a grammar cannot: refused. Every branch of ``node`` is an object, so the two are
    disjoint by type and need no difference."""
    valid = [{"leaf": "a"}, {"args": [{"leaf": "a"}, {"args": {"leaf": "b"}}]}, {"args": {"args": []}}]
    invalid = ['{"args": 1}', '{"leaf": "a", "args": []}', '{"args": [1]}', '{"args": {"x": 1}}']
    _judged_as_jsonschema_judges(smollm2, ARRAY_OR_NODE, valid, invalid, seed=9)
