"""Glue between :class:`~dgboost.booster.Booster` and the TreeSHAP engine.

``Booster.predict(pred_contribs=True / pred_interactions=True)`` calls
:func:`booster_contributions`, which returns XGBoost's layout:

* contributions: float32 ``(n, F + 1)`` for one output group, ``(n, n_groups, F + 1)``
  for several (multiclass); the bias (base margin + expected tree output) is last;
* interactions: float32 ``(n, F + 1, F + 1)`` / ``(n, n_groups, F + 1, F + 1)``, the bias
  at ``[F, F]``.

A per-row ``base_margin`` replaces the model's base margin in the bias entry, as XGBoost
does. The path table of the requested tree range is built once per booster (and its
weight tables once per path table) and cached on the booster; it is not pickled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DGBoostValueError
from .paths import PathTable, extract_paths

__all__ = ["booster_contributions", "booster_path_table"]

_CACHE_ATTR = "_explain_cache"


def booster_path_table(booster: Any, t0: int = 0, t1: int | None = None) -> PathTable:
    """The :class:`PathTable` of trees ``[t0, t1)`` of ``booster.ensemble``, cached on the
    booster (one entry, invalidated when the ensemble object or its size changes)."""
    ens = booster.ensemble
    n_trees = ens.n_trees
    t1 = n_trees if t1 is None else int(t1)
    key = (int(t0), t1, n_trees, ens.n_nodes)
    cache = booster.__dict__.get(_CACHE_ATTR)
    if cache is not None and cache[0] is ens and cache[1] == key:
        return cache[2]
    sub = ens if (t0 == 0 and t1 == n_trees) else ens.slice(int(t0), t1)
    table = extract_paths(sub)
    booster.__dict__[_CACHE_ATTR] = (ens, key, table)
    return table


def replace_base_margin(out: Any, table: PathTable, base_margin: Any, interactions: bool) -> None:
    """Swap the model's base margin for a per-row ``base_margin`` in the bias entries of
    ``out`` (engine layout (n, G, F+1) or (n, G, F+1, F+1)), in place."""
    from .._array import array_module

    n, G = out.shape[0], out.shape[1]
    bm = np.asarray(base_margin, dtype=np.float64)
    if bm.size != n * G:
        raise DGBoostValueError(f"base_margin has {bm.size} values; expected {n} rows x {G} outputs")
    delta = array_module(out).asarray(bm.reshape(n, G) - table.base_margin[None, :])
    if interactions:
        out[:, :, -1, -1] += delta
    else:
        out[:, :, -1] += delta


def booster_contributions(
    booster: Any, values: Any, t0: int, t1: int, *, engine: Any, interactions: bool = False, base_margin: Any = None
) -> Any:
    """SHAP contributions or interactions of trees ``[t0, t1)`` in XGBoost's layout (float32).

    Parameters
    ----------
    booster : dgboost.Booster
        The model (its ``ensemble``; the path table is cached on it).
    values : numpy.ndarray or cupy.ndarray, float32 of shape (n, F)
        The rows, already checked against the booster's features.
    t0, t1 : int
        The trees explained, ``[t0, t1)``.
    engine : SHAP engine
        Where the values are computed: ``Backend.shap_engine()`` of the booster's prediction
        backend (the booster hands it over, so that the explainer needs no backend lookup).
    interactions : bool
        Interaction values instead of contributions.
    base_margin : array-like of shape (n,) or (n, n_groups), optional
        Per-row base margins replacing the model's in the bias entries.

    Returns
    -------
    numpy.ndarray or cupy.ndarray, float32
        ``(n, F + 1)`` / ``(n, n_groups, F + 1)``, or ``(n[, n_groups], F + 1, F + 1)`` with
        ``interactions``, in the array module of ``values``.
    """
    from .._array import array_module, is_device_array, to_host
    from .treeshap import cached_tables

    table = booster_path_table(booster, t0, t1)
    xp = engine.xp
    rows = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
    n, F = rows.shape
    chunk = max(engine.chunk_rows(table, table.n_groups, interactions) or n, 1)
    out = xp.empty((n, table.n_groups) + ((F + 1, F + 1) if interactions else (F + 1,)), dtype=xp.float64)
    for r0 in range(0, n, chunk):
        part = rows[r0 : r0 + chunk]
        if interactions:
            out[r0 : r0 + chunk] = engine.interactions(table, part, None)
        else:
            out[r0 : r0 + chunk] = engine.path_dependent(table, part, "table", lambda: cached_tables(table))
    out = array_module(values).asarray(out) if is_device_array(values) else to_host(out)
    if base_margin is not None:
        replace_base_margin(out, table, base_margin, interactions)
    out = out.astype(np.float32)
    if out.shape[1] == 1:
        out = out[:, 0]
    return out
