"""Every CUDA kernel compiles for sm_90 on a machine without a GPU, and ships in the wheel."""

import re
from pathlib import Path

import pytest
import tomllib

from dgboost.backend import _nvrtc

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", _nvrtc.kernel_files())
def test_each_kernel_file_compiles_to_ptx_for_compute_90_without_a_gpu(name):
    ptx = _nvrtc.compile_ptx(name, "compute_90")
    assert ".target sm_90" in ptx
    for kernel in re.findall(
        r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(',
        (_nvrtc.kernel_dir() / name).read_text(),
    ):
        assert f".entry {kernel}(" in ptx


def test_a_kernel_that_does_not_compile_raises_with_the_compiler_log(tmp_path, monkeypatch):
    (tmp_path / "common.cuh").write_text("#pragma once\n")
    (tmp_path / "broken.cu").write_text('#include "common.cuh"\nextern "C" __global__ void k() { undeclared(); }\n')
    monkeypatch.setattr(_nvrtc, "kernel_dir", lambda: tmp_path)
    with pytest.raises(_nvrtc.DGBoostError, match="undeclared"):
        _nvrtc.compile_ptx("broken.cu")


def test_assembled_sources_inline_each_local_header_once():
    text = _nvrtc.assemble("split.cu")
    assert '#include "common.cuh"' not in text
    assert text.count("struct GradPairInt {") == 1


def test_a_variants_text_is_assembled_in_its_files_place_with_the_kernel_headers():
    variant = (_nvrtc.kernel_dir() / "histogram.cu").read_text().replace("add_pair(", "add_pair_variant(")
    text = _nvrtc.assemble("histogram.cu", variant)
    assert "add_pair_variant(" in text and "add_pair(" not in text
    assert '#include "common.cuh"' not in text
    assert text.count("struct GradPairInt {") == 1
    assert _nvrtc.assemble("histogram.cu", (_nvrtc.kernel_dir() / "histogram.cu").read_text()) == _nvrtc.assemble(
        "histogram.cu"
    )


def test_the_fma_contraction_stays_off_so_split_gains_round_as_on_the_cpu():
    assert "--fmad=false" in _nvrtc.compile_options()


def test_every_package_folder_is_listed_for_the_wheel_and_kernels_and_cluster_configs_ship_in_it():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dgboost").rglob("__init__.py")}
    assert found <= listed
    assert config["package-dir"]["dgboost._kernels"] == "kernels"
    assert set(config["package-data"]["dgboost._kernels"]) == {"*.cu", "*.cuh"}
    assert config["package-dir"]["dgboost._cluster_configs"] == "cluster_configs"
    assert set(config["package-data"]["dgboost._cluster_configs"]) == {"*.yaml"}
