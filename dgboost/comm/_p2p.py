"""Point-to-point exchange of byte blocks between the ranks of a host collective (an alltoall).

XGBoost's collective has no send to one rank: its allgather hands every rank every rank's
bytes. An alltoall in which rank ``k`` must receive only what is addressed to it (a feature
block of every rank's sketch sample, 1/world of the sample) goes over TCP connections of its
own, opened for the one exchange: each rank listens on the address by which it reaches the
tracker (where XGBoost's workers reach each other too), the ranks learn each other's address
through the collective, and each sends each peer its block on a thread of its own while it
receives its peers' blocks. A rank accepts only connections that present the random key it
gave out for this exchange, from a rank that has not sent yet, with the size it expects.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from typing import Callable

import numpy as np

from ..errors import CommunicationError

__all__ = ["exchange"]

_ADDRESS = struct.Struct("!64sH16s")  # host (text, zero-padded), port, the receiver's key
_HEADER = struct.Struct("!16sqq")  # the receiver's key, the sender's rank, the block's bytes


def _local_host(tracker_host: str) -> tuple[int, str]:
    """The address family and the host address through which this machine reaches the tracker."""
    family, _, _, _, where = socket.getaddrinfo(tracker_host, 9, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(where)  # a UDP "connect" sends nothing: it only picks the route
        return family, probe.getsockname()[0]


def exchange(
    rank: int,
    world_size: int,
    blocks: list,
    expected: list[int],
    allgather: Callable[[np.ndarray], np.ndarray],
    tracker_host: str,
    timeout: float,
) -> list[np.ndarray]:
    """Send ``blocks[k]`` to rank ``k``; receive from every rank the block addressed to this one.

    Parameters
    ----------
    rank, world_size : int
    blocks : list of ``world_size`` NumPy uint8 arrays, shape (n_k,)
        ``blocks[rank]`` is kept, not sent.
    expected : list of ``world_size`` int
        The bytes rank ``k`` sends this one (every rank knows them from an earlier collective).
    allgather : callable
        The collective's allgather of uint8 (1, _ADDRESS.size) rows (the ranks' addresses).
    tracker_host : str
        The tracker's host: this rank listens on its own address on the route to it.
    timeout : float
        Seconds the whole exchange may take before :class:`CommunicationError`.

    Returns
    -------
    list of ``world_size`` uint8 arrays: rank ``k``'s block to this rank (``blocks[rank]`` itself
    for this rank).
    """
    if world_size == 1:
        return [np.asarray(blocks[0], np.uint8)]
    deadline = time.monotonic() + timeout
    family, host = _local_host(tracker_host)
    key = os.urandom(16)
    with socket.create_server((host, 0), family=family, backlog=max(8, world_size)) as server:
        mine = _ADDRESS.pack(host.encode(), server.getsockname()[1], key)
        table = np.asarray(allgather(np.frombuffer(mine, np.uint8).reshape(1, -1)), np.uint8)
        peers = [_ADDRESS.unpack(table[k].tobytes()) for k in range(world_size)]
        errors: list[BaseException] = []
        senders = [
            threading.Thread(target=_send, args=(peers[k], rank, blocks[k], deadline, errors), daemon=True)
            for k in range(world_size)
            if k != rank
        ]
        for t in senders:
            t.start()
        try:
            received = _receive(server, key, rank, world_size, expected, deadline)
        finally:
            for t in senders:
                t.join(max(0.0, deadline - time.monotonic()))
        if errors:
            raise CommunicationError(f"rank {rank} could not send its alltoall block: {errors[0]}") from errors[0]
        if any(t.is_alive() for t in senders):
            raise CommunicationError(f"rank {rank}'s alltoall blocks were not taken within {timeout:.0f} s")
    received[rank] = np.asarray(blocks[rank], np.uint8)
    return received


def _send(peer: tuple, rank: int, block: np.ndarray, deadline: float, errors: list) -> None:
    host, port, key = peer
    try:
        with socket.create_connection(
            (host.rstrip(b"\0").decode(), port), timeout=max(0.1, deadline - time.monotonic())
        ) as link:
            link.sendall(_HEADER.pack(key, rank, block.nbytes))
            link.sendall(memoryview(np.ascontiguousarray(block, np.uint8)).cast("B"))
    except OSError as exc:
        errors.append(exc)


def _receive(server, key: bytes, rank: int, world_size: int, expected: list[int], deadline: float) -> list:
    """Every peer's block, from connections accepted on ``server`` until each peer has sent."""
    received: list = [None] * world_size
    waiting = world_size - 1
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            missing = [k for k in range(world_size) if k != rank and received[k] is None]
            raise CommunicationError(f"rank {rank} received no alltoall block from ranks {missing} in time")
        server.settimeout(left)
        try:
            link, _ = server.accept()
        except socket.timeout:
            continue
        with link:
            link.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                header = _read(link, bytearray(_HEADER.size))
                got_key, sender, nbytes = _HEADER.unpack(bytes(header))
                if got_key != key or not 0 <= sender < world_size or sender == rank or received[sender] is not None:
                    continue  # not a peer of this exchange: ignored
                if nbytes != expected[sender]:
                    raise CommunicationError(
                        f"rank {rank} expected {expected[sender]} bytes from rank {sender}, which sent {nbytes}"
                    )
                block = np.empty(nbytes, np.uint8)
                _read(link, memoryview(block).cast("B"))
            except (OSError, ConnectionError):
                continue  # a connection that broke before its block was whole: its sender reports it
        received[sender] = block
        waiting -= 1
    return received


def _read(link: socket.socket, buffer) -> bytearray | memoryview:
    """Fill ``buffer`` from ``link`` (ConnectionError when it closes first)."""
    view = memoryview(buffer).cast("B")
    got = 0
    while got < len(view):
        n = link.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the connection closed before the block was whole")
        got += n
    return buffer
