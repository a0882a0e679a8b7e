"""``TreeExplainer``: exact SHAP values of tree models, with ``shap.TreeExplainer``'s interface.

::

    import dgboost
    explainer = dgboost.TreeExplainer(model)            # dgboost, XGBoost, LightGBM, sklearn
    phi = explainer.shap_values(X)                      # (n, F) or (n, F, k)
    phi.sum(1) + explainer.expected_value               # == the model's raw output
    shap.plots.beeswarm(explainer(X))                   # a shap.Explanation

Output layout (shap >= 0.45, the current convention):

* ``shap_values(X)``: float64 ``(n, F)`` for one output, ``(n, F, k)`` for ``k`` outputs
  (classes; also 2 for scikit-learn tree/forest classifiers, which explain both class
  probabilities, as shap does); the bias is not included. ``expected_value`` is a float
  for one output, a float64 array ``(k,)`` otherwise.
* ``shap_interaction_values(X)``: ``(n, F, F)`` or ``(n, F, F, k)``.
* A 1-D ``X`` is one row and gives 1-D / 2-D outputs, as in shap.
* ``contributions(X)``: the engine's own layout, float64 ``(n, k, F + 1)`` with the bias
  last (XGBoost's ``pred_contribs`` with the group axis always present).

What is explained is the model's *raw* output (``model_output="raw"``): the margin for
gradient boosting (log-odds for binary classifiers), the prediction for regressors, the
class probabilities for scikit-learn tree / forest classifiers.

``feature_perturbation``: ``"tree_path_dependent"`` (the covers recorded in the trees
stand for the background; with ``data`` given, the covers are recounted from ``data``,
as shap does, unreached nodes getting a cover of 1e-6 like shap's), ``"interventional"`` (average over
the background ``data``), or
``"auto"``: interventional when ``data`` is given, else tree-path-dependent.
``algorithm`` (path-dependent values): ``"table"`` (precomputed Shapley weight tables per
path, O(depth) per row and path, where they fit a memory budget), ``"path"`` (per-row
EXTEND/UNWIND, O(depth^2)) or ``"auto"`` (``"table"`` for SHAP values, the engine's
default method for interaction values; an explicit choice is passed on to the interaction
kernel). All give the same numbers. The path table and the weight tables are built once
per model: a second explainer of the same booster (unchanged trees) or of the same model
bytes / file reuses them (:mod:`dgboost.explain.prepared`).

Rows are processed in blocks; a progress line on stderr shows for ``progress=True`` (or
by default when stderr is a terminal and there are at least :data:`PROGRESS_MIN_ROWS` rows).
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any, Sequence

import numpy as np
from numba import njit

from .._array import array_module, is_device_array, to_host
from .._compat import is_cudf_object, is_cupy_array
from ..backend import get_backend
from ..device import Device, resolve_device
from ..errors import DGBoostTypeError, DGBoostValueError
from .engines import call_row_bytes
from .paths import extract_paths
from .prepared import import_model, model_path_table
from .results import AdditivityError, Explanation
from .tables import WeightTables

__all__ = ["TreeExplainer", "Explanation", "AdditivityError", "PROGRESS_MIN_ROWS"]

#: rows from which the progress line shows by default (when stderr is a terminal)
PROGRESS_MIN_ROWS = 100_000

_PERTURBATIONS = ("auto", "tree_path_dependent", "interventional")
_ALGORITHMS = ("auto", "path", "table")
# rough cost units per row chunk (path elements x background rows ...): a few per second
_CHUNK_COST = 4e7
# objectives whose output is sigmoid(margin): dgboost / XGBoost, and LightGBM's names
_LOGISTIC_OBJECTIVES = frozenset({"binary:logistic", "reg:logistic", "binary", "cross_entropy"})


# ---------------------------------------------------------------------------------------
# progress line
# ---------------------------------------------------------------------------------------
class _Progress:
    """``label: 12,000/50,000 rows (24%), 3,100 rows/s, ETA 12 s`` on stderr."""

    def __init__(self, total: int, enabled: bool, label: str, stream=None):
        self.total = total
        self.enabled = enabled and total > 0
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.last = -1e9
        self.interval = 0.25 if self.tty else 5.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < self.total and now - self.last < self.interval:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        text = (
            f"{self.label}: {done:,}/{self.total:,} rows ({100.0 * done / self.total:.0f}%), "
            f"{rate:,.0f} rows/s, " + (f"ETA {eta:.0f} s" if done < self.total else f"done in {elapsed:.1f} s")
        )
        if self.tty:
            self.stream.write("\r" + text + ("\n" if done >= self.total else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _progress_enabled(progress, n_rows: int) -> bool:
    if progress is None:
        return n_rows >= PROGRESS_MIN_ROWS and bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _host_engine():
    """The CPU's engine: leaves and margins of host rows, whatever the explainer's device."""
    return get_backend("cpu").shap_engine()


@njit(cache=True, nogil=True)
def _count_covers(parent, offsets, leaves, out):
    """out[node] = number of rows whose path passes the node (leaves: local leaf ids)."""
    n_rows, n_trees = leaves.shape
    for t in range(n_trees):
        base = offsets[t]
        for r in range(n_rows):
            node = leaves[r, t]
            while node >= 0:
                out[base + node] += 1.0
                node = parent[base + node]


def _is_default_names(names) -> bool:
    return all(str(n) == f"f{i}" or str(n) == f"Column_{i}" for i, n in enumerate(names))


def _check_numeric_frame(X, what: str) -> None:
    import pandas as pd

    for col, dt in zip(X.columns, X.dtypes):
        if not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt)):
            raise DGBoostTypeError(
                f"{what} column {col!r} has dtype {dt}: expected numbers (encode categories as numbers first)"
            )


def _float64_matrix(X, what: str) -> tuple[np.ndarray, list | None]:
    """Rows as float64 (for models whose splits compare float64 values)."""
    names = None
    if hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "to_numpy"):
        if is_cudf_object(X):
            X = X.to_pandas()
        _check_numeric_frame(X, what)
        names = [str(c) for c in X.columns]
        arr = X.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)
    elif hasattr(X, "tocoo") and hasattr(X, "nnz"):
        arr = np.asarray(X.toarray(), dtype=np.float64)
    else:
        if is_cupy_array(X):
            X = X.get()
        arr = np.asarray(X)
        if arr.dtype == object or arr.dtype.kind in "USVMmc":
            raise DGBoostTypeError(f"{what} has dtype {arr.dtype}: expected numeric values")
        arr = arr.astype(np.float64)
    return np.ascontiguousarray(arr), names


# ---------------------------------------------------------------------------------------
# the explainer
# ---------------------------------------------------------------------------------------
class TreeExplainer:
    """Exact TreeSHAP for dgboost, XGBoost, LightGBM and scikit-learn tree models.

    Parameters
    ----------
    model
        A dgboost Booster / estimator, ``xgboost.Booster`` / ``XGB*`` estimator,
        ``lightgbm.Booster`` / ``LGBM*`` estimator, a scikit-learn tree, forest or gradient
        boosting model, a dgboost/XGBoost JSON or LightGBM text model file, or
        ``(Ensemble, meta)`` (see :func:`dgboost.explain.importers.to_ensemble`).
    data : array-like or DataFrame, optional
        Background rows: the reference distribution for ``"interventional"`` SHAP, or the
        rows that recount the trees' covers for ``"tree_path_dependent"``. All rows are used
        (shap's TreeExplainer keeps a random 100 of them; pass ``shap.sample(data, 100)``-
        sized backgrounds to compare).
    feature_perturbation : {"auto", "tree_path_dependent", "interventional"}
    algorithm : {"auto", "path", "table"}
        How path-dependent SHAP values are computed (same numbers either way).
    device : str or Device
        Where the engine runs: any spelling :func:`dgboost.device.parse_device` accepts
        (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"gpu"``, ...). A GPU that is not usable here
        gives a warning and the CPU (:func:`dgboost.device.resolve_device`, the rule of every
        entry point). A GPU: path-dependent SHAP and interaction values by
        ``kernels/treeshap_rows.cu`` (the CPU engine's kernels with one thread per row, so
        the values are bitwise the CPU's), interventional SHAP (also with
        ``model_output="probability"``) by ``kernels/treeshap_interventional.cu`` the same way.
        CuPy and cuDF rows stay on the GPU and give CuPy arrays / cuDF frames; host rows are
        uploaded chunk by chunk and give NumPy arrays.
    model_output : {"raw", "probability"}
        ``"raw"``: the raw output (see the module docstring). ``"probability"``: for
        interventional SHAP of a one-output logistic model, the probability sigmoid(margin),
        as shap does (per background row the margin values are scaled by the sigmoid's secant
        between the two margins); the values then sum to the probability minus the mean
        probability of the background.
    feature_names : list of str, optional
        Names for plots and frames (default: the model's, else the DataFrame's, else f0...).
    progress : bool, optional
        Show a progress line on stderr (default: for long inputs on a terminal).
    max_table_bytes : int, optional
        Memory budget of the per-path weight tables (``algorithm="table"``); default 256 MiB
        on the CPU, 1 GiB on a GPU. With the same budget both devices give bitwise the same
        values (paths without a table take the path method, which rounds differently).
    max_batch_bytes : int, optional
        Most memory one engine call may take for its rows' outputs and scratch: rows are
        explained in batches that fit (at least one row a batch), so on a GPU host rows
        larger than device memory, and interaction values ((F + 1)^2 a row), are explained
        within this bound. Default: about 256 MiB a call on a GPU (at least 256 rows), the
        CPU engine's own batch sizes on the CPU. Values do not depend on the batching.

    Attributes
    ----------
    expected_value : float or ndarray
        The mean model output over the background (covers, or ``data``); shap's convention.
    table : PathTable
        The path table (built once); ``ensemble`` and ``meta`` from the importer.
    """

    max_batch_bytes: int | None = None  # also for explainers pickled before it existed

    def __init__(
        self,
        model: Any,
        data: Any = None,
        feature_perturbation: str = "auto",
        algorithm: str = "auto",
        device: str | Device = "cpu",
        *,
        model_output: str = "raw",
        feature_names: Sequence[str] | None = None,
        progress: bool | None = None,
        max_table_bytes: int | None = None,
        max_batch_bytes: int | None = None,
    ) -> None:
        if feature_perturbation not in _PERTURBATIONS:
            raise DGBoostValueError(
                f"feature_perturbation must be one of {_PERTURBATIONS}, got {feature_perturbation!r}"
            )
        if algorithm not in _ALGORITHMS:
            raise DGBoostValueError(f"algorithm must be one of {_ALGORITHMS}, got {algorithm!r}")
        if model_output not in ("raw", "margin", "probability"):
            raise DGBoostValueError(
                f"model_output={model_output!r} is not supported: TreeExplainer explains the raw "
                "model output (margins for boosting, probabilities for sklearn tree classifiers), "
                "or with model_output='probability' the probability of a logistic model"
            )
        self.device = resolve_device(device)
        self._budget_given = max_table_bytes is not None
        self._kernels = get_backend(self.device).shap_engine(max_table_bytes)
        self.max_table_bytes = self._kernels.max_table_bytes
        if max_batch_bytes is not None and not (
            isinstance(max_batch_bytes, (int, np.integer))
            and not isinstance(max_batch_bytes, bool)
            and max_batch_bytes >= 1
        ):
            raise DGBoostValueError(f"max_batch_bytes must be a positive number of bytes, got {max_batch_bytes!r}")
        self.max_batch_bytes = None if max_batch_bytes is None else int(max_batch_bytes)
        if feature_perturbation == "auto":
            feature_perturbation = "interventional" if data is not None else "tree_path_dependent"
        if feature_perturbation == "interventional" and data is None:
            raise DGBoostValueError("feature_perturbation='interventional' needs background data (data=...)")
        self.feature_perturbation = feature_perturbation
        self.algorithm = "table" if algorithm == "auto" else algorithm
        self._interaction_method = None if algorithm == "auto" else algorithm
        self.model_output = "probability" if model_output == "probability" else "raw"
        if self.model_output == "probability" and feature_perturbation != "interventional":
            raise DGBoostValueError(
                "model_output='probability' needs feature_perturbation='interventional' "
                "and background data (as in shap): path-dependent SHAP explains margins"
            )
        self.progress = progress

        ensemble, meta, model_key = import_model(model)
        self.meta = meta
        if self.model_output == "probability" and (
            ensemble.n_groups != 1 or str(meta.get("objective")) not in _LOGISTIC_OBJECTIVES
        ):
            raise DGBoostValueError(
                "model_output='probability' explains sigmoid(margin): it needs a model with one output and a "
                f"logistic objective ({', '.join(sorted(_LOGISTIC_OBJECTIVES))}), got objective "
                f"{meta.get('objective')!r} with {ensemble.n_groups} output(s)"
            )
        self._encoder = meta.get("input_encoder")
        self.n_outputs = int(ensemble.n_groups)
        self.n_features = int(meta.get("num_feature") or 0)
        self._model_names = meta.get("feature_names")
        self.output_names = meta.get("output_names")

        self.data = None
        self._data_names = None
        if data is not None:
            self.data, self._data_names = self._rows(data, "background data")
            if self.data.shape[0] == 0:
                raise DGBoostValueError("background data is empty (0 rows)")
        self.feature_names = self._resolve_names(feature_names)

        booster = meta.get("booster")
        if feature_perturbation == "tree_path_dependent" and self.data is not None:
            ensemble = self._recount_covers(ensemble, self.data)
            self.table = extract_paths(ensemble)
        elif booster is not None:
            from .api import booster_path_table

            self.table = booster_path_table(booster, *meta["tree_range"])
        else:
            self.table = model_path_table(ensemble, model_key)
        self.ensemble = ensemble
        if self.n_features and self.table.n_features > self.n_features:
            raise DGBoostValueError(
                f"the model splits on feature {self.table.n_features - 1} but declares {self.n_features} features"
            )
        self._weight_tables = None

        self._expected = None  # path-dependent: made at first use (_expected64)
        if feature_perturbation == "interventional":
            ev = to_host(self._output64(self.data).mean(axis=0))  # device background rows: on the host
            self._expected = np.asarray(ev, dtype=np.float64)

    # -- configuration -----------------------------------------------------------------
    def with_device(self, device: str | Device) -> "TreeExplainer":
        """This explainer running on ``device`` (a shallow copy sharing the path table).

        Parameters
        ----------
        device : str or Device
            As the constructor's ``device`` (a GPU not usable here: a warning and the CPU).

        Returns
        -------
        TreeExplainer
        """
        import copy

        other = copy.copy(self)
        other.device = resolve_device(device)
        other._kernels = get_backend(other.device).shap_engine(self.max_table_bytes if self._budget_given else None)
        other.max_table_bytes = other._kernels.max_table_bytes
        return other

    @property
    def expected_value(self) -> float | np.ndarray:
        """A float for one output, a float64 array (k,) for k outputs (shap's convention)."""
        expected = self._expected64()
        return float(expected[0]) if self.n_outputs == 1 else expected.copy()

    def _expected64(self) -> np.ndarray:
        """The expected values, float64 (k,). A path-dependent explainer's are its table's,
        made at first use rather than in the constructor: the GPU engine makes them on the
        host while its kernel runs (a depth-16 model: 23-60 ms of an H200 host's time that
        a first call no longer waits for, issue 32)."""
        if self._expected is None:
            self._expected = np.asarray(self.table.base_margin + self.table.expected_value(), dtype=np.float64)
        return self._expected

    def _resolve_names(self, given):
        if given is not None:
            names = [str(n) for n in given]
            if self.n_features and len(names) != self.n_features:
                raise DGBoostValueError(f"{len(names)} feature names for {self.n_features} features")
            return names
        if self._model_names:
            return list(self._model_names)
        if self._data_names:
            return list(self._data_names)
        return None

    def _names_for(self, F: int) -> list[str]:
        if self.feature_names is not None and len(self.feature_names) == F:
            return list(self.feature_names)
        return [f"f{i}" for i in range(F)]

    # -- rows ----------------------------------------------------------------------------
    def _rows(self, X, what: str):
        """(values, names): raw rows checked against the model (float32, or float64 for
        models with an input encoder)."""
        if X is None:
            raise DGBoostTypeError(f"{what} is None: expected a 2-D array or DataFrame")
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[0] == 0:
            raise DGBoostValueError(f"{what} is empty: shape {tuple(shape)} (0 rows)")
        if self._encoder is not None:
            values, names = _float64_matrix(X, what)
        else:
            from ..data import rows_for_model

            arr = X
            if shape is None and not hasattr(X, "columns"):
                arr = np.asarray(X)
            # category columns re-coded to the model's categories (docs/categorical.md)
            model_meta = self.meta.get("booster_meta") or {}
            values, names = rows_for_model(arr, model_meta.get("feature_types"), model_meta.get("categories"))
            if not self._kernels.keeps(values):
                values = to_host(values)  # device rows, host kernels: copied once here
        if values.ndim != 2:
            raise DGBoostValueError(f"{what} must be 2-D (rows x features), got shape {values.shape}")
        if values.shape[0] == 0:
            raise DGBoostValueError(f"{what} is empty: shape {values.shape} (0 rows)")
        if self._encoder is not None and np.isinf(values).any():
            r, c = np.argwhere(np.isinf(values))[0]
            raise DGBoostValueError(f"{what} contains infinite values (first at row {r}, column {c})")
        F = values.shape[1]
        if self.n_features and F != self.n_features:
            raise DGBoostValueError(f"{what} has {F} columns but the model has {self.n_features} features")
        if not self.n_features and F < self._table_n_features():
            raise DGBoostValueError(
                f"{what} has {F} columns but the model splits on feature {self._table_n_features() - 1}"
            )
        model_names = self._model_names
        if (
            names is not None
            and model_names
            and not _is_default_names(model_names)
            and list(names) != list(model_names)
        ):
            missing = [m for m in model_names if m not in names][:3]
            extra = [m for m in names if m not in model_names][:3]
            detail = (
                "same names in another order" if not missing and not extra else f"missing {missing}, unexpected {extra}"
            )
            raise DGBoostValueError(f"{what} columns differ from the model's feature names: {detail}")
        bg = self._data_names
        if (
            names is not None
            and bg is not None
            and what != "background data"
            and list(names) != list(bg)
            and not model_names
        ):
            raise DGBoostValueError(
                f"{what} columns {list(names)[:5]}... differ from the background data's {list(bg)[:5]}..."
            )
        if self.data is not None and what != "background data" and F != self.data.shape[1]:
            raise DGBoostValueError(f"{what} has {F} columns, the background data has {self.data.shape[1]}")
        return values, names

    def _table_n_features(self) -> int:
        table = getattr(self, "table", None)
        return table.n_features if table is not None else 0

    def _engine_rows(self, values):
        """float32 C-contiguous rows in the module of ``values`` (NumPy or CuPy)."""
        if self._encoder is not None:
            return self._encoder(values)
        xp = array_module(values)
        return xp.ascontiguousarray(values, dtype=xp.float32)

    def _prepare(self, X):
        """(engine rows float32, raw values, names, flat) for a user's X."""
        flat = False
        if not hasattr(X, "columns"):
            arr = X if hasattr(X, "shape") else np.asarray(X)
            if getattr(arr, "ndim", 2) == 1:
                X = np.asarray(arr).reshape(1, -1)
                flat = True
        values, names = self._rows(X, "X")
        return self._engine_rows(values), values, names, flat

    # -- covers and margins ----------------------------------------------------------------
    def _leaves(self, rows_f32: np.ndarray, ensemble) -> np.ndarray:
        return _host_engine().leaves(ensemble, rows_f32)

    def _recount_covers(self, ensemble, data_values: np.ndarray):
        """A copy of ``ensemble`` whose covers count the background rows (shap's rule for
        tree_path_dependent with data). Nodes no background row reaches get a cover of
        1e-6, as in shap >= 0.47, so they keep a negligible but defined weight."""
        rows = self._engine_rows(data_values)
        leaves = self._leaves(rows, ensemble)
        cover = np.zeros(ensemble.n_nodes, dtype=np.float64)
        _count_covers(
            np.ascontiguousarray(ensemble.parent, np.int64),
            np.ascontiguousarray(ensemble.offsets(), np.int64),
            np.ascontiguousarray(leaves, np.int64),
            cover,
        )
        cover[cover == 0.0] = 1e-6
        out = ensemble.copy()
        out.arrays["cover"] = cover
        return out

    def _margin64(self, values):
        """The model's raw output in float64, (n, k): base margin + leaf values, computed
        where ``values`` are (NumPy or CuPy)."""
        rows = self._engine_rows(values)
        kernels = self._kernels if self._kernels.keeps(rows) else _host_engine()
        return kernels.margins(self.ensemble, rows)

    def _output64(self, values):
        """The output being explained, float64 (n, k): the margin, or its sigmoid for
        ``model_output="probability"``."""
        margin = self._margin64(values)
        if self.model_output != "probability":
            return margin
        xp = array_module(margin)
        return 1.0 / (1.0 + xp.exp(-margin))

    def predict(self, X: Any) -> np.ndarray:
        """The output being explained, float64: (n,) for one output, (n, k) otherwise
        (a CuPy array for device rows on ``device="cuda"``)."""
        _, values, _, flat = self._prepare(X)
        out = self._output64(values)
        out = out[:, 0] if self.n_outputs == 1 else out
        return out[0] if flat else out

    # -- engine ------------------------------------------------------------------------------
    def weight_tables(self) -> WeightTables:
        """The per-path Shapley weight tables (built on first use, then kept)."""
        if self._weight_tables is None:
            from .treeshap import cached_tables

            self._weight_tables = cached_tables(self.table, self.max_table_bytes)
        return self._weight_tables

    def _chunk_rows(self, interactions: bool) -> int:
        n_background = self.data.shape[0] if self.feature_perturbation == "interventional" else None
        chunk = self._kernels.chunk_rows(self.table, self.n_outputs, interactions, n_background)
        if chunk is None:
            chunk = self._cpu_chunk_rows(interactions)
        if self.max_batch_bytes is not None:
            per_row = call_row_bytes(self.table, self.n_outputs, interactions, n_background)
            chunk = min(chunk, max(1, self.max_batch_bytes // per_row))
        return chunk

    def _cpu_chunk_rows(self, interactions: bool) -> int:
        """Rows a CPU engine call: about _CHUNK_COST units of work, enough for every thread."""
        from numba import get_num_threads

        table = self.table
        per_row = max(table.n_elements, 1)
        if interactions:
            k = table.path_lengths.mean() if table.n_paths else 1.0
            per_row *= max(k, 1.0) ** 2
            per_row += 8 * self.n_outputs * (table.n_features + 1) ** 2
        elif self.feature_perturbation == "interventional":
            per_row = max(table.n_paths, 1) * self.data.shape[0]
        rows = int(_CHUNK_COST / per_row)
        floor = 64 if interactions else 256 * max(get_num_threads(), 1)
        return max(floor, min(rows, 1 << 20))

    def _engine(self, rows, interactions: bool):
        """Contributions of a chunk of engine rows, in the rows' array module."""
        if interactions:
            res = self._kernels.interactions(self.table, rows, self._interaction_method)
        elif self.feature_perturbation == "tree_path_dependent":
            res = self._kernels.path_dependent(self.table, rows, self.algorithm, self.weight_tables)
        else:
            transform = "logistic" if self.model_output == "probability" else None
            res = self._kernels.interventional(self.table, rows, self._engine_rows(self.data), transform)
        return array_module(rows).asarray(res) if is_device_array(rows) else to_host(res)

    def _run(self, rows: np.ndarray, interactions: bool, progress, write) -> None:
        """Run the engine over row chunks, handing each (r0, r1, result) to ``write``."""
        n = rows.shape[0]
        chunk = self._chunk_rows(interactions)
        bar = _Progress(
            n,
            _progress_enabled(self.progress if progress is None else progress, n),
            "SHAP interaction values" if interactions else "SHAP values",
        )
        for r0 in range(0, n, chunk):
            r1 = min(n, r0 + chunk)
            write(r0, r1, self._engine(rows[r0:r1], interactions))
            bar.update(r1)

    def contributions(self, X: Any, *, interactions: bool = False, progress: bool | None = None) -> np.ndarray:
        """Engine layout, float64: ``(n, k, F + 1)`` (bias last) or, with ``interactions``,
        ``(n, k, F + 1, F + 1)``. Rows sum to the model's raw output."""
        if interactions:
            self._check_interactions()
        return self._contributions(self._prepare(X), interactions, progress)

    def _contributions(self, prepared, interactions: bool, progress) -> np.ndarray:
        rows = prepared[0]
        F = rows.shape[1]
        shape = (rows.shape[0], self.n_outputs) + ((F + 1, F + 1) if interactions else (F + 1,))
        out = array_module(rows).empty(shape, dtype=np.float64)

        def write(r0, r1, res):
            out[r0:r1] = res

        self._run(rows, interactions, progress, write)
        return out

    def _check_interactions(self) -> None:
        if self.feature_perturbation != "tree_path_dependent":
            raise DGBoostValueError(
                "SHAP interaction values are only defined here for "
                "feature_perturbation='tree_path_dependent' (as in shap)"
            )

    def shap_values(self, X: Any, *, check_additivity: bool = True, progress: bool | None = None) -> np.ndarray:
        """SHAP values, float64 ``(n, F)`` for one output, ``(n, F, k)`` for k outputs (bias
        not included: see :attr:`expected_value`); a 1-D ``X`` gives ``(F,)`` / ``(F, k)``.

        With ``check_additivity`` the row sums plus the expected value are checked against
        the model's raw output (:class:`AdditivityError` if they differ by more than 1e-6
        relative); it costs one prediction pass.
        """
        return self._shap_values(self._prepare(X), check_additivity, progress)

    def _shap_values(self, prepared, check_additivity: bool, progress) -> np.ndarray:
        rows, values, _, flat = prepared
        n, F = rows.shape
        G = self.n_outputs
        xp = array_module(rows)
        out = xp.empty((n, F, G), dtype=np.float64)
        total = xp.empty((n, G), dtype=np.float64) if check_additivity else None

        def write(r0, r1, res):
            out[r0:r1] = xp.moveaxis(res[:, :, :F], 1, 2)
            if total is not None:
                total[r0:r1] = res.sum(axis=2)

        self._run(rows, False, progress, write)
        if check_additivity:
            self._check_sums(total, values)
        out = out.reshape(n, F) if G == 1 else out
        return out[0] if flat else out

    def _check_sums(self, total, values) -> None:
        """``total`` (n, k) against the model's margins, both where the rows are."""
        xp = array_module(total)
        margin = self._output64(values)
        scale = 1.0 + xp.abs(margin) + xp.abs(xp.asarray(self._expected64()))[None, :]
        err = xp.abs(total - margin) / scale
        if err.size and float(err.max()) > 1e-6:
            r, g = np.unravel_index(int(xp.argmax(err)), err.shape)
            raise AdditivityError(
                f"SHAP values do not add up to the model output for row {r} (output {g}): "
                f"{float(total[r, g]):.9g} vs {float(margin[r, g]):.9g}; please report this with the model"
            )

    def shap_interaction_values(self, X: Any, *, progress: bool | None = None) -> np.ndarray:
        """SHAP interaction values, float64 ``(n, F, F)`` or ``(n, F, F, k)``; rows sum to
        the SHAP values, the diagonal holds the main effects."""
        self._check_interactions()
        return self._interactions(self._prepare(X), progress)

    def _interactions(self, prepared, progress) -> np.ndarray:
        rows, _, _, flat = prepared
        n, F = rows.shape
        G = self.n_outputs
        xp = array_module(rows)
        out = xp.empty((n, F, F, G), dtype=np.float64)

        def write(r0, r1, res):
            out[r0:r1] = xp.moveaxis(res[:, :, :F, :F], 1, 3)

        self._run(rows, True, progress, write)
        out = out.reshape(n, F, F) if G == 1 else out
        return out[0] if flat else out

    def shap_frame(self, X: Any, *, progress: bool | None = None) -> Any:
        """A pandas DataFrame of contributions: columns = feature names (X's, else the
        model's) + ``"bias"`` for one output, ``"<name>[<output>]"`` for several; X's index
        is kept. Usable as ``ddf.map_partitions(explainer.shap_frame)``."""
        import pandas as pd

        prepared = self._prepare(X)
        out = self._contributions(prepared, False, progress)
        F = out.shape[2] - 1
        names = prepared[2]
        cols = (list(names) if names is not None else self._names_for(F)) + ["bias"]
        index = X.index if hasattr(X, "index") and hasattr(X, "columns") else None
        if self.n_outputs > 1:
            labels = self.output_names if self.output_names is not None else range(self.n_outputs)
            cols = [f"{c}[{g}]" for g in labels for c in cols]
        out = out.reshape(out.shape[0], -1)
        if is_cudf_object(X):  # a cuDF frame in, a cuDF frame out
            import cudf

            return cudf.DataFrame({c: out[:, i] for i, c in enumerate(cols)}, index=index)
        return pd.DataFrame(to_host(out), columns=cols, index=index)

    def __call__(self, X, *, interactions: bool = False, check_additivity: bool = True, progress: bool | None = None):
        """A ``shap.Explanation`` (or :class:`Explanation` without shap) for ``X``, ready for
        ``shap.plots.beeswarm`` / ``waterfall``."""
        if interactions:
            self._check_interactions()
        prepared = self._prepare(X)
        if interactions:
            values = self._interactions(prepared, progress)
        else:
            values = self._shap_values(prepared, check_additivity, progress)
        _, raw, names, flat = prepared
        values = to_host(values)  # shap's Explanation holds NumPy arrays
        data = to_host(raw).astype(np.float64)
        data = data[0] if flat else data
        n = 1 if flat else values.shape[0]
        if self.n_outputs > 1:
            base = np.tile(self._expected64(), (n, 1))
        else:
            base = np.full(n, self._expected64()[0])
        if flat:
            base = base[0]
        fnames = list(names) if names is not None else self._names_for(raw.shape[1])
        try:
            import shap
        except ImportError:
            return Explanation(values, base, data, fnames, self.output_names)
        kwargs: dict[str, Any] = {"base_values": base, "data": data, "feature_names": fnames}
        if self.output_names is not None and not interactions:
            kwargs["output_names"] = [str(o) for o in self.output_names]
        return shap.Explanation(values, **kwargs)

    @property
    def fingerprint(self) -> str:
        """A hex digest of what determines this explainer's numbers (path table, method,
        background): equal explainers have equal fingerprints, in any process."""
        import hashlib

        digest = hashlib.sha256(self.table.fingerprint.encode())
        digest.update(
            f"{self.feature_perturbation}|{self.algorithm}|{self.max_table_bytes}|{self.model_output}".encode()
        )
        if self.data is not None:
            digest.update(np.ascontiguousarray(to_host(self.data)).tobytes())
        return digest.hexdigest()

    def __getstate__(self):
        state = self.__dict__.copy()
        # the weight tables are rebuilt where the explainer lands, once per process
        # (treeshap.cached_tables keys them by the path table's fingerprint)
        state["_weight_tables"] = None
        if self.feature_perturbation != "interventional":
            state["_expected"] = None  # the table's: made again at first use, as in a new explainer
        # the engine is made where the explainer lands, by the rule of every entry point (a
        # GPU explainer unpickled where no GPU is usable runs on the CPU, with a warning)
        state.pop("_kernels", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        device = state.get("device", "cpu")
        self.device = resolve_device(device if isinstance(device, (str, Device)) else "cpu")
        self._kernels = get_backend(self.device).shap_engine(self.max_table_bytes)  # the fingerprint's budget

    def __repr__(self) -> str:
        return (
            f"TreeExplainer({self.meta.get('source')} {self.meta.get('model_type')}, "
            f"{self.ensemble.n_trees} trees, {self.n_outputs} output(s), "
            f"feature_perturbation={self.feature_perturbation!r}, algorithm={self.algorithm!r})"
        )
