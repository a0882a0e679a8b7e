"""The per-rank training job: everything one rank holds while it boosts, and one round of it.

A :class:`TrainingJob` is made once per training call (or kept by a Booster between its
``update`` calls): the objective and starting ensemble, the quantile cuts agreed by all
ranks, the binned training matrix, the margins of the training and evaluation sets on the
backend's device, the metrics and the tree grower. :meth:`TrainingJob.run_round` then boosts
one round: objective -> float32 gradients -> int64 fixed point with a scale agreed through
the communicator -> ``num_parallel_tree`` trees per output group -> margins updated from the
leaves' row segments; the evaluation sets' margins are predicted incrementally with the new
trees.

Random forests (``num_parallel_tree`` P > 1), as XGBoost grows them: a round's P trees of an
output group are grown from the same gradients (those of the margins before the round), each
with its own row subsample and column samples, and each tree's leaves are scaled by eta / P,
so that the round adds the trees' mean. The trees of a round are ordered by output group, then
by their index within the group (XGBoost's ``tree_info``). Tree ``j``'s row subsample hashes
the global row index with the round and ``j`` (``j = 0`` is the subsample of a model of one
tree per round), column samples hash the tree's index in the model: the forest is the same on
any number of workers.

Where trees grow in whole levels (no host decision inside a tree) nothing in a round waits
for the host: the scales are made on the device from the allreduced maxima, the margins are
updated there from the tree's node records, and the next round's gradients and first root
are queued before the host reads and builds the tree, so the device is not idle while the
host does its part. Work queued for a round that never runs (training stopped) is dropped.

The job knows nothing of Boosters, callbacks or printing: the drivers (:func:`dgboost.train`,
``Booster.update``, :func:`dgboost.cv`, the Dask rank task) hand it the starting model and
read its ensemble.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import numpy as np

from ._array import array_module
from ._categorical import categorical_layout, categorical_mask
from ._stages import stage
from .backend import get_backend
from .binned import BinnedMatrix
from .checkpoint import check_same_data, cuts_fingerprint, data_fingerprint
from .comm.base import Communicator, LocalComm
from .constraints import InteractionConstraints, resolve_monotone_constraints
from .data import DMatrix
from .errors import DGBoostValueError
from .exact_greedy import ExactGrower
from .grower import FeatureSampler, TreeGrower
from .metric import get_metric
from .model_io import trees_per_round
from .objective import CustomObjective, get_objective, score_from_margin
from .params import TrainParams
from .quantile import categorical_cuts, compute_cuts, global_row_index, hashed_below
from .tree import Ensemble

__all__ = ["TrainingJob", "check_features", "metrics_for", "tree_params"]

_SUBSAMPLE_STREAM = 0x5AB5


def _subsample_stream(r: int, j: int) -> int:
    """The hash stream of the row subsample of round ``r``'s tree ``j`` (of each output group):
    ``j`` above the round's bits, so tree 0's stream is a one-tree-per-round model's."""
    return _SUBSAMPLE_STREAM + r + (j << 40)


def tree_params(p: TrainParams) -> TrainParams:
    """The parameters one tree is grown with: ``p`` with ``eta`` divided by
    ``num_parallel_tree`` (XGBoost's learning rate of each tree of a forest), else ``p``."""
    if p.num_parallel_tree == 1:
        return p
    return dataclasses.replace(p, eta=p.eta / p.num_parallel_tree).validate()


def check_features(dmat: Any, n_features: int, names: Sequence[str] | None, what: str) -> None:
    """Raise unless ``dmat`` has the training data's number of features and feature names.

    Parameters
    ----------
    dmat : DMatrix or DaskDMatrix
        Anything with ``num_col()`` and ``feature_names``.
    n_features : int
        The training data's columns.
    names : sequence of str or None
        The training data's feature names.
    what : str
        How the message names ``dmat`` (e.g. ``"evaluation set 'valid'"``).

    Raises
    ------
    DGBoostValueError
    """
    if dmat.num_col() != n_features:
        raise DGBoostValueError(f"{what} has {dmat.num_col()} features, training data has {n_features}")
    if names is not None and dmat.feature_names is not None and list(dmat.feature_names) != list(names):
        diff = [f"{a!r} vs {b!r}" for a, b in zip(dmat.feature_names, names) if a != b][:3]
        raise DGBoostValueError(f"{what} has different feature names from the training data: {', '.join(diff)}")


def metrics_for(p: TrainParams, objective: Any, custom_metric: Callable | None = None) -> list:
    """The metrics a job evaluates: ``eval_metric``'s, then ``custom_metric``, else the
    objective's default metric (none for a custom objective).

    Returns
    -------
    list of dgboost.metric.Metric
    """
    names = list(p.eval_metric) if p.eval_metric else []
    metrics = [get_metric(m, objective) for m in names]
    if custom_metric is not None:
        metrics.append(get_metric(custom_metric, objective))
    if not metrics and not callable(p.objective) and getattr(objective, "default_metric", None):
        metrics.append(get_metric(objective.default_metric, objective))
    return metrics


class _Data:
    """One DMatrix prepared on one rank, on the backend's device: features, labels, margins."""

    def __init__(self, dmat: DMatrix, n_groups: int, base_margin: np.ndarray, backend, values=None, vectors=None):
        self.dmat = dmat
        self.backend = backend
        # ``values`` and ``vectors`` (label, weight): those of ``dmat``, already uploaded for the set-up
        self.values = backend.asarray(dmat.data if values is None else values)
        # as kept: a device label or weight is used where it is, with no trip to the host
        label, weight = (dmat._vector("label"), dmat._vector("weight")) if vectors is None else vectors
        self.label = None if label is None else backend.asarray(label)
        self.weight = None if weight is None else backend.asarray(weight)
        n = dmat.num_row()
        if dmat.base_margin is not None:
            if dmat.base_margin.shape[1] != n_groups:
                raise DGBoostValueError(
                    f"base_margin has {dmat.base_margin.shape[1]} columns, the model has {n_groups} outputs"
                )
            margin = dmat.base_margin.astype(np.float32).copy()
            self.margin = backend.asarray(margin)
        else:
            # filled where it lives: an n-row host array, filled and uploaded, took the
            # "margins" stage from 54 to 170 ms at 115M rows on one H200, and first-touched
            # fresh host memory in a process's first job (docs/performance-notes.md, "Leaves
            # to margins by a walk in row order")
            self.margin = backend.empty((n, n_groups), np.float32)
            self.margin[:] = backend.asarray(np.asarray(base_margin, np.float32).reshape(1, n_groups))

    @functools.cached_property
    def global_rows(self) -> np.ndarray | None:
        """int64 (n,) host: the rows' global indices when the Dask layer placed them out of
        order (``dmat.row_runs``), else None; made once, for metrics that need the rows' order."""
        runs = getattr(self.dmat, "row_runs", None)
        return None if runs is None else global_row_index(runs)


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
    return int(counts[: comm.rank].sum()), int(counts.sum())


class TrainingJob:
    """One rank's training state: objective, ensemble, cuts, binned rows, margins, grower.

    Parameters
    ----------
    params : TrainParams
        Parsed once by the driver; not parsed again here (a callable ``objective`` is taken
        as ``obj`` on a copy).
    dtrain : DMatrix
        This rank's training rows.
    evals : sequence of (DMatrix, name)
        Evaluation sets, predicted incrementally after every round.
    obj : callable, optional
        Custom objective ``obj(margin, dtrain) -> (grad, hess)``.
    custom_metric : callable, optional
        ``custom_metric(predt, dmatrix) -> (name, value)``.
    comm : Communicator, optional
        Defaults to :class:`~dgboost.comm.LocalComm`.
    start : Booster, optional
        The model to continue (its ensemble is copied; it is not changed).
    resumed : dict, optional
        A checkpoint being resumed (:mod:`dgboost.checkpoint`): its ``begin_round`` is the
        job's, and its data fingerprints must match this data's.
    fingerprint : bool
        Compute :attr:`fingerprint` (the data and cuts fingerprints a checkpoint holds).
    """

    def __init__(
        self,
        params: TrainParams,
        dtrain: DMatrix,
        evals: Sequence[tuple[DMatrix, str]] = (),
        *,
        obj: Callable | None = None,
        custom_metric: Callable | None = None,
        comm: Communicator | None = None,
        start: Any = None,
        resumed: dict | None = None,
        fingerprint: bool = False,
    ) -> None:
        p = params
        if callable(p.objective):
            obj, p = p.objective, dataclasses.replace(p, objective="reg:squarederror")
        if dtrain._vector("label") is None and obj is None:
            raise DGBoostValueError("dtrain has no label: pass label= to DMatrix")
        self.params, self.obj, self.dtrain = p, obj, dtrain
        self.comm = comm or LocalComm()
        self.evals = list(evals)
        # checked against the data before any collective starts
        self.monotone = resolve_monotone_constraints(p.monotone_constraints, dtrain.num_col(), dtrain.feature_names)
        self.backend = get_backend(p.device, p.nthread)
        self._make_objective(start)
        for dm, name in self.evals:
            check_features(dm, dtrain.num_col(), dtrain.feature_names, f"evaluation set {name!r}")
        self._starting_model(start, resumed)
        self._prepare_data(resumed, fingerprint)
        self.metrics = metrics_for(p, self.objective, custom_metric)
        self._make_grower()
        self.queued: _RoundPairs | None = None  # the next round's pairs, when queued ahead
        # the set-up's temporaries are freed: their cached blocks go back before the rounds
        self.backend.release_cached_memory()

    # -- set-up -------------------------------------------------------------------------------
    def _make_objective(self, start: Any) -> None:
        p, obj, dtrain, comm = self.params, self.obj, self.dtrain, self.comm
        if start is not None and obj is None and start.meta["objective"] != p.objective:
            raise DGBoostValueError(
                f"cannot continue a {start.meta['objective']!r} model with objective {p.objective!r}"
            )
        self.objective = get_objective(p) if obj is None else CustomObjective(obj, p, p.n_groups)
        self.n_groups = self.objective.n_outputs()
        if obj is None:
            # checked where they are kept (on the device for device labels: a host copy of
            # 115M labels and NumPy's checks took 0.3 s a job; docs/performance-notes.md)
            label, weight = dtrain._vector("label"), dtrain._vector("weight")
            self.objective.validate_labels(label, weight, dtrain.group_ptr)
            # the ranks' communicator for reductions inside the gradient; ranking: weight
            # normalisation over all ranks' query groups
            self.objective.prepare(label, weight, dtrain.group_ptr, comm)
            if self.objective.needs_group:
                # each rank's first global group index (pair sampling hashes it)
                n_local_groups = 0 if dtrain.group_ptr is None else len(dtrain.group_ptr) - 1
                self.objective.group_offset, _ = _row_offset(comm, n_local_groups)

    def _starting_model(self, start: Any, resumed: dict | None) -> None:
        """The ensemble boosting continues (a copy of ``start``'s, or a new one from the base
        margins), its ``base_score`` and the job's first round."""
        p, n_groups, objective = self.params, self.n_groups, self.objective
        if start is not None:
            self.ensemble = start.ensemble.copy()
            if self.ensemble.n_groups != n_groups:
                raise DGBoostValueError("the model to continue has a different number of outputs")
            start_parallel = trees_per_round(start.meta, n_groups) // n_groups
            if self.ensemble.n_trees and start_parallel != p.num_parallel_tree:
                # a round's trees are counted by num_parallel_tree: mixed counts have no rounds
                raise DGBoostValueError(
                    f"cannot continue a model of num_parallel_tree={start_parallel} with "
                    f"num_parallel_tree={p.num_parallel_tree}"
                )
            self.base_score = start.meta["base_score"]
            self.begin_round = start.num_boosted_rounds() if resumed is None else resumed["begin_round"]
            return
        if p.base_score is not None:
            margins = np.full(n_groups, objective.margin_from_score(float(p.base_score)))
        elif self.obj is None:
            with stage("base margins"):
                # on a GPU, host labels too are summed there (exact sums give the host's bits):
                # the host's sum kernels compile in a process's first job of over 1M labels
                margins = np.asarray(objective.base_margins(*self._train_vectors, self.comm), np.float64)
        else:
            margins = np.zeros(n_groups)
        self.ensemble = Ensemble(n_groups, margins)
        scores = [float(score_from_margin(objective.name, m)) for m in margins]
        self.base_score = scores[0] if n_groups == 1 else scores
        self.begin_round = 0

    @functools.cached_property
    def _train_vectors(self) -> tuple:
        """The training labels and weights (None where absent) where the backend reads them:
        uploaded once, for the base margins and the rounds."""
        return tuple(self.backend.resident(self.dtrain._vector(v)) for v in ("label", "weight"))

    def _prepare_data(self, resumed: dict | None, fingerprint: bool) -> None:
        """Cuts agreed by all ranks, the binned rows, the margins of every data set."""
        p, dtrain, backend, comm = self.params, self.dtrain, self.backend, self.comm
        # a row's identity (sketch sample, subsampling) is its index in the global order
        row_runs, self.n_global = _row_runs(comm, dtrain)
        exact = p.tree_method == "exact"
        # the rows where the backend reads them: host rows of a GPU job are uploaded once, for
        # the sketch, the bins and the margins (exact growth presorts the rows itself)
        values = dtrain.data if exact else backend.resident(dtrain.data)
        # one run is hashed from its offset; only runs out of order need the rows' indices,
        # 8 bytes a row (460 MB of a rank's 57.5M airline-like rows)
        global_rows = global_row_index(row_runs, array_module(values)) if len(row_runs) > 1 else None
        row_offset = row_runs[0][0] if global_rows is None and row_runs else 0
        if exact and any(t == "c" for t in (getattr(dtrain, "feature_types", None) or ())):
            raise DGBoostValueError(
                "tree_method='exact' has no categorical splits (as XGBoost's exact): use tree_method='hist'"
            )
        # exact growth bins nothing: its cuts are only a checkpoint's fingerprint
        need_cuts = not exact or fingerprint or resumed is not None
        cuts = self._compute_cuts(values, global_rows, row_offset) if need_cuts else None
        self.categorical = None
        if cuts is not None:
            self.categorical = categorical_layout(cuts.ptrs, categorical_mask(dtrain.feature_types, dtrain.num_col()))
        self.fingerprint = None
        if fingerprint or resumed is not None:
            if global_rows is None or array_module(global_rows) is not array_module(dtrain.data):
                # the fingerprint digests the sampled rows' indices, where the DMatrix keeps them
                global_rows = global_row_index(row_runs, array_module(dtrain.data))
            self.fingerprint = {
                "data": data_fingerprint(dtrain, global_rows, self.n_global, comm),
                "cuts": cuts_fingerprint(cuts),
            }
            if resumed is not None:
                check_same_data(resumed, self.fingerprint["data"], self.fingerprint["cuts"])
        del global_rows
        if exact:
            # no bins: the exact grower presorts the values (and checks its memory) itself
            self.binned = None
            self._prepare_margins(values)
            self.global_index = global_row_index(row_runs, backend.xp) if p.subsample < 1.0 else None
            return
        # deep trees rarely fill a level: the estimate counts at most 256 nodes' histograms, and a
        # wider level that does not fit fails then, with its own size in the message
        level_nodes = 2 if p.grow_policy == "lossguide" else 1 << min(max(p.max_depth, 1), 8)
        if p.max_leaves > 0:
            level_nodes = min(level_nodes, p.max_leaves)
        backend.check_training_memory(
            dtrain.num_row(),
            dtrain.num_col(),
            cuts.ptrs,
            int(cuts.ptrs[-1]),
            self.n_groups,
            level_nodes,
            not isinstance(values, np.ndarray),
        )
        with stage("binning", backend.synchronize):
            self.binned = BinnedMatrix.from_values(values, cuts, backend)
        self._prepare_margins(values)
        # on the backend's device: the subsample mask of every round is hashed there (only made
        # when rows are sampled: 8 bytes a row)
        self.global_index = global_row_index(row_runs, backend.xp) if p.subsample < 1.0 else None

    def _compute_cuts(self, values, global_rows, row_offset: int):
        """The quantile cuts agreed by all ranks (a categorical feature's bins its categories)
        of ``values`` (the training rows, host or device); the rows' global indices are
        ``global_rows`` (in the array module of ``values``), or the run from ``row_offset`` when
        None."""
        p, dtrain, backend, comm = self.params, self.dtrain, self.backend, self.comm
        # device rows are sketched with the weights uploaded for the rounds (not a host copy)
        weight = dtrain.weight if array_module(values) is np else self._train_vectors[1]
        with stage("cuts", backend.synchronize):
            cuts = compute_cuts(
                values,
                weight,
                dtrain.max_bin or p.max_bin,
                seed=p.seed,
                row_offset=row_offset,
                n_global=self.n_global,
                comm=comm,
                sample_rows=p.sketch_sample_rows,
                global_rows=global_rows,
                threads=getattr(backend, "threads", 0),
            )
            # a categorical feature's bins are its categories (docs/design.md §11.1)
            cat_mask = categorical_mask(dtrain.feature_types, dtrain.num_col())
            return categorical_cuts(cuts, values, cat_mask, comm, dtrain.feature_names)

    def _prepare_margins(self, values) -> None:
        """The training and evaluation sets on the backend's device, with their margins;
        ``values``: the training rows, already where the backend reads them or not."""
        backend = self.backend
        with stage("margins", backend.synchronize):
            self.train_data = _Data(
                self.dtrain, self.n_groups, self.ensemble.base_margin, backend, values, self._train_vectors
            )
            self.eval_data = [_Data(dm, self.n_groups, self.ensemble.base_margin, backend) for dm, _ in self.evals]
            for d in [self.train_data] + self.eval_data:
                backend.predict_margin(self.ensemble, d.values, 0, self.ensemble.n_trees, d.margin)

    def _make_grower(self) -> None:
        p, dtrain = self.params, self.dtrain
        n_features = dtrain.num_col()
        sampler = FeatureSampler(n_features, p.seed, p.colsample_bytree, p.colsample_bylevel, p.colsample_bynode)
        interactions = None
        if p.interaction_constraints is not None:
            interactions = InteractionConstraints(p.interaction_constraints, n_features, dtrain.feature_names)
        # a forest's trees grow with eta / num_parallel_tree
        if p.tree_method == "exact":
            with stage("presort", self.backend.synchronize):
                values = self.train_data.values
                self.grower = ExactGrower(
                    self.backend, self.comm, tree_params(p), values, sampler, interactions, self.monotone
                )
        else:
            self.grower = TreeGrower(
                self.backend,
                self.comm,
                tree_params(p),
                self.binned,
                sampler,
                interactions,
                self.monotone,
                self.categorical,
            )
        # leaves added to the margins on the device from the records of trees grown in whole levels
        # (no host decision in their growth), so the host reads a tree while the next round's
        # gradients are made; leaves refitted on the host, clipped into monotone bounds or of a
        # custom objective (whose call must come after the round's callbacks) go the host's way
        self.leaves_on_device = (
            self.grower.grows_without_reads()
            and self.obj is None
            and not self.objective.adaptive_leaves
            and self.monotone is None
        )
        # leaves reached by a walk from each row's entries: nothing reads the last level's rows
        self.grower.leaf_rows = not (self.leaves_on_device and self.backend.walks_leaves)

    # -- rounds -------------------------------------------------------------------------------
    def set_eta(self, eta: float) -> None:
        """Use learning rate ``eta`` from the next tree on (trees already grown keep theirs)."""
        if float(eta) != self.params.eta:
            self.params = dataclasses.replace(self.params, eta=float(eta)).validate()
            self.grower.params = tree_params(self.params)

    def run_round(self, r: int, queue_next: bool = True) -> None:
        """Boost round ``r``: ``num_parallel_tree`` trees per output group appended to
        :attr:`ensemble` (by group, then by tree), the training and evaluation margins updated.

        Parameters
        ----------
        r : int
            The round (the model's number of rounds before it; seeds subsampling).
        queue_next : bool
            Round ``r + 1`` will follow: its gradients and first tree may be queued on the
            device before this round's trees are read on the host.
        """
        backend, ensemble, n_groups = self.backend, self.ensemble, self.n_groups
        n_parallel = self.params.num_parallel_tree
        queued, self.queued = self.queued, None
        pairs = queued if queued is not None and queued.round == r else self._pairs(r)
        del queued
        new_first = ensemble.n_trees
        read_later = []  # trees whose leaves the device added to the margins, read after the queueing
        for k in range(n_groups):
            grown_here = []  # the group's trees grown on the host's way: leaves added after all of them
            for j in range(n_parallel):
                index = new_first + k * n_parallel + j
                bits, scales, gpair = pairs.group(k, j)
                maxima = backend.read_later([bits])
                if not self.leaves_on_device:
                    _check_finite(maxima, r)  # growth reads the device anyway: no tree on bad pairs
                ahead = pairs.take_grown(index) if index == new_first else None
                tree = ahead or self.grower.grow(gpair, scales, index)
                del gpair, ahead
                if self.leaves_on_device:
                    backend.add_record_leaf_values(
                        self.train_data.margin, tree.rows, tree.records, scales, self.grower.params, k, **tree.walk
                    )
                    tree.rows = None
                    read_later.append((tree, maxima, k))
                else:
                    # a forest's later trees refit their leaves on the margins before the round
                    grown_here.append(self._finish_tree(tree, maxima, r, k, pairs.keep(j)))
            for grown in grown_here:
                self._add_leaves(grown, k)
        # round r's gradients go before the next round's are made (device memory)
        del pairs
        if read_later and queue_next:
            # the next round's gradients and its first tree (grown whole: no host decision, and
            # nothing added to the margins) are queued before this round's trees are read and
            # built on the host, so the device works meanwhile (unused if training stops; its
            # leaves are added when its round runs, with that round's eta)
            self.queued = self._pairs(r + 1)
            self.queued.grow_first_tree(self.grower, new_first + n_groups * n_parallel)
        for tree, maxima, k in read_later:
            self._add_leaves(self._finish_tree(tree, maxima, r, k, None), k)
        for d in self.eval_data:
            backend.predict_margin(ensemble, d.values, new_first, ensemble.n_trees, d.margin)

    def _pairs(self, r: int) -> "_RoundPairs":
        return _RoundPairs(
            r,
            self.objective,
            self.obj,
            self.train_data,
            self.dtrain,
            self.n_groups,
            self.params,
            self.global_index,
            self.backend,
            self.comm,
            self.n_global,
        )

    def _finish_tree(self, tree, maxima, r: int, k: int, keep):
        """Read and build a grown tree (:class:`~dgboost.grower.GrowingTree`) into the ensemble
        as group ``k``'s (``keep``: its row subsample, or None).

        Returns
        -------
        GrownTree
            Whose leaves :meth:`_add_leaves` adds to the margins (nothing where the device
            added them).
        """
        _check_finite(maxima, r)
        grown = tree.finish()
        if self.objective.adaptive_leaves:
            _refit_leaves(
                self.objective,
                grown.tree,
                grown,
                self.train_data.margin[:, k],
                self.dtrain,
                keep,
                self.grower.params,
                self.comm,
                self.backend,
            )
        self.ensemble.append(grown.tree, k)
        return grown

    def _add_leaves(self, grown, k: int) -> None:
        """Add a finished tree's leaves to its rows' training margins of group ``k``."""
        if grown.rows is not None:
            self.backend.add_leaf_values(
                self.train_data.margin, grown.rows, grown.begins, grown.ends, grown.tree.value[grown.leaf_nodes], k
            )

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self, history: dict) -> None:
        """Append every metric of every evaluation set to ``history``
        (``{name: {metric: [values]}}``), sets and metrics in order."""
        for d, (dm, name) in zip(self.eval_data, self.evals):
            for m in self.metrics:
                value = _evaluate(m, d, dm, self.objective, self.comm, self.obj is not None)
                history.setdefault(name, {}).setdefault(m.name, []).append(value)


def _evaluate(metric, d: _Data, dm: DMatrix, objective, comm, custom_objective: bool) -> float:
    if getattr(metric, "is_custom", False):
        # a user's metric function gets host arrays, as XGBoost gives it NumPy predictions
        margin = d.backend.to_host(d.margin)
        preds = margin if custom_objective else objective.transform(margin)
        return float(metric.evaluate_custom(preds, dm))
    if d.label is None:
        raise DGBoostValueError("an evaluation set has no label")
    extra = {}
    if metric.needs_row_order and d.global_rows is not None:
        extra["global_rows"] = d.global_rows
    return float(metric.evaluate(d.margin, d.label, d.weight, dm.group_ptr, objective, comm, **extra))


class _RoundPairs:
    """One round's gradients, queued on the device, and per output group and tree its
    quantised pairs.

    The pairs of group 0's first tree are queued at once, the others' when :meth:`group` asks
    (one tree's 8 bytes a row held at a time beyond the gradients). A group's scales are agreed
    once, for all its trees; each tree ``j`` of a forest has its own row subsample.
    """

    def __init__(
        self,
        r: int,
        objective,
        obj,
        train_data,
        dtrain: DMatrix,
        n_groups: int,
        p: TrainParams,
        global_index,
        backend,
        comm,
        n_global: int,
    ):
        if obj is not None:
            objective.dtrain = dtrain
        grad, hess = objective.gradient(train_data.margin, train_data.label, train_data.weight, dtrain.group_ptr, r)
        xp = backend.xp
        self.round = r
        self.grad = xp.asarray(grad, dtype=np.float32).reshape(dtrain.num_row(), n_groups)
        self.hess = xp.asarray(hess, dtype=np.float32).reshape(dtrain.num_row(), n_groups)
        self._seed, self._subsample, self._global_index = p.seed, p.subsample, global_index
        self._keep0 = self._sample(0)  # tree 0's, used by every group
        self._backend, self._comm, self._n_global = backend, comm, n_global
        self._scales = None  # (group, bits, scales) of the group being grown
        self._first = None
        self._first = self.group(0, 0)
        self._first_tree = None  # (tree index, GrowingTree) of group 0's first tree, when grown ahead

    def _sample(self, j: int):
        if self._subsample >= 1.0:
            return None
        return hashed_below(self._seed, _subsample_stream(self.round, j), self._global_index, self._subsample)

    def keep(self, j: int):
        """bool (n,) on the device: the rows tree ``j`` of each group is grown on; None
        without subsampling."""
        return self._keep0 if j == 0 else self._sample(j)

    def _group_scales(self, k: int):
        if self._scales is None or self._scales[0] != k:
            backend = self._backend
            # the maxima as float32 bits, which order as the values do (NaN above inf): the max
            # of the bits over the ranks is the bits of the max, so every rank makes the same
            # scales on its device and sees a non-finite value of any rank when it reads them
            bits = self._comm.allreduce_max(backend.abs_max_bits(self.grad[:, k], self.hess[:, k]))
            self._scales = (k, bits, backend.fixed_point_scales(bits, self._n_global))
        return self._scales[1], self._scales[2]

    def grow_first_tree(self, grower, tree_index: int) -> None:
        """Queue group 0's first tree (``TreeGrower.grow``, which reads nothing where its
        growth needs no host decision), to be taken by :meth:`take_grown`."""
        _, scales, gpair = self._first
        self._first_tree = (tree_index, grower.grow(gpair, scales, tree_index))

    def take_grown(self, tree_index: int):
        """The tree :meth:`grow_first_tree` queued (:class:`~dgboost.grower.GrowingTree`, no
        longer held here), or None."""
        first, self._first_tree = self._first_tree, None
        if first is None:
            return None
        if first[0] != tree_index:
            raise AssertionError(f"tree {first[0]} was grown ahead, tree {tree_index} is due")
        return first[1]

    def group(self, k: int, j: int = 0):
        """(bits uint32 (2,), scales float64 (2,), pairs int32 (n, 2)) of group ``k``'s tree
        ``j``, on the device."""
        if k == 0 and j == 0 and self._first is not None:
            first, self._first = self._first, None
            return first
        bits, scales = self._group_scales(k)
        return bits, scales, self._backend.quantise(self.grad[:, k], self.hess[:, k], scales, self.keep(j))


def _check_finite(maxima, r: int) -> None:
    """Raise if the gradient maxima read by ``maxima`` (``Backend.read_later``) are not finite."""
    if not np.isfinite(maxima.result()[0].view(np.float32)).all():
        raise DGBoostValueError(f"round {r}: the objective produced non-finite gradients or hessians")


def _refit_leaves(objective, tree, grown, margin, dtrain: DMatrix, keep, p: TrainParams, comm, backend) -> None:
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
    values = np.asarray(
        objective.leaf_values(residual, weight, leaf_of_row, len(grown.leaf_nodes), comm), dtype=np.float64
    )
    old = tree.value[grown.leaf_nodes].astype(np.float64)
    refit = np.where(np.isnan(values), old, values * p.eta)
    tree.value[grown.leaf_nodes] = refit.astype(np.float32)
