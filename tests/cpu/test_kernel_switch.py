"""A cold Numba cache: the parallel CPU kernels run as serial twins while a background process
compiles them into the cache (``dgboost/_kernel_switch.py``, ``dgboost/_compile_server.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dgboost import _compile_server, _kernel_switch
from dgboost.backend import _cpu_kernels
from dgboost.backend.cpu import K

# the training and its SHAP values, run in a fresh process and in this one; digests of both
_WORK = """
import hashlib
import numpy as np
import dgboost as dg

rng = np.random.default_rng(3)
x = rng.standard_normal((40_000, 6)).astype(np.float32)
y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(np.float32)
x[rng.random(x.shape) < 0.1] = np.nan
booster = dg.train({"objective": "binary:logistic", "max_depth": 5, "nthread": 2}, dg.DMatrix(x, y), 4)
contribs = booster.predict(dg.DMatrix(x[:3000]), pred_contribs=True)
digests = hashlib.sha256(booster.save_raw("json")).hexdigest(), hashlib.sha256(contribs.tobytes()).hexdigest()
"""

# a fresh process (``WORK`` set to the above): says which kernels ran as twins, the digests,
# the background process's id and the parallel kernels' Numba compilations in this process
_TRAIN = """
import json
from numba.core import event
import dgboost as dg
from dgboost import _kernel_switch
from dgboost.backend.cpu import K

parallel = []
class Count(event.Listener):
    def on_start(self, ev):
        qualname = ev.data["dispatcher"].py_func.__qualname__
        if ev.data["dispatcher"].targetoptions.get("parallel"):
            parallel.append(qualname)
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
exec(WORK)
from dgboost.explain import tables, treeshap
twins = sorted(
    k for table in (K, tables._K, treeshap._K) for k, v in vars(table).items() if getattr(v, "serial", None) is not None
)
server = _kernel_switch._background.process
print("RESULT " + json.dumps({
    "twins": twins,
    "digest": digests[0],
    "shap_digest": digests[1],
    "background_pid": None if server is None else server.pid,
    "parallel_compiles": parallel,
}))
"""


def _train_in_fresh_process(cache: Path) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    script = f"WORK = {_WORK!r}\n{_TRAIN}"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _wait_until_ended(pid: int, timeout: float = 300.0) -> None:
    start = time.monotonic()
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() - start < timeout, "the background compile process did not end"
        time.sleep(0.1)


def _same_training_here() -> tuple[str, str]:
    namespace: dict = {}
    exec(_WORK, namespace)  # noqa: S102 - the test's own training, as the fresh processes run it
    return namespace["digests"]


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="waits for the background process through /proc")
def test_a_cold_cache_trains_the_same_model_on_twins_and_leaves_the_parallel_kernels_in_the_cache(tmp_path):
    """The first process finds the cache empty: its kernels run as twins (training's and the CPU
    SHAP engine's), nothing parallel is compiled in it, and the background process fills the
    cache; the next process runs the parallel kernels from the cache, compiling none. Both
    models and their SHAP values are the ones this process computes."""
    cache = tmp_path / "numba-cache"
    cold = _train_in_fresh_process(cache)
    assert {"build_histograms", "partition", "evaluate_splits", "_fill_tables", "_shap_kernel"} <= set(cold["twins"])
    assert cold["parallel_compiles"] == []
    assert cold["background_pid"] is not None
    _wait_until_ended(cold["background_pid"])
    cached = {path.name.split("-")[0].split(".")[-1] for path in cache.rglob("*.nbi")}
    assert set(cold["twins"]) <= cached  # the parallel kernels, not only their twins (``<name>__serial``)
    warm = _train_in_fresh_process(cache)
    assert warm["twins"] == []
    assert warm["parallel_compiles"] == []
    assert warm["background_pid"] is None
    assert (cold["digest"], cold["shap_digest"]) == (warm["digest"], warm["shap_digest"]) == _same_training_here()


def test_the_compile_server_compiles_what_it_is_asked_into_the_cache_and_ends_with_its_input(tmp_path):
    from numba import typeof

    sig = (typeof(np.zeros((2, 2), np.int32)), typeof(np.zeros(2, np.int64)))
    good = _compile_server.encode_request("dgboost.backend._cpu_kernels", "gpair_totals", sig)
    bad = _compile_server.encode_request("dgboost.backend._cpu_kernels", "no_such_kernel", sig)
    foreign = _compile_server.encode_request("os", "system", sig)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "dgboost._compile_server"],
        input=f"0 {good}\n1 {bad}\n2 not json\n3 {foreign}\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0
    answers = ["0 ok", "1 error AttributeError", "2 error JSONDecodeError", "3 error ValueError"]
    assert done.stdout.splitlines() == answers  # 3: no module but the kernels' is ever imported
    assert any(path.name.startswith("_cpu_kernels.gpair_totals-") for path in tmp_path.rglob("*.nbi"))


def test_a_request_carries_the_argument_types_of_the_kernels_and_nothing_else():
    from numba.core import types

    sig = (
        types.Array(types.uint16, 2, "C", readonly=True),
        types.Array(types.boolean, 1, "A"),
        types.int64,
        types.float64,
        types.boolean,
        types.none,
    )
    module = "dgboost.backend._cpu_kernels"
    request = _compile_server.encode_request(module, "partition", sig)
    assert _compile_server._decode_request(request) == (module, "partition", sig)
    assert _compile_server.encode_request(module, "partition", (types.unicode_type,)) is None  # compiled where called


def test_a_compile_server_that_imports_another_dgboost_than_the_training_says_so_and_ends():
    done = subprocess.run(
        [sys.executable, "-m", "dgboost._compile_server", "/elsewhere/dgboost/backend/_cpu_kernels.py"],
        input="0 anything\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout.startswith("mismatch ") and "0 ok" not in done.stdout


class _Process:
    """What the reader thread reads of a background process: its answers, then its end."""

    def __init__(self, lines) -> None:
        self.stdout = lines


def test_a_kernel_switches_to_its_parallel_version_when_every_compilation_it_waits_for_is_reported():
    background = _kernel_switch._Background()
    switch = _kernel_switch._Switch("gpair_totals", _cpu_kernels.gpair_totals)
    switch.pending = 2
    background.waiting = {0: switch, 1: switch}

    def answers():
        yield b"0 ok\n"
        assert not switch.ready and switch.pending == 1  # one of its two compilations reported
        yield b"1 error TypingError\n"  # an error too: the kernel then compiles where it is called
        assert switch.ready and background.waiting == {}

    background._read(_Process(answers()))


def test_a_background_process_that_ends_early_releases_the_kernels_waiting_for_it():
    background = _kernel_switch._Background()
    switch = _kernel_switch._Switch("gpair_totals", _cpu_kernels.gpair_totals)
    switch.pending = 2
    background.waiting = {0: switch, 1: switch}
    background._read(_Process([b"0 ok\n"]))
    assert switch.ready and background.failed and background.waiting == {}


def test_without_a_background_process_a_cold_kernel_gives_its_calls_to_the_parallel_kernel(monkeypatch):
    """No interpreter to start (an embedded Python): the twin answers the first call, and the
    kernel compiles in this process from then on, as before the twins."""
    monkeypatch.setattr(_kernel_switch, "_cached_for_this_machine", lambda kernel: False)
    monkeypatch.setattr(_kernel_switch, "_background", _kernel_switch._Background())
    monkeypatch.setattr(sys, "executable", "")
    switch = _kernel_switch._Switch("gpair_totals", _cpu_kernels.gpair_totals)
    gpair = np.arange(20, dtype=np.int32).reshape(10, 2)
    first, second = np.zeros(2, np.int64), np.zeros(2, np.int64)
    switch(gpair, first)
    assert switch.serial is not None and switch.ready
    switch(gpair, second)
    np.testing.assert_array_equal(first, [90, 100])
    np.testing.assert_array_equal(second, [90, 100])


def test_a_forked_child_releases_the_kernels_waiting_for_its_parents_background_process(monkeypatch):
    switch = _kernel_switch._Switch("gpair_totals", _cpu_kernels.gpair_totals)
    switch.pending = 1
    monkeypatch.setattr(_kernel_switch, "_switches", [switch])
    monkeypatch.setattr(_kernel_switch, "_background", _kernel_switch._Background())
    parent_background = _kernel_switch._background
    _kernel_switch._after_fork_in_child()
    assert switch.ready and switch.pending == 0
    assert _kernel_switch._background is not parent_background


def test_under_compile_in_process_a_cold_kernel_runs_its_parallel_version(monkeypatch):
    monkeypatch.setattr(_kernel_switch, "_cached_for_this_machine", lambda kernel: False)
    switch = _kernel_switch._Switch("gpair_totals", _cpu_kernels.gpair_totals)
    out = np.zeros(2, np.int64)
    with _kernel_switch.compile_in_process():
        switch(np.ones((4, 2), np.int32), out)
    assert switch.serial is None and not switch.decided
    np.testing.assert_array_equal(out, [4, 4])


def test_the_kernel_table_puts_stand_ins_before_exactly_the_parallel_kernels():
    parallel = {k for k, v in vars(_cpu_kernels).items() if getattr(v, "targetoptions", {}).get("parallel")}
    switched = {k for k, v in vars(K).items() if isinstance(v, _kernel_switch._Switch)}
    assert parallel == switched and "partition" in switched
    assert K.KERNEL_EPS == _cpu_kernels.KERNEL_EPS and K._accumulate is _cpu_kernels._accumulate
