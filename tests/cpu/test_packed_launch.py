"""The packed kernel launcher (dgboost/backend/_launch.py): what cuLaunchKernel would read.

A stand-in driver reads each parameter back through the pointer array, as the driver does,
so the layout is checked without a GPU; the GPU tests launch real kernels through it.
"""

import ctypes
import threading
from types import SimpleNamespace

import numpy as np

from dgboost.backend._launch import PackedLauncher, parameter_codes


class _DeviceArray:
    """A device array as the launcher sees one: ``data.ptr``."""

    def __init__(self, ptr: int):
        self.data = SimpleNamespace(ptr=ptr)


class _RecordingDriver:
    """``launchKernel`` that reads the parameters back by their C types, as the driver copies them."""

    def __init__(self, ctypes_of_params):
        self.ctypes_of_params = ctypes_of_params
        self.calls = []

    def launchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802 - CUDA's name
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        values = [
            ctypes.cast(pointers[i], ctypes.POINTER(kind)).contents.value
            for i, kind in enumerate(self.ctypes_of_params)
        ]
        self.calls.append(((f, gx, gy, gz, bx, by, bz, shared, stream, extra), values))


def test_parameter_codes_name_device_arrays_as_pointers_and_scalars_by_their_c_type():
    args = (_DeviceArray(1), np.int32(2), np.int64(3), np.float64(4.0), np.uint8(5), np.uint32(6), np.bool_(True))
    assert parameter_codes(tuple(map(type, args)), _DeviceArray) == "PiqdBI?"


def test_an_argument_of_no_known_c_type_is_left_to_cupy():
    driver = _RecordingDriver([])
    launcher = PackedLauncher(driver, _DeviceArray)
    assert parameter_codes((_DeviceArray, int), _DeviceArray) is None  # a Python int: CuPy's rules decide
    assert launcher.launch(7, (1,), 32, 0, 0, (_DeviceArray(1), 3)) is False
    assert driver.calls == []


def test_every_parameter_reads_back_at_its_c_type_whatever_the_padding_before_it():
    # a 1-byte and a 4-byte value before 8-byte ones: C pads them, and so must the packing
    args = (
        np.uint8(200),
        _DeviceArray(0x7F00_0000_1000),
        np.int32(-5),
        np.float64(2.5),
        np.bool_(True),
        np.int64(-(1 << 40)),
        np.float32(0.75),
        np.uint32(4_000_000_000),
        _DeviceArray(0x7F00_0000_2008),
        np.int8(-3),
        np.uint64(1 << 63),
    )
    kinds = [
        ctypes.c_uint8,
        ctypes.c_uint64,
        ctypes.c_int32,
        ctypes.c_double,
        ctypes.c_bool,
        ctypes.c_int64,
        ctypes.c_float,
        ctypes.c_uint32,
        ctypes.c_uint64,
        ctypes.c_int8,
        ctypes.c_uint64,
    ]
    driver = _RecordingDriver(kinds)
    launcher = PackedLauncher(driver, _DeviceArray)
    assert launcher.launch(99, (5, 3), 256, 4096, 1234, args) is True
    ((launch, values),) = driver.calls
    assert launch == (99, 5, 3, 1, 256, 1, 1, 4096, 1234, 0)
    assert values == [
        200,
        0x7F00_0000_1000,
        -5,
        2.5,
        True,
        -(1 << 40),
        0.75,
        4_000_000_000,
        0x7F00_0000_2008,
        -3,
        1 << 63,
    ]
    # each pointer sits at the next multiple of its value's size, as a C struct of them would
    block = launcher.parameters(tuple(map(type, args)))
    base = ctypes.addressof(block.buffer)
    offsets = [block.pointers[i] - base for i in range(len(args))]
    assert offsets == [0, 8, 16, 24, 32, 40, 48, 52, 56, 64, 72]


def test_a_second_launch_of_one_signature_reads_its_own_values_not_the_first():
    driver = _RecordingDriver([ctypes.c_uint64, ctypes.c_int32])
    launcher = PackedLauncher(driver, _DeviceArray)
    launcher.launch(1, (1,), 32, 0, 0, (_DeviceArray(10), np.int32(1)))
    launcher.launch(1, (2,), 32, 0, 0, (_DeviceArray(20), np.int32(2)))
    assert [values for _, values in driver.calls] == [[10, 1], [20, 2]]
    assert [call[1] for call, _ in driver.calls] == [1, 2]


def test_each_thread_packs_into_a_parameter_block_of_its_own():
    launcher = PackedLauncher(_RecordingDriver([]), _DeviceArray)
    blocks = []
    kinds = (_DeviceArray, np.int32)
    worker = threading.Thread(target=lambda: blocks.append(launcher.parameters(kinds)))
    worker.start()
    worker.join()
    blocks.append(launcher.parameters(kinds))
    assert blocks[0] is not blocks[1]
    assert launcher.parameters(kinds) is blocks[1]
