"""Issue 14, defect 1: a Client made before a fork works in each child (its
own channel and Watch stream, decisions from the sidecar, no stale local
refusal), or, with grpc's fork support off, refuses clearly; never a hang
or a crash. The pre-fork program runs in its own interpreter
(forked_workers.py): grpc reads GRPC_ENABLE_FORK_SUPPORT when imported,
and this test process has it off (conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Breakerd, unique

SCRIPT = Path(__file__).resolve().parent / "forked_workers.py"
LOCAL_SCRIPT = Path(__file__).resolve().parent / "forked_local.py"
WORKERS = 8


def _run_workers(server: Breakerd, fork_support: str) -> tuple[dict[str, object], str]:
    dep, forced, later = unique("fork/dep"), unique("fork/forced"), unique("fork/later")
    server.force_open(forced)  # before the fork: the master's Watch has it
    env = dict(os.environ, GRPC_ENABLE_FORK_SUPPORT=fork_support)
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), server.grpc_addr, dep, forced, later, str(WORKERS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        ready = proc.stdout.readline()  # bounded: the script's processes have hard timeouts
        assert ready.startswith("ready"), ready + proc.communicate(timeout=60)[1]
        server.force_close(forced)  # after the fork: each child must see both
        server.force_open(later)
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result: dict[str, object] = json.loads(out.splitlines()[-1])
    return result, err


# conformance: pre-fork
def test_children_forked_after_use_decide_with_the_sidecar_and_see_new_states(
    breakerd: Breakerd,
) -> None:
    result, err = _run_workers(breakerd, "1")
    assert result["children"] == [0] * WORKERS, err
    assert result["said"] == "r" * WORKERS, err
    assert result["master"] == ["SIDECAR", "SIDECAR"]


# conformance: pre-fork
def test_without_grpc_fork_support_children_refuse_clearly(breakerd: Breakerd) -> None:
    result, err = _run_workers(breakerd, "false")
    refused_clearly = 6  # forked_workers.REFUSED_CLEARLY
    assert result["children"] == [refused_clearly] * WORKERS, err
    assert err.count("GRPC_ENABLE_FORK_SUPPORT=1") == WORKERS
    assert result["master"] == ["SIDECAR", "SIDECAR"]


def test_forked_children_batch_under_their_own_id_and_never_resend_the_parents(
    breakerd: Breakerd,
) -> None:
    dep, workers, calls = unique("local/fork"), 2, 50
    env = dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="1")
    proc = subprocess.run(
        [sys.executable, str(LOCAL_SCRIPT), breakerd.grpc_addr, dep, str(workers), str(calls)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["statuses"] == [0] * workers, proc.stderr
    master, children = result["master"], result["children"]
    assert master["queued"] == calls + 1  # unsent at the fork (the first local grant too)
    ids = [master["client_id"]] + [c["client_id"] for c in children]
    assert len(set(ids)) == len(ids)
    for who in [master, *children]:
        assert who["client_id"].startswith(f"python-{who['pid']}-")
    assert result["master_dropped"] == 0 and all(c["dropped"] == 0 for c in children)
    # Each call's outcome counted once: a child that sent what it inherited
    # of its parent's batch would count the parent's calls again.
    child_calls = sum(sum(c["sources"].values()) for c in children)
    assert child_calls == workers * calls
    assert breakerd.reports(dep, "success", "counted_success") == (
        result["master_successes"] + child_calls
    )
    local = calls + 1 + sum(c["sources"].get("LOCAL", 0) for c in children)
    assert breakerd.metric("breakerd_acquire_total", dependency=dep, decision="allowed_local") == (
        local
    )


pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
