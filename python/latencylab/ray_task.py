"""One run of a sweep as a Ray task: ``latencylab sweep --ray ADDRESS`` starts, for each run,

    python3 -m latencylab.ray_task --address ADDRESS -- /path/to/latencylab ARGS... -o DIR ...

which submits one Ray task needing one unit of the custom resource ``lab`` (a node started
with ``ray start --resources '{"lab": N}'`` runs N labs at once; Ray does the scheduling). The
task runs the same ``latencylab ARGS`` on its worker node into a scratch directory there, and
sends the run directory back as a tar archive, which lands in DIR: the sweep reads and
journals it like a local run. The task's stdout and stderr become this process's, and its
exit status this process's.

The binary on a worker is ``$LATENCYLAB`` there, else the driver's path (install latencylab at
the same path on every node). Run directories are copied back and the worker's copy removed;
a sweep file with ``capture = false`` keeps the copies small (no pcaps, no link logs).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import ray

from . import RUN_DIR

#: The custom resource that says how many labs a node holds.
RESOURCE = "lab"

#: How many times a run whose node (or worker process) died runs again elsewhere.
NODE_LOSS_RETRIES = 3


def _run_on_worker(argv: list[str]) -> tuple[int, bytes, bytes, bytes, str]:
    """Runs ``latencylab`` with ``argv`` (its ``-o`` pointed at a scratch directory) and
    returns (status, stdout, stderr, the run directory as tar, the node's id)."""
    bin_ = os.environ.get("LATENCYLAB") or argv[0]
    scratch = tempfile.mkdtemp(prefix="latencylab-ray-")
    try:
        args = list(argv[1:])
        i = args.index("-o")
        args[i + 1] = os.path.join(scratch, "run")
        p = subprocess.run([bin_] + args, stdin=subprocess.DEVNULL, capture_output=True)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            if os.path.isdir(args[i + 1]):
                tar.add(args[i + 1], arcname=".")
        node = ray.get_runtime_context().get_node_id()
        return p.returncode, p.stdout, p.stderr, buf.getvalue(), node
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(prog="latencylab.ray_task")
    ap.add_argument("--address", required=True)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if "-o" not in argv:
        print("latencylab.ray_task: the latencylab command has no -o DIR", file=sys.stderr)
        return 2
    out = argv[argv.index("-o") + 1]
    ray.init(address=a.address, logging_level="ERROR", log_to_driver=False)
    # A task whose worker process or node dies (a node lost in the middle of a sweep) runs
    # again on another node; a lab that fails is not retried (it returns its status, as a
    # local run would), nor is an exception in the task.
    task = ray.remote(num_cpus=0, resources={RESOURCE: 1}, max_retries=NODE_LOSS_RETRIES)(
        _run_on_worker
    )
    status, stdout, stderr, archive, node = ray.get(task.remote(argv))
    os.makedirs(out, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(out, filter="data")
    with open(os.path.join(out, RUN_DIR["files"]["ray_node"]), "w") as f:
        f.write(node + "\n")
    sys.stdout.buffer.write(stdout)
    sys.stderr.buffer.write(stderr)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
