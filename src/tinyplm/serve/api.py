"""The ``POST /predict`` request body for a model's head, and client mistakes in words.

A body is one example (``{"text": "..."}``) or a list (``{"inputs": [{"text": "..."}, ...]}``);
the example's fields follow the head:

- sequence: ``text`` and, for pair tasks, ``text_pair``;
- span: ``question``, ``context`` and an optional ``id`` (echoed back);
- token: ``tokens`` (a list of words) or ``text`` (split on whitespace).

Validation is pydantic in strict mode (a number is not a text) with unknown fields refused, so a
typo is named rather than ignored; limits (texts per request, characters per text) are part of
the schema and so of the OpenAPI docs. :func:`problems` turns pydantic's errors into
``{"field": "inputs[2].text", "expected": "...", "got": "..."}`` records for the 4xx body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from tinyplm.serve.fields import RowError, check_text
from tinyplm.serve.records import Input, QAInput, TextInput, TokensInput
from tinyplm.tasks.heads import Head
from tinyplm.tasks.json_layout import EXPECTED, json_path, shown

ONE, BATCH = "one", "batch"


@dataclass(frozen=True)
class Limits:
    """Request-size limits: body bytes, examples per request, characters per text field."""

    max_body_bytes: int = 1_000_000
    max_texts: int = 64
    max_chars: int = 10_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _non_empty(value: str) -> str:
    try:
        return check_text(value, "text")
    except RowError:
        what = "a non-empty text" if not value.strip() else "UTF-8 text (no unpaired surrogate escapes)"
        raise ValueError(what) from None


def _example_model(head: Head, limits: Limits) -> type[BaseModel]:
    """The pydantic model of one example for ``head``."""
    Text = Annotated[str, Field(max_length=limits.max_chars), AfterValidator(_non_empty)]
    Word = Annotated[str, Field(min_length=1, max_length=limits.max_chars, pattern=r"^\S+$")]

    if head == Head.SPAN:
        class QuestionExample(_Strict):
            """A question on a context."""

            question: Text
            context: Text
            id: str | None = None

        return QuestionExample
    if head == Head.TOKEN:
        class SentenceExample(_Strict):
            """A sentence: its words, or a text split on whitespace."""

            tokens: Annotated[list[Word], Field(min_length=1, max_length=limits.max_chars)] | None = None
            text: Text | None = None

            @model_validator(mode="after")
            def _one_of(self):
                if (self.tokens is None) == (self.text is None):
                    raise ValueError("give either 'tokens' (a list of words) or 'text'")
                return self

        return SentenceExample

    class TextExample(_Strict):
        """A text, and the second text for pair tasks."""

        text: Text
        text_pair: Text | None = None

    return TextExample


def request_type(head: Head, limits: Limits) -> Any:
    """The ``/predict`` body type: one example, or ``{"inputs": [...]}`` (picked by that key)."""
    example = _example_model(head, limits)

    class Batch(_Strict):
        """Several examples, predicted together and answered in order."""

        inputs: Annotated[list[example], Field(min_length=1, max_length=limits.max_texts)]

    def pick(value: Any) -> str:
        return BATCH if isinstance(value, dict) and "inputs" in value else ONE

    return Annotated[Annotated[example, Tag(ONE)] | Annotated[Batch, Tag(BATCH)], Discriminator(pick)]


def to_inputs(head: Head, body: BaseModel) -> tuple[list[Input], bool]:
    """(the inputs of a validated body, whether it was a list)."""
    many = hasattr(body, "inputs")
    examples = body.inputs if many else [body]
    if head == Head.SPAN:
        return [QAInput(x.question, x.context, x.id) for x in examples], many
    if head == Head.TOKEN:
        return [TokensInput(tuple(x.tokens) if x.tokens is not None else tuple(x.text.split())) for x in examples], many
    return [TextInput(x.text, x.text_pair) for x in examples], many


def problems(errors: list[dict]) -> list[dict]:
    """pydantic/FastAPI errors -> ``{"field", "expected", "got"}`` records (the first 10)."""
    out = []
    for err in errors[:10]:
        loc = [p for p in err.get("loc", ()) if p not in ("body", ONE, BATCH)]
        if err.get("type") == "json_invalid":  # its loc is the character position, not a field
            loc = []
        record = {"field": json_path(tuple(loc)) if loc else "body", "expected": _expected(err)}
        if err.get("type") not in ("missing", "json_invalid") and "input" in err:
            record["got"] = shown(err["input"])
        out.append(record)
    return out


def _expected(err: dict) -> str:
    """What the field should have held, in words."""
    kind, ctx = err.get("type", ""), err.get("ctx") or {}
    if isinstance(err.get("input"), bytes):  # a body FastAPI did not parse as JSON
        return "a JSON body (send it with Content-Type: application/json)"
    if kind == "json_invalid" and isinstance(err.get("loc", (None, None))[-1], int):
        return f"a JSON body ({ctx.get('error', 'malformed')} at character {err['loc'][-1]})"
    words = {
        "missing": "a value (this field is required)",
        "extra_forbidden": "no such field (check its name)",
        "json_invalid": f"a JSON body ({ctx.get('error', 'malformed')})",
        "string_too_long": f"a text of at most {ctx.get('max_length')} characters",
        "too_long": f"at most {ctx.get('max_length')} items",
        "too_short": f"at least {ctx.get('min_length')} item(s)",
        "string_too_short": "a non-empty text",
        "string_pattern_mismatch": "a word: a non-empty text without spaces",
        "model_type": "a JSON object",
        "model_attributes_type": "a JSON object",
    }
    if kind in words:
        return words[kind]
    if kind in EXPECTED:
        return EXPECTED[kind].removeprefix("expected ")
    return err.get("msg", "a valid value").removeprefix("Value error, ")
