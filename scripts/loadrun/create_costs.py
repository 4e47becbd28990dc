"""`--create-costs`: what each index and trigger on `books` costs a create. The server runs
once per variant of its schema, each on a database of its own: as shipped, then with
what the list's filters and sorts added (issue 35) dropped after the migrations ran —
the title trigram index, then the year, year-descending and title-sort indexes, then
both — then without the author's foreign key, and without the counters' insert trigger
(PostgreSQL alone; on MariaDB together with the indexes). Every variant takes
creates only (50 connections, the `--versus` creates workload), interleaved within each
round, beside the hand-written axum + sqlx server (`benches/handwritten.rs`) and, with
`--before`, an older binary. A variant's list queries are broken: it measures creates,
nothing else.

After the rounds, on PostgreSQL and MariaDB, one more run of each of "as shipped" and the
hand-written server alone reads the database server's count of log flushes before and
after: how many creates one flush of the log carried (PostgreSQL's `pg_stat_wal.wal_sync`;
MariaDB's `Innodb_log_writes`, each a write the commit flushes), and on PostgreSQL how
many commits. The database's own group commit is what the hand-written server has; the
store's batches are what ours adds.
"""

import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time

from loadrun.harness import POST_LUA, RELEASE, ROOT, SERVER, TICK, cpu_seconds, fill_over_http, measure, prepare_store, rate, run, start, stop

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

AUTHOR_KEY = {
    "postgres": "ALTER TABLE books DROP CONSTRAINT books_author_id_fkey",
    "mysql": "ALTER TABLE books DROP FOREIGN KEY books_author",
}


def variants(store):
    """The schema variants measured on `store`, as (name, SQL or None)."""
    out = [("as shipped", None)]
    if store in TRIGRAMS:
        out.append(("without the title trigrams", TRIGRAMS[store]))
    out.append(("without the year and title indexes", SORT_INDEXES[store]))
    if store in TRIGRAMS:
        out.append(("without both", f"{TRIGRAMS[store]}; {SORT_INDEXES[store]}"))
    if store in AUTHOR_KEY:
        out.append(("without the author key", AUTHOR_KEY[store]))
    if store == "postgres":
        out.append(("without the counters' trigger", "DROP TRIGGER books_insert ON books"))
    if store == "mysql":
        out.append(("without the indexes and the counters' trigger",
                    f"{SORT_INDEXES[store]}; DROP TRIGGER books_insert"))
    return out


# Per store: the database server's (log flushes, commits) so far, all databases together
# (MariaDB: its flushes only; its commit counters count reads too).
FLUSHES = {
    "postgres": "SELECT wal_sync, (SELECT sum(xact_commit) FROM pg_stat_database) FROM pg_stat_wal",
    "mysql": "SELECT VARIABLE_VALUE, NULL FROM information_schema.GLOBAL_STATUS "
             "WHERE VARIABLE_NAME = 'INNODB_LOG_WRITES'",
}


def sql_row(store, sql):
    """The one row of `sql` on the database server, as ints (or None)."""
    if store == "postgres":
        cmd = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-AtF", "\t", "-c", sql]
    else:
        cmd = ["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", "-N", "-e", sql]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return [None if v in ("", "NULL") else int(v) for v in out]


# Per store: the names of the database server's processes.
DATABASE = {"postgres": "postgres", "mysql": "mariadbd"}


def busy_seconds():
    """CPU seconds the machine spent busy so far (all cores; not idle, not waiting)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK


def database_seconds(store):
    """CPU seconds so far of the database server's processes (those alive now)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == DATABASE[store]:
                    total += cpu_seconds(int(pid))
        except OSError:
            pass
    return total


def per_flush(store, proc, port, seconds, lua):
    """Creates (and commits) per log flush over one run of creates at 50 connections, and
    where the CPU went: the machine's busy share of its cores, and the database server's
    CPU per create beside the server's."""
    # PostgreSQL's backends hand their counts in at most once a second, and when idle.
    time.sleep(2)
    flushes, commits = sql_row(store, FLUSHES[store])
    busy, database, started = busy_seconds(), database_seconds(store), time.monotonic()
    r = measure(proc, port, "/api/books", seconds, lua, 50)
    busy = (busy_seconds() - busy) / (time.monotonic() - started) / os.cpu_count()
    creates = r["rps"] * seconds
    database = (database_seconds(store) - database) / creates * 1e6
    time.sleep(2)
    flushes_after, commits_after = sql_row(store, FLUSHES[store])
    flushed = max(flushes_after - flushes, 1)
    out = f"{r['rps']:,.0f} creates/s, {creates / flushed:.1f} creates"
    if commits is not None:
        out += f", {(commits_after - commits) / flushed:.1f} commits"
    out += f" per flush ({flushed:,} flushes); machine {busy:.0%} busy"
    return out + f", CPU µs per create: database {database:.1f}, server {r['cpu_us']:.1f}"


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
    notes = []
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
            if store in FLUSHES:
                for name in ("as shipped", "hand-written"):
                    flushed = per_flush(store, procs[name], ports[name], args.seconds, lua)
                    notes.append(f"- {store}, {name}: {flushed}")
        finally:
            stop(procs.values())
    print("\nOne more run of creates each, the log's flushes counted:\n")
    print("\n".join(notes))
    shutil.rmtree(tmp, ignore_errors=True)
