"""NcclComm's stream-ordered mode, its control flow on the CPU: a stand-in for CuPy and NCCL.

The stand-in (shares no code with dgboost) has one rank, streams that can "hang" (work queued
while hung never finishes until the communicator is aborted, as NCCL kernels wait for a lost
peer), and records what NCCL was asked to do. The GPU behaviour itself is tested in
``tests/gpu/test_multi_gpu.py`` and ``tests/gpu/test_cuda_dask.py``.
"""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest

from dgboost.errors import CommunicationError


class _State:
    def __init__(self):
        self.hang = False
        self.aborted = False
        self.destroyed = False
        self.calls: list[str] = []
        self.synchronised = 0


class _Array:
    """A device array stand-in: its module name makes dgboost take it for CuPy's."""

    def __init__(self, values):
        self.values = np.array(values)
        self.data = _Memory(self)
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.size, self.dtype, self.shape = self.values.size, self.values.dtype, self.values.shape
        self.nbytes = self.values.nbytes

    def get(self):
        return self.values.copy()


_Array.__module__ = "cupy._stand_in"


class _Memory:
    """A stand-in array's memory: its address, and a copy from another's in stream order."""

    def __init__(self, owner: _Array):
        self.owner, self.ptr = owner, id(owner)

    def copy_from_device_async(self, src: "_Memory", nbytes: int, stream=None) -> None:
        assert nbytes == src.owner.nbytes == self.owner.nbytes
        self.owner.values[...] = src.owner.values


def _stand_in(state: _State):
    class Event:
        def __init__(self, disable_timing=False):
            self._hung = False

        def record(self, stream=None):
            self._hung = state.hang

        @property
        def done(self):
            return not self._hung or state.aborted

    class Stream:
        ptr = 0

        def __init__(self, non_blocking=False):
            pass

        @property
        def done(self):
            return not state.hang or state.aborted

        def synchronize(self):
            state.synchronised += 1
            while state.hang and not state.aborted:
                time.sleep(0.001)

    class Device:
        def __init__(self, index=0):
            self.id = index

        def use(self):
            pass

    class Communicator:
        def __init__(self, world_size, uid, rank):
            pass

        def allReduce(self, *args):
            state.calls.append("allReduce")

        def abort(self):
            assert not state.aborted, "aborted twice"
            state.aborted = True

        def destroy(self):
            state.destroyed = True

    current = Stream()
    nccl = types.ModuleType("cupy.cuda.nccl")
    nccl.NcclCommunicator = Communicator
    for i, name in enumerate(
        [
            "NCCL_INT64",
            "NCCL_INT32",
            "NCCL_FLOAT64",
            "NCCL_FLOAT32",
            "NCCL_UINT8",
            "NCCL_UINT32",
            "NCCL_UINT64",
            "NCCL_SUM",
            "NCCL_MAX",
        ]
    ):
        setattr(nccl, name, i)
    cuda = types.ModuleType("cupy.cuda")
    cuda.Event, cuda.Stream, cuda.Device, cuda.nccl = Event, Stream, Device, nccl
    cuda.get_current_stream = lambda: current
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    cupy.array = lambda a, copy=True, order="C": _Array(a.values if isinstance(a, _Array) else a)
    cupy.asarray = lambda a: a if isinstance(a, _Array) else _Array(a)
    cupy.ascontiguousarray = lambda a: a
    cupy.empty_like = lambda a: _Array(np.empty_like(a.values))
    cupy.empty = lambda shape, dtype: _Array(np.empty(shape, dtype))
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.nccl": nccl}


@pytest.fixture
def fake_gpu(monkeypatch):
    state = _State()
    for name, module in _stand_in(state).items():
        monkeypatch.setitem(sys.modules, name, module)
    return state


def _comm(timeout=0.2, stream_ordered=True):
    from dgboost.comm.nccl import NcclComm

    return NcclComm(b"uid", 0, 1, timeout=timeout, stream_ordered=stream_ordered)


def test_a_device_reduction_is_queued_without_waiting_and_closing_waits_for_it(fake_gpu):
    with _comm() as comm:
        assert comm.stream_ordered
        given = _Array(np.arange(4, dtype=np.int64))
        out = comm.allreduce_sum(given)
        np.testing.assert_array_equal(out.get(), np.arange(4))  # the output starts as the input
        assert out is not given and out.data.ptr != given.data.ptr  # reduced in its own memory
        assert fake_gpu.calls == ["allReduce"] and fake_gpu.synchronised == 0
    assert fake_gpu.destroyed and not fake_gpu.aborted


def test_a_queued_reduction_of_a_strided_array_reduces_a_c_ordered_copy(fake_gpu):
    given = _Array(np.arange(6, dtype=np.int64))
    given.flags.c_contiguous = False  # as a column of a matrix would be
    with _comm() as comm:
        out = comm.allreduce_sum(given)
    np.testing.assert_array_equal(out.get(), np.arange(6))
    assert out is not given and fake_gpu.calls == ["allReduce"]


def test_a_queued_reduction_that_never_finishes_aborts_once_and_the_next_collective_raises(fake_gpu):
    comm = _comm().__enter__()
    fake_gpu.hang = True  # a peer is lost: what is queued from now on never finishes
    comm.allreduce_sum(_Array(np.ones(3, np.int64)))  # returns at once
    deadline = time.monotonic() + 5
    while not fake_gpu.aborted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake_gpu.aborted
    with pytest.raises(CommunicationError, match="allreduce_sum on NCCL rank 0 of 1 did not finish within 0.2 s"):
        comm.allreduce_max(_Array(np.ones(3)))
    with pytest.raises(CommunicationError, match="did not finish"):
        comm.__exit__(None, None, None)
    assert not fake_gpu.destroyed  # aborted, never destroyed


def test_a_host_reduction_after_a_lost_peer_is_freed_by_the_watchdog_and_raises(fake_gpu):
    comm = _comm().__enter__()
    fake_gpu.hang = True
    comm.allreduce_sum(_Array(np.ones(3, np.int64)))
    start = time.monotonic()
    with pytest.raises(CommunicationError, match="did not finish"):
        comm.allreduce_max(np.array([1.0]))  # waits for the stream: only the abort frees it
    assert time.monotonic() - start < 5
    comm.__exit__(CommunicationError, None, None)  # the job already failed: no second error


def test_closing_waits_for_the_last_queued_collective_and_raises_when_it_never_ends(fake_gpu):
    comm = _comm().__enter__()
    comm.allreduce_sum(_Array(np.ones(2, np.int64)))
    fake_gpu.hang = True
    start = time.monotonic()
    with pytest.raises(CommunicationError):
        comm.__exit__(None, None, None)
    assert 0.15 < time.monotonic() - start < 5 and fake_gpu.aborted and not fake_gpu.destroyed


def test_the_default_mode_waits_for_every_collective(fake_gpu):
    with _comm(stream_ordered=False) as comm:
        assert not comm.stream_ordered
        comm.allreduce_sum(_Array(np.ones(2, np.int64)))
        assert fake_gpu.synchronised == 1  # the producer's stream, then the collective's own
    assert fake_gpu.destroyed


@pytest.fixture
def communicator_module():
    """dgboost.dask._communicator, imported before the stand-in CuPy (Dask looks CuPy up)."""
    from dgboost.dask import _communicator

    return _communicator


@pytest.mark.parametrize("stream_ordered", [True, False])
def test_the_client_s_nccl_stream_ordered_option_reaches_the_rank_s_communicator(
    communicator_module, fake_gpu, monkeypatch, stream_ordered
):
    import dgboost as dg
    import dgboost.comm.nccl as nccl

    make_spec, open_comm = communicator_module.make_spec, communicator_module.open_comm
    monkeypatch.setattr(nccl, "new_unique_id", lambda: b"uid")
    with dg.config_context(nccl_stream_ordered=stream_ordered, nccl_keep_communicators=False):
        spec = make_spec(None, 1, "nccl", 0.2, [0], workers=("tcp://a:1",), kept_states=[None])
    # the rank reads the spec only: the configuration where it runs does not matter
    with dg.config_context(nccl_stream_ordered=not stream_ordered), open_comm(spec, 0, 1) as comm:
        assert comm.stream_ordered is stream_ordered
        comm.allreduce_sum(_Array(np.ones(2, np.int64)))
        assert fake_gpu.synchronised == (0 if stream_ordered else 1)
    assert fake_gpu.destroyed and comm.kept is None
