"""The same small sweep through a real local Ray cluster: a head node and a second node
process on this machine, each holding one lab (custom resource ``lab``). Needs labs (root, as
scripts/test runs it, or a machine that allows them without root), Ray and LATENCYLAB (or
latencylab on PATH)."""

import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import latencylab  # noqa: E402

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sweep-small.toml"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"lab": 1}, "include_dashboard": False},
    )
    c.add_node(num_cpus=1, resources={"lab": 1})
    c.wait_for_nodes()
    yield c
    c.shutdown()


def test_the_small_sweep_through_two_ray_nodes_gives_the_same_four_rows(
    cluster, small, tmp_path, monkeypatch
):
    monkeypatch.setenv("LATENCYLAB_PYTHON", sys.executable)
    df = latencylab.sweep(SMALL, out=tmp_path / "ray", ray=cluster.address, jobs=4)
    local = small[1]
    assert df.height == 4
    assert set(df["status"]) == {"ok"}, df.select("run", "error")
    assert df.select("run", "queue", "seed").equals(local.select("run", "queue", "seed"))
    # Run-to-run noise: the FIFO's standing queue against CoDel's, as in the local sweep.
    for d in (df, local):
        fifo = d.filter(d["queue"] == "fifo limit 300")["udp_rtt_p95_ms"]
        codel = d.filter(d["queue"] == "codel ecn")["udp_rtt_p95_ms"]
        assert fifo.min() > codel.max() + 20, (fifo, codel)
    # Each run ran as a Ray task: its node is recorded, and both nodes took labs.
    nodes = {(tmp_path / "ray" / "runs" / r / "ray-node").read_text().strip() for r in df["run"]}
    assert len(nodes) == 2, nodes
    run = latencylab.read_run(tmp_path / "ray" / "runs" / "r0000")
    assert run.link_log("path", "down").height > 1000
