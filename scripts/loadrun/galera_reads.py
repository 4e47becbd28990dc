"""`--galera-reads`: what Galera's causality wait costs a read, the choice the MariaDB
store makes on every node (`wsrep_sync_wait = 1`) against reading without it.

A three-node cluster (`test-support`'s `--example cluster galera`) with 1,000 books; node
0 takes one-row inserts from 4 connections throughout (the writes a read must wait for);
node 1, then node 0 itself, answers the store's version-check read (`SUM(n),
SUM(version)` over its counter rows) and a page of 20 books from 8 connections, with
`wsrep_sync_wait` 0 and 1 in turn (`mariadb-slap`, the same three statements each time, the `SET`
included). Reports statements per second of each, per round, and the wait's ratio per
node as the median.
"""

import re
import statistics
import subprocess
import threading

from loadrun.failover import EXAMPLE
from loadrun.harness import ROOT, run

READS = ("SELECT SUM(n), SUM(version) FROM books.book_count; "
         "SELECT id, title, year FROM books.books ORDER BY id LIMIT 20")
# (node, wsrep_sync_wait) in the order each round measures them.
VARIANTS = [(1, 0), (1, 1), (0, 0), (0, 1)]
WRITE = "INSERT INTO books.books (title, author_id, year, created_at, updated_at) VALUES ('w', NULL, 2020, NOW(), NOW())"


def slap(port, query, concurrency, queries):
    """`mariadb-slap`'s average seconds for `queries` runs of `query` (`;`-separated)."""
    out = subprocess.run(
        ["mariadb-slap", "--no-defaults", "-h127.0.0.1", f"-P{port}", "-uroot", "--create-schema=books",
         f"--query={query}", "--delimiter=;", f"--concurrency={concurrency}",
         f"--number-of-queries={queries}", "--iterations=1"],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"Average number of seconds to run all queries: ([\d.]+)", out).group(1))


def measure(cluster, rounds_wanted, seconds):
    """Each round's statements/s per (node, wait), on the held cluster."""
    urls = []
    for line in cluster.stdout:
        if line.strip() == "ready":
            break
        urls.append(line.split(" ", 1)[1].strip())
    ports = [int(host.rsplit(":", 1)[1]) for host in urls[0].split("@", 1)[1].split("/", 1)[0].split(",")]
    # The server migrates and loads its demo data; then 1,000 books in SQL.
    server = subprocess.Popen([ROOT + "/target/release/books-api", "--listen", "127.0.0.1:18310",
                               "--database-url", urls[-2]], stdout=subprocess.PIPE, text=True)
    for line in server.stdout:
        if "listening on" in line:
            break
    server.terminate()
    server.wait()
    fill = ("INSERT INTO books.books (title, author_id, year, created_at, updated_at) "
            "SELECT CONCAT('b', seq), NULL, 2000 + seq % 20, NOW(), NOW() FROM seq_1_to_1000")
    subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{ports[0]}", "-uroot", "books", "-e", fill],
                   check=True)
    halt = threading.Event()

    def writes():
        while not halt.is_set():
            slap(ports[0], WRITE, 4, 400)

    writer = threading.Thread(target=writes)
    writer.start()
    rounds, queries = [], 2000 * seconds
    try:
        for _ in range(rounds_wanted):
            rates = {}
            for node, wait in VARIANTS:
                query = f"SET SESSION wsrep_sync_wait = {wait}; {READS}"
                rates[node, wait] = queries / slap(ports[node], query, 8, queries)
            rounds.append(rates)
    finally:
        halt.set()
        writer.join()
    return rounds


def galera_reads(args):
    run(["cargo", "build", "--release", "-p", "books-test-support", "--example", "cluster"], cwd=ROOT)
    cluster = subprocess.Popen([EXAMPLE, "galera"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        rounds = measure(cluster, args.rounds, args.seconds)
    finally:
        cluster.stdin.close()
        cluster.wait(timeout=120)
    print("The version check and a page of 20 (8 connections) while node 0 takes inserts (4 connections), "
          "statements/s:\n")
    print("| round | node 1, no wait | node 1, wsrep_sync_wait = 1 | node 0 (the writes' node), no wait | "
          "node 0, wsrep_sync_wait = 1 |")
    print("|---|---|---|---|---|")
    for n, rates in enumerate(rounds, 1):
        print(f"| {n} | " + " | ".join(f"{rates[v]:,.0f}" for v in VARIANTS) + " |")
    for node in (1, 0):
        ratio = statistics.median(r[node, 1] / r[node, 0] for r in rounds)
        print(f"\nnode {node}: with the wait / without, median {ratio:.2f}x")
