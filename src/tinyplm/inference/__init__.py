"""The inference core that ``tinyplm predict`` and ``tinyplm serve`` share: a model dir's
:class:`~tinyplm.inference.model_info.ModelInfo` (task, head, labels, max length), the input and
prediction records, and the one :class:`~tinyplm.inference.predictor.Predictor` (any runtime, any
head), which predicts as ``tinyplm evaluate`` does."""
