"""`--shedding`: fills a SQLite file with `--books` rows (default 200,000), measures the
capacity for the last page (wrk, 4 connections), then offers 2x and 4x that rate
open-loop (64 keep-alive connections, latency from each request's scheduled start) to the
server without a bound on requests in flight and with `--max-in-flight 8`: p50/p99 of
admitted (200) answers, the share shed (503) and how fast a 503 comes.
"""

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from loadrun.harness import SERVER, fill_sqlite, start


async def open_loop(port, path, rate, seconds, connections=64):
    """Requests at a fixed rate over keep-alive connections; (status, seconds) each, the
    latency counted from when the request was due (so client-side waits count too)."""
    import asyncio
    queue, results = asyncio.Queue(), []

    async def worker():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while (due := await queue.get()) is not None:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            results.append((status, time.monotonic() - due))
        writer.close()

    workers = [asyncio.create_task(worker()) for _ in range(connections)]
    begin = time.monotonic() + 0.2
    for i in range(int(rate * seconds)):
        due = begin + i / rate
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        queue.put_nowait(due)
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=120)
    return results


def wrk_capacity(port, path, seconds):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c4", f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(next(l for l in out.splitlines() if l.startswith("Requests/sec")).split()[1])


def shedding(args):
    import asyncio
    tmp = tempfile.mkdtemp(prefix="books-shedding-")
    url = f"sqlite://{tmp}/shed.db"
    port = 18088
    setup = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url], port)
    fill_sqlite(f"{tmp}/shed.db", args.books)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/books") as r:
        last = json.loads(r.read())["meta"]["totalPages"]
    setup.terminate()
    setup.wait()
    path = f"/api/books?page={last}"
    bounds = {"unbounded": "1000000", "bounded (8)": "8"}
    report = [f"SQLite, {args.books:,} books, `GET {path}` (the last page); server on core 0 "
              f"(one runtime thread), load on core 1; {args.seconds}s per run, 64 connections.", ""]
    rows, capacity = [], None
    for name, bound in bounds.items():
        proc = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url,
                      "--max-in-flight", bound, "--metrics", "false"], port)
        try:
            # One capacity for both runs (measured unbounded, where nothing is shed).
            capacity = capacity or wrk_capacity(port, path, args.seconds)
            for factor in (2, 4):
                results = asyncio.run(open_loop(port, path, capacity * factor, args.seconds))
                ok = sorted(t for s, t in results if s == 200)
                shed = sorted(t for s, t in results if s == 503)
                pct = lambda xs, q: f"{xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3:,.0f}" if xs else "–"
                rows.append(f"| {name} | {factor}x ({capacity * factor:,.0f}/s) | {len(results):,} | "
                            f"{pct(ok, 0.5)} | {pct(ok, 0.99)} | {len(shed) / max(len(results), 1):.0%} | "
                            f"{pct(shed, 0.5)} | {pct(shed, 0.99)} |")
        finally:
            proc.terminate()
            proc.wait()
    report.append(f"Capacity: {capacity:,.0f} req/s (wrk -c4, {args.seconds}s, unbounded server).")
    report += ["", "| in flight | offered | requests | admitted p50 ms | admitted p99 ms | shed | 503 p50 ms | 503 p99 ms |",
               "|---|---|---|---|---|---|---|---|", *rows]
    print("\n".join(report))
    shutil.rmtree(tmp, ignore_errors=True)
