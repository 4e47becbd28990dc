"""`--edge`: the open internet's features on SQLite (1,000 books): bytes on the wire for
list page 1 + include in JSON and XML per encoding; CPU per cached list answer in each
encoding against identity (the compressed bodies kept); CPU per ping with the rate
limiter on (every request allowed) and with CORS on (an allowed Origin) against neither,
side by side in each round; and the RSS with 100,000 distinct clients behind a trusted
proxy (X-Forwarded-For) at `--rate-limit 10`, and the limiter's table after its sweep.
"""

import os
import shutil
import statistics
import tempfile
import time
import urllib.error
import urllib.request

from loadrun.harness import SERVER, fill_sqlite, measure, rate, rss_kib, start, stop, wrk


XFF_LUA = """
counter = 0
request = function()
  counter = (counter + 1) % 100000
  local ip = string.format("10.%d.%d.%d", math.floor(counter / 65536) % 256,
                           math.floor(counter / 256) % 256, counter % 256)
  return wrk.format("GET", "/api/ping", {["X-Forwarded-For"] = ip})
end
"""


def edge(args):
    """Compression, rate limits and CORS: see the module's doc."""
    tmp = tempfile.mkdtemp(prefix="books-edge-")
    url = f"sqlite://{tmp}/edge.db"
    setup = start([SERVER, "--listen", "127.0.0.1:18097", "--database-url", url], 18097)
    setup.terminate()
    setup.wait()
    fill_sqlite(f"{tmp}/edge.db", 1000)
    page = "/api/books?include=author"
    ports = {"plain": 18097, "limited": 18098, "cors": 18099}
    extra = {"plain": [], "limited": ["--rate-limit", "1000000000"],
             "cors": ["--cors-origin", "https://app.example"]}
    procs = {name: start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", url, *extra[name]], port)
             for name, port in ports.items()}
    try:
        print("Bytes on the wire, list page 1 + include (20 books with authors):\n")
        print("| format | identity | gzip | br | zstd |")
        print("|---|---|---|---|---|")
        for fmt, accept in (("JSON", "application/json"), ("XML", "application/xml")):
            sizes = []
            for coding in ("identity", "gzip", "br", "zstd"):
                request = urllib.request.Request(f"http://127.0.0.1:{ports['plain']}{page}",
                                                 headers={"Accept": accept, "Accept-Encoding": coding})
                with urllib.request.urlopen(request) as r:
                    assert r.headers.get("content-encoding", "identity") == coding
                    sizes.append(len(r.read()))
            print(f"| {fmt} | " + " | ".join(f"{n:,}" for n in sizes) + " |")
        print()
        runs = {"list, identity": ("plain", page, None),
                "list, gzip": ("plain", page, "Accept-Encoding: gzip"),
                "list, br": ("plain", page, "Accept-Encoding: br"),
                "list, zstd": ("plain", page, "Accept-Encoding: zstd"),
                "ping": ("plain", "/api/ping", None),
                "ping, rate limiter on": ("limited", "/api/ping", None),
                "ping, CORS on (allowed Origin)": ("cors", "/api/ping", "Origin: https://app.example")}
        results = {}
        for _ in range(args.rounds):
            for name, (server, path, header) in runs.items():
                r = measure(procs[server], ports[server], path, args.seconds, connections=16, header=header)
                results.setdefault(name, []).append(r)
        print(f"{args.rounds} rounds x {args.seconds}s, SQLite (exact cache), server on core 0 (one runtime "
              "thread), wrk -t1 -c16 on core 1.\n")
        print("| request | req/s | CPU µs/req | ratio |")
        print("|---|---|---|---|")
        for name, rs in results.items():
            base = results["list, identity" if name.startswith("list") else "ping"]
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in zip(rs, base))
            print(f"| {name} | {rate(rs)} | "
                  f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        print()
    finally:
        stop(procs.values())
    lua = os.path.join(tmp, "xff.lua")
    with open(lua, "w") as f:
        f.write(XFF_LUA)
    rows = []
    for limit in (None, "10"):
        flags = ["--rate-limit", limit, "--trusted-proxies", "127.0.0.0/8"] if limit else []
        proc = start([SERVER, "--listen", "127.0.0.1:18097", "--database-url", url, *flags], 18097)
        try:
            idle = rss_kib(proc.pid)
            requests, _, _, _, non2xx = wrk(18097, "/api/ping", 3, lua, 32)
            busy = rss_kib(proc.pid)
            time.sleep(3)
            after = rss_kib(proc.pid)
            rows.append((limit or "off", idle, busy, after, requests, non2xx))
        finally:
            proc.terminate()
            proc.wait()
    print("RSS with 100,000 distinct clients (X-Forwarded-For from a trusted proxy, 3 s of pings, "
          "each client 2-3 times):\n")
    print("| --rate-limit | RSS idle KiB | right after | 3 s later (swept) | requests | non-2xx |")
    print("|---|---|---|---|---|---|")
    for limit, idle, busy, after, requests, non2xx in rows:
        print(f"| {limit} | {idle:,} | {busy:,} | {after:,} | {requests:,} | {non2xx:,} |")
    shutil.rmtree(tmp, ignore_errors=True)
