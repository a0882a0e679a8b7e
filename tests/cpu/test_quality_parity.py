"""Training quality equals XGBoost ``hist`` on the same data and parameters.

max_bin 256, eta 0.1, 100 rounds, depth 6 and 8; scikit-learn's bundled data sets and
synthetic data with 20% missing values; every objective both libraries have. The test metric
of dgboost must be within 1% relative of XGBoost's (AUC within 0.003 absolute). Test metrics
are computed independently of both libraries (``dgboost.testing.parity``).
"""

import pytest
import xgboost  # noqa: F401  (a declared test dependency: a broken install must fail, not skip)

from dgboost.testing.parity import CASES, CONSTRAINED_CASES, predictions_agree, run_case, within_tolerance  # noqa: E402


@pytest.mark.parametrize("depth", [6, 8])
@pytest.mark.parametrize("dataset, objective, metric", CASES)
def test_test_metric_is_within_one_percent_of_xgboost_hist(dataset, objective, metric, depth):
    result = run_case(dataset, objective, metric, depth)
    assert within_tolerance(result), (
        f"{dataset} {objective} depth {depth}: {metric} dgboost {result.dgboost:.5f} vs "
        f"xgboost {result.xgboost:.5f} (gap {result.relative_gap:+.2%})"
    )


@pytest.mark.parametrize("depth", [6, 8])
@pytest.mark.parametrize(
    "dataset, objective, metric, constraints, extra", CONSTRAINED_CASES, ids=[c[3] for c in CONSTRAINED_CASES]
)
def test_constrained_models_match_xgboost_hist_in_test_metric_and_predictions(
    dataset, objective, metric, constraints, extra, depth
):
    result = run_case(dataset, objective, metric, depth, constraints=constraints, extra=extra)
    assert within_tolerance(result), (
        f"{dataset} {objective} {constraints} depth {depth}: {metric} dgboost {result.dgboost:.5f} vs "
        f"xgboost {result.xgboost:.5f} (gap {result.relative_gap:+.2%})"
    )
    assert predictions_agree(result), f"predictions differ: relative RMS gap {result.prediction_gap:.2e}"
