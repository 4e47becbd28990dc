"""Cached reads beside the floors: the server beside bare hyper and bare warp answering
the same paths with the same bytes.

The default mode (`load.py` with no mode flag): requests/s, server CPU per request,
latency, and the median ratio to the baselines over the rounds; then p50/p99 at a fixed
rate of 50% and 80% of the measured peak (oha, latency-corrected), and RSS idle / after
64 and 1,000 keep-alive connections.

`--bindings`: the bindings (warp filter, tower Service, axum Router; the `bindings`
example, one connection loop for all, memory store) beside bare hyper serving the same
bytes, side by side in each round.

`--metrics-cost`: the server with metrics off and on (recorder installed), memory store,
ping and list, interleaved in each round.

`--cache`: cache on and off, and on PostgreSQL a server in push mode beside the exact one
(with `--before`, an older binary in push mode beside that), and bare warp beside bare
hyper (its ratio is the floor for anything served through warp).
"""

import os
import statistics
import tempfile
import urllib.error
import urllib.request

from loadrun.harness import (
    PATHS,
    PORTS,
    POST_LUA,
    RELEASE,
    SERVER,
    fixed_rate,
    measure,
    open_connections,
    prepare_store,
    rate,
    rss_kib,
    save_bodies,
    start,
    stop,
)


BINDINGS = {"warp": 18083, "tower": 18084, "axum": 18085}


def bindings(args):
    """CPU per request of each binding beside bare hyper, interleaved in every round."""
    tmp = tempfile.mkdtemp(prefix="books-bindings-")
    procs = {}
    try:
        for kind, port in BINDINGS.items():
            procs[kind] = start([f"{RELEASE}/bindings", kind, f"127.0.0.1:{port}"], port)
        specs = save_bodies(BINDINGS["tower"], tmp)
        # Page 1 again with the ETag the client holds: a 304 from the cache (the memory
        # store knows its version without a query).
        paths = dict(PATHS, **{"list p1, 304": "/api/books?include=author&page=1"})
        with urllib.request.urlopen(f"http://127.0.0.1:{BINDINGS['tower']}{paths['list p1, 304']}") as r:
            header = f"If-None-Match: {r.headers['etag']}"
            ctype = r.headers["content-type"].replace(";", "%3B")
        open(os.path.join(tmp, "empty"), "wb").close()
        specs.append(f"{paths['list p1, 304']}=304:{ctype}:{os.path.join(tmp, 'empty')}")
        procs["hyper"] = start([f"{RELEASE}/baseline", "hyper", f"127.0.0.1:{PORTS['hyper']}", *specs],
                               PORTS["hyper"])
        ports = dict(BINDINGS, hyper=PORTS["hyper"])
        results = {}
        for _ in range(args.rounds):
            for name, path in paths.items():
                for target in ports:
                    results.setdefault((name, target), []).append(
                        measure(procs[target], ports[target], path, args.seconds,
                                header=header if "304" in name else None))
        report = [f"Machine: {os.cpu_count()} cores; {args.rounds} rounds x {args.seconds}s, "
                  "wrk -t1 -c32, servers on core 0 (one runtime thread), load on core 1.", "",
                  "| path | binding | req/s (median) | CPU µs/req (median) | CPU ratio to hyper |",
                  "|---|---|---|---|---|"]
        for (name, target), rs in results.items():
            cpu = statistics.median(r["cpu_us"] for r in rs)
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in zip(rs, results[(name, "hyper")]))
            rps = statistics.median(r["rps"] for r in rs)
            report.append(f"| {name} | {target} | {rps:,.0f} | {cpu:.1f} | {ratio:.2f}x |")
        print("\n".join(report))
    finally:
        stop(procs.values())


def metrics_cost(args):
    """CPU per request with metrics off and on (and, with --before, an older build of the
    server), side by side in every round."""
    ports = {"off": 18086, "on": 18087}
    if args.before:
        ports["before"] = 18089
    procs = {}
    try:
        for mode, port in ports.items():
            if mode == "before":
                procs[mode] = start([args.before, "--listen", f"127.0.0.1:{port}", "--database-url", "memory"], port)
                continue
            procs[mode] = start([SERVER, "--listen", f"127.0.0.1:{port}", "--database-url", "memory",
                                 "--metrics", "true" if mode == "on" else "false"], port)
        results = {}
        for _ in range(args.rounds):
            for name, path in PATHS.items():
                for mode, port in ports.items():
                    results.setdefault((name, mode), []).append(measure(procs[mode], port, path, args.seconds))
        print(f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c32, server on core 0 (one runtime thread).\n")
        print("| path | server | req/s (median) | CPU µs/req (median) | CPU ratio to metrics off |")
        print("|---|---|---|---|---|")
        for (name, mode), rs in results.items():
            pairs = zip(rs, results[(name, "off")])
            ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
            print(f"| {name} | {mode} | {statistics.median(r['rps'] for r in rs):,.0f} | "
                  f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.3f}x |")
    finally:
        stop(procs.values())


def cache_compare(args):
    """Unchanged data, read again and again: the server with its cache of rendered answers,
    without it, and bare hyper serving the same bytes, side by side in every round."""
    tmp = tempfile.mkdtemp(prefix="books-cache-")
    paths = {"list p1 + include": "/api/books?include=author", "get one + include": "/api/books/7?include=author",
             # The same page asked again with the ETag the client holds: 304, no body.
             "list p1, 304": "/api/books?include=author&page=1"}
    print(f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c16, servers on core 0 (one runtime thread); "
          "PostgreSQL also in push mode (`--push true`: a listener, no version query per request).\n")
    print("| store | path | server | req/s | CPU µs/req | CPU ratio to hyper |")
    print("|---|---|---|---|---|---|")
    for store in args.stores.split(","):
        if store == "memory":
            continue
        url = prepare_store(store, tmp)
        ports = {"cache on": 18091, "cache off": 18092, "hyper": 18093}
        if store == "postgres":
            ports["cache push"] = 18090
        procs = {}
        try:
            # One base URL for all: the same links, bytes and ETags from every server.
            same = ["--database-url", url, "--metrics", "false", "--base-url", "http://localhost:8080"]
            if "cache push" in ports:
                procs["cache push"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache push']}", *same,
                                             "--push", "true"], ports["cache push"])
                if args.before:
                    ports["before push"] = 18089
                    procs["before push"] = start([args.before, "--listen", "127.0.0.1:18089", *same,
                                                  "--push", "true"], 18089)
            procs["cache on"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache on']}", *same], ports["cache on"])
            if args.before:
                ports["before on"] = 18087
                procs["before on"] = start([args.before, "--listen", "127.0.0.1:18087", *same], 18087)
            procs["cache off"] = start([SERVER, "--listen", f"127.0.0.1:{ports['cache off']}", *same,
                                        "--cache-entries", "0"], ports["cache off"])
            specs, headers = [], {}
            for name, path in paths.items():
                with urllib.request.urlopen(f"http://127.0.0.1:{ports['cache on']}{path}") as r:
                    body, status = r.read(), r.status
                    if "304" in name:
                        headers[name] = f"If-None-Match: {r.headers['etag']}"
                        body, status = b"", 304
                    file = os.path.join(tmp, name.replace(" ", "_").replace(",", ""))
                    with open(file, "wb") as f:
                        f.write(body)
                    specs.append(f"{path}={status}:{r.headers['content-type'].replace(';', '%3B')}:{file}")
            procs["hyper"] = start([f"{RELEASE}/baseline", "hyper", f"127.0.0.1:{ports['hyper']}", *specs], ports["hyper"])
            # Bare warp with the same bytes: the floor for anything served through warp.
            ports["warp"] = 18088
            procs["warp"] = start([f"{RELEASE}/baseline", "warp", "127.0.0.1:18088", *specs], 18088)
            for name, header in headers.items():
                for target, port in ports.items():
                    request = urllib.request.Request(f"http://127.0.0.1:{port}{paths[name]}",
                                                     headers=dict([header.split(": ", 1)]))
                    try:
                        urllib.request.urlopen(request)
                        raise RuntimeError(f"{target} answered {name} with 200, not 304")
                    except urllib.error.HTTPError as e:
                        if e.code != 304:
                            raise
            results = {}
            for _ in range(args.rounds):
                for name, path in paths.items():
                    for target, port in ports.items():
                        r = measure(procs[target], port, path, args.seconds, connections=16,
                                    header=headers.get(name))
                        results.setdefault((name, target), []).append(r)
            for (name, target), rs in results.items():
                pairs = zip(rs, results[(name, "hyper")])
                ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
                print(f"| {store} | {name} | {target} | {rate(rs)} | "
                      f"{statistics.median(r['cpu_us'] for r in rs):.1f} | {ratio:.2f}x |")
        finally:
            stop(procs.values())


def beside_baselines(args):
    """Ping and the cached list page beside bare hyper and bare warp serving the same bytes,
    per store; on the memory store also latency at fixed rates and RSS."""
    tmp = tempfile.mkdtemp(prefix="books-load-")
    lua = os.path.join(tmp, "post.lua")
    with open(lua, "w") as f:
        f.write(POST_LUA)
    report = [f"Machine: {os.cpu_count()} cores, `{' '.join(os.uname()[2:3])}`; "
              f"{args.rounds} rounds x {args.seconds}s, wrk -t1 -c32, servers on core 0 "
              "(one runtime thread), load on core 1.", ""]
    for store in args.stores.split(","):
        url = prepare_store(store, tmp)
        procs = {}
        try:
            ours = procs["ours"] = start([SERVER, "--listen", f"127.0.0.1:{PORTS['ours']}",
                                          "--database-url", url], PORTS["ours"])
            specs = save_bodies(PORTS["ours"], tmp)
            for kind in ("hyper", "warp"):
                procs[kind] = start([f"{RELEASE}/baseline", kind, f"127.0.0.1:{PORTS[kind]}", *specs], PORTS[kind])
            results = {}
            for _ in range(args.rounds):
                for name, path in PATHS.items():
                    for target in ("ours", "hyper", "warp"):
                        r = measure(procs[target], PORTS[target], path, args.seconds)
                        results.setdefault((name, target), []).append(r)
                if store != "memory":
                    r = measure(ours, PORTS["ours"], "/api/books", args.seconds, lua)
                    results.setdefault(("create", "ours"), []).append(r)
            report.append(f"### {store}")
            report.append("")
            report.append("| path | target | req/s (median) | CPU µs/req (median) | p50 | p99 | CPU ratio to hyper | to warp |")
            report.append("|---|---|---|---|---|---|---|---|")
            for (name, target), rs in results.items():
                cpu = statistics.median(r["cpu_us"] for r in rs)
                def ratio(base):
                    if (name, base) not in results:
                        return ""
                    pairs = zip(rs, results[(name, base)])
                    return f"{statistics.median(a['cpu_us'] / b['cpu_us'] for a, b in pairs):.2f}x"
                report.append(f"| {name} | {target} | {rate(rs)} | {cpu:.1f} | {rs[-1]['p50']} | "
                              f"{rs[-1]['p99']} | {ratio('hyper')} | {ratio('warp')} |")
            report.append("")
            if store == "memory":
                report.append("| path | target | rate (share of our peak) | p50 ms | p99 ms |")
                report.append("|---|---|---|---|---|")
                for name, path in PATHS.items():
                    peak = statistics.median(r["rps"] for r in results[(name, "ours")])
                    for share in (0.5, 0.8):
                        for target in ("ours", "hyper"):
                            p50, p99 = fixed_rate(PORTS[target], path, peak * share, args.seconds)
                            report.append(f"| {name} | {target} | {share:.0%} ({peak * share:,.0f}/s) | {p50:.2f} | {p99:.2f} |")
                report.append("")
                report.append("| target | RSS idle KiB | after 64 conns | after 1,000 conns |")
                report.append("|---|---|---|---|")
                for target in ("ours", "hyper", "warp"):
                    fresh = start([SERVER, "--listen", "127.0.0.1:18090", "--database-url", "memory"], 18090) \
                        if target == "ours" else \
                        start([f"{RELEASE}/baseline", target, "127.0.0.1:18090", *specs], 18090)
                    idle = rss_kib(fresh.pid)
                    few = open_connections(18090, 64)
                    at64 = rss_kib(fresh.pid)
                    many = open_connections(18090, 936)
                    at1000 = rss_kib(fresh.pid)
                    for s in few + many:
                        s.close()
                    fresh.terminate()
                    fresh.wait()
                    report.append(f"| {target} | {idle:,} | {at64:,} | {at1000:,} |")
                report.append("")
        finally:
            stop(procs.values())
    print("\n".join(report))
