# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures. Tests marked ``gpu`` need a usable CUDA device and a module built with CUDA;
they are skipped otherwise (the CPU suite runs everywhere, tools/test included)."""

import pytest

import canopy


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs the gpu backend and a CUDA device (skipped otherwise)")


def pytest_collection_modifyitems(config, items):
    if canopy.gpu_available():
        return
    why = ("this canopy module was built without CUDA" if not canopy.has_gpu_backend()
           else "no usable CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="module")
def plummer():
    """3,000 Plummer points and their octree (small leaves, so a few levels deep)."""
    points = canopy.generate("plummer", 3000, seed=7)
    return points, canopy.build_octree(points, max_leaf=8)
