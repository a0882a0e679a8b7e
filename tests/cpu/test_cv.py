"""dgboost.cv against xgboost.cv on the same explicit folds, and QuantileDMatrix."""

import numpy as np
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost.datasets import make_synthetic

X, Y, _ = make_synthetic(1200, 6, task="binary", missing_rate=0.05)
FOLDS = [
    (np.setdiff1d(np.arange(1200), te), te) for te in np.array_split(np.random.default_rng(3).permutation(1200), 3)
]
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "seed": 0}


def _xgb_cv(**kw):
    return xgb.cv(PARAMS, xgb.DMatrix(X, Y), folds=FOLDS, **kw)


def test_cv_matches_xgboost_columns_rows_and_values():
    kw = {"num_boost_round": 12, "metrics": ["logloss", "auc"]}
    ours = dg.cv(PARAMS, dg.DMatrix(X, Y), folds=FOLDS, **kw)
    theirs = _xgb_cv(**kw)
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs) == 12
    for col in ours.columns:
        if col.endswith("-mean"):
            np.testing.assert_allclose(ours[col].to_numpy(), theirs[col].to_numpy(), rtol=0.05)


def test_cv_early_stopping_trims_rows_as_xgboost():
    # noisy labels and deep trees: the fold-mean test logloss has a clear minimum at round 2,
    # so both libraries stop at the same round although their trees differ slightly (on data
    # with a flat minimum the stopping round is too sensitive to compare across libraries)
    rng = np.random.default_rng(2)
    n = 600
    Xn = rng.normal(size=(n, 4)).astype(np.float32)
    folds = [(np.setdiff1d(np.arange(n), te), te) for te in np.array_split(rng.permutation(n), 3)]
    yn = (Xn[:, 0] + rng.normal(size=n) > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.5}
    kw = {"num_boost_round": 50, "metrics": "logloss", "early_stopping_rounds": 3, "folds": folds}
    ours = dg.cv(params, dg.DMatrix(Xn, yn), **kw)
    theirs = xgb.cv(params, xgb.DMatrix(Xn, yn), **kw)
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs) == 3
    for col in ours.columns:
        if col.endswith("-mean"):
            np.testing.assert_allclose(ours[col].to_numpy(), theirs[col].to_numpy(), rtol=0.05)


def test_cv_columns_for_default_metric_and_dict_output():
    res = dg.cv({"objective": "reg:squarederror"}, dg.DMatrix(X, Y), num_boost_round=4, nfold=4, as_pandas=False)
    assert list(res) == ["train-rmse-mean", "train-rmse-std", "test-rmse-mean", "test-rmse-std"]
    assert all(len(v) == 4 for v in res.values())
    assert all(s >= 0 for s in res["test-rmse-std"])


def test_cv_each_fold_is_dgboost_train_on_its_rows():
    params = {**PARAMS, "eval_metric": "logloss"}
    res = dg.cv(params, dg.DMatrix(X, Y), num_boost_round=5, folds=FOLDS)
    scores = []
    for tr, te in FOLDS:
        hist = {}
        dg.train(
            params,
            dg.DMatrix(X[tr], Y[tr]),
            5,
            evals=[(dg.DMatrix(X[te], Y[te]), "test")],
            evals_result=hist,
            verbose_eval=False,
        )
        scores.append(hist["test"]["logloss"])
    np.testing.assert_allclose(res["test-logloss-mean"], np.mean(scores, axis=0), rtol=1e-6)
    np.testing.assert_allclose(res["test-logloss-std"], np.std(scores, axis=0), rtol=1e-5, atol=1e-9)


def test_cv_stratified_verbose_and_sklearn_splitter(capsys):
    from sklearn.model_selection import KFold

    res = dg.cv(
        PARAMS, dg.DMatrix(X, Y), num_boost_round=3, nfold=3, stratified=True, verbose_eval=True, show_stdv=True
    )
    assert len(res) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[0]\ttrain-logloss:") and "+" in out[0] and "\ttest-logloss:" in out[0]
    res2 = dg.cv(PARAMS, dg.DMatrix(X, Y), num_boost_round=3, folds=KFold(3))
    assert len(res2) == 3


def test_cv_ranking_keeps_groups_whole():
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(300, 4)).astype(np.float32)
    yr = rng.integers(0, 3, 300).astype(np.float32)
    res = dg.cv(
        {"objective": "rank:ndcg", "eval_metric": "ndcg@5"},
        dg.DMatrix(Xr, yr, group=[30] * 10),
        num_boost_round=3,
        nfold=5,
    )
    assert list(res.columns) == ["train-ndcg@5-mean", "train-ndcg@5-std", "test-ndcg@5-mean", "test-ndcg@5-std"]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"nfold": 1}, "nfold must be an integer >= 2"),
        ({"folds": [(np.arange(5), np.array([5000]))]}, "fold indices must be in"),
        ({"early_stopping_rounds": 0}, "early_stopping_rounds must be a positive integer"),
    ],
)
def test_cv_bad_arguments(kw, match):
    with pytest.raises(dg.DGBoostError, match=match):
        dg.cv(PARAMS, dg.DMatrix(X, Y), num_boost_round=2, **kw)


def test_quantile_dmatrix_trains_like_dmatrix_with_same_max_bin():
    params = {"objective": "binary:logistic", "max_depth": 4}
    a = dg.train(params, dg.QuantileDMatrix(X, Y, max_bin=16), 5)
    b = dg.train(params, dg.DMatrix(X, Y, max_bin=16), 5)
    c = dg.train(params, dg.DMatrix(X, Y), 5)
    assert a.ensemble == b.ensemble
    assert a.ensemble != c.ensemble  # max_bin is really used
    qd = dg.QuantileDMatrix(X, Y, max_bin=16)
    valid = dg.QuantileDMatrix(X[:100], Y[:100], ref=qd)
    assert isinstance(valid, dg.DMatrix) and valid.max_bin == 16 and valid.ref is qd
    np.testing.assert_array_equal(a.predict(valid), b.predict(dg.DMatrix(X[:100])))
