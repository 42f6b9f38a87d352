"""Layer matching presets, explicit maps and their validation."""

from __future__ import annotations

import pytest

from tinyplm.distill.matching import (
    PRESETS,
    LayerMap,
    explicit,
    last,
    resolve,
    uniform,
    validate,
    with_embeddings,
)
from tinyplm.errors import TinyplmError


def test_uniform_tinybert_4_of_12():
    assert uniform(4, 12).pairs == ((1, 3), (2, 6), (3, 9), (4, 12))


def test_uniform_equal_depths_is_identity():
    assert uniform(3, 3).pairs == ((1, 1), (2, 2), (3, 3))


def test_uniform_non_divisible_rounds_half_up_and_ends_at_last():
    # 4 -> 6: m*6/4 = 1.5, 3, 4.5, 6 -> 2, 3, 5, 6
    assert uniform(4, 6).pairs == ((1, 2), (2, 3), (3, 5), (4, 6))
    assert uniform(5, 12).pairs[-1] == (5, 12)


def test_uniform_rejects_deeper_student():
    with pytest.raises(TinyplmError, match="student depth 6, teacher depth 4"):
        uniform(6, 4)


def test_last():
    assert last(6, 12).pairs == ((6, 12),)


def test_explicit_and_properties():
    m = explicit([[1, 2], (2, 4)])
    assert m == LayerMap(((1, 2), (2, 4)))
    assert m.student_layers == (1, 2) and m.teacher_layers == (2, 4)


@pytest.mark.parametrize("bad", [[[1]], [[1, 2, 3]], [["a", 1]], [[-1, 2]], [[True, 1]], [], [3]])
def test_explicit_rejects_malformed(bad):
    with pytest.raises(TinyplmError):
        explicit(bad)


def test_with_embeddings_adds_zero_pair_once():
    m = with_embeddings(uniform(2, 4))
    assert m.pairs == ((0, 0), (1, 2), (2, 4))
    assert with_embeddings(m) == m


def test_presets_named():
    assert PRESETS["tinybert"] is uniform and PRESETS["minilm"] is last
    assert resolve("tinybert", 4, 12).pairs == ((1, 3), (2, 6), (3, 9), (4, 12))
    assert resolve("minilm", 4, 12).pairs == ((4, 12),)
    assert resolve("uniform", 2, 4).pairs == ((1, 2), (2, 4))
    assert resolve("last", 2, 4).pairs == ((2, 4),)


def test_resolve_explicit_list_and_layermap():
    assert resolve([[0, 0], [2, 12]], 2, 12).pairs == ((0, 0), (2, 12))
    assert resolve([(1, 6)], 2, 12).pairs == ((1, 6),)
    m = LayerMap(((1, 1),))
    assert resolve(m, 1, 1) is m


def test_resolve_out_of_range_names_pair_and_depths():
    with pytest.raises(TinyplmError) as err:
        resolve([[1, 3], [5, 12]], 4, 12)
    msg = str(err.value)
    assert "(5, 12)" in msg and "4 layers" in msg and "12 layers" in msg
    with pytest.raises(TinyplmError, match=r"\(1, 13\)"):
        validate(LayerMap(((1, 13),)), 4, 12)


def test_resolve_unknown_preset_suggests_nearest():
    with pytest.raises(TinyplmError, match="did you mean 'tinybert'"):
        resolve("tinybrt", 4, 12)
    with pytest.raises(TinyplmError, match="did you mean 'uniform'"):
        resolve("unifrom", 4, 12)


def test_bad_depths_rejected():
    with pytest.raises(TinyplmError, match="student_layers"):
        resolve("last", 0, 12)
