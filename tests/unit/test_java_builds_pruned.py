"""Old Java role builds are deleted, but never one that another checkout used lately."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.proc import java_roles

KEPT = {f"b{i}" for i in range(java_roles.KEEP_BUILDS)}


def make_builds(root: Path) -> None:
    """KEEP_BUILDS recent builds, and two more last used hours ago."""
    now = time.time()
    ages = {f"b{i}": 60.0 * i for i in range(java_roles.KEEP_BUILDS)}
    ages |= {"other-checkout": 2 * 3600.0, "stale": 3 * 3600.0}
    for name, age in ages.items():
        marker = root / name / "libs" / ".built-from"
        marker.parent.mkdir(parents=True)
        marker.write_text(name)
        os.utime(marker, (now - age, now - age))


@pytest.mark.parametrize("used_lately", [True, False])
def test_a_build_another_checkout_uses_is_not_pruned(tmp_path, monkeypatch, used_lately):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    root = java_roles.builds_dir()
    make_builds(root)
    if used_lately:  # what ensure_java_roles does each time a role starts from a build
        (root / "other-checkout" / "libs" / ".built-from").touch()
    java_roles._prune_old_builds()
    left = {d.name for d in root.iterdir()}
    # The contrast: unused for two hours, the same build beyond the kept ones goes.
    assert left == KEPT | ({"other-checkout"} if used_lately else set())
