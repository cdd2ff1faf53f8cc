"""Compiled artefacts are shared: across threads, and across processes by pickling.

A compiled automaton, token index or grammar table fills its caches lazily (a row on
first visit), so each guards them with a lock, and threads share one object. Servers
that fork workers (vLLM, Ray, ``torch.multiprocessing``) pass compiled guides by
pickle; a lock cannot be pickled, so :class:`Shared` leaves it out and makes a fresh
one on the other side. The caches travel with the object: what one process has
computed, the next need not compute again.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Shared"]


class Shared:
    """Mixin for objects whose ``_lock`` (a ``Lock`` or ``RLock``) guards lazily filled caches."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        lock = state.pop("_lock", None)
        if lock is not None:
            # the lock's kind, not the lock: an RLock may be re-entered, a Lock may not
            state["_lock"] = "rlock" if isinstance(lock, type(threading.RLock())) else "lock"
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        kind = state.pop("_lock", None)
        self.__dict__.update(state)
        if kind is not None:
            self._lock = threading.RLock() if kind == "rlock" else threading.Lock()
