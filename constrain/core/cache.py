"""A bounded, thread-safe cache of computed masks, shared by the guides of one compilation.

Masks are computed lazily per state, and a long generation through a wide automaton
visits states without end, so an unbounded cache grows without end too (a 128k
vocabulary's packed mask is 16 KB). This keeps the most recently used ``size`` entries.
Per-call guide objects are shallow copies of one compiled guide: they share this object,
and so one lock, rather than each holding a lock of its own over a shared dict.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

from .sharing import Shared

__all__ = ["BoundedCache"]

V = TypeVar("V")


class BoundedCache(Shared, Generic[V]):
    """At most ``size`` values by key, least recently stored dropped first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a cache holds at least one entry, not {size}")
        self.size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> V | None:
        return self._entries.get(key)

    def put(self, key: Hashable, value: V) -> V:
        """Store ``value`` (or keep the one another thread stored first) and return what is stored."""
        with self._lock:
            value = self._entries.setdefault(key, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value
