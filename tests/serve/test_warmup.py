"""The shape warm-up: every (batch, width) a served batch can take, largest batches first, within
a time budget; only for runtimes that build kernels per shape. A forward pass keeps its weight in
padded tokens unless the runtime's differs."""

from __future__ import annotations

from tinyplm.serve.warmup import needs_shape_warm_up, pass_overhead_tokens, shapes, warm_shapes


class Recorder:
    """A model that records the shape of each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
        assert input_ids.shape == attention_mask.shape == token_type_ids.shape
        self.calls.append(tuple(input_ids.shape))


def test_every_shape_a_batch_can_take() -> None:
    assert shapes(2, 20) == [(2, 8), (2, 16), (2, 20), (1, 8), (1, 16), (1, 20)]  # never padded past 20
    assert len(shapes(32, 64)) == 32 * 8


def test_warm_shapes_runs_each_once_within_its_budget() -> None:
    model = Recorder()
    assert warm_shapes(model, 2, 16) == 4 and model.calls == [(2, 8), (2, 16), (1, 8), (1, 16)]
    assert warm_shapes(Recorder(), 32, 128, budget_s=0.0) == 0


def test_only_openvino_models_need_it_and_torch_keeps_its_pass_weight(tiny_model_dir) -> None:
    from tinyplm.inference.predictor import PASS_OVERHEAD_TOKENS, Predictor
    from tinyplm.serve.app import create_app

    predictor = Predictor.load(tiny_model_dir, split_by_length=True)
    assert not needs_shape_warm_up(predictor.model)
    assert pass_overhead_tokens(predictor.model) == PASS_OVERHEAD_TOKENS
    create_app(predictor)
    assert predictor.pass_overhead_tokens == PASS_OVERHEAD_TOKENS
