"""`--traces`: what exporting every request's spans costs. The server on SQLite (cached
page 1 + include in exact mode, and ping) with no exporter, then exporting over
OTLP/HTTP to a local receiver with every request sampled (`OTEL_TRACES_SAMPLER=
always_on`, batches every 200 ms): CPU per answer from /proc under wrk -c16 (all of the
server's threads, the exporter's included), the rate, and the spans the receiver got.
The receiver (a Python thread answering 200 to each export) runs in this script.
"""

import http.server
import tempfile
import threading

from loadrun.harness import SERVER, measure, prepare_store, start, stop, wrk


class _Receiver(http.server.BaseHTTPRequestHandler):
    exports = 0
    bytes = 0

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = self.rfile.read(length)
        _Receiver.exports += 1
        _Receiver.bytes += len(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def traces(args):
    """CPU per answer with tracing off and with every request exported."""
    tmp = tempfile.mkdtemp(prefix="books-traces-")
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    collector = f"http://127.0.0.1:{receiver.server_address[1]}"
    url = prepare_store("sqlite", tmp)
    port = 18097
    workloads = {"ping": "/api/ping", "list": "/api/books?include=author"}
    modes = {"off": {}, "exported": {"OTEL_EXPORTER_OTLP_ENDPOINT": collector,
                                     "OTEL_TRACES_SAMPLER": "always_on",
                                     "OTEL_BSP_SCHEDULE_DELAY": "200"}}
    print(f"CPU per answer (server process, all threads), SQLite, wrk -t1 -c16 for {args.seconds}s "
          f"after a 2 s warm-up, {args.rounds} round(s), best round; `exported`: every request's "
          "spans sent over OTLP/HTTP to a local receiver.\n")
    print("| workload | tracing | requests/s | CPU µs/answer | p99 | spans dropped |")
    print("|---|---|---|---|---|---|")
    for workload, path in workloads.items():
        for mode, env in modes.items():
            best = None
            for _ in range(args.rounds):
                proc = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url,
                              "--base-url", "http://localhost:8080"], port, env=env)
                try:
                    wrk(port, path, 2, connections=16)
                    result = measure(proc, port, path, args.seconds, connections=16)
                    metrics = dropped_spans(port)
                finally:
                    stop([proc])
                if best is None or result["cpu_us"] < best[0]["cpu_us"]:
                    best = (result, metrics)
            result, dropped = best
            print(f"| {workload} | {mode} | {result['rps']:,.0f} | {result['cpu_us']:.1f} | "
                  f"{result['p99']} | {dropped} |")
    print(f"\nThe receiver took {_Receiver.exports} exports ({_Receiver.bytes / 1e6:.1f} MB).")
    receiver.shutdown()


def dropped_spans(port):
    """The spans the server dropped, from /metrics."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("books_trace_spans_dropped_total{"))
