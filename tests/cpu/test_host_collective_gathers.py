"""The host communicator's allgather and alltoall (XGBoost's collective, ranks on threads)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dgboost.comm.collective import CollectiveComm, start_tracker
from dgboost.comm.threads import run_in_threads


def _in_collective(world: int, fn):
    """``fn(comm, rank)`` on ``world`` threads, each a rank of one XGBoost collective; the results
    in rank order (XGBoost's communicator is per thread, as in an in-process Dask cluster)."""
    tracker, args = start_tracker(world, "127.0.0.1", timeout=60)
    results: list = [None] * world
    errors: list = []

    def body(rank: int) -> None:
        try:
            with CollectiveComm(args, rank, world, timeout=60, verbosity=0) as comm:
                results[rank] = fn(comm, rank)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    tracker.free()
    if errors:
        raise errors[0]
    return results


def _rows(rank: int, n: int, width: int) -> np.ndarray:
    """Rows whose bits say where they came from, with -0.0 and a NaN payload that a sum would lose."""
    rows = np.arange(n * width, dtype=np.float32).reshape(n, width) + 1000 * rank
    if n:
        rows[0, 0] = -0.0
        rows.reshape(-1)[-1] = np.frombuffer(np.uint32(0x7FC00123 + rank).tobytes(), np.float32)[0]
    return rows


@pytest.mark.parametrize("world", [1, 2, 3])
def test_allgather_concatenates_ranks_of_different_row_counts_bit_for_bit(world):
    counts = [5, 0, 17][:world]  # rank 1 has no rows

    def gather(comm, rank):
        return comm.allgather(_rows(rank, counts[rank], 3)), comm.allgather(np.arange(counts[rank], dtype=np.int64))

    expected = np.concatenate([_rows(r, counts[r], 3) for r in range(world)])
    for rows, ints in _in_collective(world, gather):
        assert rows.shape == (sum(counts), 3) and rows.dtype == np.float32
        assert rows.tobytes() == expected.tobytes()
        np.testing.assert_array_equal(ints, np.concatenate([np.arange(c) for c in counts]))


def test_allgather_refuses_rows_of_different_widths():
    from dgboost.errors import CommunicationError

    def gather(comm, rank):
        with pytest.raises(CommunicationError, match="different sizes"):
            comm.allgather(np.zeros((2, 2 + rank), np.float32))
        return True

    assert all(_in_collective(2, gather))


def _parts(sender: int, world: int) -> list:
    """What ``sender`` sends each rank: 2-D blocks of sizes that differ by sender and receiver."""
    return [
        np.full((1 + receiver, 2 + sender), 10 * sender + receiver, np.float32)
        if (sender + receiver) % 3
        else np.empty((0, 2 + sender), np.float32)
        for receiver in range(world)
    ]


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("transport", ["collective", "threads"])
def test_alltoall_gives_each_rank_the_parts_addressed_to_it_in_rank_order(world, transport):
    def exchange(comm, rank):
        return comm.alltoall(_parts(rank, world))

    got = _in_collective(world, exchange) if transport == "collective" else run_in_threads(world, exchange)
    for receiver, parts in enumerate(got):
        assert len(parts) == world
        for sender, part in enumerate(parts):
            want = _parts(sender, world)[receiver]
            assert part.shape == want.shape and part.dtype == want.dtype
            np.testing.assert_array_equal(part, want)


def test_alltoall_moves_one_dimensional_parts_and_keeps_their_bits():
    def exchange(comm, rank):
        return comm.alltoall([_rows(rank, 4 + k, 1).reshape(-1) for k in range(2)])

    for receiver, parts in enumerate(_in_collective(2, exchange)):
        for sender, part in enumerate(parts):
            assert part.tobytes() == _rows(sender, 4 + receiver, 1).reshape(-1).tobytes()


def _blocks(sender: int, world: int) -> list:
    return [np.full(3 * receiver + sender, 16 * sender + receiver, np.uint8) for receiver in range(world)]


def test_the_point_to_point_exchange_ignores_connections_without_its_key():
    import socket

    from dgboost.comm import _p2p

    world = 3

    def exchange(comm, rank):
        def allgather(row):
            table = comm.allgather(row)
            if rank == 0:  # strangers knock at every peer before the ranks send
                for k in range(1, world):
                    host, port, _ = _p2p._ADDRESS.unpack(table[k].tobytes())
                    with socket.create_connection((host.rstrip(b"\0").decode(), port)) as s:
                        s.sendall(_p2p._HEADER.pack(b"x" * 16, 0, 3 * k))
                    socket.create_connection((host.rstrip(b"\0").decode(), port)).close()
            return table

        expected = [3 * rank + k for k in range(world)]
        return _p2p.exchange(rank, world, _blocks(rank, world), expected, allgather, "127.0.0.1", 30)

    for receiver, got in enumerate(run_in_threads(world, exchange)):
        for sender, block in enumerate(got):
            np.testing.assert_array_equal(block, _blocks(sender, world)[receiver])


def test_a_peer_that_never_sends_ends_the_exchange_with_a_communication_error_in_time():
    import time

    from dgboost.comm import _p2p
    from dgboost.errors import CommunicationError

    def exchange(comm, rank):
        if rank == 1:  # joins the address exchange, then is gone
            comm.allgather(np.zeros((1, _p2p._ADDRESS.size), np.uint8))
            return None
        t0 = time.monotonic()
        with pytest.raises(CommunicationError):
            _p2p.exchange(0, 2, _blocks(0, 2), [0, 1], comm.allgather, "127.0.0.1", 1.0)
        return time.monotonic() - t0

    assert run_in_threads(2, exchange)[0] < 10
