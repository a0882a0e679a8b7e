"""Clusters and files from outside (docs/security.md): local clusters listen on loopback, TLS
with a self-made certificate, cluster config values that would become shell are refused, YAML
is read with the safe loader, and no code path unpickles a file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

import dgboost as dg
from dgboost.cluster import connect, load_config, make_cluster, render
from dgboost.dask._waits import cluster_workers

HOSTILE = ["x; rm -rf ~", "gpu\nrm -rf ~", "$(rm -rf ~)", "`rm -rf ~`", "a && rm -rf ~"]
PACKAGE = Path(dg.__file__).resolve().parent


def _host(address: str) -> str:
    return re.match(r"\w+://\[?([^\]/]+?)\]?:\d+", address).group(1)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> dict:
    """A self-signed certificate for 127.0.0.1 that is its own authority (openssl)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert),
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return {"ca_file": str(cert), "cert": str(cert), "key": str(key)}


def _one_worker(**extra) -> dict:
    return {"kind": "local", "args": {"n_workers": 1, "threads_per_worker": 1, "processes": True, **extra}}


# -- loopback --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["local-cpu", "local-cuda"])
def test_the_shipped_local_configs_bind_scheduler_workers_and_dashboard_to_loopback(name):
    args = load_config(name)["args"]
    assert args["host"] == "127.0.0.1"
    assert args["dashboard_address"].startswith("127.0.0.1:")


@pytest.mark.dask
@pytest.mark.parametrize("config", ["local-cpu", _one_worker()], ids=["shipped", "without-host"])
def test_a_local_cluster_listens_on_loopback_only(config):
    if isinstance(config, str):
        config = load_config(config)
        config["args"]["n_workers"] = 1
    with connect(config) as client:
        workers = cluster_workers(client)
        assert _host(client.scheduler.address) == "127.0.0.1"
        assert [_host(w) for w in workers] == ["127.0.0.1"]
        assert all(_host(w["nanny"]) == "127.0.0.1" for w in workers.values())
        assert re.match(r"http://127\.0\.0\.1:\d+/", client.dashboard_link)


def test_a_local_config_that_names_its_host_keeps_it():
    assert "host='0.0.0.0'" in render(_one_worker(host="0.0.0.0"))
    assert "host='127.0.0.1'" in render(_one_worker())


# -- TLS -------------------------------------------------------------------------------------


@pytest.mark.dask
def test_a_local_cluster_with_tls_talks_only_tls_and_trains(certificate):
    import dask.array as da
    import numpy as np
    from distributed import Client

    import dgboost.dask as dxgb

    with connect({**_one_worker(), "tls": certificate}) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://") for w in cluster_workers(client))
        x = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.float32)
        dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=100), da.from_array(y, chunks=100))
        out = dxgb.train(client, {"max_depth": 2}, dtrain, 2, verbose_eval=False)
        assert out["booster"].to_json() == dg.train({"max_depth": 2}, dg.DMatrix(x, y), 2).to_json()
        # an existing-scheduler config with the certificate joins; a client without it cannot
        with connect({"kind": "existing", "address": address, "tls": certificate, "args": {"timeout": "20s"}}) as other:
            assert other.submit(sum, [1, 2]).result(timeout=20) == 3
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout="3s")


def test_tls_needs_a_ca_file_and_a_certificate_and_files_that_exist(tmp_path, certificate):
    with pytest.raises(dg.DGBoostValueError, match="tls needs ca_file and cert"):
        render({**_one_worker(), "tls": {"cert": certificate["cert"]}})
    with pytest.raises(dg.DGBoostValueError, match="unknown key 'certfile' in tls"):
        render({**_one_worker(), "tls": {**certificate, "certfile": "x"}})
    with pytest.raises(dg.DGBoostValueError, match="tls ca_file: no such file"):
        make_cluster({**_one_worker(), "tls": {**certificate, "ca_file": str(tmp_path / "missing.pem")}})


def test_the_slurm_existing_and_kubernetes_configs_offer_tls():
    for name in ("slurm-cuda", "existing-scheduler", "kubernetes-cuda"):
        assert "tls" in load_config(name)


def test_a_kubernetes_config_with_tls_renders_a_cluster_whose_pods_talk_tls_only():
    config = load_config("kubernetes-cuda")
    config["tls"] = {"secret": "dgboost-tls"}
    spec = yaml.safe_load(render(config))
    for part in ("scheduler", "worker"):
        pod = spec["spec"][part]["spec"]
        assert {"name": "dgboost-tls", "secret": {"secretName": "dgboost-tls"}} in pod["volumes"]
        env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
        assert env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
        assert env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"] == "/etc/dgboost-tls/ca.pem"
        assert env["DASK_DISTRIBUTED__COMM__TLS__WORKER__CERT"] == "/etc/dgboost-tls/cert.pem"
    assert spec["spec"]["scheduler"]["spec"]["containers"][0]["args"][-2:] == ["--protocol", "tls"]
    assert spec["spec"]["worker"]["spec"]["containers"][0]["args"][1] == "tls://dgboost-scheduler:8786"
    with pytest.raises(dg.DGBoostValueError, match="kubectl apply"):
        make_cluster(config)


# -- values that would become shell ----------------------------------------------------------


def _slurm(**changes) -> dict:
    config = load_config("slurm-cuda")
    for key, value in changes.items():
        config[key] = {**(config.get(key) or {}), **value} if isinstance(value, dict) else value
    return config


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("key", ["queue", "account", "walltime", "memory", "job_name"])
def test_a_slurm_value_that_would_become_shell_is_refused_naming_its_key(key, value):
    with pytest.raises(dg.DGBoostValueError, match=f"args '{key}' holds a"):
        render(_slurm(args={key: value}))


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_worker_arguments_and_sbatch_directives_are_refused(value):
    with pytest.raises(dg.DGBoostValueError, match="args 'worker_extra_args' holds"):
        render(_slurm(args={"worker_extra_args": ["--resources", value]}))
    with pytest.raises(dg.DGBoostValueError, match="args 'job_extra_directives' holds"):
        render(_slurm(args={"job_extra_directives": [f"--gres={value}"]}))


def test_prologue_lines_are_shell_by_design_but_each_is_one_line():
    script = render(_slurm(args={"job_script_prologue": ["source ~/venv/bin/activate && module load cuda"]}))
    assert "\nsource ~/venv/bin/activate && module load cuda\n" in script
    with pytest.raises(dg.DGBoostValueError, match="args 'job_script_prologue' holds a line break"):
        render(_slurm(args={"job_script_prologue": ["module load cuda\nrm -rf ~"]}))


@pytest.mark.parametrize("value", HOSTILE[:1] + HOSTILE[2:])
def test_a_hostile_worker_env_value_is_quoted_into_the_job_script(value):
    script = render(_slurm(env={"DGB_VALUE": value}))
    (line,) = [line for line in script.splitlines() if "DGB_VALUE" in line]
    # the shell reads back exactly the value: nothing of it runs
    out = subprocess.run(["bash", "-c", f'{line}\nprintf %s "$DGB_VALUE"'], capture_output=True, text=True, check=True)
    assert out.stdout == value


@pytest.mark.parametrize("name", ["A; rm -rf ~", "A B", "1A", "A\nB"])
def test_an_env_name_that_is_no_variable_name_is_refused(name):
    with pytest.raises(dg.DGBoostValueError, match="is not a valid environment variable name"):
        render(_slurm(env={name: "1"}))


def test_an_env_value_with_a_line_break_is_refused():
    with pytest.raises(dg.DGBoostValueError, match="env DGB_VALUE holds a line break"):
        render(_slurm(env={"DGB_VALUE": "a\nrm -rf ~"}))


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("key", ["worker_command", "image", "name"])
def test_a_kubernetes_value_that_would_become_shell_is_refused(key, value):
    config = load_config("kubernetes-cuda")
    config["args"][key] = value
    with pytest.raises(dg.DGBoostValueError, match=f"'{key}'"):
        render(config)


@pytest.mark.parametrize("value", HOSTILE[:1] + HOSTILE[2:])
def test_a_hostile_kubernetes_env_value_stays_one_value_of_the_resource(value):
    config = load_config("kubernetes-cuda")
    config["env"]["DGB_VALUE"] = value
    spec = yaml.safe_load(render(config))
    for part in ("scheduler", "worker"):
        env = spec["spec"][part]["spec"]["containers"][0]["env"]
        assert {"name": "DGB_VALUE", "value": value} in env


def test_the_shipped_configs_pass_the_checks():
    for name in ("slurm-cuda", "kubernetes-cuda"):
        render(name)


# -- files from outside ----------------------------------------------------------------------

_UNSAFE = re.compile(
    r"yaml\.(load|unsafe_load|full_load|load_all)\(|yaml\.(Unsafe|Full)?Loader\b|\bpickle\.loads?\(|"
    r"cloudpickle\.loads?\(|dill\.loads?\(|joblib\.load\(|read_pickle\(|allow_pickle\s*=\s*True|marshal\.loads?\("
)


def test_dgboost_reads_yaml_with_the_safe_loader_and_unpickles_no_file():
    """A scan of the package's source: YAML through ``yaml.safe_load`` only, and none of the
    calls that unpickle (a checkpoint, model, config or data file is JSON, UBJSON, YAML, NumPy
    without pickles, Parquet or CSV)."""
    found = [
        (str(path.relative_to(PACKAGE)), line.strip())
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if _UNSAFE.search(line)
    ]
    # the one unpickling: NCCL's object broadcast, of the bytes rank 0 of the same job sent
    # (a peer inside the cluster, as Dask's own messages are), never a file
    assert found == [("comm/nccl.py", "return obj if self._rank == root else pickle.loads(buf[:size].get().tobytes())")]
    assert "yaml.safe_load(" in (PACKAGE / "cluster.py").read_text(encoding="utf-8")


def test_the_scan_sees_an_unsafe_call():
    assert all(
        _UNSAFE.search(line)
        for line in ("yaml.load(text)", "pickle.load(f)", "np.load(p, allow_pickle=True)", "pd.read_pickle(p)")
    )
    assert not _UNSAFE.search("yaml.safe_load(text)")
