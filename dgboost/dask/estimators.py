"""scikit-learn estimators on Dask: the local estimators' parameters, trained by ``dgboost.dask.train``.

``DaskDGBRegressor``, ``DaskDGBClassifier`` and ``DaskDGBRanker`` take the parameters of
:class:`~dgboost.DGBRegressor` & co.; ``client`` is a property, as in ``xgboost.dask`` (None:
the default client). ``fit`` takes dask collections; ``predict`` / ``predict_proba`` return
lazy dask collections. The fitted booster is the same one the local estimator's training
would give on the concatenated rows.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .._array import array_module
from .._compat import is_cudf_object
from ..booster import Booster
from ..errors import DGBoostValueError
from ..params import TrainParams
from ..sklearn import DGBClassifier, DGBModel, DGBRanker, DGBRegressor
from ._matrix import DaskDMatrix
from ._waits import bounded_compute
from .prediction import frame_meta_like
from .prediction import predict as dask_predict
from .training import train as dask_train

__all__ = ["DaskDGBRegressor", "DaskDGBClassifier", "DaskDGBRanker"]


class _DaskEstimator:
    """What the three Dask estimators share: the client, fitting through DaskDMatrix."""

    _client = None

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` to train and predict with (None: the default client)."""
        if self._client is None:
            from distributed import default_client

            return default_client()
        return self._client

    @client.setter
    def client(self, value: Any) -> None:
        self._client = value

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_client", None)  # a Client does not travel with a pickled estimator
        return state

    def _dask_matrix(self, X, y=None, weight=None, base_margin=None, qid=None) -> DaskDMatrix:
        return DaskDMatrix(
            self.client,
            X,
            y,
            weight=weight,
            base_margin=base_margin,
            qid=qid,
            missing=self.missing,
            feature_types=self.feature_types,
            enable_categorical=self.enable_categorical,
        )

    def _dask_evals(self, eval_set, sample_weight_eval_set, base_margin_eval_set, qid_eval_set=None):
        evals = []
        for i, (Xe, ye) in enumerate(eval_set or []):
            we = sample_weight_eval_set[i] if sample_weight_eval_set else None
            be = base_margin_eval_set[i] if base_margin_eval_set else None
            qe = qid_eval_set[i] if qid_eval_set else None
            evals.append((self._dask_matrix(Xe, self._encode_dask_y(ye), we, be, qe), f"validation_{i}"))
        return evals

    def _encode_dask_y(self, y, fitting: bool = False):
        return y

    def _fit_params(self) -> dict:
        """The training parameters of one ``fit`` (made once: a RandomState seed is drawn here)."""
        return self._train_params()

    def _checked_fit_params(self) -> TrainParams:
        """:meth:`_fit_params` parsed once, on the client, before any partition is computed;
        ``dgboost.dask.train`` ships this object to the workers as it is."""
        return self._parsed_params(self._fit_params())

    def _dask_fit(self, dtrain: DaskDMatrix, X, evals, verbose, xgb_model, p: TrainParams):
        out = dask_train(
            self.client,
            p,
            dtrain,
            num_boost_round=self.n_estimators,
            evals=evals,
            custom_metric=self._custom_metric(),
            obj=self._custom_objective(),
            early_stopping_rounds=self.early_stopping_rounds,
            verbose_eval=verbose,
            xgb_model=self._start_model(xgb_model),
            callbacks=list(self.callbacks or ()),
        )
        self._Booster = out["booster"]
        self.evals_result_ = out["history"] if evals else {}
        self._set_feature_info(X, dtrain.n_features)
        self._early_stopping_used = self.early_stopping_rounds is not None and bool(evals)
        self._keep_state(self._Booster)
        return self

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        sample_weight: Any = None,
        base_margin: Any = None,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        sample_weight_eval_set: Sequence[Any] | None = None,
        base_margin_eval_set: Sequence[Any] | None = None,
        verbose: bool | int = False,
        xgb_model: Booster | DGBModel | str | os.PathLike | None = None,
    ) -> DGBModel:
        """Train on dask collections ``X`` (Array or DataFrame) and ``y``; see :meth:`DGBModel.fit`.

        Returns
        -------
        DGBModel
            ``self``, fitted.
        """
        y = self._encode_dask_y(y, fitting=True)  # a classifier's class count is a parameter
        p = self._checked_fit_params()
        dtrain = self._dask_matrix(X, y, sample_weight, base_margin)
        evals = self._dask_evals(eval_set, sample_weight_eval_set, base_margin_eval_set)
        return self._dask_fit(dtrain, X, evals, verbose, xgb_model, p)

    def _iteration_range_for(self, iteration_range):
        r = self._iteration_range(iteration_range)
        return (0, 0) if r is None else r

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> Any:
        """Lazy predictions of a dask Array or DataFrame (margins with ``output_margin``)."""
        if base_margin is not None:
            from .prediction import inplace_predict

            return inplace_predict(
                self.client,
                self.get_booster(),
                X,
                iteration_range=self._iteration_range_for(iteration_range),
                predict_type="margin" if output_margin else "value",
                missing=self.missing,
                validate_features=validate_features,
                base_margin=base_margin,
            )
        return dask_predict(
            self.client,
            self.get_booster(),
            X,
            output_margin=output_margin,
            validate_features=validate_features,
            iteration_range=self._iteration_range_for(iteration_range),
        )

    def apply(self, X: Any, iteration_range: tuple[int, int] | None = None) -> Any:
        """Lazy leaf indices, (n, trees)."""
        return dask_predict(
            self.client,
            self.get_booster(),
            X,
            pred_leaf=True,
            iteration_range=self._iteration_range_for(iteration_range),
        )


class DaskDGBRegressor(_DaskEstimator, DGBRegressor):
    """:class:`~dgboost.DGBRegressor` on Dask (``xgboost.dask.DaskXGBRegressor``)."""


class DaskDGBClassifier(_DaskEstimator, DGBClassifier):
    """:class:`~dgboost.DGBClassifier` on Dask (``xgboost.dask.DaskXGBClassifier``).

    The classes are found with one pass over ``y`` (``unique``) when ``fit`` starts.
    """

    def _encode_dask_y(self, y, fitting: bool = False):
        import dask.array as da

        if fitting:
            # drop_duplicates into one partition: a Series' unique() shuffles (and logs shuffle warnings)
            unique = y.drop_duplicates(split_out=1) if hasattr(y, "drop_duplicates") else da.unique(y)
            classes = np.asarray(bounded_compute(self.client, unique, "the classes of y (unique labels)"))
            classes = np.sort(classes[~_isnan(classes)]) if classes.dtype.kind == "f" else np.sort(classes)
            if len(classes) < 2:
                raise DGBoostValueError(f"y has {len(classes)} class(es): a classifier needs at least 2")
            self.classes_ = classes
            self.n_classes_ = len(classes)
        classes = self.classes_
        if classes.dtype.kind in "iuf" and np.array_equal(classes, np.arange(len(classes))):
            return y  # already 0..k-1: nothing to encode
        return (
            y.map_partitions(_encode_block, classes)
            if hasattr(y, "map_partitions") and not hasattr(y, "chunks")
            else y.map_blocks(_encode_block, classes, dtype=np.float64)
        )

    def _fit_params(self) -> dict:
        return self._class_params()[0]

    def predict_proba(
        self,
        X: Any,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> Any:
        """Lazy class probabilities, (n, n_classes)."""
        import dask.array as da

        p = dask_predict(
            self.client,
            self.get_booster(),
            X,
            validate_features=validate_features,
            iteration_range=self._iteration_range_for(iteration_range),
            strict_shape=True,
        )
        if not isinstance(p, da.Array):
            p = p.to_dask_array(lengths=True)
        if p.shape[1] == 1:
            return p.map_blocks(_two_class_block, chunks=(p.chunks[0], (2,)), dtype=np.float32, meta=p._meta)
        return p

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> Any:
        """Lazy class labels (from ``classes_``), or margins with ``output_margin``.

        Returns
        -------
        dask Series or Array
            For a dask DataFrame, a Series with its index and divisions (as
            :func:`dgboost.dask.predict`); for a dask Array, an Array with its row chunks.
        """
        import dask.dataframe as dd

        if output_margin:
            return super().predict(
                X,
                output_margin=True,
                validate_features=validate_features,
                base_margin=base_margin,
                iteration_range=iteration_range,
            )
        classes = self.classes_
        if isinstance(X, dd.DataFrame):
            import pandas as pd

            proba = dask_predict(
                self.client,
                self.get_booster(),
                X,
                validate_features=validate_features,
                iteration_range=self._iteration_range_for(iteration_range),
                strict_shape=True,
            )  # a DataFrame with X's index
            meta = frame_meta_like(pd.Series(np.empty(0, classes.dtype)), X)
            return proba.map_partitions(_label_partition, classes, meta=meta)
        proba = self.predict_proba(X, validate_features=validate_features, iteration_range=iteration_range)
        return proba.map_blocks(
            _label_block,
            classes,
            drop_axis=1,
            dtype=classes.dtype,
            meta=array_module(proba._meta).empty((0,), classes.dtype),
        )


class DaskDGBRanker(_DaskEstimator, DGBRanker):
    """:class:`~dgboost.DGBRanker` on Dask (``xgboost.dask.DaskXGBRanker``): ``qid`` per row,
    sorted, each query within one partition."""

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        qid: Any = None,
        sample_weight: Any = None,
        base_margin: Any = None,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        eval_qid: Sequence[Any] | None = None,
        sample_weight_eval_set: Sequence[Any] | None = None,
        base_margin_eval_set: Sequence[Any] | None = None,
        verbose: bool | int = False,
        xgb_model: Booster | DGBModel | str | os.PathLike | None = None,
        group: Any = None,
    ) -> DaskDGBRanker:
        """Train on dask collections with a query id per row (``qid``).

        Returns
        -------
        DaskDGBRanker
            ``self``, fitted.
        """
        if group is not None or qid is None:
            raise DGBoostValueError(
                "DaskDGBRanker.fit needs qid (a dask Array/Series, a query id per row); "
                "group sizes are not supported on Dask"
            )
        p = self._checked_fit_params()
        dtrain = self._dask_matrix(X, y, sample_weight, base_margin, qid)
        evals = self._dask_evals(eval_set, sample_weight_eval_set, base_margin_eval_set, eval_qid)
        return self._dask_fit(dtrain, X, evals, verbose, xgb_model, p)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def _two_class_block(b):
    """(n, 1) probabilities of class 1 -> (n, 2) float32, in the block's array module."""
    xp = array_module(b)
    return xp.stack([1.0 - b[:, 0], b[:, 0]], axis=1).astype(np.float32)


def _label_block(b, classes: np.ndarray):
    """(n, k) probabilities -> (n,) labels from ``classes``, in the block's array module."""
    xp = array_module(b)
    return xp.asarray(classes)[xp.argmax(b, axis=1)]


def _label_partition(frame, classes: np.ndarray):
    """Probabilities of one DataFrame partition ((n, 1) for two classes, else (n, k)) -> a Series
    of labels from ``classes`` with the partition's index (pandas, or cuDF for cuDF partitions)."""
    if is_cudf_object(frame):
        import cudf as frames

        values = frame.values  # a CuPy matrix
    else:
        import pandas as frames

        values = frame.to_numpy()
    if values.shape[1] == 1:
        values = _two_class_block(values)
    return frames.Series(_label_block(values, classes), index=frame.index)


def _encode_block(y, classes):
    """Class labels -> 0..k-1 (float64), for one block; unknown labels become NaN (refused later)."""
    values = np.asarray(y)
    idx = np.minimum(np.searchsorted(classes, values), len(classes) - 1)
    out = idx.astype(np.float64)
    out[classes[idx] != values] = np.nan
    if hasattr(y, "index"):
        import pandas as pd

        return pd.Series(out, index=y.index, name=getattr(y, "name", None))
    return out
