"""The Python package against the real binary: a real sweep (examples/sweep-small.toml, four
5-second labs) and its run directories. Needs labs (root, as
scripts/test runs it, or a machine that allows them without root) and LATENCYLAB (or
latencylab on PATH)."""

import runpy
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import latencylab

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "sweep-small.toml"


def test_sweep_returns_one_row_per_run_with_parameters_and_figures(small):
    out, df = small
    assert df.height == 4
    assert sorted(zip(df["queue"], df["seed"])) == [
        ("codel ecn", 1.0), ("codel ecn", 2.0), ("fifo limit 300", 1.0), ("fifo limit 300", 2.0)
    ]
    assert set(df["status"]) == {"ok"}, df.select("run", "error")
    for col in ["udp_rtt_p95_ms", "path_down_queue_delay_p95_ms", "path_down_drops",
                "path_down_ce_marks", "goodput_mbps", "self_check", "wall_s"]:
        assert col in df.columns, col
        assert df[col].null_count() == 0, col
    # The FIFO's standing queue against CoDel's, seed by seed.
    fifo = df.filter(df["queue"] == "fifo limit 300").sort("seed")["udp_rtt_p95_ms"]
    codel = df.filter(df["queue"] == "codel ecn").sort("seed")["udp_rtt_p95_ms"]
    assert all(f > c for f, c in zip(fifo, codel)), (fifo, codel)
    # pyarrow reads the same file on its own.
    t = pq.read_table(out / "results.parquet")
    assert t.num_rows == 4 and "udp_rtt_p95_ms" in t.column_names


def test_read_run_reads_a_run_directory_through_its_documented_layout(small):
    out, _ = small
    run = latencylab.read_run(out / "runs" / "r0000")
    assert run.lab["seed"] == 1
    links = run.links()
    # The columns are the run directory's definition's, as the sweep's table makes them.
    names = [c["name"] for c in latencylab.RUN_DIR["link_columns"]]
    assert links.columns == ["link", "direction", "queue", *names]
    df = latencylab.read_results(out)
    assert all(f"path_down_{n}" in df.columns for n in names)
    down = links.filter(links["direction"] == "down")
    assert down["queue"][0].startswith("fifo limit 300")
    log = run.link_log("path", "down")
    assert log.height > 1000
    assert set(log["event"].unique()) <= {"enqueue", "dequeue", "drop", "mark"}
    probes = [l for l in run.program_lines("command") if l["type"] == "probe_summary"]
    assert probes and probes[0]["proto"] == "udp"


def test_the_notebook_example_runs_on_the_finished_sweep(small, monkeypatch, capsys):
    out, _ = small
    monkeypatch.setenv("LATENCYLAB_SWEEP_OUT", str(out))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "examples" / "sweep_notebook.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert "fifo limit 300" in printed and "codel ecn" in printed


def test_a_mistake_in_the_sweep_file_is_a_sweep_error_and_runs_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.read_text().replace('"codel ecn"', '"codle"'))
    with pytest.raises(latencylab.SweepError, match="axes.queue.*codle"):
        latencylab.sweep(bad, out=tmp_path / "out")
    assert not (tmp_path / "out" / "runs").exists()


def test_read_run_refuses_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="summary.json"):
        latencylab.read_run(tmp_path)
