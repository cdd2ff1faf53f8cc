"""Errors of the grammar backend: :class:`GrammarError`, defined with the others in ``constrain.errors``."""

from __future__ import annotations

from ..errors import GrammarError

__all__ = ["GrammarError"]
