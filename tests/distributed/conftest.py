"""A local Ray cluster for a test module, started once per module: Ray takes seconds to start."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

import pytest
import ray

import polytok


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A 2-CPU Ray cluster on 127.0.0.1, this process connected; yields its address."""
    # Workers import the polytok these tests import, wherever it lies.
    source = str(Path(polytok.__file__).parents[1])
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = source + (os.pathsep + previous if previous else "")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous
