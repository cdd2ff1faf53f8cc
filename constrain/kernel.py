"""The compiled kernels, or None where the package was installed without them.

``setup.py`` builds :mod:`constrain._kernel` as an optional extension. Every caller keeps
a numpy path and takes it when :data:`compiled` is None; both give the same results (the
tests compare them). ``CONSTRAIN_KERNEL=numpy`` in the environment forces the numpy paths,
for comparisons and for debugging.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["compiled", "name"]

#: The kernels' interface these sources expect (``VERSION`` in ``_kernel.c``).
VERSION = 11


def _load() -> ModuleType | None:
    if os.environ.get("CONSTRAIN_KERNEL", "").lower() == "numpy":
        return None
    try:
        module = importlib.import_module("constrain._kernel")
    except ImportError:
        return None
    # A build from older sources (an in-place build not redone after a pull) misreads today's tables.
    return module if getattr(module, "VERSION", 1) == VERSION else None


#: The compiled extension module, or None (numpy paths).
compiled: ModuleType | None = _load()
#: Which kernels run, for reports: ``"compiled"`` or ``"numpy"``.
name = "numpy" if compiled is None else "compiled"
