"""`--failover`: the server through one failover on a real cluster, under 20 writers
creating books with an `Idempotency-Key` (a 503 sent again with the same key 250 ms
later, each 201 read back at once) and 4 readers (the list, one book).

`--events` picks from `pg-switchover` (pg_auto_failover's `perform switchover`), `pg-kill`
(its primary `SIGKILL`ed) and `galera-kill` (a three-node Galera cluster's node 0
`SIGKILL`ed; two servers whose URLs name the nodes in different orders, each create read
back on the other). The cluster is `test-support`'s (`--example cluster`); the event
comes a third of the way into `--seconds` (default 60). Reports the answers per second by
status, the time from the event to a write committing on another node ("accepting",
polled every 20 ms) and from then to the first 201, and the end check: acknowledged
creates missing from the database, keys stored twice, read-backs that answered 404, and
servers whose total disagrees with the database at the end. `--before OLD_BINARY` runs
each event again with an older server on the same URLs.
Writes `target/load/failover.json` and draws `docs/charts/failover.svg` from it
(`python3 scripts/loadrun/charts.py failover target/load/failover.json` draws it again).
"""

import http.client
import json
import os
import subprocess
import threading
import time
from collections import Counter

from loadrun.charts import CHARTS, failover_chart
from loadrun.harness import ROOT, SERVER, run, start, stop

EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "cluster")
EVENTS = {"pg-switchover": ("pg", "switchover"), "pg-kill": ("pg", "kill"), "galera-kill": ("galera", "kill")}
WRITERS, READERS = 20, 4


class Client:
    """One keep-alive connection to a server; any failure to reach it is status 0."""

    def __init__(self, port):
        self.port, self.conn = port, None

    def send(self, method, path, body=None, headers=None):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=body, headers=headers or {})
            response = self.conn.getresponse()
            return response.status, response.getheader("retry-after"), response.read()
        except (OSError, http.client.HTTPException):
            self.conn = None
            return 0, None, b""


class Run:
    """What one run saw, per second from its start."""

    def __init__(self):
        self.lock, self.start = threading.Lock(), time.time()
        self.seconds, self.bare_503 = {}, 0
        self.acknowledged, self.created, self.stale = [], [], 0

    def record(self, status, retry_after):
        with self.lock:
            self.seconds.setdefault(int(time.time() - self.start), Counter())[status] += 1
            self.bare_503 += status == 503 and retry_after is None


def writer(run, n, ports, author, halt):
    writes, reads = Client(ports[n % len(ports)]), Client(ports[(n + 1) % len(ports)])
    k = 0
    while not halt.is_set():
        title = f"failover-{n}-{k}"
        body = f"title={title}&author_id={author}&year=2020"
        headers = {"Idempotency-Key": title, "Content-Type": "application/x-www-form-urlencoded"}
        while not halt.is_set():
            status, retry, answer = writes.send("POST", "/api/books", body, headers)
            run.record(status, retry)
            if status == 201:
                book = json.loads(answer)["id"]
                with run.lock:
                    run.acknowledged.append((title, book))
                    run.created.append(time.time())
                status, retry, _ = reads.send("GET", f"/api/books/{book}")
                run.record(status, retry)
                with run.lock:
                    run.stale += status == 404
                break
            time.sleep(0.25)
        k += 1


def reader(run, n, ports, book, halt):
    client = Client(ports[n % len(ports)])
    while not halt.is_set():
        status, retry, _ = client.send("GET", "/api/books" if n % 2 == 0 else f"/api/books/{book}")
        run.record(status, retry)
        time.sleep(0.005)


def one_run(binary, event, seconds):
    """The load through `event` against `binary`; the run and its end check."""
    kind, command = EVENTS[event]
    cluster = subprocess.Popen([EXAMPLE, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    urls = []
    for line in cluster.stdout:
        if line.strip() == "ready":
            break
        urls.append(line.split(" ", 1)[1].strip())
    else:
        raise RuntimeError(f"the {kind} cluster did not start")
    servers = 2 if kind == "galera" else 1
    chosen = urls[:servers]
    ports = [18300 + i for i in range(servers)]
    procs = []
    try:
        for port, url in zip(ports, chosen):
            procs.append(start([binary, "--listen", f"127.0.0.1:{port}", "--database-url", url], port))
        deadline = time.time() + 60
        while (answer := Client(ports[0]).send("GET", "/api/books?include=author"))[0] != 200:
            if time.time() > deadline:
                raise RuntimeError(f"the server does not answer its list: {answer}")
            time.sleep(0.5)
        page = json.loads(answer[2])["data"]
        first = next(book for book in page if book.get("author"))
        run, halt = Run(), threading.Event()
        threads = [threading.Thread(target=writer, args=(run, n, ports, first["author"]["id"], halt))
                   for n in range(WRITERS)]
        threads += [threading.Thread(target=reader, args=(run, n, ports, first["id"], halt)) for n in range(READERS)]
        for thread in threads:
            thread.start()
        time.sleep(seconds / 3)
        event_at = time.time()
        cluster.stdin.write(command + "\n")
        cluster.stdin.flush()
        accepting = float(cluster.stdout.readline().split()[1])
        time.sleep(max(run.start + seconds - time.time(), 0))
        halt.set()
        for thread in threads:
            thread.join()
        cluster.stdin.write("rows\n")
        cluster.stdin.flush()
        rows = {}
        for line in cluster.stdout:
            if line.strip() == "end":
                break
            if "\t" in line:
                book, title = line.rstrip("\n").split("\t", 1)
                rows.setdefault(title, []).append(int(book))
        totals = [json.loads(Client(p).send("GET", "/api/books")[2] or b"{}").get("meta", {}).get("total")
                  for p in ports]
        drops = Counter()
        for p in ports:
            for line in (Client(p).send("GET", "/metrics")[2] or b"").decode().splitlines():
                if line.startswith("books_cache_history_rewrites_total{"):
                    seen = line.split('seen="', 1)[1].split('"', 1)[0]
                    drops[seen] += int(float(line.rsplit(" ", 1)[1]))
        firsts = [t for t in run.created if t > accepting]
        return {
            "event": event, "binary": os.path.basename(binary), "start": run.start, "event_at": event_at,
            "accepting": accepting, "first_201": (min(firsts) - accepting) if firsts else None,
            "seconds": {s: dict(c) for s, c in sorted(run.seconds.items())}, "bare_503": run.bare_503,
            "acknowledged": len(run.acknowledged),
            "missing": sum(1 for title, book in run.acknowledged if book not in rows.get(title, [])),
            "twice": sum(1 for title, books in rows.items() if title.startswith("failover-") and len(books) > 1),
            "stale": run.stale,
            "totals_off": sum(1 for t in totals if t != sum(len(b) for b in rows.values())),
            "cache_drops": dict(drops),
        }
    finally:
        stop(procs)
        cluster.stdin.close()
        cluster.wait(timeout=120)


def describe_drops(drops):
    """The servers' cache drops of every answer (`books_cache_history_rewrites_total`), by
    what the check saw: "0", or "2 (history 1, count 1)"."""
    total = sum(drops.values())
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{seen} {n}" for seen, n in sorted(drops.items())) + ")"


def failover(args):
    run(["cargo", "build", "--release", "-p", "books-test-support", "--example", "cluster"], cwd=ROOT)
    events = args.events.split(",") if args.events else list(EVENTS)
    results = []
    for event in events:
        results.append(one_run(SERVER, event, args.seconds))
        if args.before:
            results.append(one_run(args.before, event, args.seconds))
    os.makedirs(os.path.join(ROOT, "target", "load"), exist_ok=True)
    with open(os.path.join(ROOT, "target", "load", "failover.json"), "w") as f:
        json.dump(results, f)
    failover_chart(results, os.path.join(CHARTS, "failover.svg"))
    print(f"{args.seconds} s each, the event after {args.seconds // 3} s; {WRITERS} writers with keys "
          f"(each 201 read back at once), {READERS} readers; servers on core 0, one runtime thread.\n")
    print("| event | server | 200 | 201 | 503 | other | 503 without Retry-After | event → accepting | "
          "accepting → first 201 | missing | twice | stale read-backs | totals off | cache drops |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        answers = Counter()
        for counts in r["seconds"].values():
            answers.update(counts)
        other = sum(n for status, n in answers.items() if status not in (200, 201, 503))
        first = "never" if r["first_201"] is None else f"{r['first_201']:.2f} s"
        print(f"| {r['event']} | {r['binary']} | {answers[200]} | {answers[201]} | {answers[503]} | {other} | "
              f"{r['bare_503']} | {r['accepting'] - r['event_at']:.1f} s | {first} | {r['missing']} | "
              f"{r['twice']} | {r['stale']} / {r['acknowledged']} | {r['totals_off']} | "
              f"{describe_drops(r.get('cache_drops', {}))} |")
    for r in results:
        print(f"\n{r['event']}, {r['binary']}: answers per second (event at "
              f"{r['event_at'] - r['start']:.1f} s, accepting at {r['accepting'] - r['start']:.1f} s)\n")
        print("| s | 200 | 201 | 503 | other |")
        print("|---|---|---|---|---|")
        for second, counts in r["seconds"].items():
            other = sum(n for status, n in counts.items() if status not in (200, 201, 503))
            print(f"| {second} | {counts.get(200, 0)} | {counts.get(201, 0)} | {counts.get(503, 0)} | {other} |")
