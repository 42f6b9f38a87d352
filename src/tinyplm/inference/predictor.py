"""The one inference path of ``tinyplm predict`` and ``tinyplm serve``: a model, its tokenizer and
its :class:`~tinyplm.inference.model_info.ModelInfo` turn a list of inputs into predictions.

It is ``tinyplm evaluate``'s path, not a copy of it: inputs become a task ``Split`` and are
tokenised by :func:`tinyplm.tasks.encoding.encode_split` (same truncation, same max length, same
SQuAD windows and word alignment; single texts through a memo of the tokenizer's pieces per word,
:mod:`tinyplm.tasks.piece_cache`: the same ids, checked against the tokenizer when loaded, and most
of a static student's speed end to end), run by :func:`tinyplm.models.infer.predict_logits` (length-sorted
batches, dynamic padding) and read back with evaluate's rules: arg-max class or regression output
(:func:`~tinyplm.models.infer.logits_to_predictions`), SQuAD n-best spans
(:func:`~tinyplm.evaluate.model_eval.span_answers`; v2.0's no-answer threshold as in
:func:`~tinyplm.evaluate.squad.answers_with_threshold`), the tag at each word's first piece
(:func:`~tinyplm.tasks.tagging.tags_from_logits`). So a prediction equals evaluate's wherever the
model's arithmetic does not depend on the batch.

The server may also ask for **length groups** (``split_by_length``, sequence heads): a micro-batch
of requests has random lengths, and one forward pass pads every example to the longest. The
examples are then sorted by length and cut into the groups that minimise padded tokens plus
``pass_overhead_tokens`` per forward pass (:func:`length_groups`, an exact DP over <= a few
dozen examples; :data:`PASS_OVERHEAD_TOKENS` unless the server measured the model's own,
:func:`tinyplm.serve.warmup.pass_overhead_tokens`): fewer padded tokens for a pass or two more
(what it gained on SST-2 dev: docs/results/serve-load.md, "Figures measured earlier"). Files need
none of this: a window sorted by length already makes batches of like lengths, exactly as evaluate's.

**Several threads** may call :meth:`Predictor.predict` at once (a server running batches on
OpenVINO streams, :attr:`Predictor.streams`): tokenising is serialised by a lock (a fast
tokenizer's settings are changed by each call, and the library refuses two such calls at once),
the forward passes are not.

An **embedding** model (``modules.json``, or a static sentence encoder's config) is loaded by
:func:`tinyplm.models.embedder.load_embedder` and its vectors are
:meth:`~tinyplm.models.embedder.Embedder.embed`'s, the path ``tinyplm embed-eval`` scores: the
texts tokenised once, run longest first in batches of ``batch_size`` (length-sorted, dynamic padding,
as the other heads), so a vector equals the embedder's whatever the batch. Each
:class:`~tinyplm.inference.records.VectorPrediction` also carries the text's token count before any
cut (``tokens``), which the service needs for its ``truncate`` rule and its usage figures.

Pair and single-text inputs are encoded apart: a text alone in a batch of pairs would otherwise
be encoded as a pair with an empty second text, and its prediction would depend on its neighbours.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tinyplm.errors import ModelError, TinyplmError
from tinyplm.inference.model_info import ModelInfo, model_info
from tinyplm.inference.records import (
    INPUT_OF,
    AnswerPrediction,
    Input,
    LabelPrediction,
    Prediction,
    QAInput,
    TagsPrediction,
    TextInput,
    TokensInput,
    ValuePrediction,
    VectorPrediction,
)
from tinyplm.models import load_classifier
from tinyplm.models.embedder import Embedder, EmbedderKind, load_embedder
from tinyplm.models.finite import NanOutputs, nan_outputs, refuse_nan_outputs
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.models.token_ids import segment_problem
from tinyplm.tasks import canonical
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.conll import Sentence
from tinyplm.tasks.encoding import encode_split, padded_width
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.piece_cache import PieceCache
from tinyplm.tasks.spoilers import text_cleanup
from tinyplm.tasks.squad import QAExample
from tinyplm.tasks.tagging import tags_from_logits

#: ``tinyplm evaluate``'s batch size: with it, a file read in one window is batched exactly as evaluate batches.
BATCH_SIZE = 64
#: What one more forward pass costs, in padded tokens (measured: 32-128 all within 3% on MiniLM-L6).
PASS_OVERHEAD_TOKENS = 64


def length_groups(lengths: Sequence[int], overhead: float = PASS_OVERHEAD_TOKENS,
                  largest: int | None = None) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length and cut into groups (forward passes) minimising
    ``sum(overhead + len(group) * padded width of its longest)``, each of at most ``largest``."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    width = [padded_width(lengths[i]) for i in order]
    largest = largest or len(order)
    best, cut = [0.0] + [float("inf")] * len(order), [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        for i in range(max(0, j - largest), j):
            cost = best[i] + overhead + (j - i) * width[j - 1]
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], len(order)
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (numpy: ``torch.softmax`` spent longer waking its thread pool than
    numpy takes for a served batch; docs/results/code-choices.md)."""
    z = np.exp(logits.astype(np.float64) - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


@dataclass
class Predictor:
    """A loaded model ready to predict (see the module docstring). ``batch_size`` is the largest
    forward pass; ``split_by_length`` turns on length groups, which weigh a forward pass as
    ``pass_overhead_tokens`` padded tokens; ``forward_passes`` counts passes; ``pair_problem`` says
    why the model cannot read pairs of texts (None when it can), and pairs are refused with it."""

    model: object
    tokenizer: object
    info: ModelInfo
    batch_size: int = BATCH_SIZE
    split_by_length: bool = False
    forward_passes: int = 0
    pass_overhead_tokens: float = PASS_OVERHEAD_TOKENS
    pieces: PieceCache | None = None
    pair_problem: str | None = None
    _tokenizing: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, target: Path, batch_size: int = BATCH_SIZE, split_by_length: bool = False,
             **settings) -> Predictor:
        """Load a model dir or run dir (``settings``: :func:`~tinyplm.inference.model_info.model_info`'s
        explicit choices). Raises ``ModelError``/``TinyplmError`` naming the file at fault."""
        info = model_info(Path(target), **settings)
        return PATHS[info.head].load(info, batch_size, split_by_length, settings.get("max_length"))

    @classmethod
    def _load_classifier(cls, info: ModelInfo, batch_size: int, split_by_length: bool,
                         max_length: int | None) -> Predictor:
        """A classifier, QA model or tagger (``load_classifier``) for ``info``."""
        model, tokenizer = load_classifier(info.path, info.labels, info.is_regression, info.head)  # offsets: fast
        pieces = PieceCache.of(tokenizer) if info.head.row.piece_memo else None
        config = getattr(getattr(model, "config", None), "to_dict", dict)()
        pairs = segment_problem(info.path, config, tokenizer) if info.head.row.fields.pair else None
        if pairs and info.head.row.fields.pair_required:  # a reader: every question comes with its context
            raise ModelError(pairs)
        return cls(model, tokenizer, info, batch_size, split_by_length, pieces=pieces, pair_problem=pairs)

    @classmethod
    def _load_embedder(cls, info: ModelInfo, batch_size: int, split_by_length: bool,
                       max_length: int | None) -> Predictor:
        """An embedding model (either kind, :func:`~tinyplm.models.embedder.load_embedder`) for
        ``info``: cut at ``--max-length`` when given, else at the model's own limit, which ``info``
        then records (:func:`~tinyplm.inference.model_info.embedding_limit`)."""
        from dataclasses import replace

        from tinyplm.inference.model_info import embedding_limit

        embedder = load_embedder(info.path, max_length, batch_size)
        info = replace(info, dimension=embedder.dim)
        if max_length is None:
            limit, source = embedding_limit(embedder)
            info = replace(info, max_length=limit, max_length_from=source)
        return cls(embedder, embedder.tokenizer, info, batch_size, split_by_length)

    @property
    def streams(self) -> int:
        """How many forward passes the model runs at once when called from as many threads: more
        than 1 only for an OpenVINO model compiled for streams (:meth:`use_streams`)."""
        return getattr(self.model, "streams", 1)

    def use_streams(self, streams: int) -> int:
        """Let the model run up to ``streams`` forward passes at once, where its runtime can (OpenVINO;
        PyTorch already spreads one pass over every core) -> the streams it will run."""
        if streams > 1 and hasattr(self.model, "streams"):
            self.model.streams = streams
        return self.streams

    def _encode(self, split: Split):
        with self._tokenizing:  # see the module docstring
            return encode_split(split, self.tokenizer, self.info.max_length, pieces=self.pieces)

    @property
    def input_type(self) -> type:
        """The input dataclass this model's head takes."""
        return INPUT_OF[self.info.head]

    def predict(self, inputs: Sequence[Input]) -> list[Prediction]:
        """One prediction per input, in input order. Raises ``TinyplmError`` for an input of the
        wrong kind for this head (a programming error of the caller: readers and the API check), and
        :class:`~tinyplm.models.finite.NanOutputs` naming the inputs (positions in ``inputs``) whose
        outputs are NaN, which no class or answer can be read from (:mod:`tinyplm.models.finite`)."""
        inputs = list(inputs)
        wrong = next((x for x in inputs if not isinstance(x, self.input_type)), None)
        if wrong is not None:
            raise TinyplmError(f"a {self.info.head} model takes {self.input_type.__name__}, got {type(wrong).__name__}")
        if not inputs:
            return []
        try:
            return PATHS[self.info.head].predict(self, inputs)
        except NanOutputs as exc:  # which inputs: each read alone (predictions do not depend on the batch)
            rows = tuple(i for i, x in enumerate(inputs) if self._nan_alone(x)) or exc.rows
            raise nan_outputs(rows, len(inputs), "the inputs given") from None

    def _nan_alone(self, item: Input) -> bool:
        """Whether the model's outputs for ``item`` read alone are NaN."""
        try:
            PATHS[self.info.head].predict(self, [item])
        except NanOutputs:
            return True
        return False

    def _by_pairs(self, inputs: list[TextInput]) -> list[Prediction]:
        """Classify single texts and pairs apart (see the module docstring), answered in input order."""
        out: list[Prediction | None] = [None] * len(inputs)
        for paired in (False, True):  # see the module docstring
            group = [i for i, x in enumerate(inputs) if (x.text_pair is not None) == paired]
            if group:
                for i, pred in zip(group, self._classify([inputs[i] for i in group]), strict=True):
                    out[i] = pred
        return out

    def warm_up(self, lengths: Sequence[int] = (8, 24, 56), batches: Sequence[int] = (1, 8)) -> None:
        """Run a few forward passes of typical shapes (oneDNN builds its kernels on first use)."""
        sample = PATHS[self.info.head].sample
        for n in lengths:
            for b in batches:
                self.predict([sample(n)] * b)

    def _logits(self, split: Split):
        """(encoding, logits) of a split, run as evaluate runs it."""
        enc = self._encode(split)
        self.forward_passes += -(-len(enc) // self.batch_size)
        logits = predict_logits(self.model, enc, batch_size=self.batch_size)
        refuse_nan_outputs(logits, "the inputs given")
        return enc, logits

    def _grouped_logits(self, split: Split) -> torch.Tensor:
        """Logits of a sequence split run in :func:`length_groups` -> ``(N, labels)``."""
        enc = self._encode(split)
        parts = []
        for group in length_groups(enc.lengths().tolist(), self.pass_overhead_tokens, self.batch_size):
            parts.append((group, predict_logits(self.model, enc.subset(group), batch_size=len(group))))
            self.forward_passes += 1
        logits = torch.empty((len(enc), parts[0][1].shape[-1]), dtype=torch.float32)
        for group, part in parts:
            logits[group] = part
        refuse_nan_outputs(logits, "the inputs given")
        return logits

    def _classify(self, inputs: list[TextInput]) -> list[Prediction]:
        if self.pair_problem and any(x.text_pair is not None for x in inputs):
            raise TinyplmError(self.pair_problem)
        # the text as the task's reader gave it to training and evaluate; a context (the texts around)
        # is made of texts cleaned one by one, which a clean-up of them joined would change again
        clean = text_cleanup(canonical(self.info.task or "")) or (lambda text: text)
        pair = (lambda text: text) if self.info.context_sentences or self.info.context_after else clean
        examples = [Example(clean(x.text), None if x.text_pair is None else pair(x.text_pair), 0) for x in inputs]
        split = Split("predict", examples, Path("<input>"))
        logits = self._grouped_logits(split) if self.split_by_length else self._logits(split)[1]
        values = logits_to_predictions(logits, self.info.is_regression)
        if self.info.is_regression:
            return [ValuePrediction(float(v)) for v in values]
        probs = _softmax(logits.numpy()).tolist()
        labels = self.info.labels
        return [LabelPrediction(labels[int(c)], int(c), dict(zip(labels, p, strict=True)))
                for c, p in zip(values, probs, strict=True)]

    def _answers(self, inputs: list[QAInput]) -> list[Prediction]:
        # imported here: the evaluation modules bring scipy and scikit-learn (seconds of start-up)
        # that a classifier, tagger or embedding model never uses
        from tinyplm.evaluate.model_eval import span_answers
        from tinyplm.evaluate.squad import answers_with_threshold

        examples = [QAExample(x.id or str(i), x.question, x.context, ()) for i, x in enumerate(inputs)]
        options = {"doc_stride": self.info.doc_stride, "max_query_length": self.info.max_query_length}
        split = Split("predict", examples, Path("<input>"), self.info.head, options)
        enc, logits = self._logits(split)
        _, preds = span_answers(split, enc, logits)
        threshold = self.info.null_threshold
        texts = answers_with_threshold(preds, threshold) if threshold is not None else [p.text for p in preds]
        out = []
        for x, p, text in zip(inputs, preds, texts, strict=True):
            start, end = (p.start, p.end) if text else (-1, -1)
            out.append(AnswerPrediction(text, start, end, float(p.score), float(p.null_score), x.id))
        return out

    def _vectors(self, inputs: list[TextInput]) -> list[Prediction]:
        """The vectors of single texts (see the module docstring); a text pair is refused."""
        paired = next((i for i, x in enumerate(inputs) if x.text_pair is not None), None)
        if paired is not None:
            raise TinyplmError(f"an embedding model reads one text alone; input {paired} has a text_pair")
        texts = [x.text for x in inputs]
        embedder: Embedder = self.model
        special = embedder.kind is not EmbedderKind.STATIC  # a static encoder reads no [CLS]/[SEP]
        with self._tokenizing:  # see the module docstring
            counts = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=special)["input_ids"]]
            vectors = embedder.embed(texts)  # (n, dim) float32
        refuse_nan_outputs(vectors, "the inputs given")
        self.forward_passes += -(-len(texts) // self.batch_size)
        return [VectorPrediction(tuple(row), n) for row, n in zip(vectors.tolist(), counts, strict=True)]

    def _tags(self, inputs: list[TokensInput]) -> list[Prediction]:
        """A tag per word. A sentence longer than the max length is read in windows of words, each
        starting a quarter of the previous one back (left context for its first words); a word
        takes its tag from the first window that holds its first piece, so every word is read."""
        tags = self.info.labels
        out: list[list[str | None]] = [[None] * len(x.tokens) for x in inputs]
        starts = dict.fromkeys(range(len(inputs)), 0)  # the sentences still to read, from which word
        while starts:
            pending = list(starts)
            chunks = [inputs[i].tokens[starts[i]:] for i in pending]
            sentences = [Sentence(c, (tags[0],) * len(c), 0) for c in chunks]
            enc, logits = self._logits(Split("predict", sentences, Path("<input>"), self.info.head, {"tags": tags}))
            predicted = tags_from_logits(enc.meta, logits, tags, [len(c) for c in chunks])
            for k, i in enumerate(pending):
                start, chunk = starts.pop(i), chunks[k]
                read = _words_read(enc.meta, k, len(chunk), self.info.max_length)
                for j in range(read):
                    if out[i][start + j] is None:
                        out[i][start + j] = predicted[k][j]
                if start + read < len(inputs[i].tokens):
                    starts[i] = start + max(1, read - read // 4)
        return [TagsPrediction(x.tokens, tuple(t)) for x, t in zip(inputs, out, strict=True)]


def _words_read(tagged, k: int, words: int, max_length: int | None) -> int:
    """How many of sentence ``k``'s ``words`` its encoding read: all of them unless it was cut at
    ``max_length``, else those up to the last whose first piece it holds (at least one, so a word
    of more pieces than the window still moves the reading on, tagged as cut words are: ``O``)."""
    if max_length is None or len(tagged.input_ids[k]) < max_length:
        return words
    kept = tagged.words_of(k)
    return max(1, max(kept) + 1) if kept else 1


@dataclass(frozen=True)
class HeadPath:
    """How a :class:`Predictor` predicts for one head: ``predict(predictor, inputs)`` (inputs of the
    head's type, at least one), ``sample(n)``, an input of about ``n`` words for warming up, and
    ``load(info, batch_size, split_by_length, max_length)``, the model of ``info`` loaded."""

    predict: Callable[[Predictor, list], list[Prediction]]
    sample: Callable[[int], Input]
    load: Callable[..., Predictor] = Predictor._load_classifier


def _words(n: int) -> TextInput:
    return TextInput(" ".join(["the"] * n))


#: The Predictor path of each head.
PATHS: PerHead = PerHead("Predictor path", {
    Head.SEQUENCE: HeadPath(Predictor._by_pairs, _words),
    Head.SPAN: HeadPath(Predictor._answers, lambda n: QAInput("what", " ".join(["what"] * n))),
    Head.TOKEN: HeadPath(Predictor._tags, lambda n: TokensInput(("the",) * n)),
    Head.EMBEDDING: HeadPath(Predictor._vectors, _words, Predictor._load_embedder),
})
