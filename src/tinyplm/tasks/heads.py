"""The closed set of task heads: what a task's model predicts, and what follows from it.

- ``sequence``: one label (or score) per example: GLUE, custom CSV/JSONL tasks.
- ``span``: the answer's start and end positions in the context: SQuAD.
- ``token``: one label per word (on its first word piece): CoNLL-2003.

Every module asks the :class:`Head` (``head.per_position``, ``head.auto_suffix``) instead of
comparing strings. ``Head`` is a ``StrEnum``: recipes, configs and results.json keep the plain names.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Head(StrEnum):
    """A task head (see the module docstring)."""

    SEQUENCE = "sequence"
    SPAN = "span"
    TOKEN = "token"

    @property
    def per_position(self) -> bool:
        """True when the logits have a sequence axis (span: ``(batch, seq, 2)``, token:
        ``(batch, seq, labels)``); sequence logits are ``(batch, labels)``."""
        return self is not Head.SEQUENCE

    @property
    def auto_suffix(self) -> str:
        """The ``transformers`` class-name suffix of this head (``AutoModel<suffix>``)."""
        return _SUFFIX[self]

    @classmethod
    def of_architectures(cls, names: Iterable[str]) -> Head:
        """The head that class names (a model's class and its config's ``architectures``) carry;
        ``sequence`` when none names a span or token head."""
        names = list(names)
        for head in (cls.SPAN, cls.TOKEN):
            if any(n.endswith(head.auto_suffix) for n in names):
                return head
        return cls.SEQUENCE


_SUFFIX = {Head.SEQUENCE: "ForSequenceClassification", Head.SPAN: "ForQuestionAnswering",
           Head.TOKEN: "ForTokenClassification"}
