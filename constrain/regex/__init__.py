"""The regex backend: pattern → byte NFA → lazy byte DFA → token index → guide."""

from .automaton import ByteNFA, LazyDFA
from ..core.limits import Limits
from .guide import FINISHED, RegexGuide
from .index import TokenIndex

__all__ = ["ByteNFA", "LazyDFA", "Limits", "TokenIndex", "RegexGuide", "FINISHED"]
