# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the rados_nkv.weights tests, on top of python/tests/conftest.py (the package's):
`daemon` (a real rados-nkv per backend: mem, and rados on the micro cluster; --nkv-backend),
`transport` (tcp, shm) and `client` come from there. Here: the CLI's target options and model
names unique to each test."""

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # weights_helpers


@pytest.fixture
def subnqn(daemon):
    """The daemon's subsystem NQN (the CLI and the loader name it: over TCP without one they would ask
    the discovery controller on port 8009, not the test daemon's)."""
    with daemon.connect("shm") as c:
        return c.subnqn


@pytest.fixture
def target_args(daemon, transport, subnqn):
    """The CLI's target options for this daemon and transport."""
    return ["-t", daemon.target(transport), "--subnqn", subnqn]


@pytest.fixture
def model_name(request, transport):
    """A model name no other test uses."""
    return "test/%s-%s-%s" % (request.node.originalname, transport, uuid.uuid4().hex[:6])
