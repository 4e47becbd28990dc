"""`--instructions`: user-space instructions per answer (valgrind's Callgrind: within a
few percent from run to run, where CPU time moves by tens) of the server and of bare
hyper answering the same bytes, each under wrk -c16 after a warm-up: `ping`, the cached
`list` page 1 + include in exact mode (a share of the version check included), `get` one
book + include (the versus run's "get one", cached the same way), and the page's
`304` (PostgreSQL in push mode, SQLite through its WAL index, or the memory store:
versions known without a query);
`--workloads` picks some. With `--before`, an older server binary beside. The kernel's
share of a request is not counted.
"""

import http.client
import os
import subprocess
import tempfile
import urllib.request

from loadrun.harness import RELEASE, SERVER, prepare_store, wait_port, wrk


def status_of(port, path, headers):
    """The status one GET of `path` is answered with."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def instructions(args):
    """User-space instructions per answer under Callgrind: the server (and `--before`)
    beside bare hyper answering the same status, content type and bytes."""
    tmp = tempfile.mkdtemp(prefix="books-instructions-")
    page = "/api/books?include=author"
    # (path, status, whether the request sends the ETag back, PostgreSQL in push mode)
    workloads = {"ping": ("/api/ping", 200, False, False),
                 "list": (page, 200, False, False),
                 "get": ("/api/books/7?include=author", 200, False, False),
                 "304": (page + "&page=1", 304, True, True)}
    chosen = (args.workloads or "ping,list,get,304").split(",")
    servers = {"ours": SERVER, **({"before": args.before} if args.before else {})}
    print(f"User-space instructions per answer, Callgrind, wrk -t1 -c16 for {args.seconds}s after a "
          "2 s warm-up; `list` is page 1 + include answered from the cache in exact mode (so its "
          "count includes a share of one version check per wave, and depends on how many requests "
          "a wave gathers); `get` is one book + include, cached the same way; `304` is the same page with `If-None-Match`, PostgreSQL in push mode.\n")
    print("| store | workload | server | requests | instructions/request | ratio to hyper |")
    print("|---|---|---|---|---|---|")
    port = 18096
    for store in args.stores.split(","):
        # An older binary gets a database of its own: it refuses newer migrations.
        urls = {name: prepare_store(store, tmp, name) for name in servers}
        for workload in chosen:
            path, status, conditional, push = workloads[workload]
            if store == "mysql" and workload == "304":
                print(f"| {store} | 304 | skipped: no version known without a query, see `list` | | | |")
                continue
            extra = ["--push", "true"] if push and store == "postgres" else []
            counts, answer = {}, {}
            for name, binary in [*servers.items(), ("hyper", None)]:
                if binary:
                    cmd = [binary, "--listen", f"127.0.0.1:{port}", "--database-url", urls[name], "--metrics", "false",
                           "--base-url", "http://localhost:8080", *extra]
                else:
                    body = os.path.join(tmp, f"{workload}.body")
                    with open(body, "wb") as f:
                        f.write(b"" if status == 304 else answer["body"])
                    cmd = [f"{RELEASE}/baseline", "hyper", f"127.0.0.1:{port}",
                           f"{path}={status}:{answer['ctype']}:{body}"]
                out = os.path.join(tmp, f"{store}-{workload}-{name}.callgrind")
                proc = subprocess.Popen(["taskset", "-c", "0", "valgrind", "--tool=callgrind",
                                         f"--callgrind-out-file={out}", *cmd],
                                        env=dict(os.environ, TOKIO_WORKER_THREADS="1", RUST_LOG="warn"),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_port(port, timeout=120)
                    etag = answer.get("etag")
                    if binary:
                        # Each server's own ETag: another store's version gives another tag, and
                        # a tag it does not know would be answered in full (a 200, not a 304).
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
                            own = {"body": r.read(), "ctype": r.headers["content-type"].replace(";", "%3B"),
                                   "etag": r.headers["etag"]}
                        answer = answer or own
                        etag = own["etag"]
                    header = f"If-None-Match: {etag}" if conditional else None
                    if binary and conditional:
                        got = status_of(port, path, {"If-None-Match": etag})
                        if got != status:
                            raise RuntimeError(f"{name} answered {got} to its own ETag, not {status}")
                    wrk(port, path, 2, connections=16, header=header)
                    subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
                    requests, _, _, _, non2xx = wrk(port, path, args.seconds, connections=16, header=header)
                    subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
                    if non2xx and status == 200:
                        raise RuntimeError(f"{name} answered {non2xx} errors")
                    # wrk counts neither a 200 nor a 304 as an error: the tag checked again.
                    if binary and conditional and status_of(port, path, {"If-None-Match": etag}) != status:
                        raise RuntimeError(f"{name} stopped answering its own ETag with {status}")
                    if not requests:
                        raise RuntimeError(f"{name} answered nothing in {args.seconds} s under Callgrind "
                                           "(a loaded machine): run again with more --seconds")
                    with open(f"{out}.1") as f:
                        total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
                    counts[name] = (requests, total / requests)
                finally:
                    proc.terminate()
                    proc.wait()
            for name, (requests, per) in counts.items():
                print(f"| {store} | {workload} | {name} | {requests:,} | {per:,.0f} | {per / counts['hyper'][1]:.2f}x |")
