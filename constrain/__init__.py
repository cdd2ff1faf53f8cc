"""constrain: make a local language model's output provably fit a regex, a schema or a grammar.

>>> compiler = constrain.Compiler(tokenizer)        # vocabulary tables, built once
>>> guide = compiler.regex(r"\\d{3}-\\d{4}")           # a stateless, shareable guide
>>> state = guide.initial_state
>>> mask = guide.allowed_tokens(state)              # bool mask over the vocabulary
>>> state = guide.advance(state, token_id)

Or in one line, from a model to a typed value (see :mod:`constrain.api`):

>>> lm = constrain.Model.load()
>>> lm("Is water wet?", Literal["yes", "no"])
'yes'
"""

from .api import Gbnf, Grammar, Model, Regex
from .cfg import CFGGuide, compile_grammar, compile_sql
from .compiler import Compiler
from .errors import (
    BitmaskError,
    ConfigurationError,
    ConstrainError,
    EmptyLanguageError,
    GBNFError,
    InvalidPatternError,
    InvalidStateError,
    LimitExceededError,
    NonRegularPatternError,
    PatternError,
    GrammarError,
    RecursiveSchemaError,
    SchemaError,
    TokenRejected,
    UnsupportedSchemaError,
    VocabularyError,
)
from .guide import Guide, allocate_bitmask, bitmask_size, bitmask_to_bool
from .regex import FINISHED, Limits, RegexGuide
from .triggered import Trigger, TriggeredGuide, tools_schema
from .unique_items import UniqueItemsGuide
from .vocabulary import Vocabulary

__version__ = "0.1.0"

__all__ = [
    "Model",
    "Regex",
    "Grammar",
    "Gbnf",
    "Compiler",
    "Guide",
    "RegexGuide",
    "CFGGuide",
    "Trigger",
    "TriggeredGuide",
    "UniqueItemsGuide",
    "tools_schema",
    "compile_grammar",
    "compile_sql",
    "GrammarError",
    "Vocabulary",
    "Limits",
    "FINISHED",
    "allocate_bitmask",
    "bitmask_size",
    "bitmask_to_bool",
    "ConstrainError",
    "BitmaskError",
    "ConfigurationError",
    "InvalidStateError",
    "VocabularyError",
    "PatternError",
    "InvalidPatternError",
    "NonRegularPatternError",
    "EmptyLanguageError",
    "LimitExceededError",
    "TokenRejected",
    "SchemaError",
    "UnsupportedSchemaError",
    "RecursiveSchemaError",
    "GBNFError",
    "__version__",
]
