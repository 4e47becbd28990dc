#!/usr/bin/env python3
"""What filtered and sorted pages cost, beside the unfiltered page 1 and beside the
hand-written axum + sqlx server (`benches/handwritten.rs`) given the same filters.

    python3 scripts/list_queries.py [--stores sqlite,postgres,mysql] [--books 1000000]
                                    [--rounds 3] [--seconds 5] [--cached] [--before BIN]
                                    [--pages year,title]

Bulk-loads `--books` books (1,000 authors, years 2000-2025, every 1,000th title containing
"Zyzzyva") into our server's tables and the hand-written server's, in SQL, then asks both
(our cache off: every answer read from the database) for page 1 unfiltered, of one
author, of one year, sorted by `-year` and by `title`, page 100 of one year, and page 1
of the title substring that matches 1,000 books, the last again with 1 request in 10 a
create (the first page after each write pays its count), all with `include=author` (wrk, 8
connections, servers pinned as in `load.py`; each page asked twice, untimed, before its
rounds, so that a read-only page's one count and one read of its ids are not timed).
Reports requests/s, p99, the cost (1/rps)
relative to the same server's unfiltered page 1, and each server's throughput relative
to hand-written's. `--before BIN` also asks an earlier build of our server, over the same
tables, in the same rounds.

`--cached` instead runs our server with its cache on over 1,000 books (posted through the
API) and compares the server's CPU per cached answer for each filtered page with the
unfiltered page 1's.
"""

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import urllib.request

from loadrun import harness

AUTHORS = 1_000
PAGES = {
    "page 1": "",
    "one author": "&filter%5Bauthor_id%5D={author}",
    "one year": "&filter%5Byear%5D=2010",
    "sort=-year": "&sort=-year",
    "sort=title": "&sort=title",
    "page 100 of one year": "&filter%5Byear%5D=2010&page=100",
    "title matching 1,000": "&filter%5Btitle%5D=zyzzyva",
    "the title, 1 in 10 a create": "&filter%5Btitle%5D=zyzzyva",
}

# Pages asked with writes between them: 1 request in 10 creates a book (by the page's
# author), which moves the version every kept total and id list is read at.
WRITING = """
math.randomseed(os.time())
request = function()
  if math.random(10) == 1 then
    return wrk.format("POST", "/api/books", {["Content-Type"] = "application/x-www-form-urlencoded"},
                      "title=Load+test&author_id={author}&year=2020")
  end
  return wrk.format("GET", "{path}")
end
"""

# The bulk load, per dialect: authors named "Bench N" (ids as the table assigns them,
# or from 1,001 where the table takes them given), then books pointing at them.
TITLE = {
    "sqlite": "CASE WHEN i % 1000 = 0 THEN 'Book ' || i || ' Zyzzyva' ELSE 'Book ' || i END",
    "postgres": "CASE WHEN i % 1000 = 0 THEN 'Book ' || i || ' Zyzzyva' ELSE 'Book ' || i END",
    "mysql": "IF(i % 1000 = 0, CONCAT('Book ', i, ' Zyzzyva'), CONCAT('Book ', i))",
}
NUMBERS = {
    "sqlite": "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) SELECT i FROM n)",
    "postgres": "(SELECT i FROM generate_series(1, {n}) i)",
    "mysql": "(SELECT seq AS i FROM seq_1_to_{n})",
}
NOW = {"sqlite": "'2026-01-01 00:00:00+00:00'", "postgres": "now()", "mysql": "NOW(6)"}


def load_sql(dialect, books, explicit_ids):
    numbers = NUMBERS[dialect]
    name = "'Bench ' || i" if dialect != "mysql" else "CONCAT('Bench ', i)"
    authors = (f"INSERT INTO authors (id, name) SELECT 1000 + i, {name} FROM {numbers.format(n=AUTHORS)} a"
               if explicit_ids else
               f"INSERT INTO authors (name) SELECT {name} FROM {numbers.format(n=AUTHORS)} a")
    first = "(SELECT MIN(id) AS first FROM authors WHERE name LIKE 'Bench %')"
    books_sql = (f"INSERT INTO books (title, author_id, year, created_at, updated_at) "
                 f"SELECT {TITLE[dialect]}, f.first + i % {AUTHORS}, 2000 + i % 26, {NOW[dialect]}, {NOW[dialect]} "
                 f"FROM {numbers.format(n=books)} b, {first} f")
    return [authors, books_sql]


def sql(store, target, statements):
    """Runs `statements` on `target` (a SQLite file, a PostgreSQL database and schema, or
    a MariaDB database) outside the servers; returns the last one's first value."""
    if store == "sqlite":
        db = sqlite3.connect(target)
        result = None
        for statement in statements:
            row = db.execute(statement).fetchone()
            result = row[0] if row else None
        db.commit()
        db.close()
        return result
    if store == "postgres":
        database, schema = target
        out = ""
        for statement in statements:
            out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-qtA",
                                  "-c", f"SET search_path = {schema}", "-c", statement],
                                 check=True, capture_output=True, text=True).stdout.strip()
        return out
    out = subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", "-N", target, "-e",
                          ";\n".join(statements)], check=True, capture_output=True, text=True).stdout.strip()
    return out.splitlines()[-1] if out else ""


def targets(store, tmp, url):
    """Where each server's tables are: ours, hand-written's."""
    if store == "sqlite":
        return f"{tmp}/load.db", f"{tmp}/handwritten.db"
    database = url.rsplit("/", 1)[1]
    if store == "postgres":
        return (database, "public"), (database, "handwritten")
    return database, f"{database}_handwritten"


def bulk_load(store, ours, hand, books):
    for target, explicit in ((ours, False), (hand, True)):
        analyze = {"sqlite": "ANALYZE", "postgres": "VACUUM ANALYZE",
                   "mysql": "ANALYZE TABLE books, authors"}[store]
        sql(store, target, load_sql(store, books, explicit))
        sql(store, target, [analyze])


def uncached(args):
    harness.run(["cargo", "build", "--release", "--bin", "books-api"], cwd=harness.ROOT)
    harness.run(["cargo", "build", "--release", "-p", "books-benches", "--example", "handwritten"], cwd=harness.ROOT)
    tmp = tempfile.mkdtemp(prefix="books-list-queries-")
    ports = {"ours": 18101, "handwritten": 18102}
    if args.before:
        ports["before"] = 18104
    print(f"{args.books:,} books ({AUTHORS:,} authors, 26 years), our cache off; {args.rounds} rounds x "
          f"{args.seconds}s, wrk -t1 -c8 on core 1, servers on core 0 (one runtime thread). "
          "Cost: 1/throughput relative to the same server's page 1.\n")
    print("| store | page (include=author) | server | req/s | p99 | cost vs page 1 | server / hand-written |")
    print("|---|---|---|---|---|---|---|")
    for store in args.stores.split(","):
        url = harness.prepare_store(store, tmp)
        hand_url = f"sqlite://{tmp}/handwritten.db" if store == "sqlite" else url
        procs = {}
        try:
            procs["ours"] = harness.start([harness.SERVER, "--listen", f"127.0.0.1:{ports['ours']}", "--database-url",
                                        url, "--cache-entries", "0"], ports["ours"])
            if args.before:
                procs["before"] = harness.start([args.before, "--listen", f"127.0.0.1:{ports['before']}",
                                                 "--database-url", url, "--cache-entries", "0"], ports["before"])
            procs["handwritten"] = harness.start([f"{harness.RELEASE}/handwritten", hand_url,
                                               f"127.0.0.1:{ports['handwritten']}"], ports["handwritten"])
            ours, hand = targets(store, tmp, url)
            bulk_load(store, ours, hand, args.books)
            first_ours = sql(store, ours, ["SELECT MIN(id) FROM authors WHERE name LIKE 'Bench %'"])
            first = {"ours": first_ours, "before": first_ours,
                     "handwritten": sql(store, hand, ["SELECT MIN(id) FROM authors WHERE name LIKE 'Bench %'"])}
            results = {}
            pages = [page for page in PAGES
                     if not args.pages or page == "page 1" or any(p in page for p in args.pages.split(","))]
            # The pages with writes after every other's rounds: the first page of each
            # filter after a write pays its count (MariaDB's title: a scan, ~0.4 s).
            order = ([(page, r) for r in range(args.rounds) for page in pages if "a create" not in page]
                     + [(page, r) for r in range(args.rounds) for page in pages if "a create" in page])
            for page, round_ in order:
                query = PAGES[page]
                for server, port in ports.items():
                    author = int(first[server]) + 6
                    path = "/api/books?include=author" + query.format(author=author)
                    if round_ == 0:
                        # Asked twice before its rounds: its count and its ids' read (a
                        # filter of few books) are not timed.
                        for _ in range(2):
                            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=120).read()
                    script = None
                    if "a create" in page:
                        script = f"{tmp}/{server}.lua"
                        with open(script, "w") as f:
                            f.write(WRITING.replace("{author}", str(author)).replace("{path}", path))
                    r = harness.measure(procs[server], port, path, args.seconds, script, 8)
                    results.setdefault((page, server), []).append(r)
            for (page, server), rs in results.items():
                base = results[("page 1", server)]
                cost = statistics.median(b["rps"] / r["rps"] if r["rps"] else float("inf") for r, b in zip(rs, base))
                versus = statistics.median(r["rps"] / h["rps"] if h["rps"] else float("inf")
                                       for r, h in zip(rs, results[(page, "handwritten")]))
                print(f"| {store} | {page} | {server} | {harness.rate(rs)} | "
                      f"{rs[-1]['p99']} | {cost:.2f}x | {versus:.2f}x |")
        finally:
            harness.stop(procs.values())
    shutil.rmtree(tmp, ignore_errors=True)


def cached(args):
    harness.run(["cargo", "build", "--release", "--bin", "books-api"], cwd=harness.ROOT)
    tmp = tempfile.mkdtemp(prefix="books-list-queries-")
    port = 18103
    print(f"1,000 books, our cache on (exact mode); {args.rounds} rounds x {args.seconds}s, wrk -t1 -c16 on "
          "core 1, server on core 0 (one runtime thread). CPU per answer relative to page 1's.\n")
    print("| store | page (include=author) | req/s | CPU µs/req | CPU vs page 1 |")
    print("|---|---|---|---|---|")
    for store in args.stores.split(","):
        url = harness.prepare_store(store, tmp)
        proc = harness.start([harness.SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
        try:
            harness.fill_over_http(port, 1000)
            results = {}
            # The books posted are by author 3 in 2020; a page past the last is a 404.
            pages = {page: query.replace("2010", "2020") for page, query in PAGES.items()
                     if not page.startswith("page 100")}
            for _ in range(args.rounds):
                for page, query in pages.items():
                    path = "/api/books?include=author" + query.format(author=3)
                    results.setdefault(page, []).append(harness.measure(proc, port, path, args.seconds, None, 16))
            for page, rs in results.items():
                ratio = statistics.median(r["cpu_us"] / b["cpu_us"] for r, b in zip(rs, results["page 1"]))
                print(f"| {store} | {page} | {statistics.median(r['rps'] for r in rs):,.0f} | "
                      f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        finally:
            proc.terminate()
            proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--books", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--cached", action="store_true")
    parser.add_argument("--before", help="an earlier build of the server, asked beside ours")
    parser.add_argument("--pages", help="only the pages whose names hold one of these (and page 1)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        harness.run(["apt-get", "install", "-y", "-qq", "wrk"])
    (cached if args.cached else uncached)(args)


if __name__ == "__main__":
    main()
