"""The example runs against a real breakerd, with /metrics as its upstream."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Breakerd, unique

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "guarded_call.py"


def _run(server: Breakerd, dep: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--target", server.grpc_addr, "--dependency", dep,
         "--url", f"http://{server.metrics_addr}{path}", "--decision-timeout", "2"],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_example_guards_a_call(breakerd: Breakerd) -> None:
    ok, missing = unique("example/ok"), unique("example/missing")
    run = _run(breakerd, ok, "/metrics")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "HTTP 200" in run.stdout
    run = _run(breakerd, missing, "/no-such-page")
    assert run.returncode == 1, run.stdout + run.stderr
    assert breakerd.reports(ok, "success", "counted_success") == 1
    assert breakerd.reports(missing, "bad_request", "neutral") == 1
    breakerd.force_open(ok)
    run = _run(breakerd, ok, "/metrics")
    assert run.returncode == 2 and "refused" in run.stdout, run.stdout + run.stderr
