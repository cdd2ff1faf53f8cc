"""The bundled grammars' shipped lark tables: current, used, equivalent, and never trusted blindly.

``constrain/cfg/shipped.py`` ships what a compile reads of lark for every text the bundled
grammars compile to, so that compiling one builds no lark parser. The oracle here is lark
itself: each shipped file must equal what lark builds now (up to lark's state numbering),
and a guide read from a file must give the same masks as one built from lark.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import constrain
from constrain.cfg import compile_grammar, compile_sql, shipped
from constrain.cfg.grammar import CompiledGrammar
from constrain.cfg.guide import CFGGuide
from constrain.cfg.lark_adapter import LARK_VERSION, LarkTables, lark_parser

ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = ROOT / "grammars"


@pytest.fixture(scope="module")
def vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


def _shipped_file(text: str, start: str, always_accept: tuple[str, ...]) -> Path:
    key = shipped.digest(text, start, always_accept)
    found = sorted(GRAMMARS.glob(f"tables-*-{key[:16]}.json.gz"))
    assert len(found) == 1, f"no shipped tables for this text (run `make tables`): {found}"
    return found[0]


@pytest.mark.parametrize("label", [v[0] for v in shipped.variants()])
def test_every_bundled_text_has_tables_equal_to_what_lark_builds(label: str) -> None:
    """Fails after a bundled grammar changes until `make tables` rewrites its file."""
    _, text, start, always_accept = next(v for v in shipped.variants() if v[0] == label)
    path = _shipped_file(text, start, always_accept)
    stored = shipped.decode(path.read_bytes(), shipped.digest(text, start, always_accept))
    if stored.lark_version != LARK_VERSION:
        pytest.skip(f"shipped for lark {stored.lark_version}, lark {LARK_VERSION} installed: it builds its own")
    built = LarkTables(lark_parser(text, start=start, always_accept=always_accept)).record(start)
    assert stored == shipped.canonical(built)
    # The renumbering keeps the automaton: as many states, reductions and contexts as lark's.
    assert len(stored.table.actions) == len(built.table.actions)
    assert len(stored.table.reductions) == len(built.table.reductions)
    assert len(stored.contexts) == len(built.contexts)


def _shipped_lark() -> str:
    """The lark the shipped SQL tables were read from."""
    _, text, start, always_accept = shipped.variants()[1]
    path = _shipped_file(text, start, always_accept)
    return shipped.decode(path.read_bytes(), shipped.digest(text, start, always_accept)).lark_version


def test_bundled_compiles_build_no_lark_parser(vocabulary: constrain.Vocabulary) -> None:
    if _shipped_lark() != LARK_VERSION:
        pytest.skip("the shipped tables are for another lark")
    guides = [compile_grammar("json", vocabulary), compile_grammar("sql", vocabulary)]
    guides += [compile_sql(None, vocabulary, comments=c, canonical=k) for c in (True, False) for k in (True, False)]
    guides.append(constrain.Compiler(vocabulary).sql())
    for guide in guides:
        assert guide.grammar._lark is None
    # The oracle is still there on demand: lark's parser for the same text.
    assert guides[1].grammar.lark.parse("SELECT a FROM t WHERE b = 1") is not None
    assert guides[1].grammar._lark is not None


def _built_from_lark(guide: CFGGuide, vocabulary: constrain.Vocabulary) -> CFGGuide:
    """The same grammar with its tables built by lark: a text lark reads the same (one more
    comment line) that no shipped file names."""
    g = guide.grammar
    grammar = CompiledGrammar(g.text + "// built by lark\n", vocabulary, start=g.start, label=g.label,
                              always_accept=g.always_accept, single_ignore=g.single_ignore)  # fmt: skip
    assert grammar._lark is not None
    return CFGGuide(grammar, vocabulary)


@pytest.mark.parametrize("canonical", [False, True])
def test_shipped_and_lark_built_guides_give_the_same_masks(
    vocabulary: constrain.Vocabulary, smollm2: object, canonical: bool
) -> None:
    shipped_guide = compile_sql(None, vocabulary, canonical=canonical)
    built = _built_from_lark(shipped_guide, vocabulary)
    assert shipped_guide.tables() == built.tables()
    rng = random.Random(7)
    left, right = constrain.allocate_bitmask(vocabulary.size), constrain.allocate_bitmask(vocabulary.size)
    texts = ["SELECT a, count(*) FROM t JOIN u ON t.id = u.id WHERE b > 2 GROUP BY a ORDER BY a DESC LIMIT 5"]
    encode = smollm2.encode  # type: ignore[attr-defined]
    walks = [list(encode(text, add_special_tokens=False)) for text in texts] + [None] * 6
    steps = 0
    for tokens in walks:
        a, b = shipped_guide.initial_state, built.initial_state
        for step in range(len(tokens) if tokens else 60):
            shipped_guide.fill_bitmask(a, left)
            built.fill_bitmask(b, right)
            assert np.array_equal(left, right)
            assert shipped_guide.is_final(a) == built.is_final(b)
            allowed = np.flatnonzero(shipped_guide.allowed_tokens(a))
            allowed = np.array([t for t in allowed if t not in vocabulary.eos_token_ids])
            if allowed.size == 0:
                break
            token = int(tokens[step]) if tokens else int(rng.choice(allowed))
            a, b = shipped_guide.advance(a, token), built.advance(b, token)
            steps += 1
    assert steps > 150


def _encoded(text: str) -> bytes:
    key = shipped.digest(text, "start", ())
    record = shipped.canonical(LarkTables(lark_parser(text)).record("start"))
    return shipped.encode(record, "test", key)


GRAMMAR = 'start: item+\nitem: "a" NAME | "b" item ";"\nNAME: /[a-z]+/\n%ignore " "\n'


def test_a_file_is_used_only_when_whole_and_meant_for_this_text_and_lark(tmp_path: Path) -> None:
    def load(text: str) -> object:
        return shipped.load(text, "start", (), [tmp_path])

    def write(name: str, data: bytes) -> None:
        for old in tmp_path.iterdir():
            old.unlink()
        (tmp_path / name).write_bytes(data)

    def name(text: str) -> str:
        return f"tables-test-{shipped.digest(text, 'start', ())[:16]}.json.gz"

    cases = 0
    for variant, damage in enumerate(["flipped", "truncated", "other key", "other lark", "bad type", "not gzip"]):
        text = GRAMMAR + f"// {variant}\n"
        data = _encoded(text)
        body = json.loads(gzip.decompress(data))
        if damage == "flipped":
            data = data[:40] + bytes([data[40] ^ 0xFF]) + data[41:]
        elif damage == "truncated":
            data = data[: len(data) // 2]
        elif damage == "not gzip":
            data = json.dumps(body).encode()
        else:
            if damage == "other key":
                body["key"] = shipped.digest(GRAMMAR, "start", ())
            elif damage == "other lark":
                body["lark"] = "0.0.1"
            else:
                body["actions"][0][1][0][2] = "7"
            data = gzip.compress(json.dumps(body).encode())
        write(name(text), data)
        assert load(text) is None, damage
        cases += 1
    text = GRAMMAR + "// whole\n"
    write(name(text), _encoded(text))
    found = load(text)
    assert found == shipped.canonical(LarkTables(lark_parser(text)).record("start"))
    assert load(GRAMMAR + "// whole, but another text\n") is None
    assert cases == 6


@pytest.mark.slow
def test_the_shipped_numbering_does_not_depend_on_the_hash_seed() -> None:
    """lark numbers its LALR states in an order that follows Python's string hashes; the files
    renumber them, so two processes with other hash seeds write the same bytes."""
    program = (
        "import hashlib; from constrain.cfg import shipped\n"
        "from constrain.cfg.lark_adapter import LarkTables, lark_parser\n"
        "for label, text, start, accept in shipped.variants()[:3]:\n"
        "    parser = lark_parser(text, start=start, always_accept=accept)\n"
        "    record = shipped.canonical(LarkTables(parser).record(start))\n"
        "    data = shipped.encode(record, label, shipped.digest(text, start, accept))\n"
        "    print(label, hashlib.sha256(data).hexdigest())\n"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
        outputs.add(run.stdout)
    assert len(outputs) == 1
    for label, text, start, accept in shipped.variants()[:3]:
        assert f"{label} " in next(iter(outputs))
        assert _shipped_file(text, start, accept).exists()
