"""Scale-out runs.

`--pooler`: the server twice on one PostgreSQL database (1,000 books), directly and
through PgBouncer in transaction mode (`--transaction-pooler true`; installed with apt if
missing), cache on and off, side by side: ping, list page 1 + include, get one + include
(16 connections) and creates (50): throughput, our CPU and PgBouncer's per request.

`--replicas`: a private primary and a replica (PostgreSQL: initdb, pg_basebackup, as the
postgres user, a streaming replica; `mysql`: mariadb-install-db, mariadbd, a GTID
replica; `--stores` picks, default PostgreSQL); reads pages 1-10 and books (with include,
16 connections) from a server on the primary alone and one with `--replica-url`, cache on
and off, while a writer (a third server) updates a book every 20 ms and the script reads
each write back at once from the server under test: the share of store reads the replica
served (from /metrics), the primary's CPU per request (its processes, from /proc),
p50/p99, and the stale reads the script counted.
"""

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from loadrun.harness import (
    POST_LUA,
    SERVER,
    cpu_seconds,
    fill_over_http,
    measure,
    prepare_store,
    rate,
    run,
    start,
    stop,
    wait_port,
)


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
            bouncer_us = f"{statistics.median(r['bouncer_us'] for r in rs):.1f}" if "pooled" in name else "—"
            print(f"| {work} | {name} | {rate(rs)} | {rs[-1]['p50']} | "
                  f"{rs[-1]['p99']} | {statistics.median(r['cpu_us'] for r in rs):.1f} | {bouncer_us} | {ratio:.2f}x |")
    finally:
        stop([*procs.values(), bouncer])
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
        stop(procs.values())
        stop_cluster()
    shutil.rmtree(tmp, ignore_errors=True)
