"""Metrics against XGBoost 3.4's own evaluation, scikit-learn and SciPy; identical values
for any partitioning of the rows; names, directions and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xgboost as xgb  # declared test dependency: fail, never skip
from scipy.stats import poisson
from sklearn import metrics as skm

from dgboost.comm import LocalComm, run_in_threads
from dgboost.errors import DGBoostValueError, ParameterError
from dgboost.metric import CustomMetric, get_metric
from dgboost.objective import get_objective
from dgboost.params import parse_params


def objective(name, **kw):
    return get_objective(parse_params(dict(objective=name, **kw)))


def evaluate(metric, margin, label, weight=None, group_ptr=None, obj=None, comm=None):
    m = get_metric(metric, obj)
    return m.evaluate(
        np.asarray(margin, np.float32).reshape(len(label), -1),
        np.asarray(label, np.float32),
        None if weight is None else np.asarray(weight, np.float32),
        group_ptr,
        obj,
        comm or LocalComm(),
    )


def _data(kind, n, rng, x):
    if kind == "reg":
        return x * 2 + rng.normal(size=n)
    if kind == "bin":
        return (x + rng.normal(size=n) > 0).astype(float)
    if kind == "count":
        return rng.poisson(np.exp(0.5 * x)).astype(float)
    if kind == "positive":
        return rng.gamma(2.0, np.exp(0.5 * x))
    if kind == "tweedie":
        return rng.poisson(np.exp(0.3 * x)) * rng.gamma(2.0, 1.0, n)
    if kind == "multi":
        return np.clip(np.round(x + 1 + rng.normal(size=n) * 0.5), 0, 2)
    if kind == "survival":  # tied times (tenths), 30% censored (negative)
        return np.round(rng.exponential(np.exp(-0.5 * x)) + 0.1, 1) * np.where(rng.random(n) < 0.7, 1, -1)
    if kind == "graded":
        y = rng.integers(0, 4, n).astype(float)
        y[:30] = 0  # the first query has no relevant document
        return y
    y = (rng.random(n) < 0.3).astype(float)  # "binary" relevance
    y[30:80] = 0
    return y


XGB_CASES = [
    ("reg:squarederror", "reg", {}, ["rmse", "mae", "mphe"]),
    ("reg:pseudohubererror", "reg", {"huber_slope": 2.0}, ["mphe", "rmse"]),
    ("reg:absoluteerror", "reg", {}, ["mae"]),
    ("binary:logistic", "bin", {}, ["logloss", "error", "error@0.7", "auc", "rmse"]),
    ("reg:logistic", "bin", {}, ["rmse", "logloss"]),
    ("count:poisson", "count", {}, ["poisson-nloglik", "rmse"]),
    ("reg:gamma", "positive", {}, ["gamma-deviance", "gamma-nloglik", "rmse"]),
    ("binary:hinge", "bin", {}, ["error", "rmse"]),
    ("reg:tweedie", "tweedie", {"tweedie_variance_power": 1.3}, ["tweedie-nloglik@1.3", "tweedie-nloglik@1.7", "rmse"]),
    ("reg:quantileerror", "reg", {"quantile_alpha": [0.1, 0.5, 0.9]}, ["quantile"]),
    ("reg:quantileerror", "reg", {"quantile_alpha": 0.7}, ["quantile", "mae", "rmse"]),
    ("reg:squarederror", "reg", {"quantile_alpha": 0.3}, ["quantile"]),  # any objective's predictions
    ("survival:cox", "survival", {}, ["cox-nloglik"]),  # weights are not used, as in XGBoost
    ("multi:softprob", "multi", {"num_class": 3}, ["mlogloss", "merror", "auc"]),
    ("multi:softmax", "multi", {"num_class": 3}, ["mlogloss", "merror"]),
]
RANK_CASES = [
    ("rank:ndcg", "graded", {}, ["ndcg", "ndcg@5", "ndcg@5-", "ndcg-", "auc"], False),
    ("rank:ndcg", "graded", {"ndcg_exp_gain": False}, ["ndcg@10"], False),
    ("rank:pairwise", "binary", {}, ["map", "map@5", "map@5-", "ndcg@3"], False),
    ("rank:pairwise", "binary", {}, ["map", "map@5", "auc"], True),
    ("rank:ndcg", "graded", {"lambdarank_num_pair_per_sample": 4}, ["ndcg", "ndcg@4", "ndcg@100"], False),
]


def _compare_with_xgboost(name, kind, extra, metric_names, weight_kind, group=None):
    rng = np.random.default_rng(3)
    n = 300
    X = rng.normal(size=(n, 4))
    y = _data(kind, n, rng, X[:, 0])
    w = None
    if weight_kind == "row":
        w = rng.random(n) + 0.5
    elif weight_kind == "group":
        w = rng.random(len(group)) + 0.5
    d = xgb.DMatrix(X, y, weight=w, nthread=1)
    if group is not None:
        d.set_group(group)
    res: dict = {}
    b = xgb.train(
        dict(objective=name, eval_metric=metric_names, nthread=1, max_depth=3, **extra),
        d,
        3,
        evals=[(d, "d")],
        evals_result=res,
        verbose_eval=False,
    )
    margin = b.predict(d, output_margin=True)
    gp = None if group is None else np.r_[0, np.cumsum(group)]
    obj = objective(name, **extra)
    for metric in metric_names:
        ours = evaluate(metric, margin, y, w, gp, obj)
        assert ours == pytest.approx(res["d"][metric][-1], rel=2e-6, abs=1e-7), metric


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name,kind,extra,metric_names", XGB_CASES)
def test_metrics_match_xgboosts_own_evaluation(name, kind, extra, metric_names, weighted):
    _compare_with_xgboost(name, kind, extra, metric_names, "row" if weighted else None)


@pytest.mark.parametrize("name,kind,extra,metric_names,weighted", RANK_CASES)
def test_ranking_metrics_match_xgboosts_own_evaluation(name, kind, extra, metric_names, weighted):
    # group weights only where XGBoost 3.4 accepts them (its weighted ndcg trips an internal check)
    _compare_with_xgboost(name, kind, extra, metric_names, "group" if weighted else None, group=[30, 50, 20, 100, 100])


def test_metrics_match_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    n = 400
    w = (rng.random(n) + 0.1).astype(np.float32).astype(np.float64)  # what the metric sees
    y = rng.normal(size=n)
    m = y + rng.normal(size=n)
    sq = objective("reg:squarederror")
    assert evaluate("rmse", m, y, w, obj=sq) == pytest.approx(
        math.sqrt(skm.mean_squared_error(y, m, sample_weight=w)), rel=1e-6
    )
    assert evaluate("mae", m, y, w, obj=sq) == pytest.approx(skm.mean_absolute_error(y, m, sample_weight=w), rel=1e-6)

    yb = (rng.random(n) < 0.4).astype(float)
    mb = np.round(yb + rng.normal(size=n), 1)  # rounded: many tied scores for AUC
    lg = objective("binary:logistic")
    p = 1 / (1 + np.exp(-mb.astype(np.float32)))
    assert evaluate("logloss", mb, yb, w, obj=lg) == pytest.approx(skm.log_loss(yb, p, sample_weight=w), rel=1e-5)
    assert evaluate("auc", mb, yb, w, obj=lg) == pytest.approx(skm.roc_auc_score(yb, mb, sample_weight=w), rel=1e-9)
    assert evaluate("error", mb, yb, w, obj=lg) == pytest.approx(
        1 - skm.accuracy_score(yb, mb > 0, sample_weight=w), rel=1e-6
    )

    yp = rng.poisson(2.0, n).astype(float)
    mp = rng.normal(size=n) * 0.3 + 0.5
    assert evaluate("poisson-nloglik", mp, yp, w, obj=objective("count:poisson")) == pytest.approx(
        -np.average(poisson.logpmf(yp, np.exp(mp.astype(np.float32))), weights=w), rel=1e-5
    )

    ym = rng.integers(0, 3, n).astype(float)
    mm = rng.normal(size=(n, 3)) + np.eye(3)[ym.astype(int)]
    sp = objective("multi:softprob", num_class=3)
    prob = sp.transform(mm.astype(np.float32))
    assert evaluate("mlogloss", mm, ym, w, obj=sp) == pytest.approx(skm.log_loss(ym, prob, sample_weight=w), rel=1e-5)
    assert evaluate("merror", mm, ym, w, obj=sp) == pytest.approx(
        1 - skm.accuracy_score(ym, prob.argmax(1), sample_weight=w), rel=1e-6
    )
    assert evaluate("auc", mm, ym, None, obj=sp) == pytest.approx(
        skm.roc_auc_score(ym, prob, multi_class="ovr", average="weighted"), rel=1e-6
    )


def test_ndcg_matches_sklearn_per_query():
    rng = np.random.default_rng(1)
    sizes = [8, 15, 30]
    gp = np.r_[0, np.cumsum(sizes)]
    y = rng.integers(0, 4, gp[-1]).astype(float)
    y[gp[:-1]] = 3  # every query has a relevant document (sklearn scores those 0, XGBoost 1)
    m = rng.normal(size=gp[-1])  # no ties (sklearn averages over ties, XGBoost does not)
    obj = objective("rank:ndcg")
    for k in (3, 10):
        want = np.mean([skm.ndcg_score([2.0 ** y[b:e] - 1], [m[b:e]], k=k) for b, e in zip(gp[:-1], gp[1:])])
        assert evaluate(f"ndcg@{k}", m, y, None, gp, obj) == pytest.approx(want, rel=1e-6)


def _random_parts(n, world, rng):
    return np.split(rng.permutation(n), np.sort(rng.integers(0, n + 1, world - 1)))


@pytest.mark.parametrize("world", [1, 2, 3])
def test_metrics_are_identical_for_any_partition_of_the_rows(world):
    rng = np.random.default_rng(world)
    n = 500
    y, yb, ym = rng.normal(size=n), (rng.random(n) < 0.3).astype(float), rng.integers(0, 3, n).astype(float)
    m, mb, mm = rng.normal(size=n), np.round(rng.normal(size=n), 1), rng.normal(size=(n, 3))
    w = rng.random(n) + 0.2
    sq, lg, sp = objective("reg:squarederror"), objective("binary:logistic"), objective("multi:softprob", num_class=3)
    cases = [
        ("rmse", m, y, sq),
        ("mae", m, y, sq),
        ("logloss", mb, yb, lg),
        ("error", mb, yb, lg),
        ("auc", mb, yb, lg),
        ("mlogloss", mm, ym, sp),
        ("merror", mm, ym, sp),
        ("auc", mm, ym, sp),
        ("quantile", mm, y, objective("reg:quantileerror", quantile_alpha=[0.1, 0.5, 0.9])),
    ]
    # ranking: whole query groups go to one rank
    sizes = rng.integers(1, 30, 25)
    gp = np.r_[0, np.cumsum(sizes)]
    yr, mr, gw = rng.integers(0, 3, gp[-1]).astype(float), rng.normal(size=gp[-1]), rng.random(25) + 0.5
    rk = objective("rank:ndcg")

    def compute(comm, rows, groups):
        out = [evaluate(name, mg[rows], lab[rows], w[rows], None, obj, comm) for name, mg, lab, obj in cases]
        sel = np.concatenate([np.arange(gp[g], gp[g + 1]) for g in groups] + [np.zeros(0, int)])
        local_gp = np.r_[0, np.cumsum(sizes[groups])]
        for name in ("ndcg@5", "map", "auc"):
            lab = (yr[sel] > 1).astype(float) if name == "map" else yr[sel]
            out.append(evaluate(name, mr[sel], lab, gw[groups], local_gp, rk, comm))
        return out

    reference = compute(LocalComm(), np.arange(n), np.arange(25))
    row_parts, group_parts = _random_parts(n, world, rng), _random_parts(25, world, rng)
    for result in run_in_threads(world, lambda comm, r: compute(comm, row_parts[r], np.sort(group_parts[r]))):
        assert result == reference  # exactly, not approximately


@pytest.mark.parametrize("weighted", [False, True])
def test_quantile_metric_sees_crossing_predictions_sorted_as_xgboosts(weighted):
    # one round that changes nothing (eta 0): XGBoost evaluates the given margins, which
    # cross in most rows; its objective sorts each row before the metric sees it
    rng = np.random.default_rng(8)
    n, alpha = 200, [0.2, 0.5, 0.8]
    y = rng.normal(size=n)
    margin = rng.normal(size=(n, 3))
    w = rng.random(n) + 0.5 if weighted else None
    d = xgb.DMatrix(rng.normal(size=(n, 2)), y, weight=w, base_margin=margin, nthread=1)
    res: dict = {}
    xgb.train(
        {"objective": "reg:quantileerror", "quantile_alpha": alpha, "eta": 0.0, "nthread": 1},
        d,
        1,
        evals=[(d, "d")],
        evals_result=res,
        verbose_eval=False,
    )
    obj = objective("reg:quantileerror", quantile_alpha=alpha)
    assert (np.diff(margin, axis=1) < 0).any(axis=1).mean() > 0.5
    assert evaluate("quantile", margin, y, w, obj=obj) == pytest.approx(res["d"]["quantile"][-1], rel=2e-6)
    sorted_pinball = np.mean(
        [
            np.average(np.maximum(a * (y - p), (a - 1) * (y - p)), weights=w)
            for a, p in zip(alpha, np.sort(margin.astype(np.float32), axis=1).T)
        ]
    )
    assert evaluate("quantile", margin, y, w, obj=obj) == pytest.approx(sorted_pinball, rel=1e-6)


def test_cox_nloglik_is_the_partial_likelihood_per_event_with_tied_times_in_one_risk_set():
    # times 1, 1, 2, 3 with the censoring at 2: both events at 1 share the risk set of all
    # four rows (Breslow); the event at 3 has itself alone
    y = np.array([1.0, 1.0, -2.0, 3.0])
    m = np.log(np.array([1.0, 2.0, 3.0, 4.0]))
    want = -(np.log(1 / 10) + np.log(2 / 10) + np.log(4 / 4)) / 3
    assert evaluate("cox-nloglik", m, y, obj=objective("survival:cox")) == pytest.approx(want, rel=1e-6)
    assert math.isnan(evaluate("cox-nloglik", m, -np.abs(y), obj=objective("survival:cox")))  # no events


def test_quantile_and_cox_metrics_refuse_what_they_cannot_evaluate():
    with pytest.raises(ParameterError, match="quantile_alpha"):
        get_metric("quantile", objective("reg:squarederror"))
    three = objective("reg:quantileerror", quantile_alpha=[0.1, 0.5, 0.9])
    with pytest.raises(DGBoostValueError, match="3 quantile"):
        evaluate("quantile", np.zeros((4, 2)), np.zeros(4), obj=three)
    with pytest.raises(DGBoostValueError, match="workers"):
        run_in_threads(
            2,
            lambda comm, r: evaluate("cox-nloglik", [0.0, 1.0], [1.0, -2.0], obj=objective("survival:cox"), comm=comm),
        )


def test_bare_ndcg_is_xgboosts_default_metric_of_a_mean_pairs_ranking_objective():
    rng = np.random.default_rng(3)
    n, group = 300, [30, 50, 20, 100, 100]
    X, y = rng.normal(size=(n, 4)), _data("graded", n, rng, None)
    d = xgb.DMatrix(X, y, nthread=1, group=group)
    res: dict = {}
    params = {"objective": "rank:ndcg", "lambdarank_pair_method": "mean", "nthread": 1, "max_depth": 3}
    b = xgb.train(params, d, 3, evals=[(d, "d")], evals_result=res, verbose_eval=False)
    obj = objective("rank:ndcg", lambdarank_pair_method="mean")
    assert obj.default_metric == "ndcg" and list(res["d"]) == ["ndcg"]  # the whole list, not @32
    ours = evaluate(obj.default_metric, b.predict(d, output_margin=True), y, None, np.r_[0, np.cumsum(group)], obj)
    assert ours == pytest.approx(res["d"]["ndcg"][-1], rel=2e-6)


def test_queries_without_relevant_documents_score_one_or_zero_with_minus():
    gp = np.array([0, 3, 6])
    y = np.array([0, 0, 0, 1, 0, 0], float)
    m = np.array([3, 2, 1, 3, 2, 1], float)
    obj = objective("rank:ndcg")
    assert evaluate("ndcg", m, y, None, gp, obj) == 1.0
    assert evaluate("ndcg-", m, y, None, gp, obj) == 0.5
    assert evaluate("map@2", m, y, None, gp, obj) == 1.0
    assert evaluate("map@2-", m, y, None, gp, obj) == 0.5


def test_logitraw_metrics_see_probabilities_so_error_thresholds_the_margin_at_zero():
    obj = objective("binary:logitraw")
    y = np.array([1, 0, 1, 0], float)
    m = np.array([0.2, -0.3, -0.1, 0.4], float)
    assert evaluate("error", m, y, obj=obj) == 0.5
    assert evaluate("logloss", m, y, obj=obj) == pytest.approx(skm.log_loss(y, 1 / (1 + np.exp(-m))), rel=1e-6)


def test_auc_with_a_single_class_is_nan():
    assert math.isnan(evaluate("auc", [0.1, 0.5, 0.2], [1, 1, 1], obj=objective("binary:logistic")))


@pytest.mark.parametrize(
    "name,expected",
    [
        ("rmse", ("rmse", False)),
        ("auc", ("auc", True)),
        ("error@0.7", ("error@0.7", False)),
        ("ndcg@5", ("ndcg@5", True)),
        ("map@3-", ("map@3-", True)),
        ("ndcg", ("ndcg", True)),
        ("poisson-nloglik", ("poisson-nloglik", False)),
        ("cox-nloglik", ("cox-nloglik", False)),
    ],
)
def test_metric_names_and_directions(name, expected):
    m = get_metric(name, objective("rank:ndcg"))
    assert (m.name, m.higher_is_better) == expected


@pytest.mark.parametrize(
    "name,match",
    [
        ("loglos", "logloss"),
        ("ndcgg", "ndcg"),
        ("error@abc", "threshold"),
        ("ndcg@x", "ndcg@<int>"),
        ("rmse@3", "'@'"),
        ("ndcg@0", ">= 1"),
    ],
)
def test_bad_metric_names_raise_parameter_errors_with_a_hint(name, match):
    with pytest.raises(ParameterError, match=match):
        get_metric(name, objective("reg:squarederror"))


def test_bad_labels_for_a_metric_raise_value_errors():
    rk = objective("rank:ndcg")
    with pytest.raises(DGBoostValueError, match="binary relevance"):
        evaluate("map", [1, 2, 3], [0, 2, 1], None, np.array([0, 3]), rk)
    with pytest.raises(DGBoostValueError, match="0..31"):
        evaluate("ndcg", [1, 2, 3], [0, 2.5, 1], None, np.array([0, 3]), rk)
    with pytest.raises(DGBoostValueError, match=r"0\.\.2"):
        evaluate("mlogloss", np.zeros((2, 3)), [0, 3], obj=objective("multi:softprob", num_class=3))
    with pytest.raises(DGBoostValueError, match="multi-class"):
        evaluate("merror", [0.1, 0.2], [0, 1], obj=objective("binary:logistic"))


def test_custom_metric_takes_name_and_direction_from_what_it_returns():
    def my_metric(predt, dmatrix):
        return "auc", float(np.mean(predt)) + dmatrix

    cm = get_metric(my_metric, objective("reg:squarederror"))
    assert isinstance(cm, CustomMetric) and cm.is_custom and cm.name == "my_metric"
    assert cm.evaluate_custom(np.array([1.0, 3.0]), 10.0) == 12.0
    assert cm.name == "auc" and cm.higher_is_better
    cm2 = CustomMetric(lambda p, d: ("mse", 0.5))
    assert cm2.evaluate_custom(None, None) == 0.5 and not cm2.higher_is_better
