# %% [markdown]
# # A sweep in a notebook
#
# `latencylab.sweep` runs a sweep file and returns its table as a polars DataFrame, one row per
# run; running it again finishes a sweep that was stopped and otherwise runs nothing.
# Run with `latencylab` on PATH: `python3 examples/sweep_notebook.py`. Labs run without root
# where the machine allows user namespaces (docs/guide.md, "Without root"); elsewhere run
# Python as root, or pass `binary=["sudo", "latencylab"]`.

# %%
import os

import polars as pl

import latencylab

out = os.environ.get("LATENCYLAB_SWEEP_OUT", "out/sweep-small")
df = latencylab.sweep("examples/sweep-small.toml", out=out)

# %% The probe's RTT beside a bulk download, per queue, over the seeds
per_queue = (
    df.group_by("queue")
    .agg(
        pl.col("udp_rtt_p95_ms").mean().alias("rtt_p95_ms"),
        pl.col("path_down_queue_delay_p95_ms").mean().alias("queue_delay_p95_ms"),
        pl.col("goodput_mbps").mean(),
        pl.col("path_down_drops").sum().alias("drops"),
        pl.col("path_down_ce_marks").sum().alias("ce_marks"),
    )
    .sort("queue")
)
print(per_queue)

# %% One run in detail: the downlink's queue delay over time, from its link log
run = latencylab.read_run(f"{out}/runs/r0000")
log = run.link_log("path", "down").filter(pl.col("event") == "dequeue")
per_second = (
    log.with_columns((pl.col("time_ns") // 1_000_000_000).alias("second"))
    .group_by("second")
    .agg((pl.col("sojourn_ns").max() / 1e6).alias("worst_sojourn_ms"))
    .sort("second")
)
print(per_second)
