"""An XGBoost script runs unchanged with ``import dgboost as xgb`` (issue 12's acceptance).

The script below is written for XGBoost 3.4 and uses the API the drop-in promises: DMatrix with
feature names and missing values, ``train`` with evaluation sets, early stopping and
``evals_result``, ``cv``, ``Booster.update`` / ``set_param`` / ``eval`` / ``get_score`` (all five
types) / ``trees_to_dataframe`` / ``get_dump(dump_format="json")`` / slicing /
``inplace_predict`` / ``save_config`` + ``load_config`` / ``pred_contribs``, the scikit-learn
estimators, ``QuantileDMatrix``, the newer objectives and monotone and interaction constraints. It runs once with
each library; the
model it saves with dgboost loads in XGBoost with the same predictions.
"""

from __future__ import annotations

import numpy as np
import xgboost  # declared test dependency: fail, never skip

SCRIPT = """
import numpy as np
import xgboost as xgb

rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 8)).astype(np.float32)
X[rng.random(X.shape) < 0.05] = np.nan
y = (np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) > 0).astype(np.float32)
names = [f"x{i}" for i in range(8)]
dtrain = xgb.DMatrix(X[:1500], label=y[:1500], feature_names=names)
dvalid = xgb.DMatrix(X[1500:], label=y[1500:], feature_names=names)
params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.2, "eval_metric": ["logloss", "auc"],
          "tree_method": "hist"}
evals_result = {}
bst = xgb.train(params, dtrain, 40, evals=[(dtrain, "train"), (dvalid, "valid")], early_stopping_rounds=5,
                evals_result=evals_result, verbose_eval=False)
history = xgb.cv(params, dtrain, num_boost_round=8, nfold=3, seed=0)
bst.set_param({"eta": 0.1})
bst.update(dtrain, bst.num_boosted_rounds())
evaluation = bst.eval(dvalid, "valid")
scores = {t: bst.get_score(importance_type=t) for t in ("weight", "gain", "cover", "total_gain", "total_cover")}
frame = bst.trees_to_dataframe()
dump = bst.get_dump(dump_format="json")
first_five = bst[0:5]
contribs = bst.predict(dvalid, pred_contribs=True)
inplace = bst.inplace_predict(X[1500:])
config = bst.save_config()
bst.load_config(config)
clf = xgb.XGBClassifier(n_estimators=20, max_depth=3).fit(X[:1500], y[:1500])
proba = clf.predict_proba(X[1500:])
reg = xgb.XGBRegressor(objective="reg:gamma", n_estimators=10).fit(X[:1500], np.exp(np.nan_to_num(X[:1500, 0])))
quantiles = xgb.train({"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.9]},
                      xgb.QuantileDMatrix(X[:1500], label=y[:1500]), 5)
constrained = xgb.train({"max_depth": 3, "monotone_constraints": {"x0": 1, "x7": -1},
                         "interaction_constraints": [["x0", "x1"], ["x2", "x3", "x7"]]}, dtrain, 10)
grid = np.linspace(-3, 3, 25, dtype=np.float32)
sweep = np.repeat(np.nan_to_num(X[1500:1520]), len(grid), axis=0)
sweep[:, 0] = np.tile(grid, 20)
swept = constrained.predict(xgb.DMatrix(sweep, feature_names=names)).reshape(20, len(grid))
mono_reg = xgb.XGBRegressor(n_estimators=10, max_depth=3, monotone_constraints=(1, 0, 0, 0, 0, 0, 0, -1)).fit(
    X[:1500], y[:1500])
swept_reg = mono_reg.predict(sweep).reshape(20, len(grid))
bst.save_model(MODEL_PATH)
"""


def _run(module_name: str, model_path: str) -> dict:
    text = SCRIPT.replace("import xgboost as xgb", f"import {module_name} as xgb")
    env: dict = {"MODEL_PATH": model_path}
    exec(compile(text, f"<script with {module_name}>", "exec"), env)
    return env


def test_an_xgboost_script_runs_unchanged_with_dgboost_and_its_model_loads_in_xgboost(tmp_path):
    ours = _run("dgboost", str(tmp_path / "dgboost.json"))
    theirs = _run("xgboost", str(tmp_path / "xgboost.json"))
    # the same kinds and shapes of results
    assert set(ours["evals_result"]) == set(theirs["evals_result"]) == {"train", "valid"}
    assert list(ours["history"].columns) == list(theirs["history"].columns)
    assert ours["evaluation"].split(":")[0] == theirs["evaluation"].split(":")[0]
    for t in ("weight", "gain", "cover", "total_gain", "total_cover"):
        assert set(ours["scores"][t]) <= set(ours["names"])
        assert all(v > 0 for v in ours["scores"][t].values())
    assert list(ours["frame"].columns) == list(theirs["frame"].columns)
    assert len(ours["dump"]) == ours["bst"].num_boosted_rounds()
    assert ours["first_five"].num_boosted_rounds() == 5
    assert ours["contribs"].shape == theirs["contribs"].shape == (500, 9)
    assert ours["inplace"].shape == theirs["inplace"].shape == (500,)
    assert ours["proba"].shape == theirs["proba"].shape == (500, 2)
    assert ours["quantiles"].predict(ours["dvalid"]).shape == (500, 2)
    # monotone constraints (dict and tuple forms) hold in both libraries' models
    for run in (ours, theirs):
        for swept in (run["swept"], run["swept_reg"]):
            assert np.all(np.diff(swept, axis=1) >= 0.0) and np.ptp(swept) > 0
    # the model dgboost saved loads in XGBoost and predicts the same
    loaded = xgboost.Booster(model_file=str(tmp_path / "dgboost.json"))
    X = ours["X"][1500:]
    np.testing.assert_allclose(
        loaded.predict(xgboost.DMatrix(X, feature_names=ours["names"])),
        ours["bst"].predict(ours["dvalid"]),
        rtol=0,
        atol=1e-6,
    )
    # quality on par: the two libraries' validation AUCs within a point
    auc = [float(r["evaluation"].split("valid-auc:")[1]) for r in (ours, theirs)]
    assert abs(auc[0] - auc[1]) < 0.01
