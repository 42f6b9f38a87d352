"""Layer probing: how linearly readable a task is from each layer of a frozen encoder.

For every layer (the embedding output, then each encoder layer's output) the items' features are
extracted once (:func:`layer_features`) and a multinomial logistic regression is fitted on the
train items and scored on dev (:func:`fit_probe`). Two references sit beside the curve:

- the majority class (the train split's most frequent label) scored on dev;
- the random-encoder control: the same probe on the same layers of a randomly initialised encoder
  of the same shape (:func:`tinyplm.evaluate.encoder.random_copy`). What a probe reads off a
  random encoder comes from word identity and position alone; *selectivity* is the probe's
  accuracy minus its control's (in the spirit of Hewitt & Liang, 2019, whose control is a
  control *task*; here, as the issue asks, it is a control *encoder*).

The probe is a multinomial logistic regression with scikit-learn's objective (``LogisticRegression``:
``C`` x the summed cross-entropy + half the squared L2 norm of the weights, bias unpenalised) on
standardised features, minimised by full-batch L-BFGS with a strong-Wolfe line search. The problem is
convex, so the solver finds the optimum with no learning rate, schedule or epoch count to tune per
layer, and every layer and model is probed by exactly the same, deterministic procedure.

Deliberately not scikit-learn's own solver: it works in float64 with per-iteration Python and
Cython overhead, and a word-level probe has ~10^5 items x 384 features x 45 classes per layer: too
slow for a run's five stages with their random-encoder controls (the timing:
docs/results/probe-heads.md). The same objective in float32
torch (``torch.optim.LBFGS``: matrix products on every core) reaches the same optimum (a unit test
compares the two) in a fraction of the time. Only the solver is ours; scaling stays scikit-learn's.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from tinyplm.evaluate.encoder import batches, random_copy
from tinyplm.evaluate.probe_data import EncodedItems, Level, ProbeData, ProbeSplit, encode_items
from tinyplm.models.features import forward_features

POOLS = ("mean", "cls")


@dataclass(frozen=True)
class ProbeSettings:
    """How a probe runs: sentences sampled per split, tokens per sentence, sentence pooling
    (``mean`` of real tokens or ``cls``), the probe's inverse L2 strength ``c`` and iteration cap,
    the sampling / initialisation ``seed``, and whether the random-encoder ``control`` runs."""

    train_sentences: int | None = 2000
    dev_sentences: int | None = 500
    max_length: int = 128
    batch_size: int = 32
    pool: str = "mean"
    c: float = 1.0
    max_iter: int = 300
    seed: int = 0
    control: bool = True

    def __post_init__(self) -> None:
        if self.pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {self.pool!r}")
        if self.c <= 0 or self.max_iter < 1 or self.max_length < 4 or self.batch_size < 1:
            raise ValueError("c must be > 0, max_iter >= 1, max_length >= 4 and batch_size >= 1")


@torch.inference_mode()
def layer_features(model: nn.Module, items: EncodedItems, batch_size: int = 32, pool: str = "mean") -> list[np.ndarray]:
    """Per layer (embeddings first, then layers 1..L) the items' features ``(items, hidden)``.

    Word level: the state at each kept word's first piece, sentence by sentence; sentence level:
    the mean over real tokens (``pool="mean"``) or the ``[CLS]`` state (``"cls"``)."""
    firsts = items.first_pieces
    counts = [len(f) for f in firsts] if firsts is not None else [1] * len(items.enc)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    out: list[np.ndarray] | None = None
    for idx, inputs in batches(items.enc, batch_size):
        feats = forward_features(model, inputs, ("embeddings", "hidden"))
        states = [feats.embeddings, *feats.hidden]  # each (batch, seq, hidden)
        if out is None:
            out = [np.zeros((int(offsets[-1]), s.shape[-1]), dtype=np.float32) for s in states]
        mask = inputs["attention_mask"].unsqueeze(-1).float()  # (batch, seq, 1)
        for layer, s in enumerate(states):
            s = s.float()
            if firsts is not None:
                for row, i in enumerate(idx):
                    out[layer][offsets[i]:offsets[i + 1]] = s[row, firsts[i]].numpy()
            elif pool == "cls":
                out[layer][idx] = s[:, 0].numpy()
            else:
                out[layer][idx] = ((s * mask).sum(1) / mask.sum(1).clamp_min(1)).numpy()
    return out or []


def item_labels(split: ProbeSplit, items: EncodedItems) -> np.ndarray:
    """The label id of every item, in :func:`layer_features` order (words cut off are dropped)."""
    if items.first_pieces is None:
        return np.asarray(split.labels, dtype=np.int64)
    kept = [labels[:len(f)] for labels, f in zip(split.labels, items.first_pieces, strict=True)]
    return np.asarray([y for row in kept for y in row], dtype=np.int64)


def majority_accuracy(train_y: np.ndarray, dev_y: np.ndarray) -> float:
    """Dev accuracy of always predicting the train split's most frequent label."""
    if len(dev_y) == 0 or len(train_y) == 0:
        return 0.0
    values, counts = np.unique(train_y, return_counts=True)
    return float((dev_y == values[counts.argmax()]).mean())


def fit_probe(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray,
              c: float = 1.0, max_iter: int = 300, seed: int = 0) -> float:
    """Dev accuracy of a logistic-regression probe fitted on standardised train features
    ``(items, hidden)`` (see the module's docstring); a train split with one label is the majority
    class. ``seed`` is kept for the signature: the fit starts from zeros and is deterministic."""
    from sklearn.preprocessing import StandardScaler

    del seed
    classes = np.unique(train_y)
    if len(classes) < 2:
        return majority_accuracy(train_y, dev_y)
    scaler = StandardScaler().fit(train_x)
    weight, bias = _lbfgs_logistic(scaler.transform(train_x), np.searchsorted(classes, train_y), len(classes),
                                   c, max_iter)
    logits = torch.from_numpy(scaler.transform(dev_x).astype(np.float32)) @ weight + bias
    return float((classes[logits.argmax(1).numpy()] == dev_y).mean())


def _lbfgs_logistic(x: np.ndarray, y: np.ndarray, classes: int, c: float, max_iter: int
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``(features, classes)`` and bias minimising ``mean CE + |W|^2 / (2 C n)`` (scikit-learn's
    ``C * sum CE + |W|^2 / 2``, divided by ``C n`` so the scale suits float32), from zeros."""
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(y.astype(np.int64))
    weight = torch.zeros(xt.shape[1], classes, requires_grad=True)
    bias = torch.zeros(classes, requires_grad=True)
    l2 = 1.0 / (2.0 * c * len(yt))
    opt = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
                            tolerance_grad=1e-6, tolerance_change=1e-10, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(xt @ weight + bias, yt) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.inference_mode(False), torch.enable_grad():  # callers may sit inside inference_mode
        opt.step(closure)
    return weight.detach(), bias.detach()


@dataclass
class ProbeCurve:
    """One model's probe: accuracy per layer (``[embeddings, layer 1, ..., layer L]``), the
    random-encoder control on the same layers (None when not run), the majority baseline and the
    item counts (tokenizers cut differently, so they are per model), and seconds taken."""

    name: str
    accuracy: list[float]
    control: list[float] | None
    majority: float
    train_items: int
    dev_items: int
    seconds: float = 0.0
    model_dir: str | None = None

    @property
    def selectivity(self) -> list[float] | None:
        """Accuracy minus control, per layer."""
        return None if self.control is None else [a - c for a, c in zip(self.accuracy, self.control, strict=True)]

    @property
    def best_layer(self) -> int:
        """Index of the layer with the highest accuracy (0 = embeddings; the first on ties)."""
        return int(np.argmax(self.accuracy))


def _curve_of(model: nn.Module, train: EncodedItems, dev: EncodedItems, ys: tuple[np.ndarray, np.ndarray],
              settings: ProbeSettings) -> list[float]:
    """Accuracy per layer of ``model``'s features on the encoded splits."""
    train_x = layer_features(model, train, settings.batch_size, settings.pool)
    dev_x = layer_features(model, dev, settings.batch_size, settings.pool)
    return [fit_probe(tx, ys[0], dx, ys[1], settings.c, settings.max_iter, settings.seed)
            for tx, dx in zip(train_x, dev_x, strict=True)]


def probe_model(model: nn.Module, tokenizer, data: ProbeData, settings: ProbeSettings, name: str,
                model_dir: str | None = None) -> ProbeCurve:
    """Probe every layer of ``model`` (and, with ``settings.control``, of a random copy of it)."""
    start = time.perf_counter()
    train = encode_items(data.task.level, data.train.texts, tokenizer, settings.max_length)
    dev = encode_items(data.task.level, data.dev.texts, tokenizer, settings.max_length)
    ys = (item_labels(data.train, train), item_labels(data.dev, dev))
    accuracy = _curve_of(model, train, dev, ys, settings)
    control = _curve_of(random_copy(model, settings.seed), train, dev, ys, settings) if settings.control else None
    return ProbeCurve(name=name, accuracy=accuracy, control=control, majority=majority_accuracy(*ys),
                      train_items=len(ys[0]), dev_items=len(ys[1]), seconds=time.perf_counter() - start,
                      model_dir=model_dir)


PROBE_SCHEMA = 1


@dataclass
class ProbeReport:
    """Probe curves of one probing task, as stored in ``analysis/probe-<task>.json``."""

    task: str
    level: str
    description: str
    labels: list[str]
    settings: dict[str, Any]
    curves: list[ProbeCurve] = field(default_factory=list)

    def curve(self, name: str) -> ProbeCurve | None:
        return next((c for c in self.curves if c.name == name), None)

    def put(self, curve: ProbeCurve) -> None:
        """Add ``curve``, replacing the one of the same name in place."""
        at = next((i for i, c in enumerate(self.curves) if c.name == curve.name), None)
        if at is None:
            self.curves.append(curve)
        else:
            self.curves[at] = curve

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PROBE_SCHEMA, "kind": "probe", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeReport:
        """Raises ``ValueError`` naming what is missing or of the wrong type."""
        if not isinstance(data, dict) or data.get("kind") != "probe":
            raise ValueError("not a probe result (expected an object with kind: probe)")
        curves = []
        for i, c in enumerate(data.get("curves") or []):
            if not isinstance(c, dict):
                raise ValueError(f"curves[{i}] must be an object")
            acc, ctl = c.get("accuracy"), c.get("control")
            if not isinstance(acc, list) or not all(isinstance(v, (int, float)) for v in acc):
                raise ValueError(f"curves[{i}].accuracy must be a list of numbers")
            if ctl is not None and (not isinstance(ctl, list) or len(ctl) != len(acc)):
                raise ValueError(f"curves[{i}].control must be null or a list as long as accuracy")
            curves.append(ProbeCurve(**{k: c[k] for k in ProbeCurve.__dataclass_fields__ if k in c}))
        try:
            return cls(task=str(data["task"]), level=str(Level(data["level"])),
                       description=str(data.get("description", "")), labels=list(data.get("labels") or []),
                       settings=dict(data.get("settings") or {}), curves=curves)
        except KeyError as exc:
            raise ValueError(f"lacks key {exc}") from None
