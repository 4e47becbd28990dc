"""What every load run shares: the binaries, starting servers pinned to core 0, wrk on
core 1, CPU and RSS from /proc, and the databases each run gets."""

import json
import os
import shutil
import socket
import statistics
import subprocess
import time
import urllib.error
import urllib.request


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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



def stop(procs):
    """Terminates each process and waits for it to end."""
    for proc in procs:
        proc.terminate()
        proc.wait()


def rate(runs):
    """The median requests/s of `measure` runs, with how many answers were not 2xx."""
    bad = sum(r["non2xx"] for r in runs)
    return f"{statistics.median(r['rps'] for r in runs):,.0f}" + (f" ({bad} non-2xx)" if bad else "")

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


def fill_sqlite(path, books):
    import sqlite3
    db = sqlite3.connect(path, timeout=30)
    db.execute("BEGIN")
    db.executemany("INSERT INTO books (title, author_id, year, created_at, updated_at) "
                   "VALUES (?, 1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
                   ((f"Book {i}",) for i in range(books)))
    db.execute("COMMIT")
    db.close()


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
