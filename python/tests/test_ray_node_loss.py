"""A Ray worker node lost in the middle of a sweep: a local cluster of a head node and a second
node (one lab each); as soon as the second node starts a run, it is killed without warning. Its
run must run again on the head, and the table must have every run exactly once, all ok.
Needs labs (root, as scripts/test runs it, or a machine that allows them without root), Ray
and LATENCYLAB (or latencylab on PATH)."""

import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import latencylab  # noqa: E402

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sweep-small.toml"


def test_a_node_lost_mid_sweep_costs_only_its_runs_which_run_again_on_another_node(
    tmp_path, monkeypatch
):
    real = os.environ.get("LATENCYLAB") or shutil.which("latencylab")
    assert real, "no latencylab binary: set LATENCYLAB"
    # The second node runs latencylab through a script that leaves a mark per run it starts.
    marks = tmp_path / "started-on-second-node"
    marks.mkdir()
    wrapper = tmp_path / "latencylab-second-node"
    wrapper.write_text(f'#!/bin/sh\ntouch "{marks}/$$"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("LATENCYLAB_PYTHON", sys.executable)

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"lab": 1}, "include_dashboard": False},
    )
    try:
        # Its scratch directories under the test's own: the run it had under way leaves one.
        node_tmp = tmp_path / "second-node-tmp"
        node_tmp.mkdir()
        second = cluster.add_node(
            num_cpus=1,
            resources={"lab": 1},
            env_vars={"LATENCYLAB": str(wrapper), "TMPDIR": str(node_tmp)},
        )
        cluster.wait_for_nodes()
        head_id = cluster.head_node.node_id
        out = tmp_path / "ray"
        with ThreadPoolExecutor(1) as pool:
            sweep = pool.submit(latencylab.sweep, SMALL, out=out, ray=cluster.address, jobs=4)
            deadline = time.monotonic() + 180
            while not any(marks.iterdir()):
                assert not sweep.done(), sweep.result()
                assert time.monotonic() < deadline, "the second node never started a run"
                time.sleep(0.05)
            cluster.remove_node(second, allow_graceful=False)
            df = sweep.result(timeout=600)
    finally:
        cluster.shutdown()

    assert df.height == 4, df
    assert sorted(df["run"]) == ["r0000", "r0001", "r0002", "r0003"]
    assert set(df["status"]) == {"ok"}, df.select("run", "error")
    # The journal has each run once: the lost run was not recorded twice, nor as failed.
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    runs = [r["run"] for r in journal if "run" in r]
    assert sorted(runs) == ["r0000", "r0001", "r0002", "r0003"], runs
    # Every run that finished ran on the head: the second node's run ran again there.
    nodes = {(out / "runs" / r / "ray-node").read_text().strip() for r in df["run"]}
    assert nodes == {head_id}, (nodes, head_id)
