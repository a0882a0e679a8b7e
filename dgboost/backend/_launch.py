"""Kernel launches with their parameters packed by :mod:`struct`: less host time a launch.

A launch through CuPy's ``RawKernel.__call__`` took about 12 us of host time on an H200's host,
and a lossguide or multiclass round makes 400-650 launches, most of them on small data while
the device waits for the host (``docs/performance-notes.md``, "Host time of a round"). Here the
arguments are written into one buffer at their C offsets with one ``struct.Struct.pack_into``
and handed to ``cuLaunchKernel`` as the array of pointers to them that it reads; the driver
copies the values during the call, so the buffer is free again when the call returns.

Device arrays go as their data pointers (what CuPy's launch passes for a raw kernel's
``T*`` parameter) and NumPy scalars as their C type; a launch with any other argument is
left to CuPy (:meth:`PackedLauncher.launch` returns False).
"""

from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np

__all__ = ["PackedLauncher", "parameter_codes"]

# struct codes (native size and alignment) of the NumPy scalar types a kernel takes
_SCALAR_CODES = {
    np.bool_: "?",
    np.int8: "b",
    np.uint8: "B",
    np.int16: "h",
    np.uint16: "H",
    np.int32: "i",
    np.uint32: "I",
    np.int64: "q",
    np.uint64: "Q",
    np.float32: "f",
    np.float64: "d",
}
_POINTER = "P"


def parameter_codes(kinds, array_type) -> str | None:
    """The struct codes of kernel arguments of types ``kinds``: "P" for ``array_type`` (a
    device array), the C type of a NumPy scalar; None when some type is neither (a Python
    int, say, whose C type only CuPy's conversion rules would decide)."""
    codes = []
    for kind in kinds:
        if kind is array_type:
            codes.append(_POINTER)
        else:
            code = _SCALAR_CODES.get(kind)
            if code is None:
                return None
            codes.append(code)
    return "".join(codes)


class _Parameters:
    """One signature's parameter block: a buffer holding the values at their C offsets
    (native alignment, as struct lays out "@" formats), and the array of pointers to
    them that ``cuLaunchKernel`` takes as ``kernelParams``."""

    __slots__ = ("pack_into", "buffer", "pointers", "address")

    def __init__(self, codes: str):
        layout = struct.Struct("@" + codes)
        self.pack_into = layout.pack_into
        self.buffer = ctypes.create_string_buffer(max(1, layout.size))
        base = ctypes.addressof(self.buffer)
        offsets, end = [], 0
        for code in codes:  # each field at the next multiple of its own size, as in C
            size = struct.calcsize(code)
            end = -(-end // size) * size
            offsets.append(end)
            end += size
        self.pointers = (ctypes.c_void_p * max(1, len(codes)))(*(base + o for o in offsets))
        self.address = ctypes.addressof(self.pointers)


class PackedLauncher:
    """Launches kernels through ``cuLaunchKernel`` with packed parameters.

    One parameter block per signature (the arguments' types) and thread: a block is written
    and read within one call, so threads need their own.

    Parameters
    ----------
    driver : module
        ``cupy.cuda.driver`` (its ``launchKernel``).
    array_type : type
        ``cupy.ndarray``: arguments of this exact type go as their data pointers.
    """

    def __init__(self, driver, array_type):
        self._launch_kernel = driver.launchKernel
        self._array_type = array_type
        self._local = threading.local()

    def parameters(self, kinds: tuple) -> _Parameters | None:
        """The calling thread's parameter block for arguments of types ``kinds``; None
        when some type is neither the array type nor a NumPy scalar's."""
        blocks = getattr(self._local, "blocks", None)
        if blocks is None:
            blocks = self._local.blocks = {}
        block = blocks.get(kinds, False)
        if block is False:
            codes = parameter_codes(kinds, self._array_type)
            block = blocks[kinds] = None if codes is None else _Parameters(codes)
        return block

    def launch(self, function_ptr: int, grid: tuple, threads: int, shared: int, stream_ptr: int, args) -> bool:
        """Launch the kernel ``function_ptr`` (a ``CUfunction``) on ``grid`` (1 to 3 ints) of
        blocks of ``threads``, with ``shared`` bytes of dynamic shared memory, on the
        stream ``stream_ptr``. Returns False, launching nothing, when an argument is
        neither a device array nor a NumPy scalar."""
        kinds = tuple(map(type, args))
        try:  # the common case in one lookup: this thread has a block for these types
            block = self._local.blocks[kinds]
        except (AttributeError, KeyError):
            block = self.parameters(kinds)
        if block is None:
            return False
        array_type = self._array_type
        block.pack_into(block.buffer, 0, *[a.data.ptr if type(a) is array_type else a for a in args])
        n = len(grid)
        self._launch_kernel(
            function_ptr,
            grid[0],
            grid[1] if n > 1 else 1,
            grid[2] if n > 2 else 1,
            threads,
            1,
            1,
            shared,
            stream_ptr,
            block.address,
            0,
        )
        return True
