"""``check_*`` helpers that put any device through the same checks (docs/design.md §7 "Tests and oracles").

Every helper takes a ``device`` argument: CPU tests call them with ``"cpu"``, GPU tests
with ``"cuda"``, so both backends face exactly the same assertions. The CPU backend is
the oracle: the design promises that a model trained on the GPU is *the same model* as on
the CPU (integer histograms make every split decision exact), so the checks compare
structure and split values exactly and allow floating-point slack only in leaf values,
which may be computed with a different order of float operations on the device.

The helpers raise ``AssertionError`` with the first difference they find (which tree,
which node, which field, both values), so a failing GPU test says where to look.

* :func:`check_same_trees_as_cpu` -- trees, split bins, split values, leaf values, JSON.
* :func:`check_training_is_deterministic` -- two runs, byte-identical JSON.
* :func:`check_prediction_matches_reference` -- margins and leaf indices against the
  plain NumPy tree walker of :mod:`dgboost.testing.reference`.
* :func:`check_matches_cpu_metric` -- the evaluation log of a run matches the CPU's.
* :func:`check_raises_like_cpu` -- bad input raises the same error type and message.

:func:`assert_same_trees` is the comparison itself, usable on any two boosters.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dgboost._compat import is_cupy_array
from dgboost.booster import Booster
from dgboost.data import DMatrix
from dgboost.errors import DGBoostError
from dgboost.testing.reference import leaf_index_reference, predict_margin_reference
from dgboost.training import TrainingCallback, train
from dgboost.tree import NODE_ARRAYS

__all__ = [
    "assert_same_trees",
    "check_same_trees_as_cpu",
    "check_training_is_deterministic",
    "check_prediction_matches_reference",
    "check_matches_cpu_metric",
    "check_raises_like_cpu",
    "normalised_model_json",
    "round_significant",
    "LEAF_VALUE_RTOL",
]

#: leaf values of the device's model may differ from the CPU's by this much, relatively
LEAF_VALUE_RTOL = 1e-6
#: JSON arrays whose floats are rounded (to 6 significant digits) before JSON comparison:
#: ``value`` holds leaf values and the inner nodes' base weights
ROUNDED_JSON_KEYS = ("value",)
#: learner parameters that name how a model was trained, not what it is
_RUN_PARAMS = ("device", "nthread")


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------
def _to_host(a):
    """NumPy copy of a NumPy/CuPy array (None stays None); other inputs pass unchanged."""
    if a is None:
        return None
    if is_cupy_array(a):
        return a.get()
    return a


def _fit(
    device: str, X, y, params: Mapping[str, Any], num_boost_round: int, weight=None, group=None, **train_kwargs
) -> tuple[Booster, list[np.ndarray] | None]:
    """Train on ``device``; returns the booster and the split bin of every node of every tree
    (None where they could not be recorded)."""
    recorder = _SplitBinRecorder()
    dtrain = DMatrix(X, y, weight=weight, group=group)
    callbacks = list(train_kwargs.pop("callbacks", ())) + [recorder]
    booster = train(
        {**params, "device": device}, dtrain, num_boost_round, verbose_eval=False, callbacks=callbacks, **train_kwargs
    )
    bins = recorder.bins(booster.ensemble.n_trees)
    if bins is None:
        bins = _split_bins_from_cuts(booster, dtrain, params)
    return booster, bins


class _SplitBinRecorder(TrainingCallback):
    """Keeps ``Tree.split_bin`` of every new tree: the ensemble drops it once its trees are
    concatenated into flat arrays (it is a training-only field, not part of the model)."""

    def __init__(self):
        self._bins: dict[int, np.ndarray] = {}

    def after_iteration(self, model, epoch, evals_log):
        ensemble = model.ensemble
        pending = getattr(ensemble, "_pending", None)
        if pending is not None:
            first = ensemble.n_trees - len(pending)
            for k, (tree, _group) in enumerate(pending):
                if tree.split_bin is not None:
                    self._bins.setdefault(first + k, np.asarray(_to_host(tree.split_bin), np.int64))
        return False

    def bins(self, n_trees: int) -> list[np.ndarray] | None:
        if n_trees and all(t in self._bins for t in range(n_trees)):
            return [self._bins[t] for t in range(n_trees)]
        return None


def _split_bins_from_cuts(booster: Booster, dtrain: DMatrix, params: Mapping[str, Any]) -> list[np.ndarray]:
    """Split bins recovered from split values and the CPU's cuts of the same data.

    Used where training did not leave the bins behind. A split value that is not one of the
    CPU's cut values (a device whose cuts differ) gets bin -2.
    """
    from dgboost.params import parse_params
    from dgboost.quantile import compute_cuts

    p = parse_params(dict(params))
    cuts = compute_cuts(
        dtrain.data,
        dtrain.weight,
        getattr(dtrain, "max_bin", None) or p.max_bin,
        seed=p.seed,
        row_offset=0,
        n_global=dtrain.num_row(),
        sample_rows=p.sketch_sample_rows,
    )
    values, ptrs = np.asarray(_to_host(cuts.values)), np.asarray(_to_host(cuts.ptrs))
    out = []
    for tree in booster.ensemble.trees():
        bins = np.full(tree.n_nodes, -1, np.int64)
        for node in np.flatnonzero(tree.feature >= 0):
            seg = values[ptrs[tree.feature[node]] : ptrs[tree.feature[node] + 1]]
            b = int(np.searchsorted(seg, tree.split_value[node]))
            bins[node] = b if b < seg.size and seg[b] == tree.split_value[node] else -2
        out.append(bins)
    return out


# ---------------------------------------------------------------------------------------
# JSON normalisation
# ---------------------------------------------------------------------------------------
def round_significant(x: float, digits: int = 6) -> float:
    """``x`` rounded to ``digits`` significant decimal digits (0.0 and non-finite unchanged)."""
    if x == 0.0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits - 1}e}")


def _round_leaf_arrays(node, digits: int, keys: Sequence[str]):
    """A copy of a parsed JSON document with the floats of every list under one of ``keys``
    rounded; walks dicts and lists with an explicit stack (no recursion limit)."""
    root = {"": node}
    stack = [root]
    while stack:
        item = stack.pop()
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for k, v in list(children):
            if isinstance(v, list) and k in keys:
                item[k] = [round_significant(e, digits) if isinstance(e, float) else e for e in v]
            elif isinstance(v, (dict, list)):
                stack.append(v)
    return root[""]


def normalised_model_json(booster: Booster, digits: int = 6, keys: Sequence[str] = ROUNDED_JSON_KEYS) -> dict:
    """The booster's saved JSON, parsed, with floats under ``keys`` rounded to ``digits``
    significant digits and the run-only parameters (device, nthread) removed.

    Two boosters trained on different devices compare equal here when they are the same
    model up to float noise in the leaf values.
    """
    # dgboost's own document (to_json), whose learner params hold the run-only parameters;
    # save_raw("json") is XGBoost's JSON, which keeps them elsewhere
    doc = json.loads(booster.to_json())
    params = doc.get("learner", {}).get("params", {})
    for name in _RUN_PARAMS:
        params.pop(name, None)
    return _round_leaf_arrays(doc, digits, tuple(keys))


def _first_json_difference(a, b, path: str = "") -> tuple[str, Any, Any] | None:
    """(path, a's value, b's value) of the first difference between two parsed JSON
    documents, in sorted key order; None when they are equal."""
    stack = [(path, a, b)]
    while stack:
        where, x, y = stack.pop()
        if isinstance(x, dict) and isinstance(y, dict):
            if set(x) != set(y):
                return where or "<root>", sorted(x), sorted(y)
            stack.extend((f"{where}.{k}" if where else k, x[k], y[k]) for k in sorted(x, reverse=True))
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return f"{where} (length)", len(x), len(y)
            for i, (u, v) in enumerate(zip(x, y)):
                if isinstance(u, (dict, list)) or isinstance(v, (dict, list)):
                    stack.append((f"{where}[{i}]", u, v))
                elif u != v or type(u) is not type(v):
                    return f"{where}[{i}]", u, v
        elif x != y or type(x) is not type(y):
            return where, x, y
    return None


def _node_of(offsets: np.ndarray, flat_index: int) -> str:
    t = int(np.searchsorted(offsets, flat_index, side="right") - 1)
    return f"tree {t}, node {flat_index - int(offsets[t])}"


# ---------------------------------------------------------------------------------------
# the comparison
# ---------------------------------------------------------------------------------------
def assert_same_trees(
    model: Booster,
    reference: Booster,
    *,
    split_bins=None,
    names: tuple[str, str] = ("model", "reference"),
    leaf_rtol: float = LEAF_VALUE_RTOL,
    digits: int = 6,
) -> None:
    """Assert that two boosters are the same model; the message names the first difference.

    In this order: the number of output groups, trees and nodes of every tree; then, node by
    node, children, split feature, split bin (when ``split_bins`` is given), default
    direction and split value, all exactly; then leaf values to ``leaf_rtol`` relative; then
    the saved JSON with every float of the ``value`` arrays rounded to ``digits``
    significant digits (so gains, covers, base score and meta must be identical).

    Parameters
    ----------
    model, reference : Booster
    split_bins : pair of lists of int arrays, optional
        Split bin of every node of every tree of ``model`` and ``reference``.
    names : pair of str
        How the two models are named in the message (e.g. the devices).
    leaf_rtol : float
    digits : int

    Raises
    ------
    AssertionError
    """
    a, b = model.ensemble, reference.ensemble
    na, nb = names
    if a.n_groups != b.n_groups:
        raise AssertionError(f"output groups: {a.n_groups} ({na}) vs {b.n_groups} ({nb})")
    if a.n_trees != b.n_trees:
        raise AssertionError(f"number of trees: {a.n_trees} ({na}) vs {b.n_trees} ({nb})")
    for t in range(a.n_trees):
        if int(a.groups()[t]) != int(b.groups()[t]):
            raise AssertionError(f"tree {t}: output group {a.groups()[t]} ({na}) vs {b.groups()[t]} ({nb})")
        ta, tb = a.tree(t), b.tree(t)
        if ta.n_nodes != tb.n_nodes:
            first = _first_structure_difference(t, ta, tb, None, names, prefix="; first difference at ")
            raise AssertionError(f"tree {t}: {ta.n_nodes} nodes ({na}) vs {tb.n_nodes} ({nb}){first}")
        message = _first_structure_difference(t, ta, tb, split_bins, names)
        if message:
            raise AssertionError(message)
    for t in range(a.n_trees):
        ta, tb = a.tree(t), b.tree(t)
        va, vb = ta.value.astype(np.float64), tb.value.astype(np.float64)
        leaf = ta.is_leaf
        bad = np.flatnonzero(leaf & ~(np.abs(va - vb) <= leaf_rtol * np.maximum(np.abs(va), np.abs(vb))))
        if bad.size:
            node = int(bad[0])
            u, v = float(va[node]), float(vb[node])
            raise AssertionError(
                f"tree {t}, node {node}: leaf value {u!r} ({na}) vs {v!r} ({nb}), relative difference "
                f"{abs(u - v) / max(abs(u), abs(v)):.3g} > {leaf_rtol:g} ({bad.size} leaves of this tree differ)"
            )
    ja, jb = normalised_model_json(model, digits), normalised_model_json(reference, digits)
    diff = _first_json_difference(ja, jb)
    if diff is not None:
        where, x, y = diff
        node = ""
        array = where.split("[")[0].removeprefix("ensemble.")
        if where.startswith("ensemble.") and "[" in where and array in NODE_ARRAYS:
            node = f" ({_node_of(a.offsets(), int(where[where.index('[') + 1 : -1]))})"
        raise AssertionError(
            f"saved JSON differs (leaf values rounded to {digits} significant digits) at "
            f"{where}{node}: {x!r} ({na}) vs {y!r} ({nb})"
        )


def _first_structure_difference(t: int, ta, tb, split_bins, names, prefix: str = "") -> str:
    """Message naming the first node of tree ``t`` whose structure differs ("" if none)."""
    na, nb = names
    fields = {
        "left child": (ta.left, tb.left),
        "right child": (ta.right, tb.right),
        "split feature": (ta.feature, tb.feature),
        "default direction (1 = left)": (ta.default_left, tb.default_left),
    }
    if split_bins is not None and split_bins[0] is not None and split_bins[1] is not None:
        fields["split bin"] = (split_bins[0][t], split_bins[1][t])
    n = min(ta.n_nodes, tb.n_nodes)
    # a leaf has no split value; compare it where both nodes split
    both_split = (ta.left[:n] >= 0) & (tb.left[:n] >= 0)
    fields["split value"] = (np.where(both_split, ta.split_value[:n], 0), np.where(both_split, tb.split_value[:n], 0))
    for node in range(n):
        found = [
            f"{name} {u[node].item()!r} ({na}) vs {v[node].item()!r} ({nb})"
            for name, (u, v) in fields.items()
            if u[node] != v[node]
        ]
        if found:
            return f"{prefix}tree {t}, node {node}: " + "; ".join(found)
    return ""


# ---------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------
def check_same_trees_as_cpu(
    device: str, X, y, params: Mapping[str, Any], num_boost_round: int, weight=None, group=None
) -> Booster:
    """Train on ``device`` and on the CPU; assert the models are the same (:func:`assert_same_trees`).

    Parameters
    ----------
    device : str
        "cpu" or "cuda" (or "cuda:N").
    X, y, weight, group
        Training data as :class:`~dgboost.DMatrix` takes it; NumPy or CuPy. The CPU run gets
        host copies.
    params : mapping
        Training parameters without ``device``.
    num_boost_round : int

    Returns
    -------
    Booster
        The model trained on ``device``, for further checks.
    """
    model, bins = _fit(device, X, y, params, num_boost_round, weight, group)
    ref, ref_bins = _fit("cpu", _to_host(X), _to_host(y), params, num_boost_round, _to_host(weight), _to_host(group))
    assert_same_trees(model, ref, split_bins=(bins, ref_bins), names=(device, "cpu"))
    return model


def check_training_is_deterministic(
    device: str, X, y, params: Mapping[str, Any], num_boost_round: int, weight=None, group=None
) -> Booster:
    """Train twice on ``device`` with the same inputs; assert byte-identical saved JSON.

    Returns
    -------
    Booster
        The first model.
    """
    first, _ = _fit(device, X, y, params, num_boost_round, weight, group)
    second, _ = _fit(device, X, y, params, num_boost_round, weight, group)
    ja, jb = first.to_json(), second.to_json()
    if ja != jb:
        where, u, v = _first_json_difference(json.loads(ja), json.loads(jb)) or ("<text only>", None, None)
        raise AssertionError(f"two training runs on {device} differ at {where}: {u!r} vs {v!r}")
    return first


def _on_device(booster: Booster, device: str) -> Booster:
    """A copy of ``booster`` that predicts on ``device``."""
    if hasattr(booster, "set_param"):
        out = booster.copy()
        out.set_param({"device": device})
        return out
    # XGBoost's other spelling: prediction parameters given to the constructor
    return Booster(params={"device": device}, model_file=booster.to_json().encode("utf-8"))


def check_prediction_matches_reference(
    device: str, booster: Booster, X, *, rtol: float = 1e-5, atol: float = 1e-5
) -> None:
    """Assert that ``booster`` predicting on ``device`` agrees with the reference tree walker.

    Checks, for ``X`` (NumPy or CuPy):

    * leaf indices (``pred_leaf``) equal :func:`~dgboost.testing.reference.leaf_index_reference`
      exactly;
    * margins (``output_margin``) equal :func:`~dgboost.testing.reference.predict_margin_reference`
      (float64 sums) to ``rtol``/``atol`` -- float32 accumulation may differ in order;
    * transformed predictions equal the same booster's predictions on the CPU to 1e-6
      relative (the link functions agree between devices).
    """
    model = _on_device(booster, device)
    host_X = np.asarray(_to_host(X), dtype=np.float32)
    ensemble = booster.ensemble
    leaves = np.asarray(_to_host(model.predict(X, pred_leaf=True)))
    expected_leaves = leaf_index_reference(ensemble, host_X)
    if leaves.shape != expected_leaves.shape:
        raise AssertionError(f"pred_leaf on {device} has shape {leaves.shape}, expected {expected_leaves.shape}")
    bad = np.argwhere(leaves != expected_leaves)
    if bad.size:
        r, t = (int(v) for v in bad[0])
        raise AssertionError(
            f"pred_leaf on {device}: row {r}, tree {t} reaches leaf {int(leaves[r, t])}, "
            f"the reference walker leaf {int(expected_leaves[r, t])} "
            f"({len(bad)} entries differ)"
        )
    margin = np.asarray(_to_host(model.predict(X, output_margin=True, strict_shape=True)), np.float64)
    expected = predict_margin_reference(ensemble, host_X)
    if margin.shape != expected.shape:
        raise AssertionError(f"margins on {device} have shape {margin.shape}, expected {expected.shape}")
    close = np.abs(margin - expected) <= atol + rtol * np.abs(expected)
    if not close.all():
        r, g = (int(v) for v in np.argwhere(~close)[0])
        raise AssertionError(
            f"margin on {device}: row {r}, output {g}: {float(margin[r, g])!r}, reference "
            f"{float(expected[r, g])!r} ({int((~close).sum())} entries differ)"
        )
    if device != "cpu":
        value = np.asarray(_to_host(model.predict(X)), np.float64)
        cpu_value = np.asarray(_on_device(booster, "cpu").predict(host_X), np.float64)
        close = np.abs(value - cpu_value) <= 1e-6 * np.maximum(np.abs(cpu_value), 1e-6)
        if not close.all():
            i = tuple(int(v) for v in np.argwhere(~close)[0])
            raise AssertionError(f"prediction on {device} at {i}: {float(value[i])!r}, on cpu {float(cpu_value[i])!r}")


def check_matches_cpu_metric(
    device: str, X, y, params: Mapping[str, Any], num_boost_round: int, weight=None, group=None, *, rtol: float = 1e-6
) -> dict:
    """Train on ``device`` and on the CPU with the training set as evaluation set; assert
    that every metric of every round agrees to ``rtol`` relative.

    Returns
    -------
    dict
        The evaluation log of the ``device`` run.
    """
    logs = {}
    for dev, data in ((device, (X, y, weight, group)), ("cpu", tuple(_to_host(v) for v in (X, y, weight, group)))):
        log: dict = {}
        dtrain = DMatrix(data[0], data[1], weight=data[2], group=data[3])
        train(
            {**params, "device": dev},
            dtrain,
            num_boost_round,
            evals=[(dtrain, "train")],
            evals_result=log,
            verbose_eval=False,
        )
        logs[dev] = log
    got, want = logs[device]["train"], logs["cpu"]["train"]
    if sorted(got) != sorted(want):
        raise AssertionError(f"metrics on {device}: {sorted(got)}, on cpu: {sorted(want)}")
    for name in want:
        for r, (u, v) in enumerate(zip(got[name], want[name])):
            if not abs(u - v) <= rtol * max(abs(u), abs(v), 1e-12):
                raise AssertionError(f"round {r}, train-{name}: {u!r} ({device}) vs {v!r} (cpu)")
    return logs[device]


def check_raises_like_cpu(
    device: str, call: Callable[[str], Any], expected: type[BaseException] = DGBoostError
) -> BaseException:
    """Assert that ``call(device)`` raises the same exception type, with the same message, as
    ``call("cpu")``, and that the type is a subclass of ``expected``.

    Parameters
    ----------
    device : str
    call : callable
        Takes the device name, builds its input on that device and does the bad thing.
    expected : exception type

    Returns
    -------
    BaseException
        The error raised for ``device``.
    """
    caught = []  # a list, not a dict: device may be "cpu" too
    for dev in ("cpu", device):
        try:
            call(dev)
        except BaseException as exc:  # noqa: BLE001 - any error is compared below
            caught.append(exc)
        else:
            raise AssertionError(f"no error was raised on {dev}")
    cpu, dev_err = caught
    for dev, exc in (("cpu", cpu), (device, dev_err)):
        if not isinstance(exc, expected):
            raise AssertionError(f"on {dev}: {type(exc).__name__}({exc}) is not a {expected.__name__}") from exc
    if type(dev_err) is not type(cpu) or str(dev_err) != str(cpu):
        raise AssertionError(f"on {device}: {type(dev_err).__name__}({dev_err}); on cpu: {type(cpu).__name__}({cpu})")
    return dev_err
