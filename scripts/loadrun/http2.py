"""`--http2`: HTTP/2 with prior knowledge (h2c) beside bare hyper's HTTP/2 answering the
same bytes (`baseline hyper-h2`). h2load opens 16 connections of 10 streams each and
sends ping and cached page 1 (`include=author`, exact mode on SQLite and in memory) for
`--seconds` after a second's warm-up; the servers are pinned to core 0 with one runtime
thread, h2load to core 1, interleaved within each round. Reports per target the
requests/s and the server's CPU per answer (from /proc, all threads) by round, their
ratios against bare hyper, and h2load's slowest request of each round (a stall shows
there). With `--before OLD_BINARY` the older server answers too, in the same rounds.
"""

import os
import re
import shutil
import statistics
import subprocess
import tempfile

from loadrun.harness import PATHS, RELEASE, SERVER, cpu_seconds, prepare_store, run, save_bodies, start, stop

PORTS = {"ours": 18080, "hyper-h2": 18081}


def h2load(port, path, seconds):
    """One h2load run: requests/s, answers, and the slowest request in ms."""
    out = subprocess.run(["taskset", "-c", "1", "h2load", "-c", "16", "-m", "10", "-D", str(seconds),
                          "--warm-up-time=1", f"http://127.0.0.1:{port}{path}"],
                         check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"finished in [^,]+, ([0-9.]+) req/s", out).group(1))
    done = int(re.search(r"requests: .* ([0-9]+) succeeded", out).group(1))
    slowest = re.search(r"time for request:\s+\S+\s+(\S+)", out).group(1)
    return rps, done, slowest


def http2(args):
    if not shutil.which("h2load"):
        run(["apt-get", "install", "-y", "-qq", "nghttp2-client"])
    stores = [s for s in args.stores.split(",") if s in ("memory", "sqlite")] or ["sqlite"]
    print(f"h2load -c16 -m10 for {args.seconds}s after a 1 s warm-up, {args.rounds} rounds, the "
          "servers in turn (each round from the next); CPU per answer is the server process's "
          "(all threads).\n")
    print("| store | workload | server | req/s by round | CPU µs by round | rate / hyper-h2, median | "
          "slowest request by round |")
    print("|---|---|---|---|---|---|---|")
    servers = {"ours": SERVER, **({"before": args.before} if args.before else {})}
    for store in stores:
        tmp = tempfile.mkdtemp(prefix="books-h2-")
        procs, ports = {}, {}
        try:
            for i, (name, binary) in enumerate(servers.items()):
                ports[name] = PORTS["ours"] + 2 * i
                procs[name] = start([binary, "--listen", f"127.0.0.1:{ports[name]}", "--database-url",
                                     prepare_store(store, tmp, name), "--metrics", "false"], ports[name])
            specs = save_bodies(ports["ours"], tmp)
            ports["hyper-h2"] = PORTS["hyper-h2"]
            procs["hyper-h2"] = start([os.path.join(RELEASE, "baseline"), "hyper-h2",
                                       f"127.0.0.1:{ports['hyper-h2']}", *specs], ports["hyper-h2"])
            for workload, path in PATHS.items():
                seen = {name: [] for name in procs}
                names = list(procs)
                for round_no in range(args.rounds):
                    shift = round_no % len(names)
                    for name in names[shift:] + names[:shift]:
                        before = cpu_seconds(procs[name].pid)
                        rps, done, slowest = h2load(ports[name], path, args.seconds)
                        cpu = (cpu_seconds(procs[name].pid) - before) * 1e6 / max(done, 1)
                        seen[name].append((rps, cpu, slowest))
                for name in names:
                    ratio = statistics.median(o[0] / h[0] for o, h in zip(seen[name], seen["hyper-h2"]))
                    cell = lambda i, fmt: " / ".join(fmt.format(r[i]) for r in seen[name])
                    print(f"| {store} | {workload} | {name} | {cell(0, '{:,.0f}')} | {cell(1, '{:.1f}')} | "
                          f"{ratio:.2f}x | {cell(2, '{}')} |")
        finally:
            stop(list(procs.values()))
