"""The package's import graph runs one way: stages import the stages below them, never above.

Read from the source with ``ast`` (nothing is imported): a test of the layering the design
describes, so a convenient import from the wrong layer fails here instead of in a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "constrain"


def _imports(path: Path) -> set[str]:
    """The ``constrain`` modules a source file imports (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "constrain" or name.startswith("constrain.")}


SOURCES = sorted(PACKAGE.rglob("*.py"))
# (package, packages it must never import)
LAYERS = [
    ("constrain.core", ("constrain.regex", "constrain.cfg", "constrain.json_schema", "constrain.integrations")),
    # the two backends are siblings over the core: neither imports the other
    ("constrain.regex", ("constrain.cfg", "constrain.json_schema", "constrain.integrations", "constrain.compiler",
                         "constrain.skeleton", "constrain.gbnf")),
    ("constrain.cfg", ("constrain.regex", "constrain.json_schema", "constrain.integrations", "constrain.compiler",
                       "constrain.skeleton", "constrain.gbnf")),
    # the front ends that write grammars over regex terminals sit above both
    ("constrain.skeleton", ("constrain.cfg", "constrain.json_schema", "constrain.integrations", "constrain.compiler")),
    ("constrain.gbnf", ("constrain.json_schema", "constrain.integrations", "constrain.compiler")),
    ("constrain.json_schema", ("constrain.integrations", "constrain.compiler")),
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_layers(path: Path) -> None:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    imported = _imports(path)
    if not module.startswith("constrain.testing"):
        assert "constrain.testing" not in imported, f"{module} imports the test helpers"
    for package, forbidden in LAYERS:
        if module == package or module.startswith(package + "."):
            wrong = sorted(name for name in imported for f in forbidden if name == f or name.startswith(f + "."))
            assert not wrong, f"{module} imports {wrong} from a layer above it"
