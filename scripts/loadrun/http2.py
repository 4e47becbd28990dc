"""`--http2`: HTTP/2 with prior knowledge (h2c) beside bare hyper's HTTP/2 answering the
same bytes (`baseline hyper-h2`). h2load opens 16 connections of 10 streams each and
sends ping and cached page 1 (`include=author`, exact mode on SQLite and in memory) for
`--seconds` after a second's warm-up; the servers are pinned to core 0 with one runtime
thread, h2load to core 1, interleaved within each round. Reports per target the
requests/s and the server's CPU per answer (from /proc, all threads) by round, their
ratios against bare hyper, and h2load's slowest request of each round (a stall shows
there).
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
    print(f"h2load -c16 -m10 for {args.seconds}s after a 1 s warm-up, {args.rounds} rounds; "
          "CPU per answer is the server process's (all threads).\n")
    print("| store | workload | ours req/s | hyper-h2 req/s | ours CPU µs | hyper-h2 CPU µs | "
          "CPU ratio (hyper/ours), median | rate ratio, median | slowest request (ours / hyper) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for store in stores:
        tmp = tempfile.mkdtemp(prefix="books-h2-")
        url = prepare_store(store, tmp)
        ours = start([SERVER, "--listen", f"127.0.0.1:{PORTS['ours']}", "--database-url", url,
                      "--metrics", "false"], PORTS["ours"])
        specs = save_bodies(PORTS["ours"], tmp)
        hyper = start([os.path.join(RELEASE, "baseline"), "hyper-h2", f"127.0.0.1:{PORTS['hyper-h2']}",
                       *specs], PORTS["hyper-h2"])
        procs = {"ours": ours, "hyper-h2": hyper}
        try:
            for workload, path in PATHS.items():
                seen = {name: [] for name in procs}
                for _ in range(args.rounds):
                    for name, proc in procs.items():
                        before = cpu_seconds(proc.pid)
                        rps, done, slowest = h2load(PORTS[name], path, args.seconds)
                        cpu = (cpu_seconds(proc.pid) - before) * 1e6 / max(done, 1)
                        seen[name].append((rps, cpu, slowest))
                cpu_ratio = statistics.median(h[1] / o[1] for o, h in zip(seen["ours"], seen["hyper-h2"]))
                rate_ratio = statistics.median(o[0] / h[0] for o, h in zip(seen["ours"], seen["hyper-h2"]))
                cell = lambda name, i, fmt: " / ".join(fmt.format(r[i]) for r in seen[name])
                print(f"| {store} | {workload} | {cell('ours', 0, '{:,.0f}')} | {cell('hyper-h2', 0, '{:,.0f}')} | "
                      f"{cell('ours', 1, '{:.1f}')} | {cell('hyper-h2', 1, '{:.1f}')} | {cpu_ratio:.2f}x | "
                      f"{rate_ratio:.2f}x | {cell('ours', 2, '{}')} / {cell('hyper-h2', 2, '{}')} |")
        finally:
            stop(list(procs.values()))
