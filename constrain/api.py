"""The one-line API: wrap a model once, then ask it for a value of a type.

>>> lm = constrain.Model.load()                                 # the offline default model
>>> lm("Describe Tokyo as JSON.", City)                         # a validated City instance
>>> lm("Is water wet?", Literal["yes", "no"])                   # 'yes'
>>> lm("How many legs has a spider?", int)                      # 8
>>> lm("A US phone number:", constrain.Regex(r"\\(\\d{3}\\) \\d{3}-\\d{4}"))  # a str

An output type is a Pydantic class or anything Pydantic can describe (``int``,
``float``, ``bool``, ``datetime``, ``Literal[...]``, an ``Enum``, ``list[T]``,
``Optional``, unions, ``Annotated`` constraints): its JSON Schema is compiled, the model
writes JSON, and the value comes back validated by Pydantic from that JSON. Text
constraints (:class:`Regex`, :class:`Grammar`, :class:`Gbnf`) give back the text itself.
Everything below is the lower layers: :class:`~constrain.Compiler` and
:func:`~constrain.sampling.generate`, which stay the way to drive one guide by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .compiler import Compiler
from .errors import ConstrainError

__all__ = ["Model", "Regex", "Grammar", "Gbnf"]


@dataclass(frozen=True)
class Regex:
    """Output text that matches ``pattern`` in full."""

    pattern: str


@dataclass(frozen=True)
class Grammar:
    """Output text in a Lark grammar's language (or a bundled one: ``"json"``, ``"sql"``)."""

    text: str


@dataclass(frozen=True)
class Gbnf:
    """Output text in a GBNF grammar's language (llama.cpp's format), from rule ``start``."""

    text: str
    start: str = "root"


class Model:
    """A model and tokenizer with their compiler: call it with a prompt and an output type.

    Keyword options are :func:`~constrain.sampling.generate`'s (``max_new_tokens``,
    ``temperature``, ``top_k``, ``top_p``, ``seed``, ``chat``). A list of prompts is one
    batch and gives a list of values. An output cut by ``max_new_tokens`` raises
    :class:`~constrain.ConstrainError`: a cut text is never passed off as a value.
    """

    def __init__(self, model: Any, tokenizer: Any, **compiler_options: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        width = model.get_output_embeddings().weight.shape[0]  # the logits' width, padding rows included
        self.compiler = Compiler(tokenizer, vocab_size=width, generation_config=model, **compiler_options)

    @classmethod
    def load(cls, name_or_path: str = "smollm2", **compiler_options: Any) -> "Model":
        """The offline default model, or a local Hugging Face model directory (see :func:`load_model`)."""
        from .models import load_model

        return cls(*load_model(name_or_path), **compiler_options)

    def __call__(self, prompt: str | Sequence[str], output_type: Any, **options: Any) -> Any:
        from .sampling import generate

        guide, read = self._guide(output_type)
        batch = not isinstance(prompt, str)
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)  # batch: a list of them
        results = generate(self.model, self.tokenizer, prompts, guide, self.compiler.vocabulary, **options)
        values = []
        for text, result in zip(prompts, results):
            if not result.complete:
                raise ConstrainError(
                    f"the output for {text[:60]!r} was cut at max_new_tokens before it was complete "
                    f"({result.text[:80]!r}…); pass a larger max_new_tokens"
                )
            values.append(read(result.text))
        return values if batch else values[0]

    def stream(self, prompt: str, output_type: Any, **options: Any) -> Any:
        """The text as it is generated (a :class:`~constrain.sampling.TextStream`); its
        ``generation`` holds the result once the stream is read to its end."""
        from .sampling import stream

        guide, _ = self._guide(output_type)
        return stream(self.model, self.tokenizer, prompt, guide, self.compiler.vocabulary, **options)

    def _guide(self, output_type: Any) -> tuple[Any, Any]:
        """The guide for an output type, and how to read a complete text into the value."""
        if isinstance(output_type, Regex):
            return self.compiler.regex(output_type.pattern), str
        if isinstance(output_type, Grammar):
            return self.compiler.grammar(output_type.text), str
        if isinstance(output_type, Gbnf):
            return self.compiler.gbnf(output_type.text, start=output_type.start), str
        if isinstance(output_type, str):
            raise ConstrainError(
                f"the output type {output_type!r} is a str: wrap a pattern as constrain.Regex(...) or a "
                "grammar as constrain.Grammar(...) / constrain.Gbnf(...)"
            )
        from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter

        from .json_schema.pydantic_schema import ClassSchema

        if isinstance(output_type, type) and issubclass(output_type, BaseModel):
            return self.compiler.json_schema(output_type), output_type.model_validate_json
        try:
            adapter = TypeAdapter(output_type)
            schema = adapter.json_schema(schema_generator=ClassSchema)  # as strict as the type (see there)
        except (PydanticSchemaGenerationError, TypeError) as exc:
            raise ConstrainError(f"{output_type!r} is no output type Pydantic can describe: {exc}") from None
        return self.compiler.json_schema(schema), adapter.validate_json
