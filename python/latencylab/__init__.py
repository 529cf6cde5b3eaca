"""latencylab from Python: sweeps and run directories as DataFrames.

Everything here drives the ``latencylab`` binary and reads what it leaves on disk through the
documented formats (docs/run-dir.md, docs/sweeps.md); nothing reimplements a lab.

    >>> import latencylab
    >>> df = latencylab.sweep("examples/sweep-small.toml", out="out/small")
    >>> df.select("queue", "seed", "udp_rtt_p95_ms")
    >>> run = latencylab.read_run("out/small/runs/r0000")
    >>> run.summary["links"][0]["queue_delay_ms"]["p95"]

Labs run as you, without root, where the machine lets a user create user namespaces and open
``/dev/net/tun`` (docs/guide.md, "Without root"); elsewhere run Python as root, or give
``binary=["sudo", "latencylab"]``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

import polars as pl

__all__ = ["sweep", "read_results", "read_run", "follow", "Run", "SweepError"]

PathLike = Union[str, os.PathLike]


class SweepError(ValueError):
    """A mistake in the sweep file or the options: latencylab's one line about it."""


def _binary(binary: Union[None, str, Sequence[str]]) -> list[str]:
    if binary is None:
        binary = os.environ.get("LATENCYLAB") or shutil.which("latencylab")
        if binary is None:
            raise FileNotFoundError(
                "no latencylab binary: put it on PATH, set LATENCYLAB, or pass binary="
            )
    return [binary] if isinstance(binary, (str, os.PathLike)) else list(binary)


def sweep(
    file: PathLike,
    out: Optional[PathLike] = None,
    *,
    jobs: Optional[int] = None,
    ray: Optional[str] = None,
    binary: Union[None, str, Sequence[str]] = None,
    quiet: bool = True,
) -> pl.DataFrame:
    """Runs ``latencylab sweep FILE -o OUT`` and returns its results table, one row per run.

    ``out`` defaults to ``out/NAME`` for ``NAME.toml``. A sweep that was stopped resumes: only
    the missing runs run. ``ray="auto"`` (or a cluster's address) runs each lab as a Ray task
    on a worker node (docs/sweeps.md). Runs that failed are rows too (``status`` is ``failed``, ``error``
    says why). Raises :class:`SweepError` for a mistake in the sweep file, ``RuntimeError``
    when the sweep itself could not run.
    """
    file = Path(file)
    out = Path(out) if out is not None else Path("out") / file.stem
    cmd = _binary(binary) + ["sweep", str(file), "-o", str(out)]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if ray is not None:
        cmd += ["--ray", ray]
    if quiet:
        cmd.append("--quiet")
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.strip()
    if p.returncode == 2:
        raise SweepError(err.splitlines()[-1] if err else "latencylab sweep: usage error")
    if p.returncode not in (0, 1) or not (out / "results.parquet").exists():
        raise RuntimeError(f"latencylab sweep exited with {p.returncode}: {err}")
    return read_results(out)


def read_results(out: PathLike) -> pl.DataFrame:
    """The results table of the sweep in ``out`` (``results.parquet``), as it stands."""
    return pl.read_parquet(Path(out) / "results.parquet")


# The run directory's definition (docs/run-dir.md), as the binary's own: its file names, the
# link log's columns and the columns made of each link direction of summary.json. Written from
# labnet's run_dir::schema() and compared with it by that crate's tests.
with open(Path(__file__).with_name("run_dir.json"), encoding="utf-8") as _f:
    RUN_DIR = json.load(_f)

LINK_LOG_COLUMNS = RUN_DIR["link_log_columns"]


def _file(kind: str, **names: str) -> str:
    """A file of a run directory, relative to it (``_file("link_log", link="path",
    direction="down")``)."""
    return RUN_DIR["files"][kind].format(**names)


def _link_column(link: dict, column: dict) -> Optional[float]:
    """One of ``RUN_DIR["link_columns"]`` for one link direction of summary.json."""
    v: Any = link
    for k in column["key"].split("."):
        v = v.get(k) if isinstance(v, dict) else None
    if column["sum"]:
        return float(sum((v or {}).values())) if isinstance(v, dict) else None
    return None if v is None else v / column["divisor"]


@dataclass
class Run:
    """One run directory (docs/run-dir.md), read through its documented layout."""

    path: Path
    lab: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    #: A demo's ``results.json``, else ``None``.
    results: Optional[dict] = None

    def links(self) -> pl.DataFrame:
        """One row per link direction of ``summary.json``: the counters and queue delays."""
        rows = []
        for link in self.summary.get("links", []):
            rows.append(
                {
                    "link": link.get("name"),
                    "direction": link.get("direction"),
                    "queue": link.get("queue"),
                    **{c["name"]: _link_column(link, c) for c in RUN_DIR["link_columns"]},
                }
            )
        return pl.DataFrame(rows)

    def link_log(self, link: str, direction: str) -> pl.DataFrame:
        """Every packet event of ``links/LINK-DIRECTION.log``; ``-`` cells are null."""
        path = self.path / _file("link_log", link=link, direction=direction)
        with open(path, encoding="utf-8") as f:
            header = f.readline()
        if not header.startswith("#"):
            raise ValueError(f"{path}: no header line starting with '#'")
        df = pl.read_csv(
            path,
            separator="\t",
            has_header=False,
            skip_rows=1,
            new_columns=LINK_LOG_COLUMNS,
            null_values="-",
            schema_overrides={"time_ns": pl.Int64, "id": pl.Int64, "bytes": pl.Int64,
                              "sojourn_ns": pl.Int64},
        )
        if df.width != len(LINK_LOG_COLUMNS):
            raise ValueError(f"{path}: {df.width} fields, not {len(LINK_LOG_COLUMNS)}")
        return df

    def program_lines(self, name: str) -> list[dict]:
        """The JSON lines a program wrote (``programs/NAME.out``, or a sweep's shell
        ``command.out`` for ``name="command"``); a torn last line is left out."""
        path = self.path / (
            _file("command_out") if name == "command" else _file("program_out", program=name)
        )
        lines = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return lines


def read_run(path: PathLike) -> Run:
    """Reads the run directory ``path``: ``lab.json``, ``summary.json`` and, for a demo,
    ``results.json``. Raises ``FileNotFoundError`` when it has no ``summary.json``."""
    path = Path(path)

    def load(name: str) -> Any:
        with open(path / name, encoding="utf-8") as f:
            return json.load(f)

    lab, summary, results = (_file(k) for k in ("lab_json", "summary_json", "results_json"))
    res = load(results) if (path / results).exists() else None
    if not (path / summary).exists() and res is None:
        raise FileNotFoundError(f"{path} is not a run directory: it has no {summary}")
    return Run(
        path=path,
        lab=load(lab) if (path / lab).exists() else {},
        summary=load(summary) if (path / summary).exists() else {},
        results=res,
    )


def follow(
    file: PathLike, *, poll_s: float = 0.1, idle_timeout_s: Optional[float] = 30.0
) -> Iterator[dict[str, Any]]:
    """Follows a running lab's ``--live FILE``: yields each JSON line (a dict: one link
    direction over one 100 ms interval, see docs/run-dir.md) as the lab writes it.

    Waits for the file to appear. Ends after the lab's last rows (``last`` is true on each
    direction's), or when nothing new came for ``idle_timeout_s`` seconds (``None``: never).

        >>> for row in latencylab.follow("live.jsonl"):
        ...     if row["link"] == "path" and row["dir"] == "down":
        ...         print(row["t_s"], row["delivered_bps"], row["queue_delay_ms"])
    """
    path = Path(file)
    waited = 0.0
    while not path.exists():
        if idle_timeout_s is not None and waited >= idle_timeout_s:
            raise TimeoutError(f"{path}: no such file after {idle_timeout_s} s")
        time.sleep(poll_s)
        waited += poll_s
    with path.open("r", encoding="utf-8") as f:
        partial = ""
        idle = 0.0
        dirs: set[tuple[str, str]] = set()
        ended: set[tuple[str, str]] = set()
        while True:
            chunk = f.readline()
            if not chunk:
                if idle_timeout_s is not None and idle >= idle_timeout_s:
                    return
                time.sleep(poll_s)
                idle += poll_s
                continue
            idle = 0.0
            partial += chunk
            if not partial.endswith("\n"):
                continue
            row = json.loads(partial)
            partial = ""
            key = (row["link"], row["dir"])
            dirs.add(key)
            if row.get("last"):
                ended.add(key)
            yield row
            if ended and ended == dirs:
                return
