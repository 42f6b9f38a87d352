"""The ``POST /predict`` request body for a model's head, and client mistakes in words.

A body is one example (``{"text": "..."}``) or a list (``{"inputs": [{"text": "..."}, ...]}``);
the example's fields follow the head:

- sequence: ``text`` and, for pair tasks, ``text_pair``;
- span: ``question``, ``context`` and an optional ``id`` (echoed back);
- token: ``tokens`` (a list of words) or ``text`` (split on whitespace);
- embedding: ``text``.

Validation is pydantic in strict mode (a number is not a text) with unknown fields refused, so a
typo is named rather than ignored. Every rule is a JSON Schema keyword, so the OpenAPI document
states exactly what is accepted: limits (texts per request, characters per text) are ``maxItems`` and
``maxLength``; a text must hold a character that is not whitespace (``pattern``; the classes
are spelled out, since ``\\s`` means different sets to Python, Rust and ECMA regexes); a word is such
characters only; a tagger's example has ``tokens`` or ``text``, exactly one (``oneOf``). The body is
parsed and validated in one pass from its bytes (:func:`parse_body`, pydantic-core), which rejects
malformed JSON, and with it a lone surrogate escape, as not JSON (400). :func:`problems` turns
pydantic's errors into ``{"field": "inputs[2].text", "expected": "...", "got": "..."}`` records for
the 4xx body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError, model_validator

from tinyplm.inference.records import Input, QAInput, TextInput, TokensInput
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.io import SPACE, invisible
from tinyplm.tasks.json_layout import EXPECTED, json_path, shown

ONE, BATCH = "one", "batch"
#: A text holds at least one character that is neither whitespace nor an invisible format character
#: (search semantics, as JSON Schema's): ``predict`` and the training readers refuse the same texts
#: (:func:`~tinyplm.tasks.io.has_visible`).
TEXT_PATTERN = f"[^{SPACE}{invisible()}]"
#: A word is one or more characters that are not whitespace, one of them visible (a zero-width joiner
#: inside an emoji sequence is part of a word).
WORD_PATTERN = f"^[^{SPACE}]*[^{SPACE}{invisible()}][^{SPACE}]*$"


@dataclass(frozen=True)
class Limits:
    """Request-size limits: body bytes, examples per request, characters per text field."""

    max_body_bytes: int = 1_000_000
    max_texts: int = 64
    max_chars: int = 10_000


class BodyError(Exception):
    """A ``/predict`` body that cannot be used: ``status`` (400, 415 or 422), a message and problem records."""

    def __init__(self, status: int, message: str, details: list[dict]) -> None:
        super().__init__(message)
        self.status, self.message, self.details = status, message, details


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _exactly_one_of(*names: str):
    """A ``json_schema_extra`` that documents "exactly one of ``names``" (``oneOf`` + ``required``); their
    default (``None``, which a client cannot send) is left out."""

    def edit(schema: dict[str, Any]) -> None:
        for name in names:
            schema["properties"][name].pop("default", None)
        schema["oneOf"] = [{"required": [name]} for name in names]

    return edit


def _example_model(head: Head, limits: Limits) -> type[BaseModel]:
    """The pydantic model of one example for ``head`` (its entry of :data:`WIRES`)."""
    Text = Annotated[str, Field(min_length=1, max_length=limits.max_chars, pattern=TEXT_PATTERN)]
    Word = Annotated[str, Field(min_length=1, max_length=limits.max_chars, pattern=WORD_PATTERN)]
    return WIRES[head].example(Text, Word, limits)


def _question_example(Text: Any, Word: Any, limits: Limits) -> type[BaseModel]:
    class QuestionExample(_Strict):
        """A question on a context."""

        question: Text
        context: Text
        id: str | int | None = None  # echoed back as a string, as predict writes it

    return QuestionExample


def _sentence_example(Text: Any, Word: Any, limits: Limits) -> type[BaseModel]:
    class SentenceExample(_Strict):
        """A sentence: its words (``tokens``), or a text split on whitespace (``text``); exactly one."""

        model_config = ConfigDict(json_schema_extra=_exactly_one_of("tokens", "text"))

        # not ``X | None``: an explicit null is refused, as the schema says (None is only the default)
        tokens: Annotated[list[Word], Field(min_length=1, max_length=limits.max_chars)] = None
        text: Text = None

        @model_validator(mode="after")
        def _one_of(self):
            if (self.tokens is None) == (self.text is None):
                raise ValueError("give either 'tokens' (a list of words) or 'text'")
            return self

    return SentenceExample


def _text_example(Text: Any, Word: Any, limits: Limits) -> type[BaseModel]:
    class TextExample(_Strict):
        """A text, and the second text for pair tasks."""

        text: Text
        text_pair: Text | None = None

    return TextExample


def _single_text_example(Text: Any, Word: Any, limits: Limits) -> type[BaseModel]:
    class SingleTextExample(_Strict):
        """A text (an embedding model reads one text alone)."""

        text: Text

    return SingleTextExample


def request_type(head: Head, limits: Limits) -> Any:
    """The ``/predict`` body type: one example, or ``{"inputs": [...]}`` (picked by that key)."""
    example = _example_model(head, limits)

    class Batch(_Strict):
        """Several examples, predicted together and answered in order."""

        inputs: Annotated[list[example], Field(min_length=1, max_length=limits.max_texts)]

    def pick(value: Any) -> str:
        return BATCH if isinstance(value, dict) and "inputs" in value else ONE

    return Annotated[Annotated[example, Tag(ONE)] | Annotated[Batch, Tag(BATCH)], Discriminator(pick)]


def is_json(content_type: bytes | None) -> bool:
    """Whether a request's ``Content-Type`` is JSON (``application/json``, ``application/*+json``) or absent."""
    if not content_type:
        return True
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


def parse_body(adapter: TypeAdapter, raw: bytes, content_type: bytes | None) -> BaseModel:
    """The validated body of a request (one pass over its bytes); raises :class:`BodyError`: 415 for
    a body that is not sent as JSON, 400 for malformed JSON, 422 for JSON that does not fit."""
    if not is_json(content_type):
        raise BodyError(415, "send the body as JSON (Content-Type: application/json)", [
            {"field": "body", "expected": "a JSON body (send it with Content-Type: application/json)",
             "got": f"Content-Type: {content_type.decode('latin-1')[:60]}"}])
    try:
        return adapter.validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if any(e.get("type") == "json_invalid" for e in errors):
            raise BodyError(400, "the request body is not valid JSON", problems(errors)) from None
        raise BodyError(422, "the request body does not fit the schema (see /docs)", problems(errors)) from None


def to_inputs(head: Head, body: BaseModel) -> tuple[list[Input], bool]:
    """(the inputs of a validated body, whether it was a list)."""
    many = hasattr(body, "inputs")
    examples = body.inputs if many else [body]
    to_input = WIRES[head].to_input
    return [to_input(x) for x in examples], many


def problems(errors: list[dict]) -> list[dict]:
    """pydantic errors -> ``{"field", "expected", "got"}`` records (the first 10)."""
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
    if kind == "json_invalid":
        return f"a JSON body ({ctx.get('error', 'malformed')})"
    if kind == "string_pattern_mismatch":
        if ctx.get("pattern") == WORD_PATTERN:
            return "a word: a text without spaces, not only invisible characters"
        return "a text with a visible character (not only whitespace or zero-width characters)"
    words = {
        "missing": "a value (this field is required)",
        "extra_forbidden": "no such field (check its name)",
        "string_too_long": f"a text of at most {ctx.get('max_length')} characters",
        "too_long": f"at most {ctx.get('max_length')} items",
        "too_short": f"at least {ctx.get('min_length')} item(s)",
        "string_too_short": "a non-empty text",
        "model_type": "a JSON object",
        "model_attributes_type": "a JSON object",
    }
    if kind in words:
        return words[kind]
    if kind in EXPECTED:
        return EXPECTED[kind].removeprefix("expected ")
    return err.get("msg", "a valid value").removeprefix("Value error, ")


@dataclass(frozen=True)
class Wire:
    """One head's ``/predict`` example: ``example(Text, Word, limits)`` builds its pydantic model
    (``Text``, ``Word``: the constrained string types of the server's limits) and ``to_input`` turns
    a validated example into the predictor's input."""

    example: Callable[[Any, Any, Limits], type[BaseModel]]
    to_input: Callable[[Any], Input]


#: Each head's request example and its input (the fields are its row's ``fields``).
WIRES: PerHead = PerHead("request example", {
    Head.SEQUENCE: Wire(_text_example, lambda x: TextInput(x.text, x.text_pair)),
    Head.SPAN: Wire(_question_example, lambda x: QAInput(x.question, x.context, None if x.id is None else str(x.id))),
    Head.TOKEN: Wire(_sentence_example,
                     lambda x: TokensInput(tuple(x.tokens) if x.tokens is not None else tuple(x.text.split()))),
    Head.EMBEDDING: Wire(_single_text_example, lambda x: TextInput(x.text)),
})
