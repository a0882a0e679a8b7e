"""Plots of a model, with XGBoost's names: :func:`plot_importance`, :func:`plot_tree`,
:func:`to_graphviz`.

matplotlib (for the ``plot_*`` functions) and the ``graphviz`` Python package (for
:func:`to_graphviz`) are optional; a missing one raises ImportError with the ``pip install``
line. Unlike XGBoost, :func:`plot_tree` draws the tree with matplotlib alone, so it does not
need the Graphviz ``dot`` program.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DGBoostTypeError, DGBoostValueError

__all__ = ["plot_importance", "plot_tree", "to_graphviz"]


def _require(module: str, package: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs the '{package}' package: pip install {package}") from exc


def _as_booster(model):
    from .booster import Booster

    if isinstance(model, Booster):
        return model
    if hasattr(model, "get_booster"):  # dgboost / XGBoost scikit-learn estimators
        booster = model.get_booster()
        if isinstance(booster, Booster):
            return booster
    raise DGBoostTypeError(f"expected a dgboost Booster or a fitted dgboost estimator, got {type(model).__name__}")


def _feature_names(booster, fmap: str = "") -> list[str] | None:
    if fmap:
        names = {}
        with open(fmap, encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2:
                    names[int(parts[0])] = parts[1]
        if names:
            return [names.get(i, f"f{i}") for i in range(max(names) + 1)]
    return booster.feature_names


def _tree(booster, num_trees: int):
    n = booster.ensemble.n_trees
    if isinstance(num_trees, bool) or int(num_trees) != num_trees or not 0 <= num_trees < n:
        raise DGBoostValueError(f"num_trees must be a tree index in [0, {n}), got {num_trees!r}")
    return booster.ensemble.tree(int(num_trees))


def _fmt(x) -> str:
    return "%.9g" % float(np.float32(x))


def _node_label(tree, i: int, names, with_stats: bool) -> str:
    if tree.left[i] < 0:
        label = f"leaf={_fmt(tree.value[i])}"
        if with_stats:
            label += f"\ncover={_fmt(tree.cover[i])}"
        return label
    f = int(tree.feature[i])
    name = names[f] if names and f < len(names) else f"f{f}"
    if tree.split_type is not None and tree.split_type[i] == 1:  # XGBoost's "name:{c1,c2}"
        label = f"{name}:{{{','.join(str(c) for c in tree.node_categories(i).tolist())}}}"
    else:
        label = f"{name}<{_fmt(tree.split_value[i])}"
    if with_stats:
        label += f"\ngain={_fmt(tree.gain[i])}\ncover={_fmt(tree.cover[i])}"
    return label


def _edge_texts(tree, i: int) -> tuple[str, str]:
    """Labels of node i's left and right edges, as XGBoost's graphviz: "yes" is the left child
    of a numeric split and the right (the set's) child of a categorical one."""
    dleft = bool(tree.default_left[i])
    left, right = ("no", "yes") if tree.split_type is not None and tree.split_type[i] == 1 else ("yes", "no")
    return left + (", missing" if dleft else ""), right + ("" if dleft else ", missing")


def plot_importance(
    booster,
    ax=None,
    height: float = 0.2,
    xlim=None,
    ylim=None,
    title: str | None = "Feature importance",
    xlabel: str | None = "Importance score",
    ylabel: str | None = "Features",
    fmap: str = "",
    importance_type: str = "weight",
    max_num_features: int | None = None,
    grid: bool = True,
    show_values: bool = True,
    values_format: str = "{v}",
    **kwargs: Any,
):
    """Horizontal bar chart of feature importance, as ``xgboost.plot_importance``.

    Parameters
    ----------
    booster : Booster, fitted estimator, or dict
        A dict is taken as ``{feature: importance}`` already computed.
    ax : matplotlib Axes, optional
        Drawn on a new figure when not given.
    importance_type : str
        ``weight``, ``gain``, ``cover``, ``total_gain`` or ``total_cover``
        (:meth:`Booster.get_score`).
    max_num_features : int, optional
        Plot only the most important features.
    show_values, values_format
        Write each value next to its bar, formatted with ``values_format.format(v=value)``.
    **kwargs
        Passed to ``ax.barh``.

    Returns
    -------
    matplotlib.axes.Axes
        One bar per feature used by the model, the most important at the top.
    """
    plt = _require("matplotlib.pyplot", "matplotlib", "plot_importance")
    if isinstance(booster, dict):
        importance = dict(booster)
    else:
        importance = _as_booster(booster).get_score(fmap=fmap, importance_type=importance_type)
    if not importance:
        raise DGBoostValueError(
            "booster has no split to compute importance from (it is empty or every tree is a single leaf)"
        )
    items = sorted(importance.items(), key=lambda kv: kv[1])
    if max_num_features is not None:
        if int(max_num_features) != max_num_features or max_num_features < 1:
            raise DGBoostValueError(f"max_num_features must be a positive integer, got {max_num_features!r}")
        items = items[-int(max_num_features) :]
    labels, values = zip(*items)
    if ax is None:
        _, ax = plt.subplots(1, 1)
    ylocs = np.arange(len(values))
    ax.barh(ylocs, values, align="center", height=height, **kwargs)
    if show_values:
        for x, y in zip(values, ylocs):
            ax.text(x + 1, y, values_format.format(v=x), va="center")
    ax.set_yticks(ylocs)
    ax.set_yticklabels(labels)
    if xlim is not None:
        if not isinstance(xlim, tuple) or len(xlim) != 2:
            raise DGBoostValueError("xlim must be a tuple of 2 elements")
    else:
        xlim = (0, max(values) * 1.1)
    ax.set_xlim(xlim)
    if ylim is not None:
        if not isinstance(ylim, tuple) or len(ylim) != 2:
            raise DGBoostValueError("ylim must be a tuple of 2 elements")
    else:
        ylim = (-1, len(values))
    ax.set_ylim(ylim)
    if title is not None:
        ax.set_title(title)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(grid)
    return ax


def _dot_source(
    booster,
    fmap: str,
    num_trees: int,
    rankdir,
    yes_color,
    no_color,
    condition_node_params,
    leaf_node_params,
    with_stats: bool,
) -> str:
    booster = _as_booster(booster)
    tree = _tree(booster, num_trees)
    names = _feature_names(booster, fmap)
    yes_color = yes_color or "#0000FF"
    no_color = no_color or "#FF0000"
    cond = {"shape": "box", **(condition_node_params or {})}
    leaf = dict(leaf_node_params or {})

    def attrs(d: dict) -> str:
        return "".join(f', {k}="{v}"' for k, v in d.items())

    lines = ["digraph {", f"    graph [ rankdir={rankdir or 'TB'} ]"]
    for i in range(tree.left.size):
        label = _node_label(tree, i, names, with_stats).replace('"', '\\"').replace("\n", "\\n")
        if tree.left[i] < 0:
            lines.append(f'    {i} [ label="{label}"{attrs(leaf)} ]')
            continue
        lines.append(f'    {i} [ label="{label}"{attrs(cond)} ]')
        left, right = int(tree.left[i]), int(tree.right[i])
        left_text, right_text = _edge_texts(tree, i)
        lines.append(f'    {i} -> {left} [label="{left_text}" color="{yes_color}"]')
        lines.append(f'    {i} -> {right} [label="{right_text}" color="{no_color}"]')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_graphviz(
    booster,
    fmap: str = "",
    num_trees: int = 0,
    rankdir: str | None = None,
    yes_color: str | None = None,
    no_color: str | None = None,
    condition_node_params: dict | None = None,
    leaf_node_params: dict | None = None,
    with_stats: bool = False,
    **kwargs: Any,
):
    """One tree as a ``graphviz.Source``, as ``xgboost.to_graphviz``.

    Parameters
    ----------
    booster : Booster or fitted estimator
    num_trees : int
        Index of the tree to draw.
    rankdir : str, optional
        Graphviz layout direction (``TB`` by default, ``LR`` for left to right).
    yes_color, no_color : str, optional
        Edge colours of the ``x < split`` branch (blue) and the other one (red).
    condition_node_params, leaf_node_params : dict, optional
        Graphviz node attributes of split and leaf nodes.
    with_stats : bool
        Add gain and cover to the labels.
    **kwargs
        Passed to ``graphviz.Source``.

    Returns
    -------
    graphviz.Source
        Rendering it (``.render()``, ``.pipe()``) needs the Graphviz ``dot`` program.
    """
    graphviz = _require("graphviz", "graphviz", "to_graphviz")
    source = _dot_source(
        booster, fmap, num_trees, rankdir, yes_color, no_color, condition_node_params, leaf_node_params, with_stats
    )
    return graphviz.Source(source, **kwargs)


def plot_tree(
    booster,
    fmap: str = "",
    num_trees: int = 0,
    rankdir: str | None = None,
    ax=None,
    with_stats: bool = False,
    yes_color: str | None = None,
    no_color: str | None = None,
    **kwargs: Any,
):
    """Draw one tree on a matplotlib Axes, as ``xgboost.plot_tree``.

    Parameters
    ----------
    booster : Booster or fitted estimator
    num_trees : int
        Index of the tree to draw.
    rankdir : str, optional
        ``TB`` (root at the top, default) or ``LR`` (root at the left).
    ax : matplotlib Axes, optional
    with_stats : bool
        Add gain and cover to the labels.
    yes_color, no_color : str, optional
        Edge colours (blue / red by default, as XGBoost).
    **kwargs
        Passed to ``ax.text`` of every node.

    Returns
    -------
    matplotlib.axes.Axes
        One text box per node (``ax.texts``), edges labelled ``yes`` / ``no`` with
        ``missing`` on the default direction.
    """
    plt = _require("matplotlib.pyplot", "matplotlib", "plot_tree")
    booster = _as_booster(booster)
    tree = _tree(booster, num_trees)
    names = _feature_names(booster, fmap)
    if rankdir not in (None, "TB", "LR"):
        raise DGBoostValueError(f"rankdir must be 'TB' or 'LR', got {rankdir!r}")
    yes_color = yes_color or "#0000FF"
    no_color = no_color or "#FF0000"
    if ax is None:
        _, ax = plt.subplots(1, 1)

    # layout: leaves at consecutive slots in in-order, an inner node centred over its children
    pos: dict[int, tuple[float, int]] = {}
    next_slot = [0.0]

    def place(i: int, depth: int) -> float:
        if tree.left[i] < 0:
            x = next_slot[0]
            next_slot[0] += 1.0
        else:
            x = (place(int(tree.left[i]), depth + 1) + place(int(tree.right[i]), depth + 1)) / 2
        pos[i] = (x, depth)
        return x

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * tree.left.size + 100))
    try:
        place(0, 0)
    finally:
        sys.setrecursionlimit(limit)
    width = max(next_slot[0] - 1.0, 1.0)
    depth = max(d for _, d in pos.values()) or 1

    def xy(i: int) -> tuple[float, float]:
        x, d = pos[i]
        if rankdir == "LR":
            return d / depth, 1.0 - x / width
        return x / width, 1.0 - d / depth

    for i in range(tree.left.size):
        if tree.left[i] < 0:
            continue
        x0, y0 = xy(i)
        left_text, right_text = _edge_texts(tree, i)
        for child, text, color in (
            (int(tree.left[i]), left_text, yes_color),
            (int(tree.right[i]), right_text, no_color),
        ):
            x1, y1 = xy(child)
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={"arrowstyle": "->", "color": color})
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, text, color=color, fontsize=7, ha="center", va="center", gid="edge")
    for i in range(tree.left.size):
        x, y = xy(i)
        leaf = tree.left[i] < 0
        ax.text(
            x,
            y,
            _node_label(tree, i, names, with_stats),
            ha="center",
            va="center",
            gid="node",
            bbox={"boxstyle": "round" if leaf else "square", "fc": "white", "ec": "black"},
            **kwargs,
        )
    ax.set_xlim(-0.1, 1.1)
    ax.set_ylim(-0.1, 1.1)
    ax.set_axis_off()
    return ax
