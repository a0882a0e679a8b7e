"""Quiet by default: the Numba compile notice only when Numba compiles, ``verbosity`` for
dgboost's own lines, and CPU threads that follow ``nthread``, the process's cores and a
container's CPU quota, set again for every call."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import dgboost as dg
from dgboost.backend import _compile_notice, _threads, get_backend

NOTICE = "compiling the CPU kernels with Numba"
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 32}


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(np.float32)


class _Event:
    """A stand-in for a Numba compilation event of ``module``'s function."""

    def __init__(self, module: str):
        def kernel():
            pass

        kernel.__module__ = module
        self.data = {"dispatcher": type("Dispatcher", (), {"py_func": staticmethod(kernel)})()}


@pytest.fixture
def fresh_notice(monkeypatch):
    """The notice not said yet in this process; the listener that a real compilation would call."""
    monkeypatch.setitem(_compile_notice._state, "said", False)
    return _compile_notice._listener_class()()


def test_a_compilation_of_a_cpu_kernel_is_announced_on_stderr_once_per_process(capsys, fresh_notice):
    fresh_notice.on_start(_Event("dgboost.backend._cpu_kernels"))
    fresh_notice.on_start(_Event("dgboost.backend._cpu_kernels"))
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count(NOTICE) == 1 and len(captured.err.splitlines()) == 1


def test_compilations_of_other_functions_say_nothing(capsys, fresh_notice):
    fresh_notice.on_start(_Event("somebody.elses_module"))
    fresh_notice.on_start(_Event("dgboost.explain.treeshap"))
    assert capsys.readouterr().err == ""


def test_verbosity_0_silences_the_compile_notice(capsys, fresh_notice):
    with dg.config_context(verbosity=0):
        fresh_notice.on_start(_Event("dgboost.backend._cpu_kernels"))
    assert capsys.readouterr().err == ""


def test_a_thread_can_send_the_notice_elsewhere_once(capsys, fresh_notice):
    calls = []
    with _compile_notice.notice_to(lambda: calls.append(1)):
        fresh_notice.on_start(_Event("dgboost.backend._cpu_kernels"))
        fresh_notice.on_start(_Event("dgboost.backend._cpu_kernels"))
    assert calls == [1] and capsys.readouterr().err == ""


def _train_in_subprocess(cache, code_before="", trains=1):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    code = (
        "import numpy as np, dgboost as dg\n"
        f"{code_before}"
        "x = np.random.default_rng(0).normal(size=(100, 8))\n"
        f"for _ in range({trains}):\n"
        f"    dg.train({PARAMS!r}, dg.DMatrix(x, (x[:, 0] > 0).astype(float)), 1)\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)


def test_a_cold_numba_cache_is_announced_once_and_a_warm_one_not_at_all(tmp_path):
    """A cache of the test's own: the first process compiles into it (training twice, one
    notice), the next is served by it (nothing). The old check guessed from the cache's files
    and spoke on every run when ``NUMBA_CACHE_DIR`` was set."""
    cold = _train_in_subprocess(tmp_path / "cache", trains=2)
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    assert _train_in_subprocess(tmp_path / "cache").stderr == ""


def test_a_cold_numba_cache_under_verbosity_0_compiles_in_silence(tmp_path):
    quiet = _train_in_subprocess(tmp_path / "cache", code_before="dg.set_config(verbosity=0)\n")
    assert quiet.stderr == "" and quiet.stdout == ""
    assert any((tmp_path / "cache").rglob("*.nbi"))  # it did compile (into the test's cache)


def test_dgboosts_warnings_and_info_lines_follow_verbosity(caplog):
    logger = logging.getLogger("dgboost")
    caplog.set_level(logging.DEBUG, logger="dgboost")
    for verbosity in range(4):
        with dg.config_context(verbosity=verbosity):
            logger.warning("w%d", verbosity)
            logger.info("i%d", verbosity)
            logger.debug("d%d", verbosity)
    assert [r.getMessage() for r in caplog.records] == ["w1", "w2", "i2", "w3", "i3", "d3"]


def test_evaluation_lines_the_user_asked_for_print_even_at_verbosity_0(capsys):
    x, y = _data(n=200)
    dtrain = dg.DMatrix(x, y)
    with dg.config_context(verbosity=0):
        dg.train(PARAMS, dtrain, 2, evals=[(dtrain, "train")], verbose_eval=True)
    assert capsys.readouterr().out.splitlines()[0].startswith("[0]\ttrain-logloss:")


# --- threads


def test_nthread_given_is_used_up_to_numbas_pool():
    assert _threads.resolve_threads(3, pool=8) == 3
    assert _threads.resolve_threads(64, pool=8) == 8


def test_the_default_is_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(_threads, "_cgroup_cpus", lambda: None)
    assert _threads.usable_cores() == 3
    assert _threads.resolve_threads(0, pool=16) == 3


def test_a_containers_cpu_quota_bounds_the_default(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    v2 = tmp_path / "cpu.max"
    monkeypatch.setattr(_threads, "_QUOTA_FILES", ((str(v2), None),))
    v2.write_text("250000 100000\n")
    assert _threads.usable_cores() == 2  # 2.5 CPUs: two threads
    v2.write_text("50000 100000\n")
    assert _threads.usable_cores() == 1
    v2.write_text("max 100000\n")
    assert _threads.usable_cores() == 16


def test_a_cgroup_v1_quota_is_read_too(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    quota, period = tmp_path / "cpu.cfs_quota_us", tmp_path / "cpu.cfs_period_us"
    monkeypatch.setattr(_threads, "_QUOTA_FILES", ((str(tmp_path / "absent"), None), (str(quota), str(period))))
    quota.write_text("400000\n")
    period.write_text("100000\n")
    assert _threads.usable_cores() == 4
    quota.write_text("-1\n")
    assert _threads.usable_cores() == 16


def test_a_job_can_give_its_thread_a_default_of_its_own():
    with _threads.default_threads(1):
        assert _threads.resolve_threads(0, pool=16) == 1
        assert _threads.resolve_threads(4, pool=16) == 4  # nthread given still wins
    assert _threads.resolve_threads(0, pool=16) == min(_threads.usable_cores(), 16)


def test_the_cpu_backend_sets_numbas_threads_for_every_call(monkeypatch):
    """Numba keeps a thread's count between calls: a default run after an ``nthread=1`` run of
    the same thread must get its cores back."""
    pool = numba.config.NUMBA_NUM_THREADS
    if pool < 2:
        pytest.skip("Numba's pool has one thread here: no count to go back to")
    monkeypatch.setattr(_threads, "usable_cores", lambda: pool)
    assert get_backend("cpu", 1).threads == 1 and numba.get_num_threads() == 1
    backend = get_backend("cpu", 0)
    assert backend.threads == pool and numba.get_num_threads() == pool


def test_a_backend_runs_its_kernels_on_its_own_threads_though_a_later_backend_set_others(monkeypatch):
    """A training's backend (``nthread=1``) then a default backend made on the same thread (as
    binning or prediction make one): the first one's calls still run on one thread, and leave
    the thread's count as they found it. Before, its rounds ran on every core."""
    from dgboost.backend import cpu

    pool = numba.config.NUMBA_NUM_THREADS
    if pool < 2:
        pytest.skip("Numba's pool has one thread here: one count only")
    monkeypatch.setattr(_threads, "usable_cores", lambda: pool)
    training = get_backend("cpu", 1)
    get_backend("cpu", 0)
    assert numba.get_num_threads() == pool
    seen = []
    kernel = cpu.K.gpair_totals

    def recording(*args):
        seen.append(numba.get_num_threads())
        return kernel(*args)

    monkeypatch.setattr(cpu.K, "gpair_totals", recording)
    totals = training.gpair_totals(np.ones((100, 2), np.int32))
    assert seen == [1] and numba.get_num_threads() == pool
    np.testing.assert_array_equal(totals, [100, 100])
    hist = training.build_histograms(
        np.zeros((100_000, 1), np.uint8),
        np.array([0, 4]),
        np.ones((100_000, 2), np.int32),
        np.arange(100_000, dtype=np.int32),
        [[0, 100_000]],
    )
    assert hist[0, 0].tolist() == [100_000, 100_000] and numba.get_num_threads() == pool


def test_every_cpu_backend_method_that_calls_a_parallel_kernel_sets_its_thread_count():
    import inspect
    import re

    from dgboost import _kernel_switch
    from dgboost.backend import cpu

    parallel = {k for k, v in vars(cpu.K).items() if isinstance(v, _kernel_switch._Switch)}
    for name, method in vars(cpu.CPUBackend).items():
        if not callable(method):
            continue
        called = set(re.findall(r"\bK\.(\w+)\(", inspect.getsource(inspect.unwrap(method))))
        if called & parallel:
            assert getattr(method, "__wrapped__", None) is not None, name


def test_the_cuts_take_at_most_nthread_host_threads(monkeypatch):
    """The sketch's per-feature sorts ran on every core whatever ``nthread`` said."""
    from dgboost import quantile

    pools = []

    class CountingPool(quantile.ThreadPoolExecutor):
        def __init__(self, workers):
            pools.append(workers)
            super().__init__(workers)

    monkeypatch.setattr(quantile, "ThreadPoolExecutor", CountingPool)
    monkeypatch.setattr(quantile, "usable_cores", lambda: 3)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60_000, 28)).astype(np.float32)  # above the size that takes threads at all
    y = (x[:, 0] > 0).astype(np.float32)
    for nthread in (2, 1):
        pools.clear()
        dg.train({**PARAMS, "nthread": nthread}, dg.DMatrix(x, y), 1)
        assert max(pools, default=1) == nthread
    pools.clear()
    quantile.compute_cuts(x, None, 256)  # no thread count given: the cores this process may use
    assert max(pools) == 3


def test_the_model_is_the_same_whatever_the_thread_count():
    x, y = _data(n=40_000)  # enough rows that histograms are split over the threads
    models = {}
    for nthread in (1, 2, 3):
        text = dg.train({**PARAMS, "nthread": nthread}, dg.DMatrix(x, y), 4).to_json()
        assert text.count(f'"nthread":{nthread},') == 1
        models[nthread] = text.replace(f'"nthread":{nthread},', '"nthread":0,')
    default = dg.train(PARAMS, dg.DMatrix(x, y), 4).to_json()
    assert models[1] == models[2] == models[3] == default


def test_numbas_pool_starts_with_passive_openmp_waits_and_the_environment_is_left_as_it_was(monkeypatch):
    """Spinning OpenMP threads took the cores of a busy machine (6.6 s instead of 1.0 s)."""
    seen = []
    monkeypatch.setitem(_threads._pool, "started", False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(numba, "get_num_threads", lambda: seen.append(os.environ.get("OMP_WAIT_POLICY")) or 1)
    _threads.start_pool()
    _threads.start_pool()  # once per process
    assert seen == ["PASSIVE"] and "OMP_WAIT_POLICY" not in os.environ


def test_an_openmp_wait_policy_set_by_the_user_is_kept(monkeypatch):
    seen = []
    monkeypatch.setitem(_threads._pool, "started", False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setattr(numba, "get_num_threads", lambda: seen.append(os.environ.get("OMP_WAIT_POLICY")) or 1)
    _threads.start_pool()
    assert seen == ["ACTIVE"] and os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
