"""What a pre-training recipe's inputs must allow, checked before the run dir is claimed.

Each of these failed mid-run before (after the run dir was claimed, so the next try asked for
``--resume`` or ``--force``), most with a traceback that named no file: an ``init`` checkpoint of
another family than BERT, one with fewer positions than ``corpus.max_length``, a tokenizer without
the mask token that masked-LM pre-training puts in, NSP/SOP over a corpus that cannot make pairs,
and a held-out share that holds out no text.
"""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.pretrain import PretrainRecipe
from tinyplm.errors import DataError, ModelError, RecipeError
from tinyplm.models import roles
from tinyplm.pretrain.pairs import build_pairs


def check_init(recipe: PretrainRecipe, src: Path, config: dict) -> None:
    """The ``init`` checkpoint ``src`` (its config.json ``config``): a BERT model whose positions
    hold ``corpus.max_length`` pieces. Raises ``ModelError``/``RecipeError`` naming the file and key."""
    kind = config.get("model_type")
    if kind != "bert":
        raise ModelError(f"{src / 'config.json'}: model_type {kind!r}: pre-training continues BERT checkpoints "
                         "(BertForMaskedLM, BertForPreTraining, a bare BertModel) only; distil another family "
                         "with tinyplm run instead")
    usable = roles.usable_positions(config)
    positions = usable if usable is not None else config.get("max_position_embeddings")
    if isinstance(positions, int) and recipe.corpus.max_length > positions:
        raise RecipeError(f"corpus.max_length {recipe.corpus.max_length} is longer than the {positions} positions "
                          f"{src / 'config.json'} can read; set corpus.max_length to at most {positions}")


def check_tokenizer(recipe: PretrainRecipe, tokenizer, where: Path) -> None:
    """Masked-LM and ELECTRA pre-training replace pieces with the mask token: a tokenizer without one
    (read from ``where``) is refused (``ModelError``)."""
    if getattr(tokenizer, "mask_token_id", None) is None:
        raise ModelError(f"{where}: the tokenizer has no mask token ([MASK]), which {recipe.objective.kind} "
                         "pre-training puts in place of the pieces it hides; give one that has it (tinyplm "
                         "tokenizer train adds it)")


def check_texts(recipe: PretrainRecipe, train_docs: list[list[str]], held_docs: list[list[str]]) -> None:
    """The corpus split can feed the run: at least one held-out text, and (NSP/SOP) pairs on both
    sides. Raises ``DataError``/``RecipeError`` naming ``corpus.paths`` and the key."""
    c = recipe.corpus
    paths = ", ".join(c.paths)
    if not any(held_docs):
        count = sum(len(d) for d in train_docs)
        raise RecipeError(f"corpus.holdout {c.holdout} of the {count} texts of {paths} holds out none, and the "
                          "held-out figures need at least one; give more text or a larger corpus.holdout")
    kind = recipe.objective.pairs
    if kind:
        words = c.segment_words or max(4, int((c.max_length - 3) / 2 / 1.3))
        for side, docs in (("training", train_docs), ("held-out", held_docs)):
            try:
                build_pairs(docs, kind, words, recipe.train.seed)
            except DataError as exc:
                raise DataError(f"{paths}: the {side} texts make no {kind} pairs: {exc}") from None


#: The share of unknown word pieces at which a corpus is refused: a tokenizer of other text.
UNKNOWN_LIMIT = 0.5
#: Texts read for that share: the first so many of the training split (a few seconds at most).
COVERAGE_TEXTS = 2000


def check_coverage(recipe: PretrainRecipe, tokenizer, where: Path, train_texts: list[str]) -> None:
    """Raise ``RecipeError`` when ``tokenizer`` (from ``where``) reads :data:`UNKNOWN_LIMIT` or more of
    the corpus's word pieces as its unknown token, which masking never picks (a special token) and
    a model cannot learn from: the held-out check would then say that no token is masked, and more
    masking or more held-out text would not help."""
    from tinyplm.pretrain.data import encode_texts, unknown_share

    sample = encode_texts(train_texts[:COVERAGE_TEXTS], tokenizer, recipe.corpus.max_length)
    share = unknown_share(sample, tokenizer)
    if share >= UNKNOWN_LIMIT:
        raise RecipeError(f"tokenizer {where} reads {share:.0%} of the corpus's word pieces as its unknown token "
                          f"{tokenizer.unk_token} (in the first {len(sample)} training texts), which masking never "
                          "picks and a model cannot learn from: train a tokenizer on this corpus (tinyplm tokenizer "
                          "train) or use one that covers it")
