"""Record layouts shared with the CUDA kernels agree on both sides."""

import shutil
import subprocess
from pathlib import Path

import pytest

from dgboost._layout import GRAD_PAIR_INT, NODE, PATH_ELEMENT
from dgboost.backend._nvrtc import compile_options

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
_CCCL = [o for o in compile_options() if o.startswith("-I")]  # CuPy's libcu++ for <cuda/std/...>


def test_numpy_records_have_the_sizes_and_offsets_the_header_asserts():
    assert GRAD_PAIR_INT.itemsize == 16
    assert NODE.itemsize == 24
    assert PATH_ELEMENT.itemsize == 40
    assert PATH_ELEMENT.fields["zero_fraction"][1] == 24
    assert PATH_ELEMENT.fields["v"][1] == 32


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_shared_header_compiles_for_sm_90_with_its_layout_assertions(tmp_path):
    source = tmp_path / "check.cu"
    source.write_text('#include "common.cuh"\n__global__ void touch(dgboost::Node* n) { n->left = 0; }\n')
    result = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-std=c++17",
            f"-I{KERNELS}",
            *_CCCL,
            "--ptx",
            str(source),
            "-o",
            str(tmp_path / "check.ptx"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
