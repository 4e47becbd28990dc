#!/usr/bin/env python3
"""Load runs over loopback: the server beside the floors (bare hyper and bare warp answering
the same bytes) and beside a hand-written axum + sqlx server.

    python3 scripts/load.py [--rounds 3] [--seconds 5] [--stores memory,sqlite,postgres]
    python3 scripts/load.py --bindings [--rounds 3] [--seconds 5]
    python3 scripts/load.py --metrics-cost [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --shedding [--books 200000] [--seconds 5]
    python3 scripts/load.py --cache [--stores sqlite,postgres] [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --create-costs [--stores sqlite,postgres,mysql] [--books 1000] [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --versus [--stores sqlite,postgres,mysql] [--books 1000] [--rounds 3] [--seconds 5] [--push] [--cache-off] [--before OLD_BINARY]
    python3 scripts/load.py --cache-memory [--books 1000000]
    python3 scripts/load.py --instructions [--stores memory,sqlite,postgres,mysql] [--workloads ping,list,get,304] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --pooler [--rounds 3] [--seconds 5]
    python3 scripts/load.py --replicas [--stores postgres,mysql] [--rounds 3] [--seconds 5]
    python3 scripts/load.py --edge [--rounds 3] [--seconds 5]
    python3 scripts/load.py --http2 [--stores memory,sqlite] [--rounds 3] [--seconds 5] [--before OLD_BINARY]
    python3 scripts/load.py --failover [--events pg-switchover,pg-kill,galera-kill] [--seconds 60] [--before OLD_BINARY]
    python3 scripts/load.py --galera-reads [--rounds 3] [--seconds 5]
    python3 scripts/load.py --traces [--rounds 3] [--seconds 5]

Builds the release binaries, installs wrk (apt) and oha (cargo) if missing, pins every
server to core 0 with one runtime thread (TOKIO_WORKER_THREADS=1) and the load
generator to core 1, and interleaves targets within each round. Prints a Markdown
report. Everything stays on 127.0.0.1 and every run is bounded. What each mode measures
is said in its module under `scripts/loadrun/`.
"""

import argparse
import sys

from loadrun.baselines import beside_baselines, bindings, cache_compare, metrics_cost
from loadrun.create_costs import create_costs
from loadrun.edge import edge
from loadrun.failover import failover
from loadrun.galera_reads import galera_reads
from loadrun.harness import ensure_tools
from loadrun.http2 import http2
from loadrun.instructions import instructions
from loadrun.scale_out import pooler, replicas
from loadrun.shedding import shedding
from loadrun.traces import traces
from loadrun.versus import cache_memory, versus


# Each mode's flag (argparse's name for it) and its run; the first flag given wins.
MODES = {
    "pooler": pooler,
    "replicas": replicas,
    "edge": edge,
    "http2": http2,
    "failover": failover,
    "galera_reads": galera_reads,
    "instructions": instructions,
    "traces": traces,
    "cache_memory": cache_memory,
    "versus": versus,
    "create_costs": create_costs,
    "cache": cache_compare,
    "bindings": bindings,
    "metrics_cost": metrics_cost,
    "shedding": shedding,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    parser.add_argument("--bindings", action="store_true")
    parser.add_argument("--metrics-cost", action="store_true")
    parser.add_argument("--shedding", action="store_true")
    parser.add_argument("--cache", action="store_true")
    parser.add_argument("--versus", action="store_true")
    parser.add_argument("--create-costs", action="store_true")
    parser.add_argument("--cache-memory", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--traces", action="store_true")
    parser.add_argument("--pooler", action="store_true")
    parser.add_argument("--replicas", action="store_true")
    parser.add_argument("--edge", action="store_true")
    parser.add_argument("--http2", action="store_true")
    parser.add_argument("--failover", action="store_true")
    parser.add_argument("--galera-reads", action="store_true")
    parser.add_argument("--events", help="--failover: of pg-switchover,pg-kill,galera-kill")
    parser.add_argument("--push", action="store_true", help="--versus: our server in PostgreSQL push mode")
    parser.add_argument("--cache-off", action="store_true", help="--versus: our server without its cache")
    parser.add_argument("--workloads", help="--versus: only these, by first word (ping,list,get,creates,mixed); "
                        "--instructions: of ping,list,get,304")
    parser.add_argument("--books", type=int, default=200_000)
    parser.add_argument("--before", help="--metrics-cost, --instructions, --cache, --versus, --http2, --failover: an older server binary to run beside")
    args = parser.parse_args()
    if args.replicas and args.stores == parser.get_default("stores"):
        args.stores = "postgres"
    if args.instructions and args.stores == parser.get_default("stores"):
        args.stores = "memory,sqlite,postgres,mysql"
    if args.failover and args.seconds == parser.get_default("seconds"):
        args.seconds = 60
    chosen = [run for flag, run in MODES.items() if getattr(args, flag)]
    ensure_tools(fixed_rate=not chosen)
    return (chosen[0] if chosen else beside_baselines)(args)


if __name__ == "__main__":
    sys.exit(main())
