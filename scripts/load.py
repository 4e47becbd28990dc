#!/usr/bin/env python3
"""Load runs over loopback: the server beside bare-hyper and bare-warp baselines
that answer the same paths with the same bytes.

    python3 scripts/load.py [--rounds 3] [--seconds 5] [--stores memory,sqlite,postgres]
    python3 scripts/load.py --bindings [--rounds 3] [--seconds 5]
    python3 scripts/load.py --metrics-cost [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --shedding [--books 200000] [--seconds 5]
    python3 scripts/load.py --cache [--stores sqlite,postgres] [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --versus [--stores sqlite,postgres,mysql] [--books 1000] [--rounds 3] [--seconds 5] [--push] [--cache-off] [--before OLD_BINARY]
    python3 scripts/load.py --cache-memory [--books 1000000]
    python3 scripts/load.py --instructions [--stores memory,sqlite,postgres] [--workloads ping,list,304] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --pooler [--rounds 3] [--seconds 5]
    python3 scripts/load.py --replicas [--stores postgres,mysql] [--rounds 3] [--seconds 5]
    python3 scripts/load.py --edge [--rounds 3] [--seconds 5]

Builds the release binaries, installs wrk (apt) and oha (cargo) if missing, pins every
server to core 0 with one runtime thread (TOKIO_WORKER_THREADS=1) and the load
generator to core 1, and interleaves targets within each round. Prints a Markdown
report: requests/s, server CPU time per request (from /proc/PID/stat), latency, and the
median ratio to the baselines over the rounds; then p50/p99 at a fixed rate of 50% and
80% of the measured peak (oha, latency-corrected), and RSS idle / after 64 and 1,000
keep-alive connections. Everything stays on 127.0.0.1 and every run is bounded.

`--metrics-cost` compares the server with metrics off and on (recorder installed), memory
store, ping and list, interleaved in each round.

`--shedding` fills a SQLite file with `--books` rows (default 200,000), measures the
capacity for the last page (wrk, 4 connections), then offers 2x and 4x that rate open-loop
(64 keep-alive connections, latency from each request's scheduled start) to the server
without a bound on requests in flight and with `--max-in-flight 8`: p50/p99 of admitted
(200) answers, the share shed (503) and how fast a 503 comes.

`--versus` runs the server beside the hand-written axum + sqlx server
(`benches/handwritten.rs`, its own tables, no cache) on the same database server (`mysql`:
MariaDB at BOOKS_LOAD_MYSQL_URL, default the local server as root), both with their
defaults: ping, list page 1 and get one (16 connections), creates (50 connections), and a
mixed workload (95% reads over the first 10 pages, 5% creates, 32 connections);
throughput ratio to hand-written. Ping is also asked of bare hyper serving our ping's
bytes: what no server that does more can beat. `--before` adds an older server binary on
a database of its own.
With `--push`, our server runs PostgreSQL in push mode (what every write then costs);
with `--cache-off`, without its cache (`--cache-entries 0`).

`--cache` adds, on PostgreSQL, a server in push mode beside the exact one (and with
`--before`, an older binary in push mode beside that), and bare warp beside bare hyper
(its ratio is the floor for anything served through warp).

`--instructions` counts the user-space instructions per answer (valgrind's Callgrind:
within a few percent from run to run, where CPU time moves by tens) of the server and of
bare hyper answering the same bytes, each under wrk -c16 after a warm-up: `ping`, the
cached `list` page 1 + include in exact mode (a share of the version check included),
and its `304` (PostgreSQL in push mode, or the memory store: versions known without a
query); `--workloads` picks some. With `--before`, an older server binary beside. The
kernel's share of a request is not counted.

`--pooler` runs the server twice on one PostgreSQL database (1,000 books), directly and
through PgBouncer in transaction mode (`--transaction-pooler true`; installed with apt if
missing), cache on and off, side by side: ping, list page 1 + include, get one + include
(16 connections) and creates (50): throughput, our CPU and PgBouncer's per request.

`--replicas` starts a private primary and a replica (PostgreSQL: initdb, pg_basebackup,
as the postgres user, a streaming replica; `mysql`: mariadb-install-db, mariadbd, a GTID
replica; `--stores` picks, default PostgreSQL) and reads pages 1-10 and books (with include, 16 connections) from
a server on the primary alone and one with `--replica-url`, cache on and off, while a
writer (a third server) updates a book every 20 ms and the script reads each write back
at once from the server under test: the share of store reads the replica served (from
/metrics), the primary's CPU per request (its processes, from /proc), p50/p99, and the
stale reads the script counted.

`--edge` measures the open internet's features on SQLite (1,000 books): bytes on the wire for list
page 1 + include in JSON and XML per encoding; CPU per cached list answer in each
encoding against identity (the compressed bodies kept); CPU per ping with the rate
limiter on (every request allowed) and with CORS on (an allowed Origin) against neither,
side by side in each round; and the RSS with 100,000 distinct clients behind a trusted
proxy (X-Forwarded-For) at `--rate-limit 10`, and the limiter's table after its sweep.

`--bindings` instead compares the bindings (warp filter, tower Service, axum Router; the
`bindings` example, one connection loop for all, memory store) with bare hyper serving
the same bytes, side by side in each round.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release", "examples")
SERVER = os.path.join(ROOT, "target", "release", "books-api")
TICK = os.sysconf("SC_CLK_TCK")
PG_URL = os.environ.get("BOOKS_LOAD_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/books_load")
MYSQL_URL = os.environ.get("BOOKS_LOAD_MYSQL_URL", "mysql://root@127.0.0.1:3306/books_load")
PORTS = {"ours": 18080, "hyper": 18081, "warp": 18082}
PATHS = {"ping": "/api/ping", "list": "/api/books?include=author"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def ensure_tools(fixed_rate=True):
    if not shutil.which("wrk"):
        run(["apt-get", "install", "-y", "-qq", "wrk"])
    if fixed_rate and not shutil.which("oha") and not os.path.exists(os.path.expanduser("~/.cargo/bin/oha")):
        run(["cargo", "install", "oha", "--locked"])
    run(["cargo", "build", "--release", "--bin", "books-api", "--example", "baseline",
         "--example", "bindings"], cwd=ROOT)


def oha():
    return shutil.which("oha") or os.path.expanduser("~/.cargo/bin/oha")


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def start(cmd, port, env=None):
    full_env = dict(os.environ, TOKIO_WORKER_THREADS="1", RUST_LOG="warn", **(env or {}))
    proc = subprocess.Popen(["taskset", "-c", "0", *cmd], env=full_env,
                            stdout=subprocess.DEVNULL, stderr=None if os.environ.get("LOAD_DEBUG") else subprocess.DEVNULL)
    wait_port(port)
    time.sleep(0.2)
    if proc.poll() is not None:
        raise RuntimeError(f"{cmd[0]} exited: is port {port} taken?")
    return proc


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wrk(port, path, seconds, script=None, connections=32, header=None):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if header:
        cmd += ["-H", header]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{port}{path}"], check=True,
                         capture_output=True, text=True).stdout
    requests = int(next(l for l in out.splitlines() if "requests in" in l).split()[0])
    rps = float(next(l for l in out.splitlines() if l.startswith("Requests/sec")).split()[1])
    p50 = next(l for l in out.splitlines() if l.strip().startswith("50%")).split()[1]
    p99 = next(l for l in out.splitlines() if l.strip().startswith("99%")).split()[1]
    non2xx = sum(int(l.split()[-1]) for l in out.splitlines() if "Non-2xx" in l)
    return requests, rps, p50, p99, non2xx


def measure(proc, port, path, seconds, script=None, connections=32, header=None):
    before = cpu_seconds(proc.pid)
    requests, rps, p50, p99, non2xx = wrk(port, path, seconds, script, connections, header)
    cpu = cpu_seconds(proc.pid) - before
    return {"rps": rps, "cpu_us": cpu / max(requests, 1) * 1e6, "p50": p50, "p99": p99, "non2xx": non2xx}


def fixed_rate(port, path, rate, seconds):
    out = subprocess.run(["taskset", "-c", "1", oha(), "-z", f"{seconds}s", "-q", str(int(rate)),
                          "-c", "32", "--latency-correction", "--no-tui", "--output-format", "json",
                          f"http://127.0.0.1:{port}{path}"],
                         check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    pct = data["latencyPercentiles"]
    return pct["p50"] * 1e3, pct["p99"] * 1e3


def open_connections(port, count, path="/api/ping"):
    conns = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.recv(65536)
        conns.append(s)
    return conns


def save_bodies(port, tmp):
    specs = []
    for name, path in PATHS.items():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
            body = r.read()
            ctype = r.headers["content-type"].replace(";", "%3B")
            file = os.path.join(tmp, name)
            with open(file, "wb") as f:
                f.write(body)
            specs.append(f"{path}={r.status}:{ctype}:{file}")
    return specs


def prepare_store(store, tmp, name="load"):
    if store == "memory":
        return "memory"
    if store == "sqlite":
        return f"sqlite://{tmp}/{name}.db"
    database = f"books_{name}"
    if store == "mysql":
        mariadb = ["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", "-e"]
        subprocess.run(mariadb + [f"DROP DATABASE IF EXISTS {database}; "
                                  f"DROP DATABASE IF EXISTS {database}_handwritten; "
                                  f"CREATE DATABASE {database}"], check=True, capture_output=True)
        return MYSQL_URL.rsplit("/", 1)[0] + "/" + database
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc",
                    f"DROP DATABASE IF EXISTS {database}"], check=True, capture_output=True)
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc",
                    f"CREATE DATABASE {database}"], check=True, capture_output=True)
    return PG_URL.rsplit("/", 1)[0] + "/" + database


POST_LUA = """
wrk.method = "POST"
wrk.body = "title=Load+test&author_id=3&year=2020"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
"""


BINDINGS = {"warp": 18083, "tower": 18084, "axum": 18085}


def bindings(args):
    """CPU per request of each binding beside bare hyper, interleaved in every round."""
    tmp = tempfile.mkdtemp(prefix="books-bindings-")
    procs = {}
    try:
        for kind, port in BINDINGS.items():
            procs[kind] = start([f"{RELEASE}/bindings", kind, f"127.0.0.1:{port}"], port)
        specs = save_bodies(BINDINGS["tower"], tmp)
        # Page 1 again with the ETag the client holds: a 304 from the cache (the memory
        # store knows its version without a query).
        paths = dict(PATHS, **{"list p1, 304": "/api/books?include=author&page=1"})
        with urllib.request.urlopen(f"http://127.0.0.1:{BINDINGS['tower']}{paths['list p1, 304']}") as r:
            header = f"If-None-Match: {r.headers['etag']}"
            ctype = r.headers["content-type"].replace(";", "%3B")
        open(os.path.join(tmp, "empty"), "wb").close()
        specs.append(f"{paths['list p1, 304']}=304:{ctype}:{os.path.join(tmp, 'empty')}")
        procs["hyper"] = start([f"{RELEASE}/baseline", "hyper", f"127.0.0.1:{PORTS['hyper']}", *specs],
                               PORTS["hyper"])
        ports = dict(BINDINGS, hyper=PORTS["hyper"])
        results = {}
        for _ in range(args.rounds):
            for name, path in paths.items():
                for target in ports:
                    results.setdefault((name, target), []).append(
                        measure(procs[target], ports[target], path, args.seconds,
                                header=header if "304" in name else None))
        report = [f"Machine: {os.cpu_count()} cores; {args.rounds} rounds x {args.seconds}s, "
                  "wrk -t1 -c32, servers on core 0 (one runtime thread), load on core 1.", "",
                  "| path | binding | req/s (median) | CPU µs/req (median) | CPU ratio to hyper |",
                  "|---|---|---|---|---|"]
        for (name, target), rs in results.items():
            cpu = statistics.median(r["cpu_us"] for r in rs)
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in zip(rs, results[(name, "hyper")]))
            rps = statistics.median(r["rps"] for r in rs)
            report.append(f"| {name} | {target} | {rps:,.0f} | {cpu:.1f} | {ratio:.2f}x |")
        print("\n".join(report))
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()


def metrics_cost(args):
    """CPU per request with metrics off and on (and, with --before, an older build of the
    server), side by side in every round."""
    ports = {"off": 18086, "on": 18087}
    if args.before:
        ports["before"] = 18089
    procs = {}
    try:
        for mode, port in ports.items():
            if mode == "before":
                procs[mode] = start([args.before, "--listen", f"127.0.0.1:{port}", "--database-url", "memory"], port)
                continue
            procs[mode] = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", "memory",
                                 "--metrics", "true" if mode == "on" else "false"], port)
        results = {}
        for _ in range(args.rounds):
            for name, path in PATHS.items():
                for mode, port in ports.items():
                    results.setdefault((name, mode), []).append(measure(procs[mode], port, path, args.seconds))
        print(f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c32, server on core 0 (one runtime thread).\n")
        print("| path | server | req/s (median) | CPU µs/req (median) | CPU ratio to metrics off |")
        print("|---|---|---|---|---|")
        for (name, mode), rs in results.items():
            pairs = zip(rs, results[(name, "off")])
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
            print(f"| {name} | {mode} | {statistics.median(r['rps'] for r in rs):,.0f} | "
                  f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.3f}x |")
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()


async def open_loop(port, path, rate, seconds, connections=64):
    """Requests at a fixed rate over keep-alive connections; (status, seconds) each, the
    latency counted from when the request was due (so client-side waits count too)."""
    import asyncio
    queue, results = asyncio.Queue(), []

    async def worker():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while (due := await queue.get()) is not None:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            results.append((status, time.monotonic() - due))
        writer.close()

    workers = [asyncio.create_task(worker()) for _ in range(connections)]
    begin = time.monotonic() + 0.2
    for i in range(int(rate * seconds)):
        due = begin + i / rate
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        queue.put_nowait(due)
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=120)
    return results


def fill_sqlite(path, books):
    import sqlite3
    db = sqlite3.connect(path, timeout=30)
    db.execute("BEGIN")
    db.executemany("INSERT INTO books (title, author_id, year, created_at, updated_at) "
                   "VALUES (?, 1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
                   ((f"Book {i}",) for i in range(books)))
    db.execute("COMMIT")
    db.close()


def shedding(args):
    import asyncio
    tmp = tempfile.mkdtemp(prefix="books-shedding-")
    url = f"sqlite://{tmp}/shed.db"
    port = 18088
    setup = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
    fill_sqlite(f"{tmp}/shed.db", args.books)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/books") as r:
        last = json.loads(r.read())["meta"]["totalPages"]
    setup.terminate()
    setup.wait()
    path = f"/api/books?page={last}"
    bounds = {"unbounded": "1000000", "bounded (8)": "8"}
    report = [f"SQLite, {args.books:,} books, `GET {path}` (the last page); server on core 0 "
              f"(one runtime thread), load on core 1; {args.seconds}s per run, 64 connections.", ""]
    rows, capacity = [], None
    for name, bound in bounds.items():
        proc = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url,
                      "--max-in-flight", bound, "--metrics", "false"], port)
        try:
            # One capacity for both runs (measured unbounded, where nothing is shed).
            capacity = capacity or wrk_capacity(port, path, args.seconds)
            for factor in (2, 4):
                results = asyncio.run(open_loop(port, path, capacity * factor, args.seconds))
                ok = sorted(t for s, t in results if s == 200)
                shed = sorted(t for s, t in results if s == 503)
                pct = lambda xs, q: f"{xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3:,.0f}" if xs else "–"
                rows.append(f"| {name} | {factor}x ({capacity * factor:,.0f}/s) | {len(results):,} | "
                            f"{pct(ok, 0.5)} | {pct(ok, 0.99)} | {len(shed) / max(len(results), 1):.0%} | "
                            f"{pct(shed, 0.5)} | {pct(shed, 0.99)} |")
        finally:
            proc.terminate()
            proc.wait()
    report.append(f"Capacity: {capacity:,.0f} req/s (wrk -c4, {args.seconds}s, unbounded server).")
    report += ["", "| in flight | offered | requests | admitted p50 ms | admitted p99 ms | shed | 503 p50 ms | 503 p99 ms |",
               "|---|---|---|---|---|---|---|---|", *rows]
    print("\n".join(report))
    shutil.rmtree(tmp, ignore_errors=True)


def wrk_capacity(port, path, seconds):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c4", f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(next(l for l in out.splitlines() if l.startswith("Requests/sec")).split()[1])


def cache_compare(args):
    """Unchanged data, read again and again: the server with its cache of rendered answers,
    without it, and bare hyper serving the same bytes, side by side in every round."""
    tmp = tempfile.mkdtemp(prefix="books-cache-")
    paths = {"list p1 + include": "/api/books?include=author", "get one + include": "/api/books/7?include=author",
             # The same page asked again with the ETag the client holds: 304, no body.
             "list p1, 304": "/api/books?include=author&page=1"}
    print(f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c16, servers on core 0 (one runtime thread); "
          "PostgreSQL also in push mode (`--push true`: a listener, no version query per request).\n")
    print("| store | path | server | req/s | CPU µs/req | CPU ratio to hyper |")
    print("|---|---|---|---|---|---|")
    for store in args.stores.split(","):
        if store == "memory":
            continue
        url = prepare_store(store, tmp)
        ports = {"cache on": 18091, "cache off": 18092, "hyper": 18093}
        if store == "postgres":
            ports["cache push"] = 18090
        procs = {}
        try:
            # One base URL for all: the same links, bytes and ETags from every server.
            same = ["--database-url", url, "--metrics", "false", "--base-url", "http://localhost:8080"]
            if "cache push" in ports:
                procs["cache push"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache push']}", *same,
                                             "--push", "true"], ports["cache push"])
                if args.before:
                    ports["before push"] = 18089
                    procs["before push"] = start([args.before, "--listen", "127.0.0.1:18089", *same,
                                                  "--push", "true"], 18089)
            procs["cache on"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache on']}", *same], ports["cache on"])
            if args.before:
                ports["before on"] = 18087
                procs["before on"] = start([args.before, "--listen", "127.0.0.1:18087", *same], 18087)
            procs["cache off"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache off']}", *same,
                                        "--cache-entries", "0"], ports["cache off"])
            specs, headers = [], {}
            for name, path in paths.items():
                with urllib.request.urlopen(f"http://127.0.0.1:{ports['cache on']}{path}") as r:
                    body, status = r.read(), r.status
                    if "304" in name:
                        headers[name] = f"If-None-Match: {r.headers['etag']}"
                        body, status = b"", 304
                    file = os.path.join(tmp, name.replace(" ", "_").replace(",", ""))
                    with open(file, "wb") as f:
                        f.write(body)
                    specs.append(f"{path}={status}:{r.headers['content-type'].replace(';', '%3B')}:{file}")
            procs["hyper"] = start([f"{RELEASE}/baseline", "hyper", f"127.0.0.1:{ports['hyper']}", *specs], ports["hyper"])
            # Bare warp with the same bytes: the floor for anything served through warp.
            ports["warp"] = 18088
            procs["warp"] = start([f"{RELEASE}/baseline", "warp", "127.0.0.1:18088", *specs], 18088)
            for name, header in headers.items():
                for target, port in ports.items():
                    request = urllib.request.Request(f"http://127.0.0.1:{port}{paths[name]}",
                                                     headers=dict([header.split(": ", 1)]))
                    try:
                        urllib.request.urlopen(request)
                        raise RuntimeError(f"{target} answered {name} with 200, not 304")
                    except urllib.error.HTTPError as e:
                        if e.code != 304:
                            raise
            results = {}
            for _ in range(args.rounds):
                for name, path in paths.items():
                    for target, port in ports.items():
                        r = measure(procs[target], port, path, args.seconds, connections=16,
                                    header=headers.get(name))
                        results.setdefault((name, target), []).append(r)
            for (name, target), rs in results.items():
                pairs = zip(rs, results[(name, "hyper")])
                ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
                bad = sum(r["non2xx"] for r in rs)
                note = f" ({bad} non-2xx)" if bad else ""
                print(f"| {store} | {name} | {target} | {statistics.median(r['rps'] for r in rs):,.0f}{note} | "
                      f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait()


MIXED_LUA = """
math.randomseed(os.time())
request = function()
  if math.random(100) <= 5 then
    return wrk.format("POST", "/api/books", {["Content-Type"] = "application/x-www-form-urlencoded"},
                      "title=Load+test&author_id=3&year=2020")
  end
  return wrk.format("GET", "/api/books?include=author&page=" .. math.random(10))
end
"""


def versus(args):
    """The server against the hand-written axum + sqlx one (benches/handwritten.rs) on
    the same database server: repeated reads, creates at 50 connections and a mixed
    workload (95% reads over the first 10 pages, 5% creates, 32 connections)."""
    run(["cargo", "build", "--release", "-p", "books-benches", "--example", "handwritten"], cwd=ROOT)
    run(["cargo", "build", "--release", "--example", "baseline"], cwd=ROOT)
    tmp = tempfile.mkdtemp(prefix="books-versus-")
    scripts = {}
    for name, text in {"create": POST_LUA, "mixed": MIXED_LUA}.items():
        scripts[name] = os.path.join(tmp, f"{name}.lua")
        with open(scripts[name], "w") as f:
            f.write(text)
    ports = {"ours": 18094, "handwritten": 18095}
    if args.before:
        ports["before"] = 18096
    push = ["--push", "true"] if args.push else []
    # The cache off: every answer read from the database, as the hand-written server's.
    ours = ["--cache-entries", "0"] if args.cache_off else []
    runs = {"ping": ("/api/ping", None, 16),
            "list p1 + include": ("/api/books?include=author", None, 16),
            "get one + include": ("/api/books/7?include=author", None, 16),
            "creates": ("/api/books", "create", 50),
            "mixed 95/5": ("/", "mixed", 32)}
    if args.workloads:
        runs = {name: run for name, run in runs.items() if name.split()[0] in args.workloads.split(",")}
    print(f"{args.rounds} rounds x {args.seconds}s, servers on core 0 (one runtime thread), wrk -t1 on core 1; "
          f"{args.books:,} books to start with.\n")
    print("| store | workload | server | req/s | p99 | CPU µs/req | throughput ratio |")
    print("|---|---|---|---|---|---|---|")
    for store in args.stores.split(","):
        if store == "memory":
            continue
        url = prepare_store(store, tmp)
        hand_url = f"sqlite://{tmp}/handwritten.db" if store == "sqlite" else url
        procs = {}
        try:
            procs["ours"] = start([SERVER, "--listen", f"127.0.0.1:{ports['ours']}", "--database-url", url, *ours,
                                   *(push if store == "postgres" else [])], ports["ours"])
            if args.before:
                # Its own database: an older binary refuses newer migrations.
                before_url = prepare_store(store, tmp, "before")
                procs["before"] = start([args.before, "--listen", f"127.0.0.1:{ports['before']}",
                                         "--database-url", before_url,
                                         *(push if store == "postgres" else [])], ports["before"])
            procs["handwritten"] = start([f"{RELEASE}/handwritten", hand_url, f"127.0.0.1:{ports['handwritten']}"],
                                         ports["handwritten"])
            for port in ports.values():
                fill_over_http(port, args.books)
            # Ping also from bare hyper serving our ping's bytes: the most any server can
            # gain on the hand-written one there.
            pinging = {}
            if "ping" in runs:
                procs["bare hyper"] = start([f"{RELEASE}/baseline", "hyper", "127.0.0.1:18097",
                                             *save_bodies(ports["ours"], tmp)], 18097)
                pinging = {"bare hyper": 18097}
            results = {}
            for _ in range(args.rounds):
                for name, (path, script, conns) in runs.items():
                    for target, port in {**ports, **(pinging if name == "ping" else {})}.items():
                        lua = scripts.get(script)
                        r = measure(procs[target], port, path, args.seconds, lua, conns)
                        results.setdefault((name, target), []).append(r)
            for (name, target), rs in results.items():
                pairs = zip(rs, results[(name, "handwritten")])
                ratio = statistics.median(a["rps"] / b["rps"] for a, b in pairs)
                bad = sum(r["non2xx"] for r in rs)
                note = f" ({bad} non-2xx)" if bad else ""
                print(f"| {store} | {name} | {target} | {statistics.median(r['rps'] for r in rs):,.0f}{note} | "
                      f"{rs[-1]['p99']} | {statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def cache_memory(args):
    """The server's RSS with its cache empty and full at its default bound (1,024
    answers): SQLite with `--books` rows, 1,024 distinct pages with include=author."""
    tmp = tempfile.mkdtemp(prefix="books-memory-")
    port = 18096
    url = f"sqlite://{tmp}/memory.db"
    setup = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
    setup.terminate()
    setup.wait()
    fill_sqlite(f"{tmp}/memory.db", args.books)
    rows = []
    for cache in ("default", "0"):
        extra = [] if cache == "default" else ["--cache-entries", "0"]
        proc = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url, "--metrics", "false",
                      *extra], port)
        try:
            idle = rss_kib(proc.pid)
            body = 0
            for page in range(1, 1025):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/books?include=author&page={page}") as r:
                    body += len(r.read())
            rows.append(f"| {cache} | {idle:,} | {rss_kib(proc.pid):,} | {body / 1024:,.0f} |")
        finally:
            proc.terminate()
            proc.wait()
    print(f"SQLite, {args.books:,} books, 1,024 distinct pages of 20 with include=author.\n")
    print("| cache entries | RSS before, KiB | RSS after 1,024 pages, KiB | bodies served, KiB |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    shutil.rmtree(tmp, ignore_errors=True)


def fill_over_http(port, books):
    """Posts books until the server holds at least `books` (a few at a time)."""
    from concurrent.futures import ThreadPoolExecutor
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/books") as r:
        have = json.loads(r.read())["meta"]["total"]
    def post(_):
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/books", method="POST",
                                         data=b"title=Seed&author_id=3&year=2020")
        urllib.request.urlopen(request).read()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, range(max(books - have, 0))))


def start_pgbouncer(tmp, port, server_port=5432):
    """PgBouncer in transaction mode in front of 127.0.0.1:server_port (as the test
    fixture runs it); returns the process."""
    if not shutil.which("pgbouncer") and not os.path.exists("/usr/sbin/pgbouncer"):
        run(["apt-get", "install", "-y", "-qq", "pgbouncer"])
    os.chmod(tmp, 0o777)
    with open(os.path.join(tmp, "userlist.txt"), "w") as f:
        f.write('"postgres" ""\n')
    with open(os.path.join(tmp, "pgbouncer.ini"), "w") as f:
        f.write(f"[databases]\n* = host=127.0.0.1 port={server_port}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
                f"auth_type = trust\nauth_file = {tmp}/userlist.txt\npool_mode = transaction\n"
                "ignore_startup_parameters = extra_float_digits\nmax_client_conn = 1000\n"
                f"default_pool_size = 20\nlogfile = {tmp}/pgbouncer.log\n")
    pgbouncer = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    proc = subprocess.Popen([pgbouncer, *user, os.path.join(tmp, "pgbouncer.ini")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc


def pooler(args):
    """The server directly and through PgBouncer (transaction mode) on one database."""
    tmp = tempfile.mkdtemp(prefix="books-pooler-")
    lua = os.path.join(tmp, "post.lua")
    with open(lua, "w") as f:
        f.write(POST_LUA)
    url = prepare_store("postgres", tmp)
    bouncer = start_pgbouncer(tmp, 16432)
    pooled_url = url.replace("127.0.0.1:5432", "127.0.0.1:16432")
    targets = {"direct": (18096, url, []), "pooled": (18097, pooled_url, ["--transaction-pooler", "true"]),
               "direct, cache off": (18098, url, ["--cache-entries", "0"]),
               "pooled, cache off": (18099, pooled_url, ["--transaction-pooler", "true", "--cache-entries", "0"])}
    runs = {"ping": ("/api/ping", None, 16), "list p1 + include": ("/api/books?include=author", None, 16),
            "get one + include": ("/api/books/7?include=author", None, 16), "creates": ("/api/books", lua, 50)}
    procs = {}
    try:
        for name, (port, target_url, extra) in targets.items():
            procs[name] = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", target_url,
                                 "--metrics", "false", *extra], port)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "books_load", "-qc",
                        "INSERT INTO books (title, author_id, year, created_at, updated_at) "
                        "SELECT 'Seed', 3, 2020, now(), now() FROM generate_series(1, 955); ANALYZE"],
                       check=True, capture_output=True)
        results = {}
        # Reads first, creates last: creates grow the table, and a server whose
        # connections planned their statements on a small table keeps those plans until
        # the table is analysed again (autovacuum may be off where this runs).
        phases = (["ping", "list p1 + include", "get one + include"], ["creates"])
        for phase in phases:
            for _ in range(args.rounds):
                for work in phase:
                    path, script, conns = runs[work]
                    for name, (port, _, _) in targets.items():
                        if work in ("ping", "creates") and "cache off" in name:
                            continue
                        before = cpu_seconds(bouncer.pid)
                        r = measure(procs[name], port, path, args.seconds, script, conns)
                        requests = max(r["rps"] * args.seconds, 1)
                        r["bouncer_us"] = (cpu_seconds(bouncer.pid) - before) / requests * 1e6
                        results.setdefault((work, name), []).append(r)
        print(f"{args.rounds} rounds x {args.seconds}s, servers on core 0 (one runtime thread), wrk -t1 on "
              "core 1, PostgreSQL and PgBouncer unpinned; 1,000 books.\n")
        print("| workload | server | req/s | p50 | p99 | our CPU µs/req | PgBouncer CPU µs/req | throughput vs direct |")
        print("|---|---|---|---|---|---|---|---|")
        for (work, name), rs in results.items():
            base = "direct, cache off" if "cache off" in name else "direct"
            ratio = statistics.median(a["rps"] / b["rps"] for a, b in zip(rs, results[(work, base)]))
            bad = sum(r["non2xx"] for r in rs)
            note = f" ({bad} non-2xx)" if bad else ""
            bouncer_us = f"{statistics.median(r['bouncer_us'] for r in rs):.1f}" if "pooled" in name else "—"
            print(f"| {work} | {name} | {statistics.median(r['rps'] for r in rs):,.0f}{note} | {rs[-1]['p50']} | "
                  f"{rs[-1]['p99']} | {statistics.median(r['cpu_us'] for r in rs):.1f} | {bouncer_us} | {ratio:.2f}x |")
    finally:
        for proc in [*procs.values(), bouncer]:
            proc.terminate()
            proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


READS_LUA = """
math.randomseed(os.time())
request = function()
  if math.random(2) == 1 then
    return wrk.format("GET", "/api/books?include=author&page=" .. math.random(10))
  end
  return wrk.format("GET", "/api/books/" .. math.random(1000) .. "?include=author")
end
"""


def as_postgres(cmd):
    return (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []) + cmd


def private_cluster(tmp):
    """A private primary (port 15440) and a streaming replica of it (15441)."""
    bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
    os.chmod(tmp, 0o777)
    if os.geteuid() == 0:
        run(["chown", "postgres:postgres", tmp])
    primary, replica = os.path.join(tmp, "primary"), os.path.join(tmp, "replica")
    run(as_postgres([f"{bindir}/initdb", "-D", primary, "-A", "trust", "-U", "postgres"]), capture_output=True)
    opts = lambda port, d: f"-p {port} -k {d} -c listen_addresses=127.0.0.1"
    run(as_postgres([f"{bindir}/pg_ctl", "-D", primary, "-o", opts(15440, tmp), "-w", "-s", "start"]))
    run(as_postgres([f"{bindir}/pg_basebackup", "-h", "127.0.0.1", "-p", "15440", "-U", "postgres", "-D", replica,
                     "-R", "-X", "stream", "-c", "fast"]))
    run(as_postgres([f"{bindir}/pg_ctl", "-D", replica, "-o", opts(15441, tmp), "-w", "-s", "start"]))
    stop = lambda: [subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", d, "-m", "immediate", "-s", "stop"]))
                    for d in (replica, primary)]
    postmaster = int(open(os.path.join(primary, "postmaster.pid")).readline())
    return postmaster, stop


def private_mariadb(tmp):
    """A private MariaDB primary (port 15450, binary log on) and a GTID replica of it (15451)."""
    procs = []
    for port, server_id in ((15450, 1), (15451, 2)):
        data = os.path.join(tmp, f"mariadb-{port}")
        run(["mariadb-install-db", "--no-defaults", "--user=root", "--skip-test-db",
             "--auth-root-authentication-method=normal", f"--datadir={data}"], capture_output=True)
        cmd = ["mariadbd", "--no-defaults", "--user=root", "--bind-address=127.0.0.1", "--skip-name-resolve",
               f"--port={port}", f"--datadir={data}", f"--socket={data}.sock", f"--pid-file={data}.pid",
               f"--log-error={data}.err", f"--server-id={server_id}"]
        if port == 15450:
            cmd.append(f"--log-bin={data}-bin")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(port, 60)
    mariadb = lambda port, sql: run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", f"-P{port}", "-e", sql])
    mariadb(15451, "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = 15450, MASTER_USER = 'root', "
                   "MASTER_USE_GTID = slave_pos; START SLAVE")
    mariadb(15450, "CREATE DATABASE books")

    def stop():
        for proc in procs:
            proc.kill()
            proc.wait()
    return procs[0].pid, stop


def tree_cpu(pid):
    """CPU seconds of a process and its children (PostgreSQL's backends)."""
    children = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True).stdout
    total = cpu_seconds(pid)
    for child in children.split():
        try:
            total += cpu_seconds(int(child))
        except OSError:
            pass
    return total


def metric(port, name, label):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(f"{name}{{{label}}} "):
                return float(line.split()[-1])
    return 0.0


def replicas(args):
    """Reads from the primary alone against reads with a replica (PostgreSQL streaming,
    MariaDB GTID), for each of `--stores` (postgres, mysql)."""
    for store in args.stores.split(","):
        if store in ("postgres", "mysql"):
            print(f"### {store}\n")
            replicas_of(store, args)


def replicas_of(store, args):
    import threading
    tmp = tempfile.mkdtemp(prefix="books-replicas-")
    lua = os.path.join(tmp, "reads.lua")
    with open(lua, "w") as f:
        f.write(READS_LUA)
    if store == "mysql":
        postmaster, stop_cluster = private_mariadb(tmp)
        primary, replica = ("mysql://root@127.0.0.1:15450/books", "mysql://root@127.0.0.1:15451/books")
    else:
        postmaster, stop_cluster = private_cluster(tmp)
        primary, replica = ("postgres://postgres@127.0.0.1:15440/postgres",
                            "postgres://postgres@127.0.0.1:15441/postgres")
    targets = {"primary only": (18100, []), "with replica": (18101, ["--replica-url", replica]),
               "primary only, cache off": (18102, ["--cache-entries", "0"]),
               "with replica, cache off": (18103, ["--replica-url", replica, "--cache-entries", "0"])}
    procs = {}
    try:
        writer = start([SERVER, "--listen", "127.0.0.1:18104", "--database-url", primary], 18104)
        procs["writer"] = writer
        fill_over_http(18104, 1000)
        for name, (port, extra) in targets.items():
            procs[name] = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", primary, *extra], port)
        results = {}
        for _ in range(args.rounds):
            for name, (port, _) in targets.items():
                stale, written, halt = [0], [0], threading.Event()
                def write_and_read_back():
                    n = 0
                    while not halt.is_set():
                        n += 1
                        book = 1 + n % 1000
                        title = f"Write {n}"
                        request = urllib.request.Request(
                            f"http://127.0.0.1:18104/api/books/{book}", method="PUT",
                            data=f"title={title.replace(' ', '+')}&author_id=3&year=2020".encode())
                        try:
                            urllib.request.urlopen(request).read()
                        except urllib.error.HTTPError as e:
                            if e.code == 404:  # an id a batch of creates left out (MariaDB)
                                continue
                            raise
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/books/{book}") as r:
                            if json.loads(r.read())["title"] != title:
                                stale[0] += 1
                        written[0] += 1
                        time.sleep(0.02)
                thread = threading.Thread(target=write_and_read_back)
                reads = {pool: metric(port, "books_store_reads_total", f'pool="{pool}"')
                         for pool in ("primary", "replica")}
                pg_before = tree_cpu(postmaster)
                thread.start()
                r = measure(procs[name], port, "/", args.seconds, lua, 16)
                halt.set()
                thread.join()
                requests = max(r["rps"] * args.seconds, 1)
                r["primary_us"] = (tree_cpu(postmaster) - pg_before) / requests * 1e6
                served = {pool: metric(port, "books_store_reads_total", f'pool="{pool}"') - reads[pool]
                          for pool in reads}
                r["replica_share"] = served["replica"] / max(sum(served.values()), 1)
                r["stale"], r["written"] = stale[0], written[0]
                results.setdefault(name, []).append(r)
        print(f"{args.rounds} rounds x {args.seconds}s, servers on core 0 (one runtime thread), wrk -t1 -c16 on "
              "core 1, the private primary and replica unpinned; 1,000 books; pages 1-10 and books, "
              "include=author; a writer updates a book every 20 ms and reads it back from the server under test.\n")
        print("| server | req/s | p50 | p99 | our CPU µs/req | primary CPU µs/req | store reads by the replica | "
              "stale reads / writes read back |")
        print("|---|---|---|---|---|---|---|---|")
        for name, rs in results.items():
            print(f"| {name} | {statistics.median(r['rps'] for r in rs):,.0f} | {rs[-1]['p50']} | {rs[-1]['p99']} | "
                  f"{statistics.median(r['cpu_us'] for r in rs):.1f} | "
                  f"{statistics.median(r['primary_us'] for r in rs):.1f} | "
                  f"{statistics.median(r['replica_share'] for r in rs):.0%} | "
                  f"{sum(r['stale'] for r in rs)} / {sum(r['written'] for r in rs)} |")
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()
        stop_cluster()
    shutil.rmtree(tmp, ignore_errors=True)


def instructions(args):
    """User-space instructions per answer under Callgrind: the server (and `--before`)
    beside bare hyper answering the same status, content type and bytes."""
    tmp = tempfile.mkdtemp(prefix="books-instructions-")
    page = "/api/books?include=author"
    # (path, status, whether the request sends the ETag back, PostgreSQL in push mode)
    workloads = {"ping": ("/api/ping", 200, False, False),
                 "list": (page, 200, False, False),
                 "304": (page + "&page=1", 304, True, True)}
    chosen = (args.workloads or "ping,list,304").split(",")
    servers = {"ours": SERVER, **({"before": args.before} if args.before else {})}
    print(f"User-space instructions per answer, Callgrind, wrk -t1 -c16 for {args.seconds}s after a "
          "2 s warm-up; `list` is page 1 + include answered from the cache in exact mode (so its "
          "count includes a share of one version check per wave, and depends on how many requests "
          "a wave gathers); `304` is the same page with `If-None-Match`, PostgreSQL in push mode.\n")
    print("| store | workload | server | requests | instructions/request | ratio to hyper |")
    print("|---|---|---|---|---|---|")
    port = 18096
    for store in args.stores.split(","):
        # An older binary gets a database of its own: it refuses newer migrations.
        urls = {name: prepare_store(store, tmp, name) for name in servers}
        for workload in chosen:
            path, status, conditional, push = workloads[workload]
            if store in ("sqlite", "mysql") and workload == "304":
                print(f"| {store} | 304 | skipped: no push mode, see `list` | | | |")
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
                    if not answer:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
                            answer = {"body": r.read(), "ctype": r.headers["content-type"].replace(";", "%3B"),
                                      "etag": r.headers["etag"]}
                    header = f"If-None-Match: {answer['etag']}" if conditional else None
                    wrk(port, path, 2, connections=16, header=header)
                    subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
                    requests, _, _, _, non2xx = wrk(port, path, args.seconds, connections=16, header=header)
                    subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
                    if non2xx and status == 200:
                        raise RuntimeError(f"{name} answered {non2xx} errors")
                    with open(f"{out}.1") as f:
                        total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
                    counts[name] = (requests, total / requests)
                finally:
                    proc.terminate()
                    proc.wait()
            for name, (requests, per) in counts.items():
                print(f"| {store} | {workload} | {name} | {requests:,} | {per:,.0f} | {per / counts['hyper'][1]:.2f}x |")


XFF_LUA = """
counter = 0
request = function()
  counter = (counter + 1) % 100000
  local ip = string.format("10.%d.%d.%d", math.floor(counter / 65536) % 256,
                           math.floor(counter / 256) % 256, counter % 256)
  return wrk.format("GET", "/api/ping", {["X-Forwarded-For"] = ip})
end
"""


def edge(args):
    """Compression, rate limits and CORS: see the module's doc."""
    tmp = tempfile.mkdtemp(prefix="books-edge-")
    url = f"sqlite://{tmp}/edge.db"
    setup = start([SERVER, "--listen", "127.0.0.1:18097", "--database-url", url], 18097)
    setup.terminate()
    setup.wait()
    fill_sqlite(f"{tmp}/edge.db", 1000)
    page = "/api/books?include=author"
    ports = {"plain": 18097, "limited": 18098, "cors": 18099}
    extra = {"plain": [], "limited": ["--rate-limit", "1000000000"],
             "cors": ["--cors-origin", "https://app.example"]}
    procs = {name: start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url, *extra[name]], port)
             for name, port in ports.items()}
    try:
        print("Bytes on the wire, list page 1 + include (20 books with authors):\n")
        print("| format | identity | gzip | br | zstd |")
        print("|---|---|---|---|---|")
        for fmt, accept in (("JSON", "application/json"), ("XML", "application/xml")):
            sizes = []
            for coding in ("identity", "gzip", "br", "zstd"):
                request = urllib.request.Request(f"http://127.0.0.1:{ports['plain']}{page}",
                                                 headers={"Accept": accept, "Accept-Encoding": coding})
                with urllib.request.urlopen(request) as r:
                    assert r.headers.get("content-encoding", "identity") == coding
                    sizes.append(len(r.read()))
            print(f"| {fmt} | " + " | ".join(f"{n:,}" for n in sizes) + " |")
        print()
        runs = {"list, identity": ("plain", page, None),
                "list, gzip": ("plain", page, "Accept-Encoding: gzip"),
                "list, br": ("plain", page, "Accept-Encoding: br"),
                "list, zstd": ("plain", page, "Accept-Encoding: zstd"),
                "ping": ("plain", "/api/ping", None),
                "ping, rate limiter on": ("limited", "/api/ping", None),
                "ping, CORS on (allowed Origin)": ("cors", "/api/ping", "Origin: https://app.example")}
        results = {}
        for _ in range(args.rounds):
            for name, (server, path, header) in runs.items():
                r = measure(procs[server], ports[server], path, args.seconds, connections=16, header=header)
                results.setdefault(name, []).append(r)
        print(f"{args.rounds} rounds x {args.seconds}s, SQLite (exact cache), server on core 0 (one runtime "
              "thread), wrk -t1 -c16 on core 1.\n")
        print("| request | req/s | CPU µs/req | ratio |")
        print("|---|---|---|---|")
        for name, rs in results.items():
            base = results["list, identity" if name.startswith("list") else "ping"]
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in zip(rs, base))
            bad = sum(r["non2xx"] for r in rs)
            note = f" ({bad} non-2xx)" if bad else ""
            print(f"| {name} | {statistics.median(r['rps'] for r in rs):,.0f}{note} | "
                  f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        print()
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()
    lua = os.path.join(tmp, "xff.lua")
    with open(lua, "w") as f:
        f.write(XFF_LUA)
    rows = []
    for limit in (None, "10"):
        flags = ["--rate-limit", limit, "--trusted-proxies", "127.0.0.0/8"] if limit else []
        proc = start([SERVER, "--listen", "127.0.0.1:18097", "--database-url", url, *flags], 18097)
        try:
            idle = rss_kib(proc.pid)
            requests, _, _, _, non2xx = wrk(18097, "/api/ping", 3, lua, 32)
            busy = rss_kib(proc.pid)
            time.sleep(3)
            after = rss_kib(proc.pid)
            rows.append((limit or "off", idle, busy, after, requests, non2xx))
        finally:
            proc.terminate()
            proc.wait()
    print("RSS with 100,000 distinct clients (X-Forwarded-For from a trusted proxy, 3 s of pings, "
          "each client 2-3 times):\n")
    print("| --rate-limit | RSS idle KiB | right after | 3 s later (swept) | requests | non-2xx |")
    print("|---|---|---|---|---|---|")
    for limit, idle, busy, after, requests, non2xx in rows:
        print(f"| {limit} | {idle:,} | {busy:,} | {after:,} | {requests:,} | {non2xx:,} |")
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    parser.add_argument("--bindings", action="store_true")
    parser.add_argument("--metrics-cost", action="store_true")
    parser.add_argument("--shedding", action="store_true")
    parser.add_argument("--cache", action="store_true")
    parser.add_argument("--versus", action="store_true")
    parser.add_argument("--cache-memory", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--pooler", action="store_true")
    parser.add_argument("--replicas", action="store_true")
    parser.add_argument("--edge", action="store_true")
    parser.add_argument("--push", action="store_true", help="--versus: our server in PostgreSQL push mode")
    parser.add_argument("--cache-off", action="store_true", help="--versus: our server without its cache")
    parser.add_argument("--workloads", help="--versus: only these, by first word (ping,list,get,creates,mixed); "
                        "--instructions: of ping,list,304")
    parser.add_argument("--books", type=int, default=200_000)
    parser.add_argument("--before", help="--metrics-cost, --instructions, --cache, --versus: an older server binary to run beside")
    args = parser.parse_args()
    ensure_tools(fixed_rate=not (args.bindings or args.metrics_cost or args.shedding or args.cache
                                 or args.versus or args.cache_memory or args.instructions
                                 or args.pooler or args.replicas or args.edge))
    if args.pooler:
        return pooler(args)
    if args.replicas and args.stores == parser.get_default("stores"):
        args.stores = "postgres"
    if args.replicas:
        return replicas(args)
    if args.edge:
        return edge(args)
    if args.instructions:
        return instructions(args)
    if args.cache_memory:
        return cache_memory(args)
    if args.versus:
        return versus(args)
    if args.cache:
        return cache_compare(args)
    if args.bindings:
        return bindings(args)
    if args.metrics_cost:
        return metrics_cost(args)
    if args.shedding:
        return shedding(args)
    tmp = tempfile.mkdtemp(prefix="books-load-")
    lua = os.path.join(tmp, "post.lua")
    with open(lua, "w") as f:
        f.write(POST_LUA)
    report = [f"Machine: {os.cpu_count()} cores, `{' '.join(os.uname()[2:3])}`; "
              f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c32, servers on core 0 "
              "(one runtime thread), load on core 1.", ""]
    for store in args.stores.split(","):
        url = prepare_store(store, tmp)
        procs = {}
        try:
            ours = procs["ours"] = start([SERVER, "--listen", f"127.0.0.1:{PORTS['ours']}",
                                          "--database-url", url], PORTS["ours"])
            specs = save_bodies(PORTS["ours"], tmp)
            for kind in ("hyper", "warp"):
                procs[kind] = start([f"{RELEASE}/baseline", kind, f"127.0.0.1:{PORTS[kind]}", *specs], PORTS[kind])
            results = {}
            for _ in range(args.rounds):
                for name, path in PATHS.items():
                    for target in ("ours", "hyper", "warp"):
                        r = measure(procs[target], PORTS[target], path, args.seconds)
                        results.setdefault((name, target), []).append(r)
                if store != "memory":
                    r = measure(ours, PORTS["ours"], "/api/books", args.seconds, lua)
                    results.setdefault(("create", "ours"), []).append(r)
            report.append(f"### {store}")
            report.append("")
            report.append("| path | target | req/s (median) | CPU µs/req (median) | p50 | p99 | CPU ratio to hyper | to warp |")
            report.append("|---|---|---|---|---|---|---|---|")
            for (name, target), rs in results.items():
                cpu = statistics.median(r["cpu_us"] for r in rs)
                def ratio(base):
                    if (name, base) not in results:
                        return ""
                    pairs = zip(rs, results[(name, base)])
                    return f"{statistics.median(a['cpu_us'] / b['cpu_us'] for a, b in pairs):.2f}x"
                rps = statistics.median(r["rps"] for r in rs)
                bad = sum(r["non2xx"] for r in rs)
                note = f" ({bad} non-2xx)" if bad else ""
                report.append(f"| {name} | {target} | {rps:,.0f}{note} | {cpu:.1f} | {rs[-1]['p50']} | "
                              f"{rs[-1]['p99']} | {ratio('hyper')} | {ratio('warp')} |")
            report.append("")
            if store == "memory":
                report.append("| path | target | rate (share of our peak) | p50 ms | p99 ms |")
                report.append("|---|---|---|---|---|")
                for name, path in PATHS.items():
                    peak = statistics.median(r["rps"] for r in results[(name, "ours")])
                    for share in (0.5, 0.8):
                        for target in ("ours", "hyper"):
                            p50, p99 = fixed_rate(PORTS[target], path, peak * share, args.seconds)
                            report.append(f"| {name} | {target} | {share:.0%} ({peak * share:,.0f}/s) | {p50:.2f} | {p99:.2f} |")
                report.append("")
                report.append("| target | RSS idle KiB | after 64 conns | after 1,000 conns |")
                report.append("|---|---|---|---|")
                for target in ("ours", "hyper", "warp"):
                    fresh = start([SERVER, "--listen", "127.0.0.1:18090", "--database-url", "memory"], 18090) \
                        if target == "ours" else \
                        start([f"{RELEASE}/baseline", target, "127.0.0.1:18090", *specs], 18090)
                    idle = rss_kib(fresh.pid)
                    few = open_connections(18090, 64)
                    at64 = rss_kib(fresh.pid)
                    many = open_connections(18090, 936)
                    at1000 = rss_kib(fresh.pid)
                    for s in few + many:
                        s.close()
                    fresh.terminate()
                    fresh.wait()
                    report.append(f"| {target} | {idle:,} | {at64:,} | {at1000:,} |")
                report.append("")
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait()
    print("\n".join(report))


if __name__ == "__main__":
    sys.exit(main())
