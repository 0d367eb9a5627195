"""Data parallelism: 2 replicas == 1 replica on the same global batch; 2 workers end identical.

Each case runs in a fresh process (replicas_worker.py, cluster_worker.py beside this file): logical CPU
devices and TF_CONFIG must be set before TensorFlow initialises.
"""

import json
import pathlib
import re
import signal
import socket
import time

import pytest

from tests.support import finish_cli, run_cli, start_cli


def _last_json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_replicas_equal_one_replica_on_the_same_global_batch():
    result = _last_json(run_cli("tests.training.replicas_worker", timeout=600))
    for case in result.values():
        assert case["replicas"] == 2
        assert case["loss_1"] == pytest.approx(case["loss_2"], rel=1e-5)
    # SGD(lr=1): the update is the gradient, so this is the all-reduced gradient == single-replica gradient.
    assert result["sgd"]["relative_update_diff"] < 1e-5, result
    assert result["sgd"]["max_weight_diff"] < 1e-6, result
    # Adam's first step is ~lr * g/|g|: entries with |g| near 0 amplify float noise, so its tolerance is wider.
    assert result["adam"]["relative_update_diff"] < 1e-2, result
    assert result["adam"]["max_weight_diff"] < 0.5 * result["adam"]["max_update"], result


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
@pytest.mark.parametrize("accumulation", [1, 2])
def test_two_workers_on_loopback_finish_with_identical_weights(tmp_path, accumulation):
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(start_cli("tests.training.cluster_worker", tmp_path, accumulation,  # the workers run at once
                               env={"TF_CONFIG": json.dumps(tf_config)}))
    results = [_last_json(finish_cli(p, timeout=600)) for p in procs]
    assert [r["steps"] for r in results] == [4, 4]  # updates, each of `accumulation` micro-batches
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    assert (tmp_path / "checkpoints" / "ckpt-4.index").exists()
    assert not (tmp_path / "checkpoints" / ".worker_1").exists() or not any(
        p.name.endswith(".index") for p in (tmp_path / "checkpoints" / ".worker_1").iterdir())


def _start_cluster(workdir, *args):
    """Two workers of a loopback cluster running cluster_worker.py with ``args``, started at once."""
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    return [start_cli("tests.training.cluster_worker", workdir, *args, env={"TF_CONFIG": json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}) for index in range(2)]


@pytest.mark.slow
def test_sigterm_to_one_worker_checkpoints_the_whole_cluster_and_the_rerun_ends_bit_identical(tmp_path):
    """PreemptionCheckpointHandler: the SIGTERMed worker tells the other through the coordination service; both
    save the same step collectively and exit 143; the same command resumes to the weights of a run never
    interrupted."""
    whole = [_last_json(finish_cli(p, timeout=600)) for p in _start_cluster(tmp_path / "whole", 1, 60, 20)]
    procs = _start_cluster(tmp_path / "split", 1, 60, 20)
    first = tmp_path / "split" / "checkpoints" / "ckpt-20.index"
    deadline = time.time() + 300
    while not first.exists() and time.time() < deadline and procs[1].poll() is None:
        time.sleep(0.05)
    assert first.exists()
    procs[1].send_signal(signal.SIGTERM)  # the non-chief: the chief must hear of it and save too
    done = [finish_cli(p, check=False, timeout=300) for p in procs]
    assert [d.returncode for d in done] == [143, 143], [d.stderr[-2000:] for d in done]
    saved = re.search(r"interrupted by SIGTERM at step (\d+): saved ([^;\s]+);", done[0].stderr)
    assert saved and 20 <= int(saved.group(1)) < 60 and pathlib.Path(f"{saved.group(2)}.index").exists()
    resumed = [_last_json(finish_cli(p, timeout=600)) for p in _start_cluster(tmp_path / "split", 1, 60, 20)]
    assert [r["steps"] for r in resumed] == [60, 60]
    assert resumed[0]["weights_sha256"] == resumed[1]["weights_sha256"] == whole[0]["weights_sha256"]
