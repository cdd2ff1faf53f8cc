"""Python's cyclic garbage collector, paused while automata are built.

A compile, or the first visit of a state, allocates hundreds of thousands of small
containers that stay alive: NFA edge lists, subset states (frozensets of virtual states),
product tuples, their dicts. Every 700 allocations the collector traverses the youngest of
them, and every so often all of them, and finds nothing to free: nothing built there is
garbage while the build runs. On the dev set's slowest compiles that was 35-45% of the
time (Github_medium o48661 1.03 -> 0.58 s, Handwritten oneofpr1 3.17 -> 2.05 s), and a
fifth of the first walks of 150 dev schemas (docs/design.md, "The cold path").

So the collector is paused for the build and resumes after it; cyclic garbage made
meanwhile (by any thread) is collected then. The collector is one per process, so the
pause is too: the first build to start pauses it, where it was enabled, and the last one to
finish resumes it. A caller that disables the collector itself while a build runs finds it
enabled again afterwards; ``CONSTRAIN_PAUSE_GC=0`` in the environment (or
``collector.ENABLED = False``) leaves the collector alone.
"""

from __future__ import annotations

import functools
import gc
import os
import threading
from types import TracebackType
from typing import Callable, ParamSpec, TypeVar

__all__ = ["ENABLED", "paused", "while_paused"]

#: Whether builds pause the collector (``CONSTRAIN_PAUSE_GC=0`` turns it off).
ENABLED = os.environ.get("CONSTRAIN_PAUSE_GC", "1").strip() != "0"

_lock = threading.Lock()
_depth = 0  # builds under way, in every thread
_we_paused = False  # whether the outermost one disabled the collector (it was enabled)


class _Paused:
    """The context manager ``paused()`` returns (a class: cheaper to enter than a generator)."""

    __slots__ = ("_counted",)

    def __enter__(self) -> None:
        global _depth, _we_paused
        self._counted = ENABLED
        if not self._counted:
            return
        with _lock:
            if _depth == 0:
                _we_paused = gc.isenabled()
                if _we_paused:
                    gc.disable()
            _depth += 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        global _depth, _we_paused
        if not self._counted:
            return
        with _lock:
            _depth -= 1
            if _depth == 0 and _we_paused:
                _we_paused = False
                gc.enable()


def paused() -> _Paused:
    """A context in which the collector is paused (see the module docstring); nests, in any thread."""
    return _Paused()


P = ParamSpec("P")
R = TypeVar("R")


def while_paused(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run with the collector paused (a decorator for the compiler's entry points)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _Paused():
            return function(*args, **kwargs)

    return wrapper
