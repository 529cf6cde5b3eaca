"""latencylab.follow on a lab that runs while it is followed. Needs root and LATENCYLAB (or
latencylab on PATH)."""

import os
import shutil
import subprocess

import latencylab


def test_follow_yields_rows_as_the_lab_runs_and_ends_with_its_last_rows(tmp_path):
    binary = os.environ.get("LATENCYLAB") or shutil.which("latencylab")
    live = tmp_path / "live.jsonl"
    lab = subprocess.Popen(
        [binary, "shell", "--down", "10mbit", "--rtt", "20ms", "--live", str(live), "-q",
         "--server", "latencylab bulk-server", "--",
         "latencylab", "bulk-client", "server", "--duration", "2s"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )
    rows = []
    running_while_followed = False
    for row in latencylab.follow(live, idle_timeout_s=30):
        rows.append(row)
        running_while_followed |= lab.poll() is None and row["t_s"] > 0.5
    assert lab.wait(timeout=30) == 0
    assert running_while_followed
    down = [r for r in rows if r["link"] == "path" and r["dir"] == "down"]
    assert len(down) >= 15
    assert down[-1]["last"] and down[-1]["bytes_total"] > 1_000_000
    assert max(r["delivered_bps"] for r in down) > 5e6
