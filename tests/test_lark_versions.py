"""The lark adapter's tests pass on the oldest and the newest lark the pin allows.

``constrain/cfg/lark_adapter.py`` relies on lark internals (docs/cfg.md, "What constrain
relies on in lark"), so the pin ``lark>=1.3,<2`` is only a claim until both ends are run.
``make setup`` installs them into ``.lark/oldest`` and ``.lark/newest``; this test runs
the adapter's tests in a fresh interpreter with each folder first on ``PYTHONPATH``,
after checking that the interpreter really imports that folder's lark.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
#: The tests of what the adapter reads from lark: its plain data and lark's refusals directly,
#: then the guides built on them (refusals by name; lark's lexing reproduced byte by byte).
ADAPTER_TESTS = ("tests/test_lark_adapter.py", "tests/test_cfg_errors.py", "tests/test_cfg_lexer.py")
FOLDERS = {"oldest": ROOT / ".lark" / "oldest", "newest": ROOT / ".lark" / "newest"}


def _pin() -> tuple[Version, Version]:
    """The ``lark>=LOW,<HIGH`` bounds of pyproject.toml."""
    found = re.search(r'"lark>=([0-9.]+),<([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise AssertionError("pyproject.toml no longer pins lark as lark>=LOW,<HIGH; update this test")
    return Version(found.group(1)), Version(found.group(2))


def _installed(folder: Path) -> Version:
    """The version of the lark ``pip install --target`` put in ``folder``."""
    infos = sorted(folder.glob("lark-*.dist-info"))
    if not (folder / "lark" / "__init__.py").is_file() or len(infos) != 1:
        pytest.fail(f"{folder.relative_to(ROOT)} holds no single lark install; run `make setup`")
    return Version(infos[0].name[len("lark-") : -len(".dist-info")])


def _run(folder: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("end", sorted(FOLDERS))
def test_adapter_tests_pass_on_each_end_of_the_pin(end: str) -> None:
    folder = FOLDERS[end]
    if not folder.is_dir():
        pytest.fail(f"{folder.relative_to(ROOT)} is missing: run `make setup`, which installs the lark versions")
    version = _installed(folder)
    low, high = _pin()
    if end == "oldest":
        assert version == low, f"{folder} holds lark {version}, the pin's floor is {low}: run `make setup`"
    else:
        assert low <= version < high, f"{folder} holds lark {version}, outside the pin [{low}, {high})"

    probe = _run(folder, "-c", "import lark; print(lark.__version__); print(lark.__file__)", timeout=60)
    assert probe.returncode == 0, probe.stderr
    imported, location = probe.stdout.split()
    assert Version(imported) == version and Path(location).is_relative_to(folder), probe.stdout

    run = _run(folder, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ADAPTER_TESTS, timeout=600)
    assert run.returncode == 0, f"the adapter's tests fail on lark {version}:\n{run.stdout[-6000:]}{run.stderr[-2000:]}"
