"""The input arrays the ONNX Runtime and OpenVINO classifiers hand their exported graph."""
import numpy as np
import torch

from tinyplm.models.onnx import graph_feed


def test_missing_mask_and_segments_get_their_defaults_as_int64():
    ids = torch.tensor([[101, 7, 102], [101, 9, 102]], dtype=torch.int32)
    feed = graph_feed({"input_ids", "attention_mask", "token_type_ids"}, ids)
    assert set(feed) == {"input_ids", "attention_mask", "token_type_ids"}
    assert all(a.dtype == np.int64 for a in feed.values())
    np.testing.assert_array_equal(feed["input_ids"], ids.numpy())
    np.testing.assert_array_equal(feed["attention_mask"], np.ones((2, 3)))
    np.testing.assert_array_equal(feed["token_type_ids"], np.zeros((2, 3)))


def test_given_inputs_pass_through_and_only_the_graphs_inputs_are_fed():
    ids = torch.tensor([[101, 7, 0]])
    mask = torch.tensor([[1, 1, 0]])
    segments = torch.tensor([[0, 1, 1]])
    feed = graph_feed({"input_ids", "attention_mask"}, ids, mask, segments)  # a graph without token types
    assert set(feed) == {"input_ids", "attention_mask"}
    np.testing.assert_array_equal(feed["attention_mask"], mask.numpy())
