"""Booster: a trained model; prediction, feature checks, saving and loading.

The model itself is an :class:`~dgboost.tree.Ensemble` plus a small metadata dict (the
objective, base score, feature names, best iteration, training parameters): the same
``meta`` layout that :mod:`dgboost.model_io` writes to JSON.
"""

from __future__ import annotations

import os
from typing import IO, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ._array import is_device_array
from .backend import array_backend, get_backend
from .data import DMatrix, rows_for_model, small_to_host
from .device import resolve_device
from .errors import DGBoostTypeError, DGBoostValueError, ParameterError
from .params import OBJECTIVES, normalize_device
from .tree import Ensemble

__all__ = ["Booster"]


class Booster:
    """A gradient-boosted tree model.

    Parameters
    ----------
    params : dict, optional
        Ignored apart from ``nthread``/``device`` used for prediction (XGBoost compatibility);
        see :meth:`set_param`.
    model_file : str or os.PathLike or bytes or bytearray, optional
        A model file dgboost or XGBoost wrote, JSON or UBJSON (a path, or the file's bytes
        as ``save_raw`` gives them), to load.

    Notes
    -----
    Where prediction runs: CuPy / cuDF input is predicted on its GPU and gives CuPy
    arrays; other input is predicted on the booster's ``device`` (set with
    :meth:`set_param`, else the device it was trained with) and gives NumPy arrays. When
    that device is a GPU and none is usable, prediction warns once and runs on the CPU,
    so models move freely between GPU and CPU-only machines.
    """

    def __init__(
        self, params: dict | None = None, model_file: str | os.PathLike | bytes | bytearray | None = None
    ) -> None:
        self.ensemble = Ensemble(1, 0.0)
        self.meta: dict[str, Any] = _default_meta()
        self._predict_params: dict[str, Any] = {}
        self.set_param(dict(params or {}))
        if model_file is not None:
            self.load_model(model_file)

    def set_param(self, params: Mapping[str, Any] | str | Iterable[tuple[str, Any]], value: Any = None) -> None:
        """Set prediction parameters, as ``xgboost.Booster.set_param``.

        Parameters
        ----------
        params : dict or str or iterable of (str, value) pairs
            ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"gpu"``) and ``nthread``
            (alias ``n_jobs``) change where and how :meth:`predict` runs; other names are
            kept and ignored (the model is already trained).
        value : optional
            The value when ``params`` is a single name.

        Raises
        ------
        ParameterError
            For an invalid device string.
        """
        if isinstance(params, str):
            items = [(params, value)]
        elif isinstance(params, dict):
            items = list(params.items())
        else:
            items = list(params)
        for key, val in items:
            key = "nthread" if key == "n_jobs" else key
            if key == "device" and val is not None:
                val = normalize_device(val)
            if val is None:
                self._predict_params.pop(key, None)
            else:
                self._predict_params[key] = val

    # -- construction from training ---------------------------------------------------------
    @classmethod
    def _from_training(
        cls,
        ensemble,
        params,
        objective,
        base_score,
        feature_names,
        feature_types,
        n_features,
        previous=None,
        categories=None,
    ) -> "Booster":
        b = cls()
        b.ensemble = ensemble
        meta = _default_meta()
        meta.update(previous.meta if previous is not None else {})
        meta.update(
            {
                "objective": objective.name if hasattr(objective, "name") else "custom",
                "objective_params": _objective_params(params),
                "base_score": base_score if isinstance(base_score, list) else float(base_score),
                "num_class": params.num_class if ensemble.n_groups > 1 else 0,
                "num_feature": int(n_features),
                "feature_names": list(feature_names) if feature_names is not None else None,
                "feature_types": list(feature_types) if feature_types is not None else None,
                "params": params.to_dict(),
            }
        )
        if categories is not None:
            # per feature: None, or the category values in code order (DMatrix.category_values);
            # only models with categorical features carry the key
            meta["categories"] = list(categories)
        b.meta = meta
        return b

    def _set_ensemble(self, ensemble) -> None:
        self.ensemble = ensemble

    def _set_best(self, best_round, best_score) -> None:
        self.meta["best_iteration"] = None if best_round is None else int(best_round)
        self.meta["best_score"] = None if best_score is None else float(best_score)

    # -- properties -----------------------------------------------------------------------
    @property
    def feature_names(self) -> list[str] | None:
        return self.meta.get("feature_names")

    @feature_names.setter
    def feature_names(self, names: Sequence[str] | None) -> None:
        if names is not None and len(names) != self.num_features():
            raise DGBoostValueError(f"{len(names)} feature names for {self.num_features()} features")
        self.meta["feature_names"] = None if names is None else [str(n) for n in names]

    @property
    def feature_types(self) -> list[str] | None:
        return self.meta.get("feature_types")

    @property
    def best_iteration(self) -> int:
        """The best round (0-based, counting the rounds of a continued model) by the last metric
        of the last evaluation set; set by training with evaluation sets and by
        :class:`~dgboost.callback.EarlyStopping`. AttributeError when not set."""
        best = self.meta.get("best_iteration")
        if best is None:
            raise AttributeError("best_iteration is only set when training used evaluation sets")
        return best

    @best_iteration.setter
    def best_iteration(self, value: int | None) -> None:
        self.meta["best_iteration"] = None if value is None else int(value)

    @property
    def best_score(self) -> float:
        """The score of :attr:`best_iteration`. AttributeError when not set."""
        best = self.meta.get("best_score")
        if best is None:
            raise AttributeError("best_score is only set when training used evaluation sets")
        return best

    @best_score.setter
    def best_score(self, value: float | None) -> None:
        self.meta["best_score"] = None if value is None else float(value)

    def num_features(self) -> int:
        return int(self.meta.get("num_feature") or 0)

    def _trees_per_round(self) -> int:
        from .model_io import trees_per_round

        return trees_per_round(self.meta, self.ensemble.n_groups)

    def num_boosted_rounds(self) -> int:
        return self.ensemble.n_trees // self._trees_per_round()

    def attr(self, key: str) -> str | None:
        """The attribute ``key`` as a string, or None when it is not set (``xgboost.Booster.attr``)."""
        return self.attributes().get(key)

    def set_attr(self, **kwargs: Any) -> None:
        """Set attributes (values are kept as strings; None deletes), as ``xgboost.Booster.set_attr``.

        ``best_iteration`` and ``best_score`` set (or clear) :attr:`best_iteration` and
        :attr:`best_score`, as in XGBoost, where they are attributes too.

        Raises
        ------
        DGBoostValueError
            When ``best_iteration`` is not an integer or ``best_score`` not a number.
        """
        attrs = self.meta.setdefault("attributes", {})
        for k, v in kwargs.items():
            if k in _BEST_ATTRIBUTES:
                self._set_best_attribute(k, v)
            elif v is None:
                attrs.pop(k, None)
            else:
                attrs[k] = str(v)

    def _set_best_attribute(self, key: str, value: Any) -> None:
        kind = int if key == "best_iteration" else float
        try:
            self.meta[key] = None if value is None else kind(str(value))
        except ValueError:
            raise DGBoostValueError(
                f"attribute {key} must be a{'n integer' if kind is int else ' number'}, got {value!r}"
            ) from None

    def attributes(self) -> dict[str, str]:
        """Every attribute as strings, ``best_iteration`` and ``best_score`` (after training with
        evaluation sets) included, as ``xgboost.Booster.attributes``."""
        out = {str(k): str(v) for k, v in self.meta.get("attributes", {}).items()}
        for key in _BEST_ATTRIBUTES:
            value = self.meta.get(key)
            if value is not None:
                out[key] = str(value)  # str(float) is Python's repr, as XGBoost's Python package stores it
        return out

    def copy(self) -> "Booster":
        import copy

        b = Booster()
        b.ensemble = self.ensemble.copy()
        b.meta = copy.deepcopy(self.meta)
        b._predict_params = dict(self._predict_params)  # where it predicts goes with the model
        return b

    def __getitem__(self, item: slice) -> "Booster":
        """Slice by boosting rounds: ``booster[2:5]`` keeps rounds 2, 3 and 4."""
        if not isinstance(item, slice) or item.step not in (None, 1):
            raise DGBoostTypeError("a Booster can only be sliced by rounds with step 1, e.g. booster[0:10]")
        begin, end, _ = item.indices(self.num_boosted_rounds())
        b = self.copy()
        per = self._trees_per_round()
        b.ensemble = self.ensemble.slice(begin * per, max(begin, end) * per)
        b.meta["best_iteration"] = None
        b.meta["best_score"] = None
        return b

    # -- prediction -----------------------------------------------------------------------
    def _objective(self):
        from .objective import get_objective
        from .params import parse_params

        params = {"objective": self.meta["objective"], "num_class": self.meta.get("num_class") or 0}
        for key in ("huber_slope", "scale_pos_weight", "tweedie_variance_power", "quantile_alpha"):
            if key in self.meta.get("objective_params", {}):
                params[key] = self.meta["objective_params"][key]
        if params["objective"] not in _KNOWN_OBJECTIVES:
            return None
        return get_objective(parse_params(params))

    def _features(self, data, validate_features: bool = True) -> np.ndarray:
        # a category column is re-coded to the model's categories (docs/categorical.md)
        values, names = rows_for_model(data, self.feature_types, self.meta.get("categories"))
        n = self.num_features()
        if n and values.shape[1] != n:
            raise DGBoostValueError(f"data has {values.shape[1]} features but the model was trained with {n}")
        mine = self.feature_names
        if validate_features and mine is not None and names is not None and list(names) != list(mine):
            missing = [m for m in mine if m not in names][:3]
            extra = [m for m in names if m not in mine][:3]
            detail = f"expected {mine[:5]}..., " if not missing and not extra else ""
            raise DGBoostValueError(
                f"feature names differ from the model's: {detail}missing {missing}, unexpected {extra}"
            )
        return values

    def _tree_range(self, iteration_range) -> tuple[int, int]:
        per = self._trees_per_round()
        if iteration_range is None or tuple(iteration_range) == (0, 0):
            return 0, self.ensemble.n_trees
        begin, end = (int(v) for v in iteration_range)
        rounds = self.num_boosted_rounds()
        if not 0 <= begin <= end <= rounds:
            raise DGBoostValueError(f"iteration_range {iteration_range} is outside the model's 0..{rounds} rounds")
        return begin * per, end * per

    def _prediction_device(self) -> str:
        """The device asked for: :meth:`set_param`'s, else the training parameters'."""
        device = self._predict_params.get("device")
        if device is not None:
            return device
        stored = (self.meta.get("params") or {}).get("device", "cpu")
        try:
            return normalize_device(stored)
        except ParameterError:
            # a model file from elsewhere may carry a device string we do not know: the
            # model itself does not depend on it, so predict where it always works
            return "cpu"

    def _prediction_backend(self, values):
        """The backend that predicts ``values`` (a NumPy or CuPy float32 (n, F) matrix).

        Device data is predicted where it lives. Host data goes to the requested device, by
        the rule of every entry point (:func:`dgboost.device.resolve_device`: a GPU that is
        not usable here gives the CPU, with one warning per booster and device).
        """
        nthread = int(self._predict_params.get("nthread", 0) or 0)
        if is_device_array(values):
            return array_backend(values, nthread)
        requested = self._prediction_device()
        resolved = getattr(self, "_resolved_device", None)
        if resolved is None or resolved[0] != requested:
            resolved = self._resolved_device = (requested, resolve_device(requested))
        return get_backend(resolved[1], nthread)

    def predict(
        self,
        data: Any,
        output_margin: bool = False,
        pred_leaf: bool = False,
        pred_contribs: bool = False,
        approx_contribs: bool = False,
        pred_interactions: bool = False,
        validate_features: bool = True,
        training: bool = False,
        iteration_range: tuple[int, int] | None = None,
        strict_shape: bool = False,
        base_margin: Any = None,
    ) -> Any:
        """Predict for ``data`` (a DMatrix or anything :class:`DMatrix` accepts).

        Runs on the data's GPU for CuPy / cuDF data (or a DMatrix made from them), else
        on the booster's ``device`` (see :meth:`set_param`; the CPU, with a warning, when
        no GPU is usable). ``approx_contribs`` with ``pred_contribs`` (or
        ``pred_interactions``) gives XGBoost's approximate contributions instead of SHAP
        values (:mod:`dgboost.explain.saabas`; computed on the host).

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            float32 predictions (n,) or (n, n_groups) for multi-output models; margins with
            ``output_margin``; int32 leaf indices (n, n_trees) with ``pred_leaf``; SHAP
            values (n, F+1) / (n, n_groups, F+1) with ``pred_contribs``; interaction values
            (n, F+1, F+1) / (n, n_groups, F+1, F+1) with ``pred_interactions``. A CuPy
            array on the data's GPU for device data, a NumPy array otherwise (SHAP and
            interaction values are computed on the GPU for device data or ``device="cuda"``).
        """
        values = self._features(data, validate_features)
        t0, t1 = self._tree_range(iteration_range)
        if isinstance(data, DMatrix) and data.base_margin is not None and base_margin is None:
            base_margin = data.base_margin
        if approx_contribs and (pred_contribs or pred_interactions):
            return self._approx_contributions(values, t0, t1, base_margin, pred_interactions)
        if pred_contribs or pred_interactions:
            from .explain.api import booster_contributions

            backend = self._prediction_backend(values)
            return booster_contributions(
                self,
                values,
                t0,
                t1,
                engine=backend.shap_engine(),
                interactions=pred_interactions,
                base_margin=small_to_host(base_margin),
            )
        on_device = is_device_array(values)
        backend = self._prediction_backend(values)
        values = backend.asarray(values)
        if pred_leaf:
            leaves = backend.predict_leaf(self.ensemble, values, t0, t1)
            return leaves if on_device else backend.to_host(leaves)
        xp = backend.xp
        n, n_groups = values.shape[0], self.ensemble.n_groups
        # a fresh buffer: predict_margin adds into it, and must never write into the
        # caller's (or the DMatrix's) base_margin
        margin = xp.empty((n, n_groups), xp.float32)
        if base_margin is not None:
            margin[...] = backend.asarray(self._row_base_margins(base_margin, n))
        else:
            margin[...] = backend.asarray(self.ensemble.base_margin.astype(np.float32))
        backend.predict_margin(self.ensemble, values, t0, t1, margin)
        if output_margin:
            out = margin
        else:
            objective = self._objective()
            out = margin if objective is None else objective.transform(margin)
        if strict_shape and out.ndim == 1:
            out = out[:, None]
        if out.ndim == 2 and out.shape[1] == 1 and not strict_shape:
            out = out[:, 0]
        return out if on_device else backend.to_host(out)

    def _row_base_margins(self, base_margin, n: int) -> np.ndarray:
        """A caller's ``base_margin`` as float32 (n, n_groups) on the host, its width checked."""
        bm = np.asarray(small_to_host(base_margin), np.float32).reshape(n, -1)
        if bm.shape[1] != self.ensemble.n_groups:
            raise DGBoostValueError(
                f"base_margin has {bm.shape[1]} columns, the model has {self.ensemble.n_groups} outputs"
            )
        return bm

    def _approx_contributions(self, values, t0: int, t1: int, base_margin, interactions: bool) -> Any:
        """XGBoost's ``approx_contribs`` (:mod:`dgboost.explain.saabas`), float32, in
        :meth:`predict`'s layout; with ``interactions``, as XGBoost: the approximate
        contributions on the diagonal, zeros elsewhere. Computed on the host."""
        from .explain.saabas import approx_contributions

        on_device = is_device_array(values)
        backend = self._prediction_backend(values)
        leaves = np.asarray(backend.to_host(backend.predict_leaf(self.ensemble, backend.asarray(values), t0, t1)))
        n, F, G = leaves.shape[0], values.shape[1], self.ensemble.n_groups
        if base_margin is not None:
            bm = self._row_base_margins(base_margin, n)
        else:
            bm = np.broadcast_to(self.ensemble.base_margin.astype(np.float32), (n, G))
        out = approx_contributions(self.ensemble, leaves, t0, F, bm)
        if interactions:
            square = np.zeros(out.shape + (F + 1,), dtype=np.float32)
            diagonal = np.arange(F + 1)
            square[:, :, diagonal, diagonal] = out
            out = square
        if G == 1:
            out = out[:, 0]
        if on_device:
            import cupy

            return cupy.asarray(out)
        return out

    def inplace_predict(
        self,
        data: Any,
        iteration_range: tuple[int, int] | None = None,
        predict_type: str = "value",
        missing: float = np.nan,
        validate_features: bool = True,
        base_margin: Any = None,
        strict_shape: bool = False,
    ) -> Any:
        """Predict ``data`` without a separate DMatrix step (XGBoost's ``inplace_predict``).

        CuPy / cuDF input is predicted on its GPU and gives a CuPy array; other input
        gives a NumPy array (see :meth:`predict`). ``predict_type`` is ``"value"`` or
        ``"margin"``.
        """
        dm = DMatrix(data, missing=missing)
        return self.predict(
            dm,
            output_margin=predict_type == "margin",
            iteration_range=iteration_range,
            validate_features=validate_features,
            base_margin=base_margin,
            strict_shape=strict_shape,
        )

    # -- persistence ----------------------------------------------------------------------
    def save_model(self, fname: str | os.PathLike) -> None:
        """Write the model file (atomically: a temporary file, then a rename).

        Parameters
        ----------
        fname : str or os.PathLike
            A ``.json`` path gives JSON text, a ``.ubj`` path UBJSON, and any other name
            UBJSON with XGBoost's warning (as ``xgboost.Booster.save_model``). The file is
            XGBoost's schema, so ``xgboost.Booster(model_file=fname)`` loads it and predicts
            as this booster does; what XGBoost has no place for (training parameters, exact
            base margins and covers) is kept in a top-level ``"dgboost"`` key that XGBoost
            ignores (see :mod:`dgboost.model_io`). Loading the file back gives the same
            predictions and saving it again gives the same bytes.

        Raises
        ------
        ModelFormatError
            For invalid models.
        """
        from .model_io import save_model

        save_model(os.fspath(fname), self.ensemble, self.meta)

    def load_model(self, fname: str | os.PathLike | bytes | bytearray) -> None:
        """Load a model file (a path, or the file's bytes).

        Parameters
        ----------
        fname : str or os.PathLike or bytes or bytearray
            A file :meth:`save_model` or :meth:`save_raw` wrote, one older dgboost versions
            wrote (dgboost's schema 1), or an XGBoost model file, JSON or UBJSON: the
            encoding is told from the content, not the name.

        Raises
        ------
        ModelFormatError
            For anything else, naming what is wrong (e.g. an unknown objective).
        """
        from .model_io import load_model, model_from_json

        if isinstance(fname, (bytes, bytearray)):
            self.ensemble, meta = model_from_json(bytes(fname))
        else:
            self.ensemble, meta = load_model(os.fspath(fname))
        self.meta = {**_default_meta(), **meta}

    def save_raw(self, raw_format: str = "ubj") -> bytearray:
        """The model file's bytes, as ``xgboost.Booster.save_raw``.

        Parameters
        ----------
        raw_format : {"ubj", "json"}
            UBJSON (the default, as in XGBoost 3.4) or JSON text: the bytes
            :meth:`save_model` writes to a ``.ubj`` / ``.json`` file, which
            ``xgboost.Booster().load_model(raw)`` and :meth:`load_model` load.

        Raises
        ------
        DGBoostValueError
            For another format (XGBoost 3 refuses ``"deprecated"`` too).
        """
        from .model_io import model_file_bytes

        return bytearray(model_file_bytes(self.ensemble, self.meta, raw_format))

    def to_json(self) -> str:
        """dgboost's internal text form of the model (schema 1, deterministic): for comparing
        models; :meth:`save_raw` gives what XGBoost loads."""
        from .model_io import model_to_json

        return model_to_json(self.ensemble, self.meta)

    def export_xgboost_json(self, fname: str | os.PathLike) -> None:
        """Write the model in XGBoost's JSON format (loadable by ``xgboost.Booster(model_file=...)``)."""
        from .model_io import export_xgboost_json

        export_xgboost_json(os.fspath(fname), self.ensemble, self.meta)

    @classmethod
    def from_xgboost(cls, model: Any) -> "Booster":
        """Import an ``xgboost.Booster``, an XGBoost sklearn model, or an XGBoost model file (JSON or UBJSON)."""
        from .model_io import import_xgboost_booster

        b = cls()
        if hasattr(model, "get_booster"):
            model = model.get_booster()
        if hasattr(model, "save_raw"):
            b.ensemble, meta = import_xgboost_booster(model)
            b.meta = {**_default_meta(), **meta}
        else:
            b.load_model(model)
        return b

    def get_dump(self, fmap: str | os.PathLike = "", with_stats: bool = False, dump_format: str = "text") -> list[str]:
        """One string per tree, as ``xgboost.Booster.get_dump`` (``"text"`` or ``"json"``)."""
        if dump_format == "json":
            from ._booster_inspect import dump_json

            return dump_json(self, fmap, with_stats)
        if dump_format != "text":
            raise DGBoostValueError(f"dump_format must be 'text' or 'json', got {dump_format!r}")
        from .model_io import dump_text

        return dump_text(self.ensemble, self.meta, with_stats=with_stats)

    def dump_model(
        self,
        fout: str | os.PathLike | IO[str],
        fmap: str | os.PathLike = "",
        with_stats: bool = False,
        dump_format: str = "text",
    ) -> None:
        """Write :meth:`get_dump`'s trees to a file, as ``xgboost.Booster.dump_model``.

        Parameters
        ----------
        fout : str or os.PathLike or text file object
            A path (written as UTF-8) or an open text stream (written to, left open).
        fmap, with_stats, dump_format
            As for :meth:`get_dump` (``"text"`` or ``"json"``).

        Notes
        -----
        The layout is XGBoost's: text dumps as ``booster[i]:`` lines each followed by tree
        ``i``; JSON dumps as one JSON array of the trees.
        """
        from ._booster_inspect import write_dump

        write_dump(fout, self.get_dump(fmap, with_stats, dump_format), dump_format)

    def to_xgboost(self) -> Any:
        """This model as an ``xgboost.Booster`` (through the model bytes), e.g. for
        ``shap.TreeExplainer``, which reads XGBoost boosters but not dgboost's.

        Returns
        -------
        xgboost.Booster
            Predicts as this booster does (to float32 rounding); SHAP values of
            ``shap.TreeExplainer(booster.to_xgboost())`` equal :meth:`predict` with
            ``pred_contribs=True`` (without its bias column).
        """
        import xgboost

        return xgboost.Booster(model_file=self.save_raw(raw_format="ubj"))  # typed arrays: the fast path

    def get_fscore(self, fmap: str | os.PathLike = "") -> dict[str, float]:
        """Split counts per feature (``get_score(importance_type="weight")``)."""
        return self.get_score(fmap, importance_type="weight")

    def get_score(self, fmap: str | os.PathLike = "", importance_type: str = "weight") -> dict[str, float]:
        """Feature importance as ``xgboost.Booster.get_score``: ``weight`` (split count),
        ``gain`` / ``cover`` (mean per split), ``total_gain`` / ``total_cover``. Features no
        split uses are left out."""
        from ._booster_inspect import feature_score

        return feature_score(self, fmap, importance_type)

    def trees_to_dataframe(self, fmap: str | os.PathLike = "") -> Any:
        """One row per tree node as a pandas DataFrame (``xgboost.Booster.trees_to_dataframe``:
        columns Tree, Target, Node, ID, Feature, Split, Yes, No, Missing, Gain, Cover, Category)."""
        from ._booster_inspect import trees_dataframe

        return trees_dataframe(self, fmap)

    # -- training steps -------------------------------------------------------------------
    def update(self, dtrain: DMatrix, iteration: int, fobj: Callable | None = None) -> None:
        """Boost one round on ``dtrain`` (with the custom objective ``fobj``, if given) and
        append it to this model, as ``xgboost.Booster.update``.

        ``n`` calls give the model ``train(..., num_boost_round=n)`` gives. The booster keeps
        its training job (cuts, binned rows, margins) between calls while the same ``dtrain``
        object is passed, the model's trees are not changed in between (``load_model``,
        slicing) and the training parameters stay equal (a new ``eta`` is taken as it is); a
        ``dtrain`` whose values or labels are changed in place is not noticed. Otherwise the
        job is made again. ``iteration`` is accepted for compatibility; the round number is
        the model's :meth:`num_boosted_rounds`.

        Parameters
        ----------
        dtrain : DMatrix
        iteration : int
            Ignored (XGBoost's round counter).
        fobj : callable, optional
            ``fobj(margin, dtrain) -> (grad, hess)``.
        """
        from ._booster_inspect import train_one_round

        train_one_round(self, dtrain, fobj)

    def boost(
        self, dtrain: DMatrix, iteration: int, grad: Any = None, hess: Any = None, fobj: Callable | None = None
    ) -> None:
        """Boost one round from the given gradient and hessian (``(n,)`` or ``(n, k)``), or
        from ``fobj(margin, dtrain) -> (grad, hess)``, as ``xgboost.Booster.boost``.

        Parameters
        ----------
        dtrain : DMatrix
        iteration : int
            Ignored (XGBoost's round counter).
        grad, hess : array-like of float32, optional
            One value per row and output group.
        fobj : callable, optional
            Instead of ``grad`` and ``hess``.
        """
        from ._booster_inspect import boost_gradients, train_one_round

        if grad is not None and hess is not None and fobj is not None:
            raise DGBoostValueError("Provide either the objective, or the gradient and hessian, not both.")
        if grad is not None or hess is not None:
            if grad is None or hess is None:
                raise DGBoostValueError("boost needs both grad and hess")
            boost_gradients(self, dtrain, grad, hess)
        elif fobj is not None:
            train_one_round(self, dtrain, fobj)
        else:
            raise DGBoostValueError(
                "Invalid input for the boost function. Either the gradient or the objective should have a valid value."
            )

    def eval_set(
        self,
        evals: Sequence[tuple[DMatrix, str]],
        iteration: int = 0,
        feval: Callable | None = None,
        output_margin: bool = True,
    ) -> str:
        """XGBoost's evaluation string ``[iteration]\tname-metric:value...`` for every
        (DMatrix, name) pair and every metric of the model (``eval_metric``, else the
        objective's default), then ``feval``'s, as ``xgboost.Booster.eval_set``."""
        from ._booster_inspect import eval_set

        return eval_set(self, evals, iteration, feval, output_margin)

    def eval(self, data: DMatrix, name: str = "eval", iteration: int = 0) -> str:
        """``eval_set([(data, name)], iteration)``."""
        return self.eval_set([(data, name)], iteration)

    # -- configuration --------------------------------------------------------------------
    def save_config(self) -> str:
        """The learner's parameters as a JSON string (XGBoost's ``save_config`` layout)."""
        from ._booster_inspect import save_config

        return save_config(self)

    def load_config(self, config: str) -> None:
        """Restore the parameters :meth:`save_config` wrote."""
        from ._booster_inspect import load_config

        load_config(self, config)

    def __getstate__(self) -> dict:
        # the model only: a training job kept by update() is not pickled
        return {"ensemble": self.ensemble, "meta": self.meta, "_predict_params": self._predict_params}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return (
            f"Booster(objective={self.meta.get('objective')!r}, rounds={self.num_boosted_rounds()}, "
            f"features={self.num_features()})"
        )


#: attributes XGBoost keeps with the others and dgboost as meta entries of their own
_BEST_ATTRIBUTES = ("best_iteration", "best_score")

# the objectives dgboost trains (and so can transform predictions of)
_KNOWN_OBJECTIVES = frozenset(OBJECTIVES)


def _objective_params(params) -> dict:
    """The objective's parameters a model keeps (XGBoost's model file carries them too)."""
    out = {
        "huber_slope": params.huber_slope,
        "scale_pos_weight": params.scale_pos_weight,
        "max_delta_step": params.max_delta_step,
        "tweedie_variance_power": params.tweedie_variance_power,
    }
    if params.quantile_alpha is not None:
        out["quantile_alpha"] = list(params.quantile_alpha)
    return out


def _default_meta() -> dict:
    return {
        "objective": "reg:squarederror",
        "objective_params": {},
        "base_score": 0.5,
        "num_class": 0,
        "num_feature": 0,
        "feature_names": None,
        "feature_types": None,
        "best_iteration": None,
        "best_score": None,
        "params": {},
        "attributes": {},
    }
