"""Distributed prediction: the model is sent to the workers once and mapped over row blocks.

Every row's prediction depends only on that row, so each block is predicted exactly as
single-process :meth:`dgboost.Booster.predict` would predict it (bitwise equal results). The
output shape of a call is learned on the client from one dummy row, so the returned collection
is lazy with known trailing shape: a dask array with the input's row chunks, or for DataFrame
input a Series (1-D output) or DataFrame (2-D output) with the input's divisions and index.
3-D outputs (multiclass contributions, interactions) are dask arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._array import array_module
from .._compat import is_cudf_object, is_dask_cudf_collection, library_of
from ..backend._threads import dask_worker_threads
from ..errors import DGBoostTypeError, DGBoostValueError
from ._held_blocks import held_blocks_array, map_held_partitions, where_held
from ._matrix import DaskDMatrix

if TYPE_CHECKING:
    import dask.array as da
    import dask.dataframe as dd
    from distributed import Client

__all__ = ["predict", "inplace_predict", "model_reference", "as_booster"]


def as_booster(model):
    """The Booster of ``model``: a Booster, ``train``'s result dict, or a fitted estimator."""
    from ..booster import Booster

    if isinstance(model, dict) and "booster" in model:
        model = model["booster"]
    if hasattr(model, "get_booster") and not isinstance(model, Booster):
        model = model.get_booster()
    if not isinstance(model, Booster):
        raise DGBoostTypeError(
            f"model must be a dgboost Booster, train()'s result or an estimator, got {type(model).__name__}"
        )
    return model


def model_reference(obj):
    """``obj`` as one task of the graph, for the mapped tasks to share.

    Each worker that runs a block fetches it once and keeps it while its blocks run, as a
    broadcast would. It is a task (``dask.delayed``), not scattered data, so that results
    lost with a worker can be recomputed after the caller dropped its handles (a scattered
    Future is released with its last client-side reference, and the recomputation then fails).
    """
    import uuid

    import dask

    return dask.delayed(obj, pure=False, name=f"dgboost-model-{uuid.uuid4().hex}")


def _empty_like(trailing: tuple, dtype, like) -> Any:
    xp = np
    if library_of(like) in ("cupy", "cudf"):
        import cupy as xp  # noqa: F811 - the block's device
    return xp.empty((0,) + tuple(trailing), dtype=dtype)


def _predict_rows(booster, block, kwargs: dict, trailing: tuple, dtype, base_margin=None):
    """Predictions for one block of rows (any kind :class:`~dgboost.DMatrix` accepts, 0 rows too)."""
    from ..data import RankDMatrix

    if block.shape[0] == 0:
        return _empty_like(trailing, dtype, block)
    kw = dict(kwargs)
    missing = kw.pop("missing", np.nan)
    dm = RankDMatrix(block, base_margin=base_margin, missing=missing)
    with dask_worker_threads():  # the worker's threads, not every core of a shared host
        return booster.predict(dm, **kw)


def _predict_array_block(block, booster, kwargs, trailing, dtype, base_margin=None):
    return _predict_rows(booster, block, kwargs, trailing, dtype, base_margin)


def frame_meta_like(meta, data):
    """``meta`` (an empty pandas object) as cuDF when ``data``'s partitions are cuDF (dask_cudf)."""
    if is_dask_cudf_collection(data):
        import cudf

        return cudf.from_pandas(meta)
    return meta


def _predict_frame_partition(part, booster, kwargs, trailing, dtype, columns):
    return _frame_of(part, _predict_rows(booster, part, kwargs, trailing, dtype), columns)


def _predict_frame_margin_partition(part, margin, booster, kwargs, trailing, dtype, columns):
    """``_predict_frame_partition`` with the partition's base margin (a Series or DataFrame
    partition of the same rows)."""
    if len(margin) != len(part):
        raise DGBoostValueError(
            f"a partition of {len(part)} rows has a base_margin partition of {len(margin)}: "
            "give base_margin the data's row partitions"
        )
    values = margin.values  # NumPy for pandas, CuPy for cuDF
    out = _predict_rows(booster, part, kwargs, trailing, dtype, base_margin=values)
    return _frame_of(part, out, columns)


def _frame_of(part, out, columns):
    """Predictions ``out`` of the partition ``part`` as a Series (1-D) or DataFrame (2-D) with
    its index, in its library (pandas or cuDF)."""
    if is_cudf_object(part):
        import cudf as frames
    else:
        import pandas as frames
    if out.ndim == 1:
        return frames.Series(out, index=part.index)
    return frames.DataFrame(out, index=part.index, columns=columns)


def _output_spec(booster, n_features: int, kwargs: dict) -> tuple[tuple, np.dtype]:
    """(trailing shape, dtype) of ``booster.predict(..., **kwargs)``, from one dummy row."""
    from ..data import DMatrix

    kw = {k: v for k, v in kwargs.items() if k != "missing"}
    out = booster.predict(
        DMatrix(np.zeros((1, n_features), np.float32)),
        validate_features=False,
        **{k: v for k, v in kw.items() if k != "validate_features"},
    )
    out = np.asarray(out.get() if hasattr(out, "get") else out)
    return out.shape[1:], out.dtype


def _output_columns(booster, kwargs: dict, trailing: tuple, names) -> list:
    if kwargs.get("pred_contribs") and len(trailing) == 1:
        names = list(names) if names is not None else [f"f{i}" for i in range(trailing[0] - 1)]
        return names + ["bias"]
    return list(range(trailing[0])) if trailing else []


def _map_collection(client, booster, data, kwargs: dict, base_margin=None):
    """Map the prediction over a dask Array or DataFrame (lazy)."""
    import dask.array as da
    import dask.dataframe as dd

    ref = model_reference(booster)
    n_features = int(data.shape[1]) if isinstance(data, da.Array) else len(data.columns)
    trailing, dtype = _output_spec(booster, n_features, kwargs)
    if isinstance(data, dd.DataFrame) and len(trailing) <= 1:
        columns = _output_columns(booster, kwargs, trailing, [str(c) for c in data.columns])
        import pandas as pd

        meta = (
            pd.Series(np.empty(0, dtype))
            if not trailing
            else pd.DataFrame(np.empty((0, trailing[0]), dtype), columns=columns)
        )
        meta = frame_meta_like(meta, data)
        args = (ref, kwargs, trailing, dtype, columns)
        if base_margin is not None:  # partition by partition with the margin's (as XGBoost)
            margin = base_margin.to_dask_dataframe() if isinstance(base_margin, da.Array) else base_margin
            if margin.npartitions != data.npartitions:
                raise DGBoostValueError(
                    f"base_margin has {margin.npartitions} row blocks and the data {data.npartitions} "
                    "partitions: give base_margin the data's row partitions"
                )
            return dd.map_partitions(
                _predict_frame_margin_partition, data, margin, *args, meta=meta, align_dataframes=False
            )
        held = map_held_partitions(client, data, _predict_frame_partition, *args, meta=meta)
        if held is not None:  # a persisted frame's partitions, predicted where they are held
            return held
        return data.map_partitions(_predict_frame_partition, *args, meta=meta)
    if isinstance(data, dd.DataFrame):
        data = data.to_dask_array(lengths=True)
    if not isinstance(data, da.Array):
        raise DGBoostTypeError(f"data must be a DaskDMatrix, dask Array or DataFrame, got {type(data).__name__}")
    if data.ndim != 2:
        raise DGBoostTypeError(f"data must be 2-D, got shape {data.shape}")
    if data.numblocks[1] > 1:
        data = data.rechunk({1: -1})
    chunks = (data.chunks[0],) + tuple((t,) for t in trailing)
    extra = {}
    if len(trailing) == 0:
        extra["drop_axis"] = 1
    elif len(trailing) > 1:
        extra["new_axis"] = list(range(2, 1 + len(trailing)))
    args = [data]
    # the blocks come back in the input's array module (CuPy in, CuPy out): so must the meta,
    # or a reduction over the predictions mixes NumPy and CuPy
    meta = array_module(data._meta).empty((0,) * len(chunks), dtype)
    if base_margin is not None:
        if not isinstance(base_margin, da.Array):  # a dask Series / DataFrame
            base_margin = base_margin.to_dask_array(lengths=True)
        bm = base_margin if base_margin.ndim == 2 else base_margin[:, None]
        args.append(bm.rechunk({0: data.chunks[0], 1: -1}))
        out = da.map_blocks(
            lambda b, m, *a: _predict_array_block(b, *a, base_margin=m),
            *args,
            ref,
            kwargs,
            trailing,
            dtype,
            dtype=dtype,
            chunks=chunks,
            meta=meta,
            **extra,
        )
    else:
        out = da.map_blocks(
            _predict_array_block, data, ref, kwargs, trailing, dtype, dtype=dtype, chunks=chunks, meta=meta, **extra
        )
    # a persisted array's blocks are predicted where they are held
    holders = where_held(client, data)
    return out if holders is None else held_blocks_array(out, holders)


def _map_dmatrix(client, booster, dm: DaskDMatrix, kwargs: dict):
    """Predict the persisted partitions of a DaskDMatrix: a dask array in partition order."""
    import dask
    import dask.array as da

    from ._preflight import check_partitions

    ref = model_reference(booster)
    trailing, dtype = _output_spec(booster, dm.n_features, kwargs)
    rows = [info["rows"] for info in check_partitions(client, dm, None, "prediction data")]
    kw = dict(kwargs, missing=dm.missing)
    pieces = []
    for i, n in enumerate(rows):
        part = dm.partition(i)
        task = dask.delayed(_predict_array_block)(
            part["data"], ref, kw, trailing, dtype, base_margin=part["base_margin"]
        )
        pieces.append(da.from_delayed(task, shape=(n,) + tuple(trailing), dtype=dtype))
    return da.concatenate(pieces, axis=0)


def predict(
    client: Client | None,
    model: Any,
    data: DaskDMatrix | da.Array | dd.DataFrame,
    output_margin: bool = False,
    pred_leaf: bool = False,
    pred_contribs: bool = False,
    approx_contribs: bool = False,
    pred_interactions: bool = False,
    validate_features: bool = True,
    iteration_range: tuple[int, int] = (0, 0),
    strict_shape: bool = False,
) -> da.Array | dd.Series | dd.DataFrame:
    """Predict on a Dask cluster (``xgboost.dask.predict``); lazy.

    Parameters
    ----------
    client : distributed.Client or None
    model : Booster, ``train()``'s result dict, or a fitted estimator
    data : DaskDMatrix, dask Array (n, F) or dask DataFrame
    output_margin, pred_leaf, pred_contribs, approx_contribs, pred_interactions, validate_features,
    iteration_range, strict_shape
        As for :meth:`dgboost.Booster.predict`. The workers predict on the booster's
        device (:meth:`dgboost.Booster.set_param`), by the rule of every entry point: a
        worker without a usable GPU predicts on its CPU, with a warning in its log.

    Returns
    -------
    dask Array, Series or DataFrame
        Rows in the input's order and chunks (DataFrame input: its index; 1-D outputs as a
        Series, 2-D as a DataFrame whose contribution columns are the features and ``bias``).
        Bitwise equal to single-process predictions.

    Notes
    -----
    Each block of a persisted Array or DataFrame is predicted on the worker that holds it
    (loosely: a lost worker's blocks run elsewhere). An Array stays lazy; a persisted
    DataFrame's partitions are submitted at once and the result holds their futures, as
    ``persist()`` would (dask-expr keeps no placement for a lazy frame's tasks).
    """
    from distributed import default_client

    client = client if client is not None else default_client()
    booster = as_booster(model)
    kwargs = {
        "output_margin": output_margin,
        "pred_leaf": pred_leaf,
        "pred_contribs": pred_contribs,
        "approx_contribs": approx_contribs,
        "pred_interactions": pred_interactions,
        "validate_features": validate_features,
        "iteration_range": iteration_range,
        "strict_shape": strict_shape,
    }
    if isinstance(data, DaskDMatrix):
        return _map_dmatrix(client, booster, data, kwargs)
    return _map_collection(client, booster, data, kwargs)


def inplace_predict(
    client: Client | None,
    model: Any,
    data: da.Array | dd.DataFrame,
    iteration_range: tuple[int, int] = (0, 0),
    predict_type: str = "value",
    missing: float = np.nan,
    validate_features: bool = True,
    base_margin: da.Array | dd.Series | dd.DataFrame | None = None,
    strict_shape: bool = False,
) -> da.Array | dd.Series | dd.DataFrame:
    """Predict a dask Array or DataFrame without a DaskDMatrix (``xgboost.dask.inplace_predict``).

    ``predict_type`` is ``"value"`` or ``"margin"``; ``base_margin`` a dask Array aligned with
    ``data``'s rows (for a DataFrame: in its row partitions, or a dask Series / DataFrame with
    the same partitions). Returns what :func:`predict` returns for the same input.
    """
    from distributed import default_client

    if predict_type not in ("value", "margin"):
        raise DGBoostValueError(f"predict_type must be 'value' or 'margin', got {predict_type!r}")
    client = client if client is not None else default_client()
    booster = as_booster(model)
    kwargs = {
        "output_margin": predict_type == "margin",
        "iteration_range": iteration_range,
        "validate_features": validate_features,
        "strict_shape": strict_shape,
        "missing": missing,
    }
    return _map_collection(client, booster, data, kwargs, base_margin=base_margin)
