"""Training checkpoints: what resuming needs, written atomically, validated when read.

A checkpoint is written by rank 0 after every ``checkpoint_every`` rounds of a ``train``
call. It holds the model so far (the Booster's JSON text), the training configuration,
fingerprints of the training data and of the quantile cuts, the number of rounds done, the
early-stopping state and the evaluation history. Resuming needs nothing else because every
random choice in dgboost is a pure function of (seed, round, global row index) and the cuts
are a function of the data and the seed alone (:mod:`dgboost.quantile`): round ``r`` grows
the same trees whether or not the rounds before it ran in this process, on these workers.

File format: ``checkpoint-<rounds, 8 digits>.json``: one header line
``{"format": "dgboost-checkpoint", "version": 1, "sha256": ...}`` and then the payload's
JSON, whose SHA-256 the header holds, so a truncated or altered file is detected and skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import warnings
from typing import Any

import numpy as np

from ._array import array_module, to_host
from .errors import DGBoostValueError
from .quantile import sketch_sample_mask

__all__ = [
    "CheckpointWarning",
    "Checkpointer",
    "checkpointer_for",
    "data_fingerprint",
    "cuts_fingerprint",
    "training_config",
    "check_resumable",
    "check_same_data",
    "read_checkpoints",
    "load_on_rank0",
]

_FORMAT = "dgboost-checkpoint"
_VERSION = 1
_NAME = re.compile(r"^checkpoint-(\d{8})\.json$")
# parameters that change where or how fast training runs, never the model (docs/design.md
# §1.3 "Integers make it exact": the same model on CPU and GPU): a job may resume on other hardware
_RUNTIME_PARAMS = frozenset({"nthread", "device"})
# the fingerprint's row sample: its own seed, so that changing the training seed is reported
# as a parameter change and not as a change of the data
_FINGERPRINT_SEED = 0x0F1A9E
_FINGERPRINT_ROWS = 4096


class CheckpointWarning(UserWarning):
    """A checkpoint file was skipped (unreadable, truncated or altered)."""


def training_config(params, early_stopping_rounds, maximize) -> dict:
    """What must be equal for a checkpoint to be resumed: the parameters that shape the model.

    Parameters
    ----------
    params : TrainParams
    early_stopping_rounds : int or None
    maximize : bool or None

    Returns
    -------
    dict
        JSON-able; compared key by key by :func:`check_resumable`.
    """
    out = {k: v for k, v in params.to_dict().items() if k not in _RUNTIME_PARAMS}
    out["early_stopping_rounds"] = early_stopping_rounds
    out["maximize"] = maximize
    # through JSON so that tuples and lists compare as a reloaded checkpoint's
    return json.loads(json.dumps(out))


def data_fingerprint(dmat, global_rows, n_global: int, comm) -> dict:
    """A cheap fingerprint of the training rows of all ranks, the same for any partitioning.

    The sampled rows are chosen by a hash of their global index (as the sketch sample,
    :func:`~dgboost.quantile.sketch_sample_mask`); each is digested with its label, weight and
    base margin, and the (global index, digest) pairs of all ranks are hashed in index order.

    Parameters
    ----------
    dmat : DMatrix
        This rank's rows.
    global_rows : ndarray of int64, shape (n_local,)
        The rows' global indices, in the array module of ``dmat.data``.
    n_global : int
        Rows of all ranks.
    comm : Communicator
        One allgather of at most a few thousand (index, digest) pairs.

    Returns
    -------
    dict
        ``{"rows", "features", "feature_names", "sample"}`` (``sample``: hex SHA-256).
    """
    xp = array_module(dmat.data)
    mask = sketch_sample_mask(dmat.num_row(), 0, n_global, _FINGERPRINT_SEED, _FINGERPRINT_ROWS, xp, global_rows)
    local = np.flatnonzero(to_host(mask))
    pairs = np.empty((local.size, 2), np.int64)
    pairs[:, 0] = np.asarray(to_host(global_rows))[local]
    pairs[:, 1] = _row_digests(dmat, local, xp)
    pairs = np.asarray(to_host(comm.allgather(pairs)), np.int64).reshape(-1, 2)
    pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]
    return {
        "rows": int(n_global),
        "features": int(dmat.num_col()),
        "feature_names": None if dmat.feature_names is None else [str(n) for n in dmat.feature_names],
        "sample": hashlib.sha256(np.ascontiguousarray(pairs).tobytes()).hexdigest(),
    }


def _row_digests(dmat, rows: np.ndarray, xp) -> np.ndarray:
    """An int64 digest of each listed row: its features, label, weight and base margin."""
    if rows.size == 0:  # also a rank that holds no rows (a reshape cannot infer widths there)
        return np.empty(0, np.int64)
    index = rows if xp is np else xp.asarray(rows)
    parts = [np.asarray(to_host(dmat.data[index]), np.float32).reshape(rows.size, -1)]
    for extra in (dmat.label, dmat.weight, dmat.base_margin):
        if extra is not None:
            parts.append(np.asarray(to_host(extra), np.float32).reshape(dmat.num_row(), -1)[rows])
    record = np.concatenate(parts, axis=1) if parts else np.empty((rows.size, 0), np.float32)
    # one bit pattern per value: every NaN alike, -0.0 as 0.0
    record = np.where(np.isnan(record), np.float32(np.nan), record + np.float32(0.0))
    record = np.ascontiguousarray(record)
    digests = [hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in record]
    return np.frombuffer(b"".join(digests), dtype=np.int64) if digests else np.empty(0, np.int64)


def cuts_fingerprint(cuts) -> str:
    """Hex SHA-256 of the cut values and pointers (identical cuts, identical bins)."""
    h = hashlib.sha256(np.ascontiguousarray(to_host(cuts.ptrs), np.int64).tobytes())
    h.update(np.ascontiguousarray(to_host(cuts.values), np.float32).tobytes())
    return h.hexdigest()


def check_resumable(state: dict, config: dict, eval_names: list[str]) -> None:
    """Refuse a checkpoint made with other parameters or evaluation sets.

    Raises
    ------
    DGBoostValueError
        Naming the parameters (at most five) that differ, with both values.
    """
    saved = state["config"]
    diff = [
        f"{k}: checkpoint {saved.get(k)!r}, now {config.get(k)!r}"
        for k in sorted(set(saved) | set(config))
        if saved.get(k) != config.get(k)
    ]
    if diff:
        raise DGBoostValueError(
            f"cannot resume from {state['path']}: it was written with other training parameters ({'; '.join(diff[:5])})"
        )
    if state["eval_names"] != list(eval_names):
        raise DGBoostValueError(
            f"cannot resume from {state['path']}: it was written with evaluation sets "
            f"{state['eval_names']}, now {list(eval_names)}"
        )


def check_same_data(state: dict, fingerprint: dict, cuts_hash: str) -> None:
    """Refuse a checkpoint written for other training data.

    Raises
    ------
    DGBoostValueError
        Saying what differs: the number of rows or features, the feature names, the sampled
        rows, or (with all of these equal) the quantile cuts.
    """
    saved = state["data"]
    what = {"rows": "rows", "features": "features", "feature_names": "feature names"}
    for key, label in what.items():
        if saved[key] != fingerprint[key]:
            raise DGBoostValueError(
                f"cannot resume from {state['path']}: the training data differs "
                f"({label}: checkpoint {saved[key]!r}, now {fingerprint[key]!r})"
            )
    if saved["sample"] != fingerprint["sample"]:
        raise DGBoostValueError(
            f"cannot resume from {state['path']}: the training data differs (the values, "
            "labels or weights of sampled rows changed)"
        )
    if state["cuts"] != cuts_hash:
        raise DGBoostValueError(
            f"cannot resume from {state['path']}: the training data differs (its quantile cuts changed)"
        )


# -- files ------------------------------------------------------------------------------------


def _encode(payload: dict) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    header = json.dumps(
        {"format": _FORMAT, "version": _VERSION, "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()}
    )
    return header + "\n" + body


def _decode(text: str) -> dict:
    """The payload of a checkpoint file's text; ValueError says why it is not valid."""
    header_text, sep, body = text.partition("\n")
    if not sep:
        raise ValueError("no header line (truncated?)")
    header = json.loads(header_text)
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise ValueError("not a dgboost checkpoint")
    if header.get("version") != _VERSION:
        raise ValueError(f"checkpoint version {header.get('version')!r}, this dgboost reads {_VERSION}")
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != header.get("sha256"):
        raise ValueError("checksum mismatch (truncated or altered)")
    payload = json.loads(body)
    missing = {
        "round",
        "begin_round",
        "config",
        "data",
        "cuts",
        "model",
        "history",
        "eval_names",
        "early_stopping",
        "stopped",
    } - set(payload)
    if missing:
        raise ValueError(f"missing keys {sorted(missing)}")
    return payload


def _refuse_pickle(raw: bytes, path: str) -> None:
    """A Python pickle where a checkpoint belongs is refused, not skipped: it is no damaged
    checkpoint but a foreign file, and dgboost never unpickles files (loading one can run any
    code). Protocol 2+ pickles start with the PROTO opcode 0x80."""
    if raw[:1] == b"\x80":
        raise DGBoostValueError(
            f"{path} is a Python pickle, not a dgboost checkpoint (JSON): dgboost never unpickles "
            "files, since loading a pickle can run any code; remove it"
        )


def read_checkpoints(directory) -> list[tuple[int, str]]:
    """(rounds, path) of the checkpoint files in ``directory``, newest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), os.path.join(directory, n)) for n in names if (m := _NAME.match(n))]
    return sorted(found, reverse=True)


def checkpointer_for(checkpoint_dir, checkpoint_every, resume) -> "Checkpointer | None":
    """The job's :class:`Checkpointer` (None without ``checkpoint_dir``), after checking the
    three checkpoint arguments of ``train`` / ``dask.train`` together (DGBoostValueError)."""
    if checkpoint_dir is None:
        if checkpoint_every is not None or resume:
            raise DGBoostValueError("checkpoint_every and resume need checkpoint_dir")
        return None
    every = 10 if checkpoint_every is None else checkpoint_every
    if isinstance(every, (bool, np.bool_)) or int(every) != every or every < 1:
        raise DGBoostValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    return Checkpointer(checkpoint_dir, int(every))


class Checkpointer:
    """Writes and finds the checkpoints of one training job.

    Parameters
    ----------
    directory : str or os.PathLike
        Created when missing. On a Dask cluster it must be reachable by every worker that
        may become rank 0 (a shared file system).
    every : int
        Rounds between checkpoints, counted in the ``train`` call: with ``every=10`` the
        checkpoints hold 10, 20, 30, ... rounds (written after the 0-based rounds 9, 19, ...).
    keep : int
        The newest ``keep`` files are kept; older ones are deleted after each write.
    """

    def __init__(self, directory, every: int, keep: int = 2):
        self.directory = os.fspath(directory)
        self.every = int(every)
        self.keep = int(keep)

    def due(self, rounds_done: int) -> bool:
        """Whether a checkpoint is written once ``rounds_done`` rounds of the call are done."""
        return rounds_done > 0 and rounds_done % self.every == 0

    def write(self, payload: dict) -> str:
        """Write ``payload`` atomically (temporary file, fsync, rename) and prune old files.

        Returns
        -------
        str
            The path written.
        """
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"checkpoint-{int(payload['round']):08d}.json")
        fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(_encode(payload))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_directory(self.directory)
        for _, old in read_checkpoints(self.directory)[self.keep :]:
            with contextlib.suppress(OSError):
                os.unlink(old)
        return path

    def load_newest(self) -> dict | None:
        """The newest checkpoint that validates, or None; skipped files give a CheckpointWarning.

        Returns
        -------
        dict or None
            The payload with ``"path"`` added.
        """
        for _, path in read_checkpoints(self.directory):
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as exc:
                warnings.warn(f"dgboost: skipping checkpoint {path}: {exc}", CheckpointWarning, stacklevel=3)
                continue
            _refuse_pickle(raw, path)
            try:
                payload = _decode(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                warnings.warn(f"dgboost: skipping checkpoint {path}: {exc}", CheckpointWarning, stacklevel=3)
                continue
            payload["path"] = path
            return payload
        return None


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_on_rank0(checkpointer: Checkpointer, comm) -> dict | None:
    """Rank 0 reads the newest valid checkpoint and every rank gets it (one broadcast).

    A failure to read is broadcast too, so every rank raises it instead of waiting.
    """
    outcome: Any = None
    if comm.rank == 0:
        try:
            outcome = ("ok", checkpointer.load_newest())
        except Exception as exc:  # noqa: BLE001 - sent to every rank, raised there
            outcome = ("error", f"cannot read checkpoints in {checkpointer.directory}: {exc}")
    outcome = comm.broadcast(outcome, 0)
    if outcome[0] == "error":
        raise DGBoostValueError(outcome[1])
    return outcome[1]
