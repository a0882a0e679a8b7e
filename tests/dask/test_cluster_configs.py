"""The shipped cluster configs: they load, render what they would submit, refuse typos, and start."""

from __future__ import annotations

import os

import dask_jobqueue
import distributed
import pytest
import yaml
from dask_kubernetes.operator import make_cluster_spec
from distributed.core import Status

import dgboost.backend
from dgboost.cluster import connect, default_config, load_config, make_cluster, render, shipped_configs
from dgboost.errors import DGBoostError, DGBoostValueError

pytestmark = pytest.mark.dask

SHIPPED = ["existing-scheduler", "kubernetes-cuda", "local-cpu", "local-cuda", "slurm-cuda"]
PLACEHOLDER = "tcp://<insert-scheduler-address-here>:8786"


def write_config(tmp_path, text: str):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_the_five_designed_configs_are_shipped():
    assert shipped_configs() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_loads_by_name_and_by_file_name(name):
    config = load_config(name)
    assert config == load_config(f"{name}.yaml")
    assert config["kind"] in {"local", "local-cuda", "slurm", "kubernetes", "existing"}


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_renders_without_starting_anything(name):
    assert render(load_config(name)).strip()


def test_an_explicit_path_is_read(tmp_path):
    path = write_config(tmp_path, "kind: existing\naddress: tcp://10.0.0.1:8786\n")
    assert load_config(path) == {"kind": "existing", "address": "tcp://10.0.0.1:8786"}
    assert load_config(str(path))["address"] == "tcp://10.0.0.1:8786"


def test_the_slurm_config_renders_an_sbatch_script_asking_for_one_gpu_per_job():
    script = render("slurm-cuda")
    assert script.startswith("#!/usr/bin/env bash")
    assert "#SBATCH -J " in script and "#SBATCH -p gpu" in script and "#SBATCH -t 02:00:00" in script
    assert "#SBATCH --gres=gpu:1" in script
    assert "export NCCL_NVLS_ENABLE=0" in script
    assert "--resources GPU=1" in script and PLACEHOLDER in script


def test_the_rendered_slurm_script_is_the_one_a_slurm_cluster_would_submit():
    config = load_config("slurm-cuda")
    config["env"] = None
    # building a SLURMCluster needs no SLURM (only submitting does), but it starts a scheduler
    with dask_jobqueue.SLURMCluster(**config["args"], scheduler_options={"dashboard_address": ":0"}) as cluster:
        expected = cluster.job_script().replace(cluster.scheduler.address, PLACEHOLDER)
    assert render(config) == expected


def test_the_kubernetes_config_renders_a_dask_cluster_with_one_gpu_per_worker():
    config = load_config("kubernetes-cuda")
    spec = yaml.safe_load(render(config))
    # the resource KubeCluster would be given: the spec arguments and the workers' environment
    spec_args = {key: value for key, value in config["args"].items() if key != "namespace"}
    assert spec == make_cluster_spec(**spec_args, env=config["env"])
    assert spec["kind"] == "DaskCluster"
    worker = spec["spec"]["worker"]
    container = worker["spec"]["containers"][0]
    assert worker["replicas"] == 2
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["args"][0] == "dask-cuda-worker"
    assert {"name": "NCCL_NVLS_ENABLE", "value": "0"} in container["env"]
    assert "&id" not in render("kubernetes-cuda")


def test_an_unknown_kind_names_the_file_and_suggests_the_closest(tmp_path):
    path = write_config(tmp_path, "kind: slurn\n")
    with pytest.raises(DGBoostValueError, match=r"unknown kind 'slurn'; did you mean 'slurm'\?") as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_a_missing_kind_is_refused_with_the_valid_kinds(tmp_path):
    with pytest.raises(DGBoostValueError, match="no 'kind' key; give one of local, local-cuda"):
        load_config(write_config(tmp_path, "args: {}\n"))


def test_an_unknown_top_level_key_names_the_file_and_suggests_the_closest(tmp_path):
    path = write_config(tmp_path, "kind: slurm\nscael: {jobs: 2}\n")
    with pytest.raises(
        DGBoostValueError, match=r"unknown key 'scael' for kind 'slurm'; did you mean 'scale'\?"
    ) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_an_unknown_argument_names_the_key_and_suggests_the_closest(tmp_path):
    path = write_config(tmp_path, "kind: local\nargs: {n_worker: 2}\n")
    with pytest.raises(
        DGBoostValueError,
        match=r"unknown key 'n_worker' in args of kind 'local'; "
        r"did you mean 'n_workers'\?",
    ) as info:
        load_config(path)
    assert str(path) in str(info.value)
    path = write_config(tmp_path, "kind: slurm\nargs: {job_extra_directive: ['--gres=gpu:1']}\n")
    with pytest.raises(DGBoostValueError, match=r"did you mean 'job_extra_directives'\?"):
        load_config(path)


def test_an_edited_dict_is_checked_again_before_use():
    config = load_config("local-cpu")
    config["args"]["thread_per_worker"] = 2
    with pytest.raises(DGBoostValueError, match="did you mean 'threads_per_worker'"):
        render(config)


def test_an_unknown_shipped_name_suggests_the_closest():
    with pytest.raises(DGBoostValueError, match=r"no cluster config 'local-gpu'.*did you mean 'local-cpu'"):
        load_config("local-gpu")


def test_an_existing_config_needs_exactly_one_of_address_and_scheduler_file(tmp_path):
    with pytest.raises(DGBoostValueError, match="exactly one of 'address'"):
        load_config(write_config(tmp_path, "kind: existing\n"))
    with pytest.raises(DGBoostValueError, match="exactly one of 'address'"):
        load_config(write_config(tmp_path, "kind: existing\naddress: tcp://a:1\nscheduler_file: s.json\n"))


def test_a_missing_library_is_an_error_with_the_pip_command(monkeypatch):
    config = load_config("slurm-cuda")
    monkeypatch.setitem(__import__("sys").modules, "dask_jobqueue", None)
    with pytest.raises(DGBoostError, match="pip install dask-jobqueue"):
        make_cluster(config)


def test_the_default_config_follows_the_gpus_of_this_machine(monkeypatch):
    has_gpu, _ = dgboost.backend.cuda_status()
    assert default_config()["kind"] == ("local-cuda" if has_gpu else "local")
    monkeypatch.setattr(dgboost.backend, "cuda_status", lambda: (False, "no CUDA device found"))
    assert default_config() == load_config("local-cpu")
    monkeypatch.setattr(dgboost.backend, "cuda_status", lambda: (True, ""))
    assert default_config() == load_config("local-cuda")


def test_null_cpu_workers_means_as_many_as_the_cores_allow_but_at_most_four():
    line = render("local-cpu")
    assert line.startswith("distributed.LocalCluster(n_workers=")
    n_workers = int(line.split("n_workers=")[1].split(",")[0])
    assert 1 <= n_workers <= min(4, os.cpu_count())


def test_connect_starts_a_local_cluster_of_processes_runs_a_task_and_closing_stops_it():
    config = load_config("local-cpu")
    config["args"].update(n_workers=1, dashboard_address=":0")
    with connect(config) as client:
        assert isinstance(client, distributed.Client)
        cluster = client.cluster
        assert isinstance(cluster, distributed.LocalCluster)
        assert client.submit(lambda x: x + 1, 41).result(timeout=30) == 42
        worker_pids = client.run(os.getpid)
        assert len(worker_pids) == 1 and os.getpid() not in worker_pids.values()
    assert cluster.status == Status.closed


def test_an_existing_config_connects_to_a_running_scheduler_and_leaves_it_running():
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        client = connect({"kind": "existing", "address": cluster.scheduler_address, "args": {"timeout": "10s"}})
        assert client.scheduler_info()["address"] == cluster.scheduler_address
        client.close()
        assert cluster.status == Status.running


def test_a_missing_scheduler_file_is_refused_instead_of_waited_for(tmp_path):
    config = {"kind": "existing", "scheduler_file": str(tmp_path / "scheduler.json")}
    with pytest.raises(DGBoostValueError, match="does not exist"):
        connect(config)
