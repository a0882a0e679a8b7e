"""Distributed SHAP: the explainer goes to every worker once and is mapped over row blocks.

The explainer (path table, packed bins, weight tables) is built on the client, scattered to
every worker once, and each block of rows is explained there exactly as
:class:`~dgboost.TreeExplainer` explains it in one process (bitwise equal values). Interaction
outputs are ``(F+1)^2`` per row: blocks are re-chunked so that no block's output exceeds
``max_block_bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np

from .._array import array_module, is_device_array
from .._compat import is_cudf_object
from ..backend._threads import dask_worker_threads
from ..device import Device, parse_device
from ..errors import DGBoostTypeError
from ._held_blocks import held_blocks_array, map_held_partitions, where_held
from .prediction import as_booster, frame_meta_like, model_reference

if TYPE_CHECKING:
    import dask.dataframe as dd
    from distributed import Client

__all__ = ["shap_values", "shap_frame_meta"]

DEFAULT_MAX_BLOCK_BYTES = 256 << 20


def _as_explainer(model_or_explainer, background):
    from ..explain.explainer import TreeExplainer

    if isinstance(model_or_explainer, TreeExplainer):
        return model_or_explainer
    try:
        model = as_booster(model_or_explainer)
    except DGBoostTypeError:
        model = model_or_explainer  # any model the importers read (XGBoost, LightGBM, sklearn)
    return TreeExplainer(model, data=background, progress=False)


def explainer_on_device(explainer, device: Device | None, rows_on_gpu: bool):
    """The explainer that runs here: on the GPU for rows already there, or for every block
    when ``device`` is a GPU (host rows are uploaded, their values come back to the host). A GPU
    that is not usable on this worker gives the CPU, with a warning (the rule of every entry point)."""
    if device is not None and device.is_cuda and not explainer.device.is_cuda:
        return explainer.with_device(device)  # a shallow copy; the upload is cached per worker
    if rows_on_gpu and not explainer.device.is_cuda:
        return explainer.with_device("cuda")  # rows on a GPU: a GPU works here
    return explainer


def _explain_block(block, explainer, interactions: bool, trailing: tuple, device: Device | None = None):
    if block.shape[0] == 0:
        return array_module(block).empty((0,) + tuple(trailing), np.float64)
    explainer = explainer_on_device(explainer, device, is_device_array(block))
    with dask_worker_threads():  # the worker's threads, not every core of a shared host
        if interactions:
            return explainer.shap_interaction_values(block, progress=False)
        return explainer.shap_values(block, progress=False)


def _frame_partition(part, explainer, device: Device | None = None):
    on_gpu = is_cudf_object(part)
    if part.shape[0] == 0:
        out = shap_frame_meta(explainer, [str(c) for c in part.columns])
        if on_gpu:
            import cudf

            return cudf.from_pandas(out)
        return out
    explainer = explainer_on_device(explainer, device, on_gpu)
    with dask_worker_threads():
        return explainer.shap_frame(part, progress=False)  # a cuDF frame for a cuDF partition


def _codes_partition(part, explainer):
    """A partition's category columns as the explainer's model codes (float32 columns), so the
    frame can become a dask Array (interaction values of a DataFrame with category columns)."""
    if part.shape[0] == 0:
        return part.astype("float32")
    from ..data import rows_for_model

    model_meta = explainer.meta.get("booster_meta") or {}
    values, _ = rows_for_model(part, model_meta.get("feature_types"), model_meta.get("categories"))
    if is_cudf_object(part):
        import cudf as frames
    else:
        import pandas as frames
    return frames.DataFrame(values, index=part.index, columns=part.columns)


def shap_frame_meta(explainer, columns=None):
    """The empty pandas DataFrame that ``explainer.shap_frame`` returns for 0 rows: the
    ``meta=`` of ``ddf.map_partitions(explainer.shap_frame, meta=shap_frame_meta(explainer, ddf.columns))``.

    Parameters
    ----------
    explainer : TreeExplainer
    columns : list of str, optional
        The data's feature columns (default: the explainer's feature names).

    Returns
    -------
    pandas.DataFrame
        No rows; float64 columns: the features and ``bias`` (per output for several outputs).
    """
    import pandas as pd

    names = list(columns) if columns is not None else list(explainer.feature_names)
    cols = [str(c) for c in names] + ["bias"]
    if explainer.n_outputs > 1:
        labels = explainer.output_names if explainer.output_names is not None else range(explainer.n_outputs)
        cols = [f"{c}[{g}]" for g in labels for c in cols]
    return pd.DataFrame({c: np.empty(0, np.float64) for c in cols})


def shap_values(
    client: Client | None,
    model_or_explainer: Any,
    data: da.Array | dd.DataFrame,
    interactions: bool = False,
    background: Any = None,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    device: str | Device | None = None,
) -> da.Array | dd.DataFrame:
    """SHAP values of a dask Array or DataFrame, computed where the rows are; lazy.

    Parameters
    ----------
    client : distributed.Client or None
    model_or_explainer : TreeExplainer, Booster, ``train()``'s result, or any model
        :class:`~dgboost.TreeExplainer` reads.
    data : dask Array (n, F) or dask DataFrame
    interactions : bool
        SHAP interaction values instead of SHAP values.
    background : array-like, optional
        Background rows for interventional SHAP (when a model, not an explainer, is given).
    max_block_bytes : int
        Upper bound on one block's output (interaction outputs are re-chunked by rows to fit).
    device : str or Device, optional
        Where the workers explain: any spelling :func:`dgboost.device.parse_device` accepts
        (checked here, on the client). None or the CPU: on the explainer's device, and on
        the worker's GPU for blocks already there (CuPy, cuDF). A GPU (``"cuda"``,
        ``"gpu:0"``...): every block on the worker's GPU (host blocks are uploaded there and
        their values come back to the host), e.g. pandas partitions read from Parquet by
        Dask-CUDA workers; a worker without a usable GPU explains on its CPU, with a warning
        in its log (:func:`dgboost.device.resolve_device`).

    Returns
    -------
    dask Array or DataFrame
        Arrays: :meth:`TreeExplainer.shap_values` layout, ``(n, F)`` / ``(n, F, k)`` (or
        ``(n, F, F)`` / ``(n, F, F, k)`` with ``interactions``), float64, the input's row
        chunks. DataFrames (without ``interactions``): :meth:`TreeExplainer.shap_frame` per
        partition, index preserved, columns = features + ``bias``.

    Notes
    -----
    Each block of a persisted input is explained on the worker that holds it (loosely: a lost
    worker's blocks run elsewhere). An Array stays lazy. A persisted DataFrame's partitions are
    submitted at once, and the DataFrame returned holds their futures, as ``persist()`` would:
    dask-expr keeps no placement for a lazy frame's tasks. A lazy DataFrame stays lazy, and
    Dask places its tasks, as it does for a DataFrame's interaction values (computed from the
    frame as an Array).
    """
    import dask.dataframe as dd
    from distributed import default_client

    device = None if device is None else parse_device(device)
    if device is not None and not device.is_cuda:
        device = None  # the CPU: the explainer's own device
    client = client if client is not None else default_client()
    explainer = _as_explainer(model_or_explainer, background)
    ref = model_reference(explainer)
    if isinstance(data, dd.DataFrame) and not interactions:
        meta = frame_meta_like(shap_frame_meta(explainer, [str(c) for c in data.columns]), data)
        held = map_held_partitions(client, data, _frame_partition, ref, device, meta=meta)
        if held is not None:  # a persisted frame's partitions, explained where they are held
            return held
        return data.map_partitions(_frame_partition, ref, device, meta=meta)
    if isinstance(data, dd.DataFrame):
        if any(str(dt) == "category" for dt in data.dtypes):  # codes of the model's categories
            data = data.map_partitions(_codes_partition, ref, meta=data._meta.astype("float32"))
        data = data.to_dask_array(lengths=True)
    if not isinstance(data, da.Array) or data.ndim != 2:
        raise DGBoostTypeError("data must be a 2-D dask Array or a dask DataFrame")
    if data.numblocks[1] > 1:
        data = data.rechunk({1: -1})
    F, G = int(data.shape[1]), explainer.n_outputs
    trailing = (F, F) if interactions else (F,)
    if G > 1:
        trailing = trailing + (G,)
    row_bytes = 8 * int(np.prod(trailing))
    limit = max(1, int(max_block_bytes) // row_bytes)
    if any(c > limit for c in data.chunks[0] if not np.isnan(c)):
        data = data.rechunk({0: limit})
    chunks = (data.chunks[0],) + tuple((t,) for t in trailing)
    extra = {"new_axis": list(range(2, 1 + len(trailing)))} if len(trailing) > 1 else {}
    out = da.map_blocks(
        _explain_block,
        data,
        ref,
        interactions,
        trailing,
        device,
        dtype=np.float64,
        chunks=chunks,
        meta=array_module(data._meta).empty((0,) * len(chunks), np.float64),
        **extra,
    )
    holders = where_held(client, data)
    # a persisted array's blocks are explained where they are held
    return out if holders is None else held_blocks_array(out, holders)
