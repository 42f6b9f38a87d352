"""ROC points for reports: the area is scikit-learn's, thinning keeps both ends, one-class refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from tinyplm.evaluate.roc import roc_points


def test_roc_points_are_thinned_but_keep_the_area_and_both_ends():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 2000)
    scores = labels * 0.3 + rng.random(2000)
    full = roc_points(labels, scores, max_points=10_000)
    thin = roc_points(labels, scores, max_points=50)
    assert thin["auc"] == pytest.approx(roc_auc_score(labels, scores)) == full["auc"]
    assert len(thin["fpr"]) <= 50 < len(full["fpr"])
    assert (thin["fpr"][0], thin["tpr"][0], thin["fpr"][-1], thin["tpr"][-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.trapezoid(thin["tpr"], thin["fpr"]) == pytest.approx(thin["auc"], abs=0.01)


def test_roc_points_need_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        roc_points(np.zeros(5), np.arange(5.0))
