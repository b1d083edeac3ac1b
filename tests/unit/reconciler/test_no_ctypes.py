"""The reconciler calls no C library through ctypes (a mistyped signature there corrupts memory silently): the
running process never imports it, and its image tunes no glibc allocator setting that would stand in for one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_reconciler_imports_no_ctypes() -> None:
    code = "import sys\nimport reconciler.__main__\nprint('ctypes' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.split() == ["False"]


def test_the_image_sets_no_malloc_tuning() -> None:
    """docs/reconciler.md, "Tuning": MALLOC_TRIM_THRESHOLD_ and MALLOC_ARENA_MAX were measured and bought nothing."""
    assert "MALLOC_" not in (ROOT / "Dockerfile.reconciler").read_text(encoding="utf-8")
