"""Run the fault-injecting Kafka proxy as its own process.

Route mode, for brokers that advertise the proxy's addresses:

    python -m engine.proxy --route 1:127.0.0.1:19092:127.0.0.1:29092 [--route ...] \
        --control 127.0.0.1:PORT --events proxy-events.jsonl [--parent-pid PID]

Rewrite mode, for any cluster: one bootstrap listener, and broker addresses in Metadata,
FindCoordinator and DescribeCluster responses rewritten to per-node listeners opened on demand:

    python -m engine.proxy --bootstrap-upstream HOST:PORT[,HOST:PORT] --listen-host 127.0.0.1 \
        --control 127.0.0.1:PORT --events proxy-events.jsonl [--parent-pid PID]

Once listening it prints one JSON line to stdout with the bound addresses.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence

from engine.proxy.control import start_control_server
from engine.proxy.server import Proxy, Route, log


def _host_port(spec: str) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {spec!r}")
    try:
        return host, int(port)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad port in {spec!r}") from e


def _route(spec: str) -> Route:
    try:
        return Route.parse(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _host_ports(spec: str) -> list[tuple[str, int]]:
    parts = [s.strip() for s in spec.split(",") if s.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("want HOST:PORT[,HOST:PORT...]")
    return [_host_port(s) for s in parts]


def _port(spec: str) -> int:
    try:
        port = int(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad port {spec!r}") from e
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {port}")
    return port


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.proxy", description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--route",
        type=_route,
        action="append",
        metavar="NODE:LISTEN_HOST:LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT",
        help="route mode: one per broker node",
    )
    mode.add_argument(
        "--bootstrap-upstream",
        type=_host_ports,
        metavar="HOST:PORT[,HOST:PORT]",
        help="rewrite mode: the cluster's bootstrap servers",
    )
    p.add_argument(
        "--listen-host",
        default="127.0.0.1",
        help="rewrite mode: host the bootstrap and per-node listeners bind (default 127.0.0.1)",
    )
    p.add_argument(
        "--advertise-host",
        default=None,
        help="rewrite mode: host written into rewritten responses (default: --listen-host)",
    )
    p.add_argument(
        "--bootstrap-listen-port",
        type=_port,
        default=0,
        help="rewrite mode: port of the bootstrap listener (default: a free one)",
    )
    p.add_argument(
        "--control", type=_host_port, required=True, metavar="HOST:PORT", help="control channel"
    )
    p.add_argument("--events", default=None, help="JSONL file the fault events are appended to")
    p.add_argument("--parent-pid", type=int, default=None, help="exit once this process is gone")
    p.add_argument(
        "--connect-timeout", type=float, default=5.0, help="upstream connect timeout, seconds"
    )
    args = p.parse_args(argv)
    if args.route is not None:
        given = [
            f"--{name.replace('_', '-')}"
            for name in ("listen_host", "advertise_host", "bootstrap_listen_port")
            if getattr(args, name) != p.get_default(name)
        ]
        if given:
            p.error(f"{', '.join(given)} apply only with --bootstrap-upstream")
    return args


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, just not ours
    return True


async def _watch_parent(pid: int, stop: asyncio.Event) -> None:
    while _process_exists(pid):
        await asyncio.sleep(1.0)
    log(f"parent process {pid} is gone; exiting")
    stop.set()


async def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT (or the parent process disappears)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ctl_host, ctl_port = args.control
    proxy = Proxy(
        args.route or (),
        args.events,
        connect_timeout=args.connect_timeout,
        bootstrap=args.bootstrap_upstream or (),
        listen_host=args.listen_host,
        advertise_host=args.advertise_host,
        bootstrap_listen_port=args.bootstrap_listen_port,
    )
    try:
        control = await start_control_server(proxy, ctl_host, ctl_port)
        ctl_addr = control.sockets[0].getsockname()[:2]
        await proxy.start(control=f"{ctl_addr[0]}:{ctl_addr[1]}")
    except OSError as e:
        log(f"cannot listen: {e}")
        return 1
    ready: dict[str, object] = {
        "pid": os.getpid(),
        "control": f"{ctl_addr[0]}:{ctl_addr[1]}",
        "nodes": {str(n): "{}:{}".format(*proxy.address(n)) for n in proxy.routes},
    }
    if proxy.rewriting:
        ready["mode"] = "rewrite"
        ready["bootstrap"] = proxy.bootstrap_address()
    print(json.dumps(ready), flush=True)
    watcher = None
    if args.parent_pid is not None:
        watcher = asyncio.create_task(_watch_parent(args.parent_pid, stop))
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    control.close()
    await proxy.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
