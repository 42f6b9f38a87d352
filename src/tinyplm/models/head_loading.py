"""A saved model loaded for a task's head: one table of loaders, one per head.

The heads with a task class (sequence, span, token) load through
:func:`~tinyplm.models.loading.load_classifier`, which puts the head's classifier on the checkpoint;
the embedding head loads the embedding model its dir holds
(:func:`~tinyplm.models.embedder.load_embedder`: a sentence-transformers layout or a static
sentence encoder), refusing any other dir by name. This module sits above both, so neither
imports the other.
"""

from __future__ import annotations

from pathlib import Path

from tinyplm.models.embedder import load_embedder
from tinyplm.models.loading import load_classifier
from tinyplm.tasks.heads import Head, PerHead


def _embedding_model(path: Path, labels: tuple[str, ...], is_regression: bool, head: Head, *,
                     replace_head: bool = False):
    """The embedding model of ``path`` -> (model, tokenizer); labels (and a head to replace) do not apply."""
    embedder = load_embedder(path)
    return embedder.model, embedder.tokenizer


#: How a saved model is loaded for each head: (path, labels, is_regression, head) -> (model, tokenizer).
LOADERS: PerHead = PerHead("model loader", {Head.SEQUENCE: load_classifier, Head.SPAN: load_classifier,
                                            Head.TOKEN: load_classifier, Head.EMBEDDING: _embedding_model})


def load_for_head(path: Path, labels: tuple[str, ...], is_regression: bool, head: Head | str, *,
                  replace_head: bool = False):
    """``path`` loaded for ``head`` (see the module docstring) -> (model, tokenizer). Raises
    ``ModelError`` naming the dir at fault, ``TinyplmError`` for an unknown head. ``replace_head``:
    the model is trained on the task next, so a trained head that does not fit it is replaced
    (:func:`~tinyplm.models.loading.load_classifier`)."""
    from tinyplm.tasks.heads import head_of_name

    head = head_of_name(head)
    return LOADERS[head](Path(path), labels, is_regression, head, replace_head=replace_head)
