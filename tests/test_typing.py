"""The package type-checks under ``mypy --strict`` (``py.typed`` promises its annotations hold).

The configuration is pyproject.toml's ``[tool.mypy]`` (strict, plus overrides for untyped
third-party packages), so plain ``mypy constrain`` is the same check.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "constrain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    print(output)
    assert result.returncode == 0, f"mypy --strict constrain failed:\n{output}"
