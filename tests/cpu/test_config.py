"""dgboost.config: set_config / get_config / config_context with XGBoost's names; environment
variables as defaults read when a value is used; the NCCL options travel in the job's spec."""

from __future__ import annotations

import logging
import threading

import pytest

import dgboost as dg
from dgboost.errors import DGBoostTypeError, DGBoostValueError

_DEFAULTS = {
    "verbosity": 1,
    "nccl_stream_ordered": True,
    "nccl_keep_communicators": True,
    "device_cache_bytes": 4 << 30,
    "kernel_cache_dir": None,
    "use_rmm": False,
}
_VARIABLES = ("DGBOOST_NCCL_STREAM_ORDERED", "DGBOOST_NCCL_KEEP", "DGBOOST_DEVICE_CACHE_BYTES", "DGBOOST_KERNEL_CACHE")


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    """No deployment variable and no process-wide value leaks into or out of a test."""
    from dgboost import config

    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    saved = dict(config._process)
    config._process.clear()
    yield
    config._process.clear()
    config._process.update(saved)


def test_the_defaults_are_the_documented_ones():
    assert dg.get_config() == _DEFAULTS


def test_a_context_sets_values_inside_and_restores_them_after_even_on_an_error():
    dg.set_config(device_cache_bytes=1000)
    with pytest.raises(RuntimeError, match="inside"):
        with dg.config_context(device_cache_bytes=10, nccl_keep_communicators=False):
            assert dg.get_config()["device_cache_bytes"] == 10
            assert dg.get_config()["nccl_keep_communicators"] is False
            raise RuntimeError("inside")
    assert dg.get_config() == {**_DEFAULTS, "device_cache_bytes": 1000}


def test_set_config_inside_a_context_is_undone_when_the_context_exits():
    with dg.config_context(verbosity=2):
        dg.set_config(verbosity=3, kernel_cache_dir="/tmp/kernels")
        with dg.config_context(verbosity=0):
            assert dg.get_config()["verbosity"] == 0
        assert dg.get_config()["verbosity"] == 3
    assert dg.get_config() == _DEFAULTS


def test_a_context_changes_the_calling_thread_only_and_set_config_outside_one_the_whole_process():
    seen = {}

    def other_thread():
        seen["cache"] = dg.get_config()["device_cache_bytes"]

    with dg.config_context(device_cache_bytes=5):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen["cache"] == 4 << 30
    dg.set_config(device_cache_bytes=7)
    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen["cache"] == 7


def test_an_environment_variable_is_read_when_the_value_is_used_not_at_import(monkeypatch):
    monkeypatch.setenv("DGBOOST_DEVICE_CACHE_BYTES", "123")
    monkeypatch.setenv("DGBOOST_NCCL_STREAM_ORDERED", "0")
    monkeypatch.setenv("DGBOOST_NCCL_KEEP", "false")
    monkeypatch.setenv("DGBOOST_KERNEL_CACHE", "/srv/kernels")
    assert dg.get_config() == {
        **_DEFAULTS,
        "device_cache_bytes": 123,
        "nccl_stream_ordered": False,
        "nccl_keep_communicators": False,
        "kernel_cache_dir": "/srv/kernels",
    }
    with dg.config_context(device_cache_bytes=9):  # a value set in Python wins over the variable
        assert dg.get_config()["device_cache_bytes"] == 9


@pytest.mark.parametrize(
    "variable, text",
    [
        ("DGBOOST_DEVICE_CACHE_BYTES", "4GB"),
        ("DGBOOST_DEVICE_CACHE_BYTES", "-1"),
        ("DGBOOST_NCCL_KEEP", "maybe"),
        ("DGBOOST_NCCL_STREAM_ORDERED", "2"),
    ],
)
def test_an_environment_variable_that_cannot_be_read_is_named_in_the_error(monkeypatch, variable, text):
    monkeypatch.setenv(variable, text)
    with pytest.raises(DGBoostValueError, match=f"environment variable {variable}="):
        dg.get_config()


def test_an_unknown_option_is_refused_with_the_closest_name_and_nothing_is_set():
    with pytest.raises(
        DGBoostValueError, match="unknown dgboost config option 'device_cache_byte'; did you mean 'device_cache_bytes'"
    ):
        dg.set_config(verbosity=2, device_cache_byte=10)
    assert dg.get_config()["verbosity"] == 1
    with pytest.raises(DGBoostValueError, match="unknown dgboost config option 'verbose'; did you mean 'verbosity'"):
        with dg.config_context(verbose=2):
            pass
    assert dg.get_config()["verbosity"] == 1


@pytest.mark.parametrize(
    "option, value, error",
    [
        ("verbosity", 4, DGBoostValueError),
        ("verbosity", -1, DGBoostValueError),
        ("verbosity", True, DGBoostTypeError),
        ("verbosity", "2", DGBoostTypeError),
        ("nccl_stream_ordered", 1, DGBoostTypeError),
        ("nccl_keep_communicators", "no", DGBoostTypeError),
        ("device_cache_bytes", -5, DGBoostValueError),
        ("device_cache_bytes", 1.5, DGBoostTypeError),
        ("kernel_cache_dir", 3, DGBoostTypeError),
        ("kernel_cache_dir", "", DGBoostTypeError),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(option, value, error):
    with pytest.raises(error, match=option):
        dg.set_config(**{option: value})
    assert dg.get_config() == _DEFAULTS


def test_the_nccl_options_of_the_client_go_into_the_communicator_spec(monkeypatch):
    import dgboost.comm.nccl as nccl
    from dgboost.dask._communicator import make_spec

    monkeypatch.setattr(nccl, "new_unique_id", lambda: b"id")
    default = make_spec(None, 2, "nccl", 30.0, [0, 1], workers=("a", "b"), kept_states=[None, None])
    assert default["stream_ordered"] is True and default["keep"] is True
    with dg.config_context(nccl_stream_ordered=False, nccl_keep_communicators=False):
        spec = make_spec(None, 2, "nccl", 30.0, [0, 1], workers=("a", "b"), kept_states=[None, None])
    assert spec["stream_ordered"] is False and spec["keep"] is False
    monkeypatch.setenv("DGBOOST_NCCL_KEEP", "0")  # set after import: still applies
    assert make_spec(None, 2, "nccl", 30.0, [0, 1], workers=("a", "b"), kept_states=[None, None])["keep"] is False


def test_the_kernel_cache_folder_is_the_configured_one_at_each_compile(monkeypatch, tmp_path):
    from dgboost.backend import _nvrtc

    monkeypatch.setenv("DGBOOST_KERNEL_CACHE", str(tmp_path / "from-env"))
    assert _nvrtc._cache_dir() == tmp_path / "from-env"
    with dg.config_context(kernel_cache_dir=tmp_path / "set"):
        assert _nvrtc._cache_dir() == tmp_path / "set"
    monkeypatch.delenv("DGBOOST_KERNEL_CACHE")
    assert _nvrtc._cache_dir().parts[-3:] == (".cache", "dgboost", "kernels")


def test_verbosity_filters_the_dgboost_loggers_records(caplog):
    logger = logging.getLogger("dgboost")
    with caplog.at_level(logging.DEBUG, logger="dgboost"):
        logger.info("info at the default verbosity")
        with dg.config_context(verbosity=2):
            logger.info("info at verbosity 2")
            logger.debug("debug at verbosity 2")
        with dg.config_context(verbosity=0):
            logger.warning("warning at verbosity 0")
            logger.error("error at verbosity 0")
    assert [r.getMessage() for r in caplog.records] == ["info at verbosity 2", "error at verbosity 0"]


def test_use_rmm_is_accepted_under_xgboosts_name_and_is_false_by_default():
    assert dg.get_config()["use_rmm"] is False
    with dg.config_context(use_rmm=True):
        assert dg.get_config()["use_rmm"] is True
    assert dg.get_config()["use_rmm"] is False


def test_use_rmm_without_rmm_installed_warns_and_keeps_cupys_pool(monkeypatch):
    import sys
    import types

    from dgboost.backend import _allocator

    monkeypatch.setattr(_allocator, "_warned", False)
    monkeypatch.setitem(sys.modules, "rmm", None)  # import rmm raises ImportError
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(set_allocator=lambda a: pytest.fail("set")))
    assert _allocator.apply_allocator(fake_cupy) == "cupy"  # the option is off by default
    with dg.config_context(use_rmm=True), pytest.warns(UserWarning, match="rmm"):
        assert _allocator.apply_allocator(fake_cupy) == "cupy"


def test_use_rmm_with_rmm_installed_routes_cupys_allocations_through_it(monkeypatch):
    import sys
    import types

    from dgboost.backend import _allocator

    def rmm_cupy_allocator(nbytes):
        return nbytes

    module = types.ModuleType("rmm.allocators.cupy")
    module.rmm_cupy_allocator = rmm_cupy_allocator
    for name in ("rmm", "rmm.allocators"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "rmm.allocators.cupy", module)
    chosen = []
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(set_allocator=chosen.append))
    with dg.config_context(use_rmm=True):
        assert _allocator.apply_allocator(fake_cupy) == "rmm"
    assert chosen == [rmm_cupy_allocator]
