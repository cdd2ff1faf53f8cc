"""The JSON Schema Test Suite (draft 2020-12) through schema guides: nothing invalid may get through.

The runner lives in ``benchmarks/conformance.py`` (which also writes the report
and the docs page); this test calls its core function over the whole suite,
optional folders included, with the shared smollm2 tokenizer. The suite is not
part of the repository: set ``CONSTRAIN_JSON_SCHEMA_SUITE`` to a checkout of
JSON-Schema-Test-Suite, or keep one at ``../shared/data/json-schema-test-suite``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # the model, the whole suite or brute-force oracles: full tier only

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("constrain_conformance", ROOT / "benchmarks" / "conformance.py")
assert _spec is not None and _spec.loader is not None
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)

SUITE = Path(os.environ.get("CONSTRAIN_JSON_SCHEMA_SUITE", conformance.DEFAULT_SUITE))


@pytest.fixture(scope="module")
def report(smollm2: object) -> dict[str, Any]:
    if not (SUITE / "tests" / conformance.DRAFT).is_dir():
        pytest.skip(
            f"JSON Schema Test Suite not found at {SUITE} (no tests/{conformance.DRAFT}); "
            "set CONSTRAIN_JSON_SCHEMA_SUITE to a checkout of json-schema-org/JSON-Schema-Test-Suite"
        )
    return conformance.run_suite(SUITE, smollm2)


def test_suite_ran(report: dict[str, Any]) -> None:
    totals = report["totals"]["all"]
    assert totals["files"] > 40
    assert totals["correct"] > 0


def test_no_under_constrained_case(report: dict[str, Any]) -> None:
    under = report["under_constrained"]
    lines = [
        f"{u['file']} | {u['group']} | {u['test']} | schema={json.dumps(u['schema'])} | instance={u['text']}"
        for u in under
    ]
    assert not under, f"{len(under)} invalid instance(s) accepted by the guide:\n" + "\n".join(lines)


def test_no_crash(report: dict[str, Any]) -> None:
    crashes = report["crashes"]
    lines = [f"{c['file']} | {c['group']} | {c['class']}: {c['message']}" for c in crashes]
    assert not crashes, f"{len(crashes)} non-constrain exception(s):\n" + "\n".join(lines)
