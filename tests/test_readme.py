"""The README's example runs as written (with the real default model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

README = Path(__file__).resolve().parents[1] / "README.md"


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
    """The streaming and transformers snippets too, each after the ones before it, as a reader runs them."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 3
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert namespace["chunks"].generation.value == namespace["out"].value  # type: ignore[attr-defined]
    assert capsys.readouterr().out.count("name=") >= 2
    reasoned = namespace["result"]  # the mid-text snippet: free text, the trigger, then valid JSON
    assert reasoned.complete, reasoned.text  # type: ignore[attr-defined]
    _thinking, trigger, body = reasoned.text.partition("</think>")  # type: ignore[attr-defined]
    assert trigger and isinstance(json.loads(body)["answer"], int), reasoned.text  # type: ignore[attr-defined]
