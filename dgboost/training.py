"""``train()``: the boosting loop, written once for every device and any number of workers.

Each round: objective -> float32 gradients -> int64 fixed point with a scale agreed
through the communicator -> one tree per output group (grower) -> margins updated from the
leaves' row segments. Evaluation sets are predicted incrementally with the new trees.

Where trees grow in whole levels (no host decision inside a tree) nothing in a round waits
for the host: the scales are made on the device from the allreduced maxima, the margins are
updated there from the tree's node records, and the next round's gradients and first root
are queued before the host reads and builds the tree, so the device is not idle while the
host does its part. Callbacks see the same rounds in the same order; work queued for a round
that a callback or early stopping ends is dropped.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ._array import array_module
from ._fixed_point import fixed_point_scale  # noqa: F401 (public here, as before)
from .backend import get_backend
from .binned import BinnedMatrix
from .checkpoint import (check_resumable, checkpointer_for, check_same_data, cuts_fingerprint, data_fingerprint,
                         load_on_rank0, training_config)
from .comm.base import Communicator, LocalComm
from .constraints import resolve_monotone_constraints
from .data import DMatrix
from .errors import DGBoostTypeError, DGBoostValueError
from .grower import FeatureSampler, TreeGrower
from .params import TrainParams, parse_params
from ._stages import stage
from .quantile import compute_cuts, global_row_index, hashed_uniform
from .tree import Ensemble

__all__ = ["train", "TrainingCallback", "fixed_point_scale"]

_SUBSAMPLE_STREAM = 0x5AB5


class TrainingCallback:
    """Hooks called by :func:`train` (same method names as ``xgboost.callback.TrainingCallback``).

    ``before_iteration`` / ``after_iteration`` returning True stop training.
    """

    def before_training(self, model):
        return model

    def after_training(self, model):
        return model

    def before_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        return False

    def after_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        return False


class _Data:
    """One DMatrix prepared on one rank, on the backend's device: features, labels, margins."""

    def __init__(self, dmat: DMatrix, n_groups: int, base_margin: np.ndarray, backend):
        self.dmat = dmat
        self.backend = backend
        self.values = backend.asarray(dmat.data)
        self.label = None if dmat.label is None else backend.asarray(np.asarray(dmat.label, np.float32))
        self.weight = None if dmat.weight is None else backend.asarray(np.asarray(dmat.weight, np.float32))
        n = dmat.num_row()
        if dmat.base_margin is not None:
            if dmat.base_margin.shape[1] != n_groups:
                raise DGBoostValueError(
                    f"base_margin has {dmat.base_margin.shape[1]} columns, the model has {n_groups} outputs")
            margin = dmat.base_margin.astype(np.float32).copy()
        else:
            margin = np.empty((n, n_groups), np.float32)
            margin[:] = base_margin.astype(np.float32)
        self.margin = backend.asarray(margin)

    @functools.cached_property
    def global_rows(self) -> np.ndarray | None:
        """int64 (n,) host: the rows' global indices when the Dask layer placed them out of
        order (``dmat.row_runs``), else None; made once, for metrics that need the rows' order."""
        runs = getattr(self.dmat, "row_runs", None)
        return None if runs is None else global_row_index(runs)


def _check_features(dmat: DMatrix, n_features: int, names, what: str) -> None:
    if dmat.num_col() != n_features:
        raise DGBoostValueError(f"{what} has {dmat.num_col()} features, training data has {n_features}")
    if names is not None and dmat.feature_names is not None and list(dmat.feature_names) != list(names):
        diff = [f"{a!r} vs {b!r}" for a, b in zip(dmat.feature_names, names) if a != b][:3]
        raise DGBoostValueError(f"{what} has different feature names from the training data: {', '.join(diff)}")


def _row_runs(comm: Communicator, dmat: DMatrix) -> tuple[list[tuple[int, int]], int]:
    """This rank's rows as global (offset, rows) runs, and the rows of all ranks.

    One run after the previous ranks' rows, unless the Dask layer placed the rank's partitions
    wherever they lie and said where each sits in the global order (``dmat.row_runs``).
    """
    runs = getattr(dmat, "row_runs", None)
    if runs is None:
        offset, n_global = _row_offset(comm, dmat.num_row())
        return [(offset, dmat.num_row())], n_global
    if sum(n for _, n in runs) != dmat.num_row():
        raise DGBoostValueError(f"row runs {runs} do not cover the rank's {dmat.num_row()} rows")
    return runs, int(np.asarray(comm.allreduce_sum(np.array([dmat.num_row()], dtype=np.int64)))[0])


def _row_offset(comm: Communicator, n_local: int) -> tuple[int, int]:
    """(global index of this rank's first item, total number of items) for items laid out
    rank after rank."""
    counts = np.asarray(comm.allgather(np.array([n_local], dtype=np.int64)))
    return int(counts[:comm.rank].sum()), int(counts.sum())


def _verbose_period(verbose_eval) -> int:
    """Rounds between printed evaluation lines (0: print nothing), as ``xgboost.train`` reads it.

    Parameters
    ----------
    verbose_eval : bool or int
        True prints every round, a positive int ``k`` every ``k``-th round, False or 0 nothing.

    Returns
    -------
    int
        The period; 0 when nothing is printed.
    """
    if isinstance(verbose_eval, (bool, np.bool_)) or verbose_eval is None:
        return int(bool(verbose_eval))
    if int(verbose_eval) != verbose_eval or verbose_eval < 0:
        raise DGBoostValueError(f"verbose_eval must be a bool or a non-negative integer, got {verbose_eval!r}")
    return int(verbose_eval)


def _format_evaluation(epoch: int, history: dict) -> str:
    """One evaluation line exactly as XGBoost's ``EvaluationMonitor`` writes it.

    Parameters
    ----------
    epoch : int
        Round counted from the start of this ``train`` call (XGBoost restarts at 0 when a
        model is continued).
    history : dict
        ``{data_name: {metric_name: [values]}}``; the last value of each is printed.

    Returns
    -------
    str
        ``[epoch]\tname-metric:value...`` with five decimals, in the history's order.
    """
    return f"[{epoch}]" + "".join(f"\t{data}-{metric}:{log[-1]:.5f}"
                                  for data, metrics in history.items() for metric, log in metrics.items())


def train(params: Mapping[str, Any] | TrainParams, dtrain: DMatrix, num_boost_round: int = 10,
          evals: Sequence[tuple[DMatrix, str]] = (), obj: Callable | None = None,
          custom_metric: Callable | None = None, maximize: bool | None = None,
          early_stopping_rounds: int | None = None, evals_result: dict | None = None,
          verbose_eval: bool | int = True, xgb_model=None,
          callbacks: Iterable[TrainingCallback] = (), comm: Communicator | None = None,
          feval: Callable | None = None, checkpoint_dir=None, checkpoint_every: int | None = None,
          resume: bool = False):
    """Train a gradient-boosted tree model (XGBoost's ``xgboost.train`` signature).

    Parameters
    ----------
    params : dict or TrainParams
        XGBoost parameter names (see :class:`~dgboost.params.TrainParams`).
    dtrain : DMatrix
        Training rows of this rank (all rows when training in one process).
    num_boost_round : int
    evals : sequence of (DMatrix, name)
        Evaluated after every round; the last metric of the last set drives early stopping.
    obj : callable, optional
        Custom objective ``obj(margin, dtrain) -> (grad, hess)``.
    custom_metric : callable, optional
        ``custom_metric(predt, dmatrix) -> (name, value)``.
    maximize : bool, optional
        Whether early stopping maximises the metric (default: from the metric).
    early_stopping_rounds : int, optional
    evals_result : dict, optional
        Filled as ``{eval_name: {metric_name: [values...]}}``.
    verbose_eval : bool or int
        As in ``xgboost.train``: with evaluation sets, print the metrics every round (True)
        or every ``verbose_eval``-th round and the last one (int); False prints nothing.
        Nothing is printed without evaluation sets.
    xgb_model : Booster or path, optional
        Continue training from this model.
    callbacks : iterable of TrainingCallback
    comm : Communicator, optional
        Defaults to the single-process :class:`~dgboost.comm.LocalComm`.
    checkpoint_dir : str or os.PathLike, optional
        Rank 0 writes a checkpoint here (see :mod:`dgboost.checkpoint`) every
        ``checkpoint_every`` rounds and keeps the newest two.
    checkpoint_every : int, optional
        Rounds between checkpoints, counted in this call (default 10): with 10, the
        checkpoints hold 10, 20, 30, ... rounds.
    resume : bool
        Continue from the newest valid checkpoint in ``checkpoint_dir`` (files that are
        truncated or altered are skipped with a :class:`~dgboost.checkpoint.CheckpointWarning`;
        with none, training starts from the beginning). The finished model is byte-identical
        to an uninterrupted run. A checkpoint written with other parameters, early-stopping
        settings, evaluation set names or training data is refused. Callbacks' own state is
        not saved.

    Returns
    -------
    Booster
    """
    from .booster import Booster
    from .metric import get_metric
    from .objective import CustomObjective, get_objective, score_from_margin

    p = parse_params(params)
    comm = comm or LocalComm()
    if not isinstance(dtrain, DMatrix):
        raise DGBoostTypeError(f"dtrain must be a dgboost.DMatrix, got {type(dtrain).__name__}")
    if int(num_boost_round) != num_boost_round or num_boost_round < 0:
        raise DGBoostValueError(f"num_boost_round must be a non-negative integer, got {num_boost_round!r}")
    if early_stopping_rounds is not None and (int(early_stopping_rounds) != early_stopping_rounds
                                              or early_stopping_rounds < 1):
        raise DGBoostValueError(f"early_stopping_rounds must be a positive integer, got {early_stopping_rounds!r}")
    if early_stopping_rounds is not None and not evals:
        raise DGBoostValueError("early_stopping_rounds needs at least one evaluation set in evals")
    for item in evals:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], DMatrix)):
            raise DGBoostTypeError("evals must be a sequence of (DMatrix, name) pairs")
    custom_metric = custom_metric or feval
    if callable(p.objective):
        obj, p.objective = p.objective, "reg:squarederror"
    if dtrain.label is None and obj is None:
        raise DGBoostValueError("dtrain has no label: pass label= to DMatrix")
    # checked against the data before any collective starts
    monotone = resolve_monotone_constraints(p.monotone_constraints, dtrain.num_col(), dtrain.feature_names)
    backend = get_backend(p.device, p.nthread)
    checkpointer = checkpointer_for(checkpoint_dir, checkpoint_every, resume)
    config = training_config(p, early_stopping_rounds, maximize)
    resumed = None
    if resume:
        resumed = load_on_rank0(checkpointer, comm)
        if resumed is not None:
            check_resumable(resumed, config, [name for _, name in evals])
            # the checkpoint's model already holds any model this job continued
            xgb_model = Booster(model_file=resumed["model"].encode("utf-8"))

    # -- the starting model ---------------------------------------------------------------
    if xgb_model is not None and not isinstance(xgb_model, Booster):
        xgb_model = Booster(model_file=xgb_model)
    if xgb_model is not None and obj is None and xgb_model.meta["objective"] != p.objective:
        raise DGBoostValueError(f"cannot continue a {xgb_model.meta['objective']!r} model with "
                                f"objective {p.objective!r}")
    objective = get_objective(p) if obj is None else CustomObjective(obj, p, p.n_groups)
    n_groups = objective.n_outputs()
    if obj is None:
        objective.validate_labels(dtrain.label, dtrain.weight, dtrain.group_ptr)
        # the ranks' communicator for reductions inside the gradient; ranking: weight
        # normalisation over all ranks' query groups
        objective.prepare(dtrain.label, dtrain.weight, dtrain.group_ptr, comm)
        if objective.needs_group:
            # each rank's first global group index (pair sampling hashes it)
            n_local_groups = 0 if dtrain.group_ptr is None else len(dtrain.group_ptr) - 1
            objective.group_offset, _ = _row_offset(comm, n_local_groups)
    names = dtrain.feature_names
    n_features = dtrain.num_col()
    for dm, name in evals:
        _check_features(dm, n_features, names, f"evaluation set {name!r}")

    if xgb_model is not None:
        ensemble = xgb_model.ensemble.copy()
        if ensemble.n_groups != n_groups:
            raise DGBoostValueError("the model to continue has a different number of outputs")
        base_score = xgb_model.meta["base_score"]
        begin_round = xgb_model.num_boosted_rounds() if resumed is None else resumed["begin_round"]
    else:
        if p.base_score is not None:
            margins = np.full(n_groups, objective.margin_from_score(float(p.base_score)))
        elif obj is None:
            with stage("base margins"):
                margins = np.asarray(objective.base_margins(dtrain.label, dtrain.weight, comm), np.float64)
        else:
            margins = np.zeros(n_groups)
        ensemble = Ensemble(n_groups, margins)
        scores = [float(score_from_margin(objective.name, m)) for m in margins]
        base_score = scores[0] if n_groups == 1 else scores
        begin_round = 0

    # -- data: cuts agreed by all ranks, binned rows, margins -----------------------------
    # a row's identity (sketch sample, subsampling) is its index in the global order
    row_runs, n_global = _row_runs(comm, dtrain)
    global_rows = global_row_index(row_runs, array_module(dtrain.data))
    max_bin = dtrain.max_bin or p.max_bin
    with stage("cuts", backend.synchronize):
        cuts = compute_cuts(dtrain.data, dtrain.weight, max_bin, seed=p.seed, n_global=n_global, comm=comm,
                            sample_rows=p.sketch_sample_rows, global_rows=global_rows)
    fingerprint = None
    if checkpointer is not None:
        fingerprint = {"data": data_fingerprint(dtrain, global_rows, n_global, comm),
                       "cuts": cuts_fingerprint(cuts)}
        if resumed is not None:
            check_same_data(resumed, fingerprint["data"], fingerprint["cuts"])
    del global_rows
    # deep trees rarely fill a level: the estimate counts at most 256 nodes' histograms, and a
    # wider level that does not fit fails then, with its own size in the message
    level_nodes = 2 if p.grow_policy == "lossguide" else 1 << min(max(p.max_depth, 1), 8)
    if p.max_leaves > 0:
        level_nodes = min(level_nodes, p.max_leaves)
    backend.check_training_memory(dtrain.num_row(), n_features, int(cuts.n_bins().max()), int(cuts.ptrs[-1]),
                                  n_groups, level_nodes, not isinstance(dtrain.data, np.ndarray))
    with stage("binning", backend.synchronize):
        binned = BinnedMatrix.from_values(dtrain.data, cuts, backend)
    with stage("margins", backend.synchronize):
        train_data = _Data(dtrain, n_groups, ensemble.base_margin, backend)
        eval_data = [_Data(dm, n_groups, ensemble.base_margin, backend) for dm, _ in evals]
        for d in [train_data] + eval_data:
            backend.predict_margin(ensemble, d.values, 0, ensemble.n_trees, d.margin)

    metrics = _metrics_for(p, objective, custom_metric, get_metric)
    sampler = FeatureSampler(n_features, p.seed, p.colsample_bytree, p.colsample_bylevel, p.colsample_bynode)
    interactions = None
    if p.interaction_constraints is not None:
        from .constraints import InteractionConstraints

        interactions = InteractionConstraints(p.interaction_constraints, n_features, dtrain.feature_names)
    grower = TreeGrower(backend, comm, p, binned, sampler, interactions, monotone)
    # on the backend's device: the subsample mask of every round is hashed there (only made
    # when rows are sampled: 8 bytes a row)
    global_index = global_row_index(row_runs, backend.xp) if p.subsample < 1.0 else None

    booster = Booster._from_training(ensemble, p, objective, base_score, names, dtrain.feature_types,
                                     n_features, xgb_model)
    callbacks = list(callbacks)
    for cb in callbacks:
        booster = cb.before_training(booster) or booster
    history: dict = {} if evals_result is None else evals_result
    history.clear()
    first_round, stopped = begin_round, False
    if resumed is not None:
        history.update(resumed["history"])
        best_score, best_round, maximize_flag = (resumed["early_stopping"][k] for k in
                                                 ("best_score", "best_round", "maximize"))
        first_round, stopped = resumed["round"], resumed["stopped"]
    else:
        best_score, best_round, maximize_flag = None, None, maximize
    # printing follows xgboost.train's EvaluationMonitor: nothing without evaluation sets
    period = _verbose_period(verbose_eval)
    if comm.rank != 0:
        period = 0  # one printer, as XGBoost's monitor on rank 0
    skipped_line = None  # the last line held back by the period: printed when training ends

    round_args = (objective, obj, train_data, dtrain, n_groups, p, global_index, backend, comm, n_global)
    # leaves added to the margins on the device from the records of trees grown in whole levels
    # (no host decision in their growth), so the host reads a tree while the next round's
    # gradients are made; leaves refitted on the host, clipped into monotone bounds or of a
    # custom objective (whose call must come after the round's callbacks) go the host's way
    leaves_on_device = (grower.grows_without_reads() and obj is None and not objective.adaptive_leaves
                        and monotone is None)
    queued = None  # the next round's _RoundPairs, when queued ahead
    for r in range(first_round, begin_round + int(num_boost_round)):
        if stopped:  # the checkpoint was written by the round training stopped on
            break
        if any(cb.before_iteration(booster, r, history) for cb in callbacks):
            break
        pairs = queued if queued is not None and queued.round == r else _RoundPairs(r, *round_args)
        queued = None
        new_first = ensemble.n_trees
        read_later = []  # trees whose leaves the device added to the margins, read after the queueing
        for k in range(n_groups):
            bits, scales, gpair = pairs.group(k)
            maxima = backend.read_later([bits])
            if not leaves_on_device:
                _check_finite(maxima, r)  # growth reads the device anyway: no tree on bad pairs
            started = pairs.take_started(new_first + k) if k == 0 else None
            tree = grower.grow_from(started or grower.start(gpair, scales, new_first + k))
            del gpair, started
            if leaves_on_device:
                backend.add_record_leaf_values(train_data.margin, tree.rows, tree.records, scales, p, k)
                tree.rows = None
                read_later.append((tree, maxima))
            else:
                _finish_tree(tree, maxima, r, k, ensemble, objective, train_data, dtrain, pairs.keep, p, comm,
                             backend)
        # round r's gradients go before the next round's are made (device memory)
        del pairs
        if read_later and r + 1 < begin_round + int(num_boost_round):
            # the next round's gradients and its first tree's root are queued before this
            # round's trees are read and built on the host, so the device works meanwhile
            # (unused if training stops)
            queued = _RoundPairs(r + 1, *round_args)
            queued.start_first_tree(grower, new_first + n_groups)
        for k, (tree, maxima) in enumerate(read_later):
            _finish_tree(tree, maxima, r, k, ensemble, objective, train_data, dtrain, None, p, comm, backend)
        for d in eval_data:
            backend.predict_margin(ensemble, d.values, new_first, ensemble.n_trees, d.margin)
        booster._set_ensemble(ensemble)

        # -- evaluation, logging, early stopping ------------------------------------------
        for d, (dm, name) in zip(eval_data, evals):
            for m in metrics:
                value = _evaluate(m, d, dm, objective, comm, obj is not None)
                history.setdefault(name, {}).setdefault(m.name, []).append(value)
        if evals and metrics:
            last_name, last_metric = evals[-1][1], metrics[-1]
            score = history[last_name][last_metric.name][-1]
            if maximize_flag is None:
                maximize_flag = last_metric.higher_is_better
            if best_score is None or (score > best_score if maximize_flag else score < best_score):
                best_score, best_round = score, r
            booster._set_best(best_round, best_score)
        # XGBoost runs user callbacks before its EvaluationMonitor and stops at the first
        # that returns True, so a round a user callback stops on is not printed
        stop = any(cb.after_iteration(booster, r, history) for cb in callbacks)
        if period and history and not stop:
            epoch = r - begin_round  # XGBoost counts epochs from 0 in every train() call
            line = _format_evaluation(epoch, history)
            if epoch % period == 0:
                print(line, flush=True)
                skipped_line = None
            else:
                skipped_line = line
        # XGBoost's EarlyStopping prints nothing (the monitor's last line is the only trace)
        stop = stop or (early_stopping_rounds is not None and best_round is not None
                        and r - best_round >= early_stopping_rounds)
        if checkpointer is not None and comm.rank == 0 and checkpointer.due(r + 1 - begin_round):
            checkpointer.write({
                "round": r + 1, "begin_round": begin_round, "config": config, **fingerprint,
                "model": booster.to_json(), "history": history, "eval_names": [name for _, name in evals],
                "early_stopping": {"best_score": best_score, "best_round": best_round, "maximize": maximize_flag},
                "stopped": bool(stop)})
        if stop:
            break
    for cb in callbacks:
        booster = cb.after_training(booster) or booster
    if skipped_line is not None:
        # the monitor's after_training: the last round is shown even when off-period
        print(skipped_line, flush=True)
    return booster


def _metrics_for(p: TrainParams, objective, custom_metric, get_metric) -> list:
    names = list(p.eval_metric) if p.eval_metric else []
    metrics = [get_metric(m, objective) for m in names]
    if custom_metric is not None:
        metrics.append(get_metric(custom_metric, objective))
    if not metrics and not callable(p.objective) and getattr(objective, "default_metric", None):
        metrics.append(get_metric(objective.default_metric, objective))
    return metrics


def _evaluate(metric, d: _Data, dm: DMatrix, objective, comm, custom_objective: bool) -> float:
    if getattr(metric, "is_custom", False):
        # a user's metric function gets host arrays, as XGBoost gives it NumPy predictions
        margin = d.backend.to_host(d.margin)
        preds = margin if custom_objective else objective.transform(margin)
        return float(metric.evaluate_custom(preds, dm))
    if dm.label is None:
        raise DGBoostValueError("an evaluation set has no label")
    extra = {}
    if metric.needs_row_order and d.global_rows is not None:
        extra["global_rows"] = d.global_rows
    return float(metric.evaluate(d.margin, d.label, d.weight, dm.group_ptr, objective, comm, **extra))


class _RoundPairs:
    """One round's gradients, queued on the device, and per output group its quantised pairs.

    The pairs of group 0 are queued at once, those of a later group when :meth:`group` asks
    (one group's 8 bytes a row held at a time beyond the gradients).
    """

    def __init__(self, r: int, objective, obj, train_data, dtrain: DMatrix, n_groups: int, p: TrainParams,
                 global_index, backend, comm, n_global: int):
        if obj is not None:
            objective.dtrain = dtrain
        grad, hess = objective.gradient(train_data.margin, train_data.label, train_data.weight, dtrain.group_ptr, r)
        xp = backend.xp
        self.round = r
        self.grad = xp.asarray(grad, dtype=np.float32).reshape(dtrain.num_row(), n_groups)
        self.hess = xp.asarray(hess, dtype=np.float32).reshape(dtrain.num_row(), n_groups)
        self.keep = None
        if p.subsample < 1.0:
            self.keep = hashed_uniform(p.seed, _SUBSAMPLE_STREAM + r, global_index) < p.subsample
        self._backend, self._comm, self._n_global = backend, comm, n_global
        self._first = self._quantised(0)
        self._first_tree = None  # group 0's tree, when started ahead

    def _quantised(self, k: int):
        backend = self._backend
        g, h = self.grad[:, k], self.hess[:, k]
        # the maxima as float32 bits, which order as the values do (NaN above inf): the max of
        # the bits over the ranks is the bits of the max, so every rank makes the same scales
        # on its device and sees a non-finite value of any rank when it reads them
        bits = self._comm.allreduce_max(backend.abs_max_bits(g, h))
        scales = backend.fixed_point_scales(bits, self._n_global)
        return bits, scales, backend.quantise(g, h, scales, self.keep)

    def start_first_tree(self, grower, tree_index: int) -> None:
        """Queue the root of group 0's tree (``TreeGrower.start``), to be grown later."""
        _, scales, gpair = self._first
        self._first_tree = grower.start(gpair, scales, tree_index)

    def take_started(self, tree_index: int):
        """The tree :meth:`start_first_tree` started (:class:`~dgboost.grower.StartedTree`,
        no longer held here), or None."""
        first, self._first_tree = self._first_tree, None
        if first is not None and first.tree_index != tree_index:
            raise AssertionError(f"tree {first.tree_index} was started ahead, tree {tree_index} is due")
        return first

    def group(self, k: int):
        """(bits uint32 (2,), scales float64 (2,), pairs int32 (n, 2)) of group ``k``, on the device."""
        if k == 0 and self._first is not None:
            first, self._first = self._first, None
            return first
        return self._quantised(k)


def _check_finite(maxima, r: int) -> None:
    """Raise if the gradient maxima read by ``maxima`` (``Backend.read_later``) are not finite."""
    if not np.isfinite(maxima.result()[0].view(np.float32)).all():
        raise DGBoostValueError(f"round {r}: the objective produced non-finite gradients or hessians")


def _finish_tree(tree, maxima, r: int, k: int, ensemble: Ensemble, objective, train_data, dtrain: DMatrix, keep,
                 p: TrainParams, comm, backend) -> None:
    """Read and build a grown tree (:class:`~dgboost.grower.GrowingTree`) into ``ensemble`` as
    group ``k``'s; its leaves go to the margins here unless the device added them."""
    _check_finite(maxima, r)
    grown = tree.finish()
    if objective.adaptive_leaves:
        _refit_leaves(objective, grown.tree, grown, train_data.margin[:, k], dtrain, keep, p, comm, backend)
    ensemble.append(grown.tree, k)
    if grown.rows is not None:
        backend.add_leaf_values(train_data.margin, grown.rows, grown.begins, grown.ends,
                                grown.tree.value[grown.leaf_nodes], k)


def _refit_leaves(objective, tree, grown, margin, dtrain: DMatrix, keep, p: TrainParams, comm,
                  backend) -> None:
    """Objectives like reg:absoluteerror re-fit each leaf to a quantile of its residuals.

    The exact quantile search is host code: rows, margins and the sample mask come to the host.
    """
    n = dtrain.num_row()
    margin = backend.to_host(margin)
    rows = backend.to_host(grown.rows)
    keep = None if keep is None else backend.to_host(keep)
    leaf_of_row = np.full(n, -1, dtype=np.int64)
    for i, (b, e) in enumerate(zip(grown.begins, grown.ends)):
        leaf_of_row[rows[b:e]] = i
    residual = (dtrain.label.astype(np.float64) - margin.astype(np.float64)).astype(np.float32)
    # unweighted rows take XGBoost's interpolated median (weight None); weights, or rows
    # left out by subsampling (weight 0), take the weighted median
    weight = dtrain.weight
    if keep is not None:
        weight = np.where(keep, np.ones(n, np.float32) if weight is None else weight, np.float32(0.0))
    values = np.asarray(objective.leaf_values(residual, weight, leaf_of_row, len(grown.leaf_nodes), comm),
                        dtype=np.float64)
    old = tree.value[grown.leaf_nodes].astype(np.float64)
    refit = np.where(np.isnan(values), old, values * p.eta)
    tree.value[grown.leaf_nodes] = refit.astype(np.float32)
