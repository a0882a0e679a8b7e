"""DaskDMatrix: a distributed training set as persisted row partitions on the workers.

The collections (features, labels, weights, margins, query ids) are split into aligned row
partitions on the client, computed and kept on the workers (one future per partition and
field), and checked on the workers before any collective starts (:mod:`._preflight`). The
order of the partitions is the order of the rows: the model is that of the rows concatenated
in this order, however they are spread over workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .._category_codes import checked_categories, is_categorical_dtype, is_category_column, recode_map, union_categories
from .._compat import library_of
from ..errors import CommunicationError, DGBoostError, DGBoostTypeError, DGBoostValueError
from ..params import check_max_bin

__all__ = [
    "DaskDMatrix",
    "DaskQuantileDMatrix",
    "agreed_code_counts",
    "as_rank_dmatrix",
    "conformed_codes",
    "check_eval_categories",
]

_FIELDS = ("data", "label", "weight", "base_margin", "qid")


def _collection_kind(obj, name: str) -> str:
    """'array', 'frame' (DataFrame or Series) or raise: only dask collections are accepted."""
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(obj, da.Array):
        return "array"
    if isinstance(obj, (dd.DataFrame, dd.Series)):
        return "frame"
    hint = (
        " (wrap it with dask.array.from_array or dask.dataframe.from_pandas)"
        if hasattr(obj, "shape") or hasattr(obj, "columns")
        else ""
    )
    raise DGBoostTypeError(f"{name} must be a dask Array, DataFrame or Series, got {type(obj).__name__}{hint}")


def _row_blocks(obj, name: str) -> tuple[list, tuple | None]:
    """Delayed row blocks of a dask collection, and its row chunk sizes when known."""
    kind = _collection_kind(obj, name)
    if kind == "frame":
        return list(obj.to_delayed()), None
    if obj.ndim not in (1, 2):
        raise DGBoostValueError(f"{name} must be 1-D or 2-D, got {obj.ndim}-D")
    if obj.ndim == 2 and obj.numblocks[1] > 1:
        obj = obj.rechunk({1: -1})  # a partition holds whole rows
    blocks = obj.to_delayed().reshape(-1)
    chunks = obj.chunks[0]
    return list(blocks), None if any(np.isnan(c) for c in chunks) else tuple(int(c) for c in chunks)


#: seconds to wait for the partitions' categories (computed with the partitions themselves)
_CATEGORIES_TIMEOUT = 300.0


def _known_categories(data) -> dict[int, np.ndarray | None]:
    """{position: the categories of its dtype, or None when unknown} of a Dask DataFrame's
    category columns (an Arrow dictionary column's are unknown: dask does not keep them)."""
    out: dict[int, np.ndarray | None] = {}
    for j, (name, dtype) in enumerate(data._meta.dtypes.items()):
        if not is_category_column(dtype):
            continue
        known = is_categorical_dtype(dtype) and bool(getattr(data[name].cat, "known", False))
        out[j] = checked_categories(str(name), dtype.categories) if known else None
    return out


def _partition_categories(part, positions: list[int], index: int) -> dict[int, np.ndarray]:
    """The categories of the category columns ``positions`` of one partition (run on its worker)."""
    try:
        out = {}
        for j in positions:
            column = part[part.columns[j]]
            if not is_categorical_dtype(column.dtype):  # an Arrow dictionary column
                column = column.astype("category")
            out[j] = checked_categories(str(part.columns[j]), column.cat.categories)
        return out
    except DGBoostError as exc:
        raise type(exc)(f"partition {index}: {exc}") from None


def _agreed_categories(client, futures: list, known: dict, n_features: int, names) -> list | None:
    """Per feature: None, or the categories every partition's codes are made to mean.

    A column whose dtype knows its categories keeps them (a partition with others is refused
    by the checks before training); for unknown categories the partitions' categories are
    computed on the workers (small: values only) and their sorted union agreed on, the order
    pandas gives ``astype("category")`` of the whole column.
    """
    from distributed import wait

    if not known:
        return None
    categories: list = [None] * n_features
    unknown = [j for j, values in known.items() if values is None]
    for j, values in known.items():
        categories[j] = values
    if unknown:
        found = [
            client.submit(_partition_categories, future, unknown, i, pure=False) for i, future in enumerate(futures)
        ]
        try:
            wait(found, timeout=_CATEGORIES_TIMEOUT)
        except TimeoutError:
            client.cancel(found, force=True)
            columns = ", ".join(repr(names[j] if names is not None else f"f{j}") for j in unknown)
            raise CommunicationError(
                f"the categories of column(s) {columns} (unknown in the collection's dtype) were not found "
                f"in every partition within {_CATEGORIES_TIMEOUT:g} s (a worker busy with a task that does "
                "not end, or gone); give the columns known categories (df[col].cat.set_categories(...)) or retry"
            ) from None
        results = client.gather(found)
        for j in unknown:
            column = names[j] if names is not None else f"f{j}"
            categories[j] = union_categories(column, [(i, r[j]) for i, r in enumerate(results)])
    return categories


def conformed_codes(data, categories: list, feature_types, feature_names, missing: float, what: str):
    """One partition's features as float32 whose codes mean the agreed ``categories``.

    Parameters
    ----------
    data : pandas / cuDF DataFrame, NumPy / CuPy array
        One partition's features.
    categories : list of (numpy.ndarray or None)
        Per feature, the agreed categories (None: numeric, or codes given as numbers).
    feature_types, feature_names, missing
        The matrix's.
    what : str
        What the categories are, for the error message.

    Returns
    -------
    numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        ``missing`` already applied to the numeric columns.

    Raises
    ------
    DGBoostValueError
        A category outside the agreed set (see :func:`dgboost.data.aligned_codes`).
    """
    from ..data import aligned_codes, model_categories, read_features

    table = read_features(
        data, missing, feature_names, feature_types=feature_types, enable_categorical=True, allow_empty_rows=True
    )
    return aligned_codes(table, *model_categories(feature_types, categories), what=what)


def check_eval_categories(dtrain: "DaskDMatrix", dm: "DaskDMatrix", name: str) -> None:
    """Refuse an evaluation set whose categories the training data does not have (on the client).

    Raises
    ------
    DGBoostValueError
        Naming the column and the categories, or a category column that is numeric in the
        training data.
    """
    if not dm.has_categories:
        return
    names = dtrain.feature_names or [f"f{j}" for j in range(dtrain.n_features)]
    train_types = dtrain.feature_types or []
    for j, values in enumerate(dm.categories):
        target = dtrain.categories[j] if dtrain.categories is not None else None
        if values is None:
            continue
        if target is None:
            if j < len(train_types) and train_types[j] == "c":
                continue  # codes given as numbers in training: taken as they are
            raise DGBoostValueError(
                f"evaluation set {name!r}: column {names[j]!r} is a category column but it is numeric in the "
                "training data"
            )
        recode_map(names[j], values, target, f"the training data (evaluation set {name!r})")


@dataclass
class _Partitions:
    """Persisted partitions: ``futures[field][i]`` is partition i of ``field`` (or None)."""

    futures: dict = field(default_factory=dict)
    n_partitions: int = 0


class DaskDMatrix:
    """Training or evaluation data spread over a Dask cluster (``xgboost.dask.DaskDMatrix``).

    Parameters
    ----------
    client : distributed.Client or None
        None uses the current default client.
    data : dask.array.Array of shape (n, F), or dask.dataframe.DataFrame
        Features. Partitions may hold NumPy / pandas, or CuPy / cuDF (dask_cudf) data, which
        stays on the worker's GPU.
    label, weight, base_margin, qid : dask Array or Series, optional
        Row-aligned with ``data``: the same number of partitions with the same lengths
        (checked on the workers before training). Query groups (``qid``, sorted within a
        partition) must not span partitions.
    missing : float, optional
        The value that marks a missing entry (NaN when None).
    feature_names : list of str, optional
        Defaults to the DataFrame's columns.
    feature_types : list of str, optional
        ``"q"``, ``"float"``, ``"int"``, ``"i"`` or ``"c"``, as for :class:`dgboost.DMatrix`
        (category columns are ``"c"``; a numeric column typed ``"c"`` holds codes).
    max_bin : int, optional
        Histogram bins per feature, in place of the training parameter (as for
        :class:`dgboost.DMatrix`); checked here by :func:`dgboost.params.check_max_bin`.
    enable_categorical : bool, default True
        Take category columns as categorical features (XGBoost 3.4.1's default). Their codes
        are made to agree over all partitions before training: the categories of a column
        whose dtype has known categories are those; for unknown categories (e.g.
        ``astype("category")`` of a dask column) the sorted union of every partition's
        categories. A partition holding a category outside a known set is refused, naming the
        partition. See docs/categorical.md.
    silent
        Accepted for XGBoost compatibility.
    group, label_lower_bound, label_upper_bound, feature_weights
        Not supported: refused when given.

    Notes
    -----
    The partitions are computed and kept on the workers when the DaskDMatrix is made
    (``client.compute``); they are released when it is garbage-collected.
    """

    def __init__(
        self,
        client: Any,
        data: Any,
        label: Any = None,
        *,
        weight: Any = None,
        base_margin: Any = None,
        missing: float | None = None,
        silent: bool = False,
        feature_names: Sequence[str] | None = None,
        feature_types: Sequence[str] | None = None,
        group: Any = None,
        qid: Any = None,
        label_lower_bound: Any = None,
        label_upper_bound: Any = None,
        feature_weights: Any = None,
        enable_categorical: bool = True,
        max_bin: int | None = None,
    ) -> None:
        from distributed import default_client

        from ..data import checked_feature_types

        # checked first, on the client: before any partition is computed
        self.max_bin = None if max_bin is None else check_max_bin(max_bin)

        if group is not None:
            raise DGBoostValueError("DaskDMatrix takes qid (a query id per row), not group sizes")
        if label_lower_bound is not None or label_upper_bound is not None or feature_weights is not None:
            raise DGBoostValueError("label bounds (survival) and feature_weights are not supported")
        self.client = client if client is not None else default_client()
        self.missing = np.nan if missing is None else float(missing)
        self.is_frame = _collection_kind(data, "data") == "frame"
        if self.is_frame and hasattr(data, "columns"):
            names = [str(c) for c in data.columns]
        elif self.is_frame:
            raise DGBoostTypeError("data must be a dask DataFrame or 2-D Array, not a Series")
        else:
            if data.ndim != 2:
                raise DGBoostValueError(f"data must be 2-D (rows x features), got shape {data.shape}")
            names = None
        self.n_features = len(names) if names is not None else int(data.shape[1])
        if feature_names is not None:
            feature_names = [str(n) for n in feature_names]
            if len(feature_names) != self.n_features:
                raise DGBoostValueError(f"{len(feature_names)} feature names given for {self.n_features} features")
        self.feature_names = feature_names if feature_names is not None else names
        self._frame_columns = names  # what every DataFrame partition must have, in order
        # checked on the client from the collection's meta, before any partition is computed
        meta = data._meta if self.is_frame else None
        self.feature_types = checked_feature_types(feature_types, self.n_features, meta, enable_categorical)
        known = _known_categories(data) if meta is not None else {}

        blocks, chunks = _row_blocks(data, "data")
        fields = {"data": blocks}
        for name, value in (("label", label), ("weight", weight), ("base_margin", base_margin), ("qid", qid)):
            if value is None:
                continue
            vblocks, vchunks = _row_blocks(value, name)
            if len(vblocks) != len(blocks):
                raise DGBoostValueError(
                    f"{name} has {len(vblocks)} partitions but data has {len(blocks)}: "
                    "give them the same row partitions (rechunk / repartition)"
                )
            if chunks is not None and vchunks is not None and vchunks != chunks:
                i = next(i for i, (a, b) in enumerate(zip(chunks, vchunks)) if a != b)
                raise DGBoostValueError(
                    f"partition {i}: {name} has {vchunks[i]} rows but data has {chunks[i]}: "
                    "give them the same row chunks"
                )
            fields[name] = vblocks
        self.has = {name: name in fields for name in _FIELDS}
        flat = [b for name in _FIELDS if name in fields for b in fields[name]]
        futures = self.client.compute(flat)
        self._parts = _Partitions(n_partitions=len(blocks))
        k = 0
        for name in _FIELDS:
            if name in fields:
                self._parts.futures[name] = futures[k : k + len(blocks)]
                k += len(blocks)
            else:
                self._parts.futures[name] = [None] * len(blocks)
        self.categories = _agreed_categories(self.client, self._parts.futures["data"], known, self.n_features, names)

    @property
    def n_partitions(self) -> int:
        return self._parts.n_partitions

    def partition(self, i: int) -> dict:
        """The futures of partition ``i``: a dict field -> Future (or None)."""
        return {name: self._parts.futures[name][i] for name in _FIELDS}

    def all_futures(self) -> list:
        return [f for name in _FIELDS for f in self._parts.futures[name] if f is not None]

    def num_col(self) -> int:
        return self.n_features

    @property
    def has_categories(self) -> bool:
        """Whether any feature has category values to agree on (category columns)."""
        return self.categories is not None and any(c is not None for c in self.categories)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(partitions={self.n_partitions}, features={self.n_features}, "
            f"label={self.has['label']})"
        )


class DaskQuantileDMatrix(DaskDMatrix):
    """A :class:`DaskDMatrix` with XGBoost's ``DaskQuantileDMatrix`` signature.

    dgboost bins the features when training starts, so, as :class:`dgboost.QuantileDMatrix`,
    this class only carries and checks ``max_bin`` and ``ref``.

    Parameters
    ----------
    client, data, label, weight, base_margin, missing, silent, feature_names, feature_types, group, qid,
    label_lower_bound, label_upper_bound, feature_weights, enable_categorical
        As for :class:`DaskDMatrix`.
    max_bin : int, optional
        Histogram bins per feature (default: the ``max_bin`` of ``ref`` if given, else the
        training parameter); :func:`dgboost.params.check_max_bin` applies.
    ref : DaskDMatrix, optional
        The training data this (evaluation) data is binned like; its ``max_bin`` must agree
        with ``max_bin`` when both are given.
    max_quantile_batches : int, optional
        Accepted for XGBoost compatibility; no effect.
    """

    def __init__(
        self,
        client: Any,
        data: Any,
        label: Any = None,
        *,
        weight: Any = None,
        base_margin: Any = None,
        missing: float | None = None,
        silent: bool = False,
        feature_names: Sequence[str] | None = None,
        feature_types: Sequence[str] | None = None,
        max_bin: int | None = None,
        ref: DaskDMatrix | None = None,
        group: Any = None,
        qid: Any = None,
        label_lower_bound: Any = None,
        label_upper_bound: Any = None,
        feature_weights: Any = None,
        enable_categorical: bool = True,
        max_quantile_batches: int | None = None,
    ) -> None:
        if ref is not None and not isinstance(ref, DaskDMatrix):
            raise DGBoostTypeError(f"ref must be a DaskDMatrix or DaskQuantileDMatrix, got {type(ref).__name__}")
        if max_bin is not None:
            max_bin = check_max_bin(max_bin)  # before comparing it with ref's
        if ref is not None and ref.max_bin is not None:
            if max_bin is not None and max_bin != ref.max_bin:
                raise DGBoostValueError(
                    f"max_bin={max_bin!r} differs from the max_bin of ref "
                    f"({ref.max_bin}); data binned with ref's cuts must use its bins"
                )
            max_bin = ref.max_bin if max_bin is None else max_bin
        super().__init__(
            client,
            data,
            label,
            weight=weight,
            base_margin=base_margin,
            missing=missing,
            silent=silent,
            feature_names=feature_names,
            feature_types=feature_types,
            group=group,
            qid=qid,
            label_lower_bound=label_lower_bound,
            label_upper_bound=label_upper_bound,
            feature_weights=feature_weights,
            enable_categorical=enable_categorical,
            max_bin=max_bin,
        )
        if ref is not None and ref.n_features != self.n_features:
            raise DGBoostValueError(f"ref has {ref.n_features} features but data has {self.n_features}")
        self.ref = ref


def as_rank_dmatrix(
    parts: list[dict],
    has: dict,
    *,
    missing: float,
    feature_names,
    feature_types,
    n_features: int,
    row_runs: list[tuple[int, int]] | None = None,
    max_bin: int | None = None,
    categories: list | None = None,
    code_counts: dict | None = None,
):
    """A :class:`~dgboost.data.RankDMatrix` of the partitions one rank holds, concatenated in order.

    Parameters
    ----------
    parts : list of dict
        Materialised partitions (field -> NumPy / pandas / CuPy / cuDF object or None), in
        global row order.
    has : dict of str -> bool
        Which fields the job has. A rank without rows gets empty arrays for them, so that it
        takes the same branches (and joins the same collectives) as the ranks with rows.
    row_runs : list of (int, int), optional
        The global (row offset, rows) of each partition, when the rank's partitions are not
        one contiguous run in rank order (see :mod:`._placement`); kept as ``row_runs``.
    max_bin : int, optional
        The ``max_bin`` of the :class:`DaskDMatrix` (None: the training parameter's).
    categories : list of (numpy.ndarray or None), optional
        The categories agreed over all partitions (:attr:`DaskDMatrix.categories`): each
        partition's codes are made to mean them before the partitions are concatenated.
    code_counts : dict of int -> int, optional
        K of each categorical feature given as codes, over all partitions
        (:func:`agreed_code_counts`): the rank's ``categories`` are then ``arange(K)`` of the job.

    Returns
    -------
    RankDMatrix
        With 0 rows (and ``n_features`` columns) when ``parts`` is empty.
    """
    from ..data import RankDMatrix

    agreed = categories is not None and any(c is not None for c in categories)
    if agreed:
        what = "the data (agreed over all partitions)"
        parts = [
            dict(p, data=conformed_codes(p["data"], categories, feature_types, feature_names, missing, what))
            if p.get("data") is not None
            else p
            for p in parts
        ]
        missing = np.nan  # applied to the numeric columns; a code is never the missing value
    fields: dict[str, Any] = {}
    for name in _FIELDS:
        values = [p[name] for p in parts if p.get(name) is not None]
        if values:
            fields[name] = _concat_rows(values)
        elif has.get(name):
            fields[name] = np.empty((0, n_features) if name == "data" else 0, np.float32)
        else:
            fields[name] = None
    dm = RankDMatrix(
        fields["data"],
        fields["label"],
        weight=fields["weight"],
        base_margin=fields["base_margin"],
        qid=fields["qid"],
        missing=missing,
        feature_names=feature_names,
        feature_types=feature_types,
        max_bin=max_bin,
    )
    dm.row_runs = None if row_runs is None else [(int(o), int(n)) for o, n in row_runs]
    if agreed:
        for j, values in enumerate(categories):
            if values is not None:  # the values, not the rank's own arange of codes
                dm.categories[j], dm._coded[j] = values, False
    for j, k in (code_counts or {}).items():
        dm.categories[j] = np.arange(k, dtype=np.int64)  # the job's K, not this rank's
    return dm


def agreed_code_counts(infos: list[dict]) -> dict[int, int] | None:
    """{feature: K} over all partitions for categorical features given as codes (the largest
    code + 1 anywhere), from the partitions' checks; None when there are none."""
    counts: dict[int, int] = {}
    for info in infos:
        for j, k in (info.get("codes_k") or {}).items():
            counts[int(j)] = max(counts.get(int(j), 0), int(k))
    return counts or None


def _concat_device_rows(blocks: list):
    """CuPy row blocks one after another: blocks of one dtype and row shape by the backend's
    device-to-device copies into place (CuPy's concatenate compiles a kernel of 64-bit
    indexing at its first result of more than 2 GiB, in the first large job); others by
    ``cupy.concatenate``."""
    import cupy

    from ..backend import array_backend

    first = blocks[0]
    if all(b.dtype == first.dtype and b.shape[1:] == first.shape[1:] for b in blocks):
        return array_backend(first).concatenate(blocks)
    return cupy.concatenate(blocks, axis=0)


def _concat_rows(values: list):
    """Concatenate row blocks of one kind (NumPy, pandas, CuPy or cuDF), keeping the kind."""
    if len(values) == 1:
        return values[0]
    first = values[0]
    module = library_of(first)
    if module == "pandas":
        import pandas as pd

        return pd.concat(values, axis=0)
    if module == "cudf":
        import cudf

        return cudf.concat(values, axis=0)
    if module == "cupy":
        return _concat_device_rows(values)
    return np.concatenate([np.asarray(v) for v in values], axis=0)
