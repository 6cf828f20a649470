#!/usr/bin/env python3
"""A flaky fake upstream for the breakerd demo (Python standard library only).

GET  /call       waits latency_ms, then answers 200, or 503 with probability
                 failure_rate.
GET  /control    the current settings as JSON.
POST /control?failure_rate=0.8&latency_ms=200
                 changes either or both while it runs.

Binds 127.0.0.1 on --port (0 = a free port) and writes the port bound to
--port-file once it is listening.
"""
import argparse
import json
import os
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_lock = threading.Lock()
_settings = {"failure_rate": 0.05, "latency_ms": 20.0}


def _snapshot():
    with _lock:
        return dict(_settings)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the client prints the summary
        pass

    def _send(self, code, body):
        data = (json.dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/call":
            s = _snapshot()
            time.sleep(s["latency_ms"] / 1000.0)
            if random.random() < s["failure_rate"]:
                self._send(503, {"error": "injected failure"})
            else:
                self._send(200, {"ok": True})
        elif path == "/control":
            self._send(200, _snapshot())
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        url = urlsplit(self.path)
        if url.path != "/control":
            self._send(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        q = parse_qs(url.query)
        update = {}
        try:
            if "failure_rate" in q:
                fr = float(q["failure_rate"][0])
                if not 0.0 <= fr <= 1.0:
                    raise ValueError("failure_rate must be in [0, 1]")
                update["failure_rate"] = fr
            if "latency_ms" in q:
                lat = float(q["latency_ms"][0])
                if not 0.0 <= lat <= 60000.0:
                    raise ValueError("latency_ms must be in [0, 60000]")
                update["latency_ms"] = lat
        except ValueError as e:
            self._send(400, {"error": str(e)})
            return
        with _lock:
            _settings.update(update)
            now = dict(_settings)
        print(f"[upstream] now failure_rate={now['failure_rate']} "
              f"latency_ms={now['latency_ms']:g}", flush=True)
        self._send(200, now)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--failure-rate", type=float, default=0.05)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args()
    _settings["failure_rate"] = args.failure_rate
    _settings["latency_ms"] = args.latency_ms
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.replace(args.port_file + ".tmp", args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    import signal

    def _term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    main()
