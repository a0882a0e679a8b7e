"""plot_importance / plot_tree (matplotlib, Agg backend) and to_graphviz."""

import sys

import numpy as np
import pytest

import dgboost as dg

X = np.random.default_rng(0).normal(size=(400, 5)).astype(np.float32)
Y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(np.float32)  # features 1, 3, 4 are noise
BOOSTER = dg.train({"objective": "binary:logistic", "max_depth": 2}, dg.DMatrix(X, Y), 5)


@pytest.fixture
def plt():
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plot_importance_one_bar_per_used_feature(plt):
    ax = dg.plot_importance(BOOSTER)
    used = BOOSTER.get_score()
    assert len(ax.patches) == len(used)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == sorted(used)
    widths = [p.get_width() for p in ax.patches]
    assert widths == sorted(widths)  # most important at the top
    assert labels[-1] == max(used, key=used.get)
    ax2 = dg.plot_importance(BOOSTER, importance_type="gain", max_num_features=1, ax=plt.gca())
    assert len(ax2.patches) == len(used) + 1  # drawn on the same Axes


def test_plot_tree_draws_every_node(plt):
    ax = dg.plot_tree(BOOSTER, num_trees=1)
    tree = BOOSTER.ensemble.tree(1)
    nodes = [t for t in ax.texts if t.get_gid() == "node"]
    assert len(nodes) == tree.left.size
    assert any(t.get_text().startswith("leaf=") for t in nodes)
    assert dg.plot_tree(BOOSTER, rankdir="LR", with_stats=True) is not None
    with pytest.raises(dg.DGBoostValueError, match="num_trees"):
        dg.plot_tree(BOOSTER, num_trees=99)


def test_plotting_without_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        dg.plot_importance(BOOSTER)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        dg.plot_tree(BOOSTER)


def test_to_graphviz_source():
    import graphviz

    src = dg.to_graphviz(BOOSTER, num_trees=0, rankdir="LR", yes_color="#00FF00")
    assert isinstance(src, graphviz.Source)
    tree = BOOSTER.ensemble.tree(0)
    text = src.source
    assert text.startswith("digraph {") and "rankdir=LR" in text
    assert text.count("->") == 2 * int((tree.left >= 0).sum())
    assert "#00FF00" in text and "leaf=" in text


def test_to_graphviz_without_graphviz_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(ImportError, match="pip install graphviz"):
        dg.to_graphviz(BOOSTER)


def test_plotting_names_are_exported_and_lazy():
    import subprocess

    code = (
        "import sys, dgboost; assert 'matplotlib' not in sys.modules; "
        "assert 'dgboost.plotting' not in sys.modules; "
        "assert {'cv', 'QuantileDMatrix', 'plot_importance', 'plot_tree', 'to_graphviz'} "
        "<= set(dgboost.__all__); dgboost.plot_tree; assert 'dgboost.plotting' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
