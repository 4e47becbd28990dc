"""`--versus`: the server beside the hand-written axum + sqlx server
(`benches/handwritten.rs`, its own tables, no cache) on the same database server (`mysql`:
MariaDB at BOOKS_LOAD_MYSQL_URL, default the local server as root), both with their
defaults: ping, list page 1 and get one (16 connections), creates (50 connections), and a
mixed workload (95% reads over the first 10 pages, 5% creates, 32 connections);
throughput ratio to hand-written. Ping is also asked of bare hyper serving our ping's
bytes: what no server that does more can beat. `--before` adds an older server binary on
a database of its own. With `--push`, our server runs PostgreSQL in push mode (what every
write then costs); with `--cache-off`, without its cache (`--cache-entries 0`). Writes every
round's measures to `target/load/versus.json` and the chart to `docs/charts/versus.svg`
(`versus-cache-off`, `versus-push` for those runs; `scripts/loadrun/charts.py` redraws it).

`--cache-memory`: the server's RSS with its cache empty and full at its default bound,
SQLite with `--books` rows.
"""

import json
import os
import shutil
import statistics
import tempfile
import urllib.error
import urllib.request

from loadrun.charts import CHARTS, versus_chart
from loadrun.harness import (
    POST_LUA,
    RELEASE,
    ROOT,
    SERVER,
    fill_over_http,
    fill_sqlite,
    measure,
    prepare_store,
    rate,
    rss_kib,
    run,
    save_bodies,
    start,
    stop,
)


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
    saved = {"books": args.books, "rounds": args.rounds, "seconds": args.seconds, "push": args.push,
             "cache_off": args.cache_off, "stores": {}}
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
            for round_no in range(args.rounds):
                for name, (path, script, conns) in runs.items():
                    targets = list({**ports, **(pinging if name == "ping" else {})}.items())
                    # Each round starts from another server: where the database bounds the
                    # rate it drifts within a run (MariaDB's get one: a binary measured last
                    # in every round was 1.03-1.26x the one measured first, in 4 of 4).
                    shift = round_no % len(targets)
                    for target, port in targets[shift:] + targets[:shift]:
                        lua = scripts.get(script)
                        r = measure(procs[target], port, path, args.seconds, lua, conns)
                        results.setdefault((name, target), []).append(r)
            for (name, target), rs in results.items():
                pairs = zip(rs, results[(name, "handwritten")])
                ratio = statistics.median(a["rps"] / b["rps"] for a, b in pairs)
                print(f"| {store} | {name} | {target} | {rate(rs)} | "
                      f"{rs[-1]['p99']} | {statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
                saved["stores"].setdefault(store, {}).setdefault(name, {})[target] = rs
        finally:
            stop(procs.values())
    shutil.rmtree(tmp, ignore_errors=True)
    name = "versus" + ("-cache-off" if args.cache_off else "") + ("-push" if args.push else "")
    os.makedirs(os.path.join(ROOT, "target", "load"), exist_ok=True)
    with open(os.path.join(ROOT, "target", "load", f"{name}.json"), "w") as f:
        json.dump(saved, f)
    versus_chart(saved, os.path.join(CHARTS, f"{name}.svg"))
    print(f"\nChart: docs/charts/{name}.svg (redraw: python3 scripts/loadrun/charts.py versus "
          f"target/load/{name}.json --out docs/charts/{name}.svg)")


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
