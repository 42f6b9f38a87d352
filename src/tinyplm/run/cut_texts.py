"""How many examples ``task.max_length`` cuts, per split, counted on the run's own encodings.

A text longer than the window is cut to its first ``max_length`` word pieces when it is encoded;
training, choosing and measuring then read only that part, and a task of long texts (reviews,
pages) may lose what decides its label. That is the user's trade-off to make, so the run says it:
each split with cut examples is logged when it is encoded and recorded in ``results.json``
(``info.cut``) for ``summary.md``. Tasks read in overlapping windows (SQuAD) read every piece and
are not counted.
"""

from __future__ import annotations

from tinyplm.report.run_info import CutTexts
from tinyplm.tasks.base import Split
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.retrieval import MAX_LENGTH_OPTION
from tinyplm.tasks.tagging import word_pieces


def cut_texts(splits: dict[str, tuple[Split, Encoded]], tokenizer, max_length: int) -> list[CutTexts]:
    """The splits (name -> (split, its encoding)) of which some examples are cut, with how many.

    An encoding as long as its window (an eval split's own ``max_length`` option, else
    ``max_length``) marks an example that may have been cut; it is tokenised again, uncut, to tell
    (and to find the longest)."""
    out = []
    for name, (split, enc) in splits.items():
        if split.head.row.windows:
            continue
        width = int(split.options.get(MAX_LENGTH_OPTION, max_length))
        full = [i for i, ids in enumerate(enc.input_ids) if len(ids) >= width]
        lengths = _uncut_lengths([split.examples[i] for i in full], tokenizer, width)
        cut = [n for n in lengths if n > width]
        if cut:
            out.append(CutTexts(split=name, cut=len(cut), examples=len(enc), width=width, longest=max(cut)))
    return out


def _uncut_lengths(examples: list, tokenizer, width: int) -> list[int]:
    """The pieces (special tokens included) of each example read whole: one text or a text pair, or
    a sentence of words (``tokens``, split as a tagger reads them); any other counts as one piece
    past ``width``."""
    texts = [ex for ex in examples if isinstance(getattr(ex, "text", None), str)]
    if not examples:
        return []
    words = [list(ex.tokens) for ex in examples if isinstance(getattr(ex, "tokens", None), tuple)]
    if len(words) == len(examples):
        return [len(i) for i in word_pieces(words, tokenizer)["input_ids"]]
    if len(texts) != len(examples):
        return [width + 1] * len(examples)
    pairs = [ex.text_pair for ex in texts]
    has_pairs = any(p is not None for p in pairs)
    ids = tokenizer([ex.text for ex in texts], [p or "" for p in pairs] if has_pairs else None,
                    add_special_tokens=True)["input_ids"]
    return [len(i) for i in ids]
