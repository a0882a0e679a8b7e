"""Preflight: every partition is checked where it lives before any collective starts.

A bad partition found inside a collective would leave the other ranks waiting; found here, it
gives one error that names the partition (and every other bad one, up to a few).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from typing import Any

import numpy as np

from ..errors import CommunicationError, DGBoostError, DGBoostTypeError, DGBoostValueError
from ..params import TrainParams

__all__ = ["DEFAULT_TIMEOUT", "check_partitions"]

_MAX_REPORTED = 5
# seconds the checks may take in all (dgboost.dask.train passes its own timeout)
DEFAULT_TIMEOUT = 300.0
# a fetch is given at least this once the bound is spent (0 would time out before the first
# message; a result whose worker answers comes in milliseconds)
_MIN_FETCH_SECONDS = 0.5
# checks that passed: (scheduler, partition keys, parameters) -> infos. A Dask key names one
# value for good, so partitions of the same keys (a new DaskDMatrix of the same persisted
# arrays included) need not be checked again for the same parameters
_PASSED: collections.OrderedDict = collections.OrderedDict()
_PASSED_MAX = 32
_passed_lock = threading.Lock()


def _check_partition(
    index: int,
    part: dict,
    has: dict,
    missing: float,
    feature_names,
    columns,
    n_features: int,
    params: TrainParams | None,
    feature_types=None,
    categories=None,
) -> dict:
    """Validate partition ``index`` as the training data of one rank would be validated.

    ``params`` were validated on the client: only its objective is used here, to check the
    labels (not for a callable objective). ``categories`` (agreed over all partitions, see
    :class:`~dgboost.dask.DaskDMatrix`): every category of the partition must be among them.

    Returns
    -------
    dict
        ``rows``; ``first_qid`` / ``last_qid`` when there are query ids; ``codes_k`` ({feature:
        largest code + 1}) for categorical features given as codes. Raises a
        DGBoostError whose message starts with ``partition <index>:``.
    """
    from ..data import RankDMatrix, aligned_codes, model_categories
    from ..objective import get_objective

    try:
        data = part["data"]
        if columns is not None and hasattr(data, "columns"):
            got = [str(c) for c in data.columns]
            if got != list(columns):
                extra = [c for c in got if c not in columns]
                lacking = [c for c in columns if c not in got]
                detail = (
                    (f"extra {extra}" if extra else "")
                    + (", " if extra and lacking else "")
                    + (f"missing {lacking}" if lacking else "")
                )
                raise DGBoostValueError(f"its columns differ from the first partition's ({detail or 'order differs'})")
        dm = RankDMatrix(
            data,
            part.get("label"),
            weight=part.get("weight"),
            base_margin=part.get("base_margin"),
            qid=part.get("qid"),
            missing=missing,
            feature_names=feature_names,
            feature_types=feature_types,
        )
        if dm.num_col() != n_features:
            raise DGBoostValueError(f"it has {dm.num_col()} features, the data has {n_features}")
        if categories is not None:
            aligned_codes(
                dm, *model_categories(feature_types, categories), what="the data (agreed over all partitions)"
            )
        label = dm._vector("label")  # where the partition keeps it: a device one is checked there
        if params is not None and not callable(params.objective) and label is not None and dm.num_row():
            objective = get_objective(params)
            objective.validate_labels(label, dm._vector("weight"), dm.group_ptr)
        info = {"rows": dm.num_row()}
        if dm._coded is not None and any(dm._coded):
            # codes given as numbers: each feature's K here (the job's K is the largest)
            info["codes_k"] = {j: dm.n_categories(j) for j, coded in enumerate(dm._coded) if coded}
        if part.get("qid") is not None and dm.num_row():
            q = np.asarray(_to_numpy(part["qid"])).reshape(-1)
            info["first_qid"], info["last_qid"] = q[0].item(), q[-1].item()
        return info
    except DGBoostError as exc:
        raise type(exc)(f"partition {index}: {exc}") from None


def _to_numpy(value):
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    if hasattr(value, "get"):  # CuPy
        value = value.get()
    return np.asarray(value)


def check_partitions(
    client: Any, dmatrix: Any, params: TrainParams | None, what: str = "data", timeout: float = DEFAULT_TIMEOUT
) -> list[dict]:
    """Run the partition checks of ``dmatrix`` on the workers that hold the partitions.

    Parameters
    ----------
    client : distributed.Client
    dmatrix : DaskDMatrix
    params : TrainParams or None
        The job's parameters, parsed once on the client (:func:`dgboost.params.parse_params`):
        the labels are checked against its objective (unless that is a callable). None: no
        label checks (e.g. a custom objective given as ``obj``). They are not parsed again.
    what : str
        How errors name the matrix ("data", "evaluation set 'valid'").
    timeout : float
        Seconds to wait for all the checks and their results together (default
        ``DEFAULT_TIMEOUT``, 300 s, as :func:`dgboost.dask.train`'s ``timeout``). A check that
        does not finish or answer in time (its worker busy with a task that does not end, such
        as a cancelled rank still in a collective, or its partition not recomputed after a
        lost worker) raises CommunicationError naming the partitions instead of leaving the
        caller waiting. Every wait on the workers here is bounded by it.

    Returns
    -------
    list of dict
        Per partition: ``rows`` (and query id bounds). Checks that passed are remembered
        for the same partitions (Dask keys) and ``params``: while a worker holds every
        partition, later calls return them without running again (a large share of a short
        job otherwise: docs/performance-notes.md).

    Raises
    ------
    DGBoostTypeError
        When ``params`` is not a TrainParams (a dict must be parsed first, once).
    DGBoostValueError
        Naming every bad partition (the first few), or a query group that spans partitions.
    CommunicationError
        When the checks did not all finish within ``timeout`` seconds.
    """
    from distributed import wait

    if params is not None and not isinstance(params, TrainParams):
        raise DGBoostTypeError(
            f"check_partitions takes the TrainParams parsed on the client (or None), got {type(params).__name__}"
        )

    key = _memo_key(client, dmatrix, params)
    with _passed_lock:
        passed = _PASSED.get(key)
        if passed is not None:
            _PASSED.move_to_end(key)  # least recently used goes first
    if passed is not None and _all_held(client, dmatrix):
        return [dict(info) for info in passed]
    futures = [
        client.submit(
            _check_partition,
            i,
            dmatrix.partition(i),
            dmatrix.has,
            dmatrix.missing,
            dmatrix.feature_names,
            dmatrix._frame_columns,
            dmatrix.n_features,
            params,
            dmatrix.feature_types,
            getattr(dmatrix, "categories", None),
            pure=False,
        )
        for i in range(dmatrix.n_partitions)
    ]
    deadline = time.monotonic() + timeout
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        _give_up(client, futures, [i for i, f in enumerate(futures) if f.status == "pending"], what, timeout)
    answers = _finished_answers(client, futures, deadline)
    infos, errors = [], []
    for i, fut in enumerate(futures):
        if i in answers:
            infos.append(answers[i])
            continue
        try:
            # finished, but its result is fetched from its worker (or recomputed when the
            # worker was lost since): within what is left of the same bound
            infos.append(fut.result(timeout=max(deadline - time.monotonic(), _MIN_FETCH_SECONDS)))
        except DGBoostError as exc:
            errors.append(str(exc))
            infos.append(None)
        except TimeoutError:
            _give_up(client, futures, list(range(i, len(futures))), what, timeout)
        except Exception as exc:  # noqa: BLE001 - the partition itself could not be computed (I/O, user code)
            errors.append(f"partition {i}: could not be computed: {type(exc).__name__}: {exc}")
            infos.append(None)
    if errors:
        more = f" (and {len(errors) - _MAX_REPORTED} more)" if len(errors) > _MAX_REPORTED else ""
        lead = "; ".join(errors[:_MAX_REPORTED])
        raise DGBoostValueError(f"{what}: {lead}{more}")
    _check_query_groups(infos, what)
    with _passed_lock:
        _PASSED[key] = [dict(info) for info in infos]
        while len(_PASSED) > _PASSED_MAX:
            _PASSED.popitem(last=False)
    return infos


def _finished_answers(client, futures: list, deadline: float) -> dict:
    """{index: answer} of the checks that finished, fetched in one round trip rather than one
    each (46 partitions on one local worker: 117 to 77 ms for all the checks, on 2 cores);
    {} when they are not all fetched by ``deadline`` (each is then asked on its own, within
    what is left). Failed checks are not among them: their errors are asked one by one."""
    done = [i for i, f in enumerate(futures) if f.status == "finished"]
    if not done:
        return {}
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        fetch = pool.submit(client.gather, [futures[i] for i in done])
        values = fetch.result(timeout=max(deadline - time.monotonic(), _MIN_FETCH_SECONDS))
    except Exception:  # noqa: BLE001 - late or lost: the one-by-one fetch below names it
        return {}
    finally:
        pool.shutdown(wait=False)
    return dict(zip(done, values))


def _give_up(client, futures: list, late: list[int], what: str, timeout: float) -> None:
    """Cancel the checks still running and raise the CommunicationError naming their partitions."""
    client.cancel([futures[i] for i in late])
    shown = ", ".join(str(i) for i in late[:_MAX_REPORTED]) + (" ..." if len(late) > _MAX_REPORTED else "")
    raise CommunicationError(
        f"{what}: partition(s) {shown} could not be checked within {timeout:g} s "
        "(a worker busy with a task that does not end, or a lost partition "
        "not recomputed)"
    ) from None


def _memo_key(client, dmatrix, params: TrainParams | None) -> tuple:
    """What the checks of a matrix depend on: its partitions (their Dask keys, field by field),
    the parameters, and the cluster that holds them."""
    parts = tuple(
        tuple(None if f is None else str(f.key) for f in dmatrix.partition(i).values())
        for i in range(dmatrix.n_partitions)
    )
    shape = (
        dmatrix.missing,
        repr(dmatrix.feature_names),
        repr(dmatrix._frame_columns),
        dmatrix.n_features,
        repr(dmatrix.feature_types),
        repr(getattr(dmatrix, "categories", None)),
    )
    settings = "" if params is None else repr(params)
    return str(getattr(client.scheduler, "address", "")), parts, repr(shape), settings


def _all_held(client, dmatrix) -> bool:
    """Whether a worker holds every partition (a lost one is checked again as it is recomputed,
    within the checks' timeout)."""
    futures = dmatrix.all_futures()
    who = client.who_has(futures)
    return all(who.get(f.key) for f in futures)


def _check_query_groups(infos: list[dict], what: str) -> None:
    """Query ids must be sorted over the whole data, and a query must lie in one partition."""
    previous = None
    for i, info in enumerate(infos):
        if "first_qid" not in info:
            continue
        if previous is not None:
            j, last = previous
            if info["first_qid"] == last:
                raise DGBoostValueError(
                    f"{what}: query {last!r} spans partitions {j} and {i}: keep each query group within one partition"
                )
            if info["first_qid"] < last:
                raise DGBoostValueError(
                    f"{what}: query ids are not sorted across partitions "
                    f"({last!r} in partition {j}, then {info['first_qid']!r} in {i})"
                )
        previous = (i, info["last_qid"])
