from pathlib import Path

import pytest

import latencylab

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sweep-small.toml"


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """examples/sweep-small.toml run once on the local pool: (its directory, its table)."""
    out = tmp_path_factory.mktemp("sweep") / "small"
    return out, latencylab.sweep(SMALL, out=out)
