#!/usr/bin/env python3
"""Client loop for the breakerd demo.

For each request: Acquire(dependency) from breakerd; if allowed, call the
upstream over HTTP with a timeout and Report the HTTP status (or
OUTCOME_TIMEOUT / OUTCOME_CONNECTION_ERROR) and the latency; if refused,
serve a local fallback instead. Prints one summary line per second.

The breakerd stubs (breakerd/v1/breaker_pb2*.py) are generated at demo start
with grpc_tools.protoc into --stubs; that directory is put on sys.path.
"""
import argparse
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, help="breakerd gRPC host:port")
    ap.add_argument("--upstream", required=True, help="URL of the upstream call")
    ap.add_argument("--stubs", required=True, help="dir with generated stubs")
    ap.add_argument("--dependency", default="demo/upstream")
    ap.add_argument("--rps", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1.0,
                    help="upstream call timeout, seconds")
    ap.add_argument("--watch", action="store_true",
                    help="also print transitions from the Watch RPC")
    args = ap.parse_args()

    sys.path.insert(0, args.stubs)
    import grpc
    from breakerd.v1 import breaker_pb2 as pb
    from breakerd.v1 import breaker_pb2_grpc as pbg

    stop = threading.Event()

    def _stop(*_):
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    # Started in the background by run.sh, SIGINT is ignored: run.sh's trap
    # stops us with SIGTERM. Run by hand, Ctrl-C stops the loop.
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _stop)

    channel = grpc.insecure_channel(args.target)
    grpc.channel_ready_future(channel).result(timeout=10)
    stub = pbg.BreakerStub(channel)
    state_name = lambda v: pb.State.Name(v).removeprefix("STATE_").lower()

    if args.watch:
        def watch():
            try:
                for ch in stub.Watch(pb.WatchRequest(dependencies=[args.dependency])):
                    ra = ch.retry_after.seconds + ch.retry_after.nanos / 1e9
                    extra = f" retry_after={ra:.1f}s" if ra > 0 else ""
                    print(f"[watch]  {ch.dependency}: {state_name(ch.previous)} -> "
                          f"{state_name(ch.state)} ({ch.reason}) gen={ch.generation}{extra}",
                          flush=True)
            except grpc.RpcError:
                pass
        threading.Thread(target=watch, daemon=True).start()

    counts = dict(allowed=0, refused=0, ok=0, failures=0, timeouts=0, fallback=0)
    last_state = "closed"
    interval = 1.0 / args.rps if args.rps > 0 else 0.0
    next_print = time.monotonic() + 1.0
    next_call = time.monotonic()

    while not stop.is_set():
        try:
            acq = stub.Acquire(pb.AcquireRequest(dependency=args.dependency), timeout=2)
        except grpc.RpcError as e:
            # Sidecar unreachable: fail open would be a policy choice; the
            # demo just counts it as a fallback and goes on.
            if stop.is_set():
                break
            print(f"[client] Acquire failed: {e.code().name}", flush=True)
            counts["fallback"] += 1
            stop.wait(0.5)
            continue
        last_state = state_name(acq.state)
        if acq.allowed:
            counts["allowed"] += 1
            start = time.monotonic()
            status, outcome = 0, pb.OUTCOME_UNSPECIFIED
            try:
                with urllib.request.urlopen(args.upstream, timeout=args.timeout) as r:
                    r.read()
                    status = r.status
            except urllib.error.HTTPError as e:
                status = e.code
            except (socket.timeout, TimeoutError):
                outcome = pb.OUTCOME_TIMEOUT
            except urllib.error.URLError as e:
                if isinstance(e.reason, (socket.timeout, TimeoutError)):
                    outcome = pb.OUTCOME_TIMEOUT
                else:
                    outcome = pb.OUTCOME_CONNECTION_ERROR
            except OSError:
                outcome = pb.OUTCOME_CONNECTION_ERROR
            elapsed = time.monotonic() - start
            if status == 200:
                counts["ok"] += 1
            elif outcome == pb.OUTCOME_TIMEOUT:
                counts["timeouts"] += 1
                counts["failures"] += 1
            else:
                counts["failures"] += 1
            req = pb.ReportRequest(dependency=args.dependency, permit=acq.permit,
                                   outcome=outcome, http_status=status)
            req.latency.FromNanoseconds(int(elapsed * 1e9))
            try:
                rep = stub.Report(req, timeout=2)
                last_state = state_name(rep.state)
            except grpc.RpcError as e:
                if not stop.is_set():
                    print(f"[client] Report failed: {e.code().name}", flush=True)
        else:
            counts["refused"] += 1
            counts["fallback"] += 1  # the local fallback answer

        now = time.monotonic()
        if now >= next_print:
            print(f"[client] state={last_state:<9} allowed={counts['allowed']:3d} "
                  f"refused={counts['refused']:3d} ok={counts['ok']:3d} "
                  f"failures={counts['failures']:3d} (timeouts={counts['timeouts']}) "
                  f"fallbacks={counts['fallback']:3d}", flush=True)
            for k in counts:
                counts[k] = 0
            next_print = now + 1.0
        next_call += interval
        delay = next_call - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        else:
            next_call = time.monotonic()
    channel.close()


if __name__ == "__main__":
    main()
