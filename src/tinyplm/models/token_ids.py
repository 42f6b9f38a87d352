"""Whether two tokenizers give the same text the same ids: what a model needs to read another's
encoding (a student initialised from a checkpoint, a stage teacher, a frozen feature encoder) or to
be compared with it position by position (layer-wise distillation).

Vocabulary sizes are not enough: MPNet's ids are BERT's shifted by 4 (``a gripping, funny film``
is ``[0, 1041, 13944, 1014, 6061, 2147, 2]`` for all-mpnet-base-v2 and ``[101, 1037, 13940, 1010,
6057, 2143, 102]`` for MiniLM), and two vocabularies of one size may order their pieces otherwise.
"""

from __future__ import annotations

#: Encoded by both tokenizers as a last check (normalisation: case, accents, punctuation).
PROBE = "A gripping, funny film -- naïve but Honest: 1999's best."
SPECIAL = ("cls_token", "sep_token", "pad_token", "mask_token", "unk_token")


def token_id_mismatch(ours, theirs) -> str | None:
    """None when ``ours`` and ``theirs`` (Hugging Face tokenizers) map every piece and special token
    to the same id and encode :data:`PROBE` alike; otherwise the first difference, in words
    (``"'the' is id 1996 here and 2000 there"``)."""
    a, b = ours.get_vocab(), theirs.get_vocab()
    if len(a) != len(b):
        return f"{len(a)} word pieces here and {len(b)} there"
    for name in SPECIAL:
        x, y = getattr(ours, name, None), getattr(theirs, name, None)
        ix, iy = getattr(ours, f"{name}_id", None), getattr(theirs, f"{name}_id", None)
        if (x, ix) != (y, iy):
            return f"{name} is {x!r} (id {ix}) here and {y!r} (id {iy}) there"
    piece = next((p for p, i in a.items() if b.get(p) != i), None)
    if piece is not None:
        return f"{piece!r} is id {a[piece]} here and {b.get(piece)} there"
    x, y = ours(PROBE)["input_ids"], theirs(PROBE)["input_ids"]
    if x != y:
        return f"{PROBE!r} is {x} here and {y} there"
    return None


def segment_problem(folder, config: dict, tokenizer, who: str = "model") -> str | None:
    """Why the model in ``folder`` cannot read a pair of texts as its tokenizer encodes them: the
    tokenizer gives the second text a segment id past the ``type_vocab_size`` rows of ``config``
    (BERT's tokenizer on a model trained without segments: the first pair would index past the
    table); None when it can (a family without segment embeddings, DistilBERT or MPNet, and
    DeBERTa-v3, whose ``type_vocab_size`` 0 means it adds none, included)."""
    rows = config.get("type_vocab_size")
    if not rows:  # no segment table (DistilBERT, MPNet), or DeBERTa's 0: it reads no segment ids at all
        return None
    used = max(tokenizer("a b", "c d", return_token_type_ids=True).get("token_type_ids") or [0])
    if used < rows:
        return None
    return (f"{folder}/config.json: type_vocab_size {rows} has no row for segment id {used}, which the {who}'s "
            "tokenizer gives the second text of a pair; use a checkpoint trained with segments (type_vocab_size 2) "
            "for pairs of texts")


def padding_problem(folder, config: dict, tokenizer) -> str | None:
    """Why the model in ``folder`` would not read its tokenizer's padding as padding: in a family
    whose positions count from the padding id (RoBERTa, XLM-R, CamemBERT: the role table's
    ``Positions.AFTER_PAD``, its code reading config.json's ``pad_token_id``), a ``pad_token_id``
    other than the tokenizer's shifts every position and takes a real token for padding, silently;
    None when they agree, the tokenizer has no padding token, or the family does not count so."""
    from tinyplm.models.role_table import ROLES, Positions

    family = ROLES.get(str(config.get("model_type")))
    ours, theirs = config.get("pad_token_id"), getattr(tokenizer, "pad_token_id", None)
    if family is None or family.positions != Positions.AFTER_PAD or family.position_pad is not None:
        return None
    if not isinstance(ours, int) or theirs is None or ours == theirs:
        return None
    return (f"{folder}/config.json: pad_token_id {ours}, but the tokenizer pads with id {theirs} "
            f"({tokenizer.pad_token!r}); a {config.get('model_type')} model counts positions from its padding id, "
            f"so every position would shift and id {ours} read as padding; expected pad_token_id {theirs}")


def offsets_problem(folder, tokenizer, head) -> str | None:
    """Why the tokenizer of the model in ``folder`` cannot serve a task of ``head`` (a
    :class:`~tinyplm.tasks.heads.Head`): the head reads examples through character offsets
    (tagged words, answers in contexts), which only a fast tokenizer gives; None when it can."""
    if not head.row.offsets or getattr(tokenizer, "is_fast", False):
        return None
    reads = "aligns words to pieces" if head.row.words else "cuts answers from contexts"
    return (f"{folder}: its tokenizer ({type(tokenizer).__name__}) is a slow one, without character offsets, and "
            f"a {head} task {reads} by offsets; save the model's fast tokenizer (tokenizer.json) beside it")
