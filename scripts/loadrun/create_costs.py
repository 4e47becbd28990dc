"""`--create-costs`: what each index and trigger on `books` costs a create. The server runs
once per variant of its schema, each on a database of its own: as shipped, then with
what the list's filters and sorts added (issue 35) dropped after the migrations ran —
the title trigram index, then the year, year-descending and title-sort indexes, then
both — and on MariaDB also without the counters' insert trigger. Every variant takes
creates only (50 connections, the `--versus` creates workload), interleaved within each
round, beside the hand-written axum + sqlx server (`benches/handwritten.rs`) and, with
`--before`, an older binary. A variant's list queries are broken: it measures creates,
nothing else.
"""

import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile

from loadrun.harness import POST_LUA, RELEASE, ROOT, SERVER, fill_over_http, measure, prepare_store, rate, run, start, stop

# Per store: each variant's name and the SQL that makes it from the migrated schema.
TRIGRAMS = {
    "sqlite": "DROP TRIGGER books_title_trigrams_insert",
    "postgres": "DROP INDEX books_title_trigrams",
}
SORT_INDEXES = {
    "sqlite": "DROP INDEX books_year; DROP INDEX books_year_desc; DROP INDEX books_title",
    "postgres": "DROP INDEX books_year, books_year_desc, books_title",
    "mysql": "ALTER TABLE books DROP INDEX books_year, DROP INDEX books_year_desc, DROP INDEX books_title",
}


def variants(store):
    """The schema variants measured on `store`, as (name, SQL or None)."""
    out = [("as shipped", None)]
    if store in TRIGRAMS:
        out.append(("without the title trigrams", TRIGRAMS[store]))
    out.append(("without the year and title indexes", SORT_INDEXES[store]))
    if store in TRIGRAMS:
        out.append(("without both", f"{TRIGRAMS[store]}; {SORT_INDEXES[store]}"))
    if store == "mysql":
        out.append(("without the indexes and the counters' trigger",
                    f"{SORT_INDEXES[store]}; DROP TRIGGER books_insert"))
    return out


def alter(store, url, sql):
    """Runs `sql` on the database at `url` (the server's own, already migrated)."""
    if store == "sqlite":
        db = sqlite3.connect(url.removeprefix("sqlite://"), timeout=30)
        db.executescript(sql)
        db.close()
    elif store == "postgres":
        database = url.rsplit("/", 1)[1]
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-qc", sql],
                       check=True, capture_output=True)
    else:
        database = url.rsplit("/", 1)[1]
        subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", database, "-e", sql],
                       check=True, capture_output=True)


def create_costs(args):
    """Creates per second and CPU per create for each schema variant, side by side."""
    run(["cargo", "build", "--release", "-p", "books-benches", "--example", "handwritten"], cwd=ROOT)
    tmp = tempfile.mkdtemp(prefix="books-create-costs-")
    lua = os.path.join(tmp, "create.lua")
    with open(lua, "w") as f:
        f.write(POST_LUA)
    print(f"{args.rounds} rounds x {args.seconds}s of creates at 50 connections, servers on core 0 "
          f"(one runtime thread), wrk -t1 on core 1; {args.books:,} books to start with.\n")
    print("| store | server | creates/s | CPU µs/create | against as shipped | against hand-written |")
    print("|---|---|---|---|---|---|")
    for store in args.stores.split(","):
        if store == "memory":
            continue
        procs, ports = {}, {}
        try:
            port = 18110
            for i, (name, sql) in enumerate(variants(store)):
                url = prepare_store(store, tmp, f"variant{i}")
                procs[name] = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
                if sql:
                    alter(store, url, sql)
                ports[name] = port
                port += 1
            if args.before:
                url = prepare_store(store, tmp, "before")
                procs["before"] = start([args.before, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
                ports["before"] = port
                port += 1
            hand_url = f"sqlite://{tmp}/handwritten.db" if store == "sqlite" else prepare_store(store, tmp, "hand")
            procs["hand-written"] = start([f"{RELEASE}/handwritten", hand_url, f"127.0.0.1:{port}"], port)
            ports["hand-written"] = port
            for port in ports.values():
                fill_over_http(port, args.books)
            results = {}
            for _ in range(args.rounds):
                for name, port in ports.items():
                    results.setdefault(name, []).append(
                        measure(procs[name], port, "/api/books", args.seconds, lua, 50))
            for name, rs in results.items():
                shipped = statistics.median(a["rps"] / b["rps"] for a, b in zip(rs, results["as shipped"]))
                hand = statistics.median(a["rps"] / b["rps"] for a, b in zip(rs, results["hand-written"]))
                cpu = statistics.median(r["cpu_us"] for r in rs)
                print(f"| {store} | {name} | {rate(rs)} | {cpu:.1f} | {shipped:.2f}x | {hand:.2f}x |")
        finally:
            stop(procs.values())
    shutil.rmtree(tmp, ignore_errors=True)
