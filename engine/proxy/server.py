"""The asyncio TCP proxy: one listener per broker, Kafka-aware forwarding, fault injection.

Each accepted client connection gets its own upstream connection and two one-way pipes. A pipe
is a reader task (split frames, decide, stamp a release time) and a writer task (wait for the
release time and for any blackhole to end, then write), joined by a FIFO queue, so latency and
partitions never reorder frames within a connection.

Two modes. With routes, the brokers already advertise the proxy's listeners. In rewrite mode
(for a cluster the lab does not configure) there is one bootstrap listener; every Metadata,
FindCoordinator and DescribeCluster response (and the leader hints of Produce/Fetch responses)
is rewritten so each broker it names points at a listener of the proxy, opened for that node id
the first time it is seen. See rewrite.py for the codecs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from engine.kafka.wire import FrameError, FrameSplitter, encode_frame
from engine.model.events import ProxyRecord
from engine.proxy.framing import (
    END_TXN,
    OFFSET_COMMIT,
    PRODUCE,
    api_name,
    parse_produce_acks,
    parse_request_header,
    produce_response_errors,
    response_correlation_id,
)
from engine.proxy.rewrite import (
    API_VERSIONS,
    MAX_VERSIONS,
    REWRITE_APIS,
    UnsupportedResponse,
    cap_api_versions,
    decode_response,
    may_carry_addresses,
    rewrite_addresses,
)
from engine.proxy.rules import THEN_CHOICES, DropRule, Latency, RuleError, RuleSet

CHUNK = 64 * 1024
QUEUE_FRAMES = 1024  # per direction; bounds memory when a writer is held back (latency)
_LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, timeout 0: close() sends RST
BOOTSTRAP = -1  # the "node" of rewrite mode's bootstrap listener (clients use -1 there too)

# Requests to a coordinator whose answer (or the request itself) a rule may lose, besides
# Produce: a consumer's offset commit, and a transactional producer's commit or abort.
COORDINATOR_APIS = {OFFSET_COMMIT: "offset_commit", END_TXN: "end_txn"}


def log(msg: str) -> None:
    """Diagnostics go to stderr; the events file is for facts the lab shows."""
    print(f"[proxy] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Route:
    """One broker: where the proxy listens for it and where the broker really is."""

    node: int
    listen_host: str
    listen_port: int
    upstream_host: str
    upstream_port: int

    @classmethod
    def parse(cls, spec: str) -> Route:
        """Parse NODE_ID:LISTEN_HOST:LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT (no IPv6)."""
        parts = spec.split(":")
        if len(parts) != 5:
            raise ValueError(
                f"bad route {spec!r}: want NODE:LISTEN_HOST:LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT"
            )
        try:
            return cls(int(parts[0]), parts[1], int(parts[2]), parts[3], int(parts[4]))
        except ValueError as e:
            raise ValueError(f"bad route {spec!r}: node and ports must be integers") from e


class EventLog:
    """Append-only JSONL file of everything the proxy did, one flushed object per line."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._file: TextIO | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def emit(self, kind: str, node: int | None = None, **detail: Any) -> dict[str, Any]:
        event: dict[str, Any] = {"ts": time.time(), "kind": kind, "node": node, **detail}
        if self._file is not None:
            self._file.write(json.dumps(event, default=str) + "\n")
            self._file.flush()
        return event

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class NodeStats:
    """Counters per node since the proxy started."""

    connections_accepted: int = 0
    produce_requests: int = 0  # acks != 0, i.e. the ones rules may target
    produce_requests_acks0: int = 0
    responses_dropped: int = 0
    connections_reset: int = 0
    connections_held: int = 0
    upstream_connect_failures: int = 0


@dataclass
class Inflight:
    """A request forwarded upstream whose response has not come back yet."""

    correlation_id: int
    api_key: int
    api_version: int
    client_id: str | None
    ts: float
    acks: int | None = None
    transactional_id: str | None = None
    drop_rule: DropRule | None = None

    @property
    def rule_id(self) -> int | None:
        return self.drop_rule.rule_id if self.drop_rule is not None else None


@dataclass
class _Item:
    release: float  # loop.time() at which it may be written
    payload: bytes | None  # None: the source side closed
    drop: Inflight | None = None  # a response to swallow instead of writing


@dataclass
class Blackhole:
    """An active partition for one node (or all nodes when node is None)."""

    node: int | None
    then: str
    started_ts: float
    ends_ts: float
    handle: asyncio.TimerHandle | None = None
    conns: set[Connection] = field(default_factory=set)

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "node": self.node,
            "then": self.then,
            "started_ts": self.started_ts,
            "ends_ts": self.ends_ts,
            "remaining_s": max(0.0, self.ends_ts - now),
            "connections": len(self.conns),
        }


class Connection:
    """One proxied client connection and its upstream twin."""

    def __init__(
        self,
        proxy: Proxy,
        route: Route,
        conn_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.proxy = proxy
        self.route = route
        self.node = route.node
        self.conn_id = conn_id
        self.client_reader = reader
        self.client_writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.up_reader: asyncio.StreamReader | None = None
        self.up_writer: asyncio.StreamWriter | None = None
        self.client_id: str | None = None
        self.inflight: dict[int, Inflight] = {}
        self.held = False
        self.closed = False
        self.task: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self._to_upstream: asyncio.Queue[_Item] = asyncio.Queue(QUEUE_FRAMES)
        self._to_client: asyncio.Queue[_Item] = asyncio.Queue(QUEUE_FRAMES)

    def _detail(self) -> dict[str, Any]:
        return {"conn": self.conn_id, "peer": self.peer, "client_id": self.client_id}

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        try:
            # During a blackhole a new connection is accepted but not connected upstream.
            if not await self._wait_gate() or not await self._connect_upstream():
                return
            tasks = [
                asyncio.create_task(self._guard(self._read_client())),
                asyncio.create_task(self._guard(self._write_upstream())),
                asyncio.create_task(self._guard(self._read_upstream())),
                asyncio.create_task(self._guard(self._write_client())),
            ]
            await self._done.wait()
        finally:
            self.closed = True
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.client_writer.close()
            if self.up_writer is not None:
                self.up_writer.close()

    async def _wait_gate(self) -> bool:
        """Wait until this node is not blackholed; False if the connection closed meanwhile."""
        gate = self.proxy.gate(self.node)
        if not gate.is_set():
            waiters = {asyncio.create_task(gate.wait()), asyncio.create_task(self._done.wait())}
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for p in pending:
                p.cancel()
        return not self.closed

    async def _connect_upstream(self) -> bool:
        """Connect to the node's broker (the bootstrap listener tries each upstream in turn)."""
        for host, port in self.proxy.upstreams(self.node):
            try:
                self.up_reader, self.up_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), self.proxy.connect_timeout
                )
            except (OSError, TimeoutError) as e:
                self.proxy.stats[self.node].upstream_connect_failures += 1
                log(f"node {self.node}: upstream {host}:{port} unreachable ({e!r})")
                continue
            return not self.closed
        log(f"node {self.node} conn {self.conn_id}: no upstream reachable; closing client")
        return False

    async def _guard(self, pump: Coroutine[Any, Any, None]) -> None:
        """Run one pump; any I/O or framing failure ends the whole connection."""
        try:
            await pump
        except (OSError, EOFError, FrameError) as e:
            if not self.closed:
                log(f"node {self.node} conn {self.conn_id}: closing after {e!r}")
            self.close()
        except Exception as e:  # a bug must cost one connection, never the proxy
            log(f"node {self.node} conn {self.conn_id}: unexpected {e!r}")
            self.close()

    def close(self) -> None:
        """Ask run() to close both sides normally."""
        self.closed = True
        self._done.set()

    def reset(self, reason: str, **detail: Any) -> bool:
        """Abort the client side with an RST and close upstream; False if already closed."""
        if self.closed:
            return False
        sock = self.client_writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        self.client_writer.transport.abort()
        if self.up_writer is not None:
            self.up_writer.close()
        self.proxy.stats[self.node].connections_reset += 1
        self.proxy.events.emit(
            ProxyRecord.CONNECTION_RESET, self.node, reason=reason, **self._detail(), **detail
        )
        self.close()
        return True

    def hold(self, **detail: Any) -> None:
        """From now on forward nothing on this connection, in either direction."""
        if self.held or self.closed:
            return
        self.held = True
        self.inflight.clear()
        self.proxy.stats[self.node].connections_held += 1
        self.proxy.events.emit(ProxyRecord.CONNECTION_HELD, self.node, **self._detail(), **detail)

    # -- pumps ---------------------------------------------------------------------------------

    async def _read_client(self) -> None:
        splitter = FrameSplitter()
        while True:
            await self.proxy.gate(self.node).wait()
            data = await self.client_reader.read(CHUNK)
            if not data:
                await self._to_upstream.put(_Item(0.0, None))
                return
            if self.held:
                continue  # the "network" eats it; reading on lets us notice the client leave
            for payload in splitter.feed(data):
                item = self._on_request(payload)
                if item is not None:
                    await self._to_upstream.put(item)

    def _on_request(self, payload: bytes) -> _Item | None:
        """Track a request by correlation id and let the rules decide about its response."""
        item = _Item(self.proxy.release_time(self.node), payload)
        try:
            header = parse_request_header(payload)
        except FrameError:
            return item  # not a request we understand: forward untouched, untracked
        self.client_id = header.client_id
        now = time.time()
        info = Inflight(
            header.correlation_id, header.api_key, header.api_version, header.client_id, now
        )
        if header.api_key in COORDINATOR_APIS:
            api = COORDINATOR_APIS[header.api_key]
            info.drop_rule = self.proxy.rules.evaluate(self.node, header.client_id, now, api)
            if info.drop_rule is not None and info.drop_rule.drop == "request":
                self._drop_request(info)
                return None  # never forwarded, never answered: the client times it out
        if header.api_key == PRODUCE:
            stats = self.proxy.stats[self.node]
            try:
                produce = parse_produce_acks(payload, header)
            except FrameError:
                produce = None
            if produce is not None:
                info.acks, info.transactional_id = produce.acks, produce.transactional_id
                if produce.acks == 0:
                    stats.produce_requests_acks0 += 1
                    return item  # acks=0 gets no response: never tracked or targeted
                stats.produce_requests += 1
                info.drop_rule = self.proxy.rules.evaluate(self.node, header.client_id, now)
                if info.drop_rule is not None and info.drop_rule.drop == "request":
                    self._drop_request(info)
                    return None  # never forwarded, never answered: the client times it out
        self.inflight[header.correlation_id] = info
        return item

    def _drop_request(self, info: Inflight) -> None:
        """Lose a request as a network path that goes down loses it: nothing behind it arrives.

        TCP delivers a connection's bytes in order, so the requests behind a lost one never
        reach the broker either. One lost segment would be retransmitted within about a
        second; a path that stays down (a partition) keeps everything behind it back until
        the client gives up on the connection (socket.timeout.ms) and retries on a new one,
        in order. So the proxy holds the connection from the lost request on, instead of
        forwarding what follows (which would be a reordering no network can cause).
        """
        rule = info.drop_rule
        assert rule is not None
        self.proxy.events.emit(
            f"{rule.api}_request_dropped",
            self.node,
            **self._detail(),
            rule_id=rule.rule_id,
            correlation_id=info.correlation_id,
            api_version=info.api_version,
            acks=info.acks,
            transactional_id=info.transactional_id,
        )
        self.hold(rule_id=rule.rule_id, correlation_id=info.correlation_id)

    async def _read_upstream(self) -> None:
        assert self.up_reader is not None
        splitter = FrameSplitter()
        while True:
            await self.proxy.gate(self.node).wait()
            data = await self.up_reader.read(CHUNK)
            if not data:
                await self._to_client.put(_Item(0.0, None))
                return
            for payload in splitter.feed(data):
                info: Inflight | None = None
                with contextlib.suppress(FrameError):
                    info = self.inflight.pop(response_correlation_id(payload), None)
                if info is not None and info.api_key == PRODUCE:
                    self._note_produce_errors(info, payload)
                if info is not None and self.proxy.rewriting:
                    payload = await self.proxy.rewrite_response(self, info, payload)
                drop = info if info is not None and info.drop_rule is not None else None
                await self._to_client.put(_Item(self.proxy.release_time(self.node), payload, drop))

    async def _next(self, queue: asyncio.Queue[_Item]) -> _Item:
        """Next item once its latency has elapsed and no blackhole blocks this node."""
        item = await queue.get()
        delay = item.release - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)
        await self.proxy.gate(self.node).wait()
        return item

    async def _write_upstream(self) -> None:
        assert self.up_writer is not None
        while True:
            item = await self._next(self._to_upstream)
            if item.payload is None:
                self.close()
                return
            if self.held:
                continue
            self.up_writer.write(encode_frame(item.payload))
            await self.up_writer.drain()

    async def _write_client(self) -> None:
        while True:
            item = await self._next(self._to_client)
            if item.payload is None:
                if self.held:  # the client must not notice: just let go of the broker side
                    if self.up_writer is not None:
                        self.up_writer.close()
                    return
                self.close()
                return
            if self.held:
                continue
            if item.drop is not None and self.proxy.rules.rules.get(item.drop.rule_id) is not None:
                self._drop_response(item.drop)  # (a rule removed meanwhile drops nothing more)
                continue
            self.client_writer.write(encode_frame(item.payload))
            await self.client_writer.drain()

    def _note_produce_errors(self, info: Inflight, payload: bytes) -> None:
        """Record each partition error the broker answered a Produce request with.

        The client may retry such an error without telling the application (librdkafka does
        for REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS): the proxy's record is how a run shows
        what the broker said.
        """
        try:
            errors = produce_response_errors(payload, info.api_version)
        except FrameError:
            return  # a layout we do not know: forwarded untouched, unrecorded
        for error in errors:
            self.proxy.events.emit(
                ProxyRecord.PRODUCE_ERROR,
                self.node,
                **self._detail(),
                correlation_id=info.correlation_id,
                api_version=info.api_version,
                topic=error.topic,
                partition=error.partition,
                error=error.error_name,
                error_code=error.error_code,
                waited_ms=round((time.time() - info.ts) * 1000.0, 1),
            )

    def _drop_response(self, info: Inflight) -> None:
        rule = info.drop_rule
        assert rule is not None
        self.proxy.stats[self.node].responses_dropped += 1
        detail = {
            "rule_id": rule.rule_id,
            "after": rule.after,
            "correlation_id": info.correlation_id,
            "api_version": info.api_version,
            "acks": info.acks,
            "transactional_id": info.transactional_id,
            "request_ts": info.ts,
        }
        event = f"{rule.api}_response_dropped"
        self.proxy.events.emit(event, self.node, **self._detail(), **detail)
        cause = {"rule_id": rule.rule_id, "correlation_id": info.correlation_id}
        if rule.after == "hold":
            self.hold(**cause)
        else:
            self.reset(event, **cause)


class Proxy:
    """All listeners, connections, rules and fault state. Methods run on the event loop."""

    def __init__(
        self,
        routes: Sequence[Route] = (),
        events_path: str | os.PathLike[str] | None = None,
        *,
        connect_timeout: float = 5.0,
        bootstrap: Sequence[tuple[str, int]] = (),
        listen_host: str = "127.0.0.1",
        advertise_host: str | None = None,
        bootstrap_listen_port: int = 0,
    ) -> None:
        """Route mode: `routes`. Rewrite mode: `bootstrap` upstreams (HOST, PORT) instead.

        In rewrite mode the bootstrap listener binds `listen_host`:`bootstrap_listen_port`,
        discovered brokers get listeners on free ports of `listen_host`, and responses name
        `advertise_host` (default: `listen_host`) as their host.
        """
        nodes = [r.node for r in routes]
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"duplicate node ids in routes: {nodes}")
        if bool(routes) == bool(bootstrap):
            raise ValueError("give either routes or bootstrap upstreams (rewrite mode)")
        if any(n < 0 for n in nodes):
            raise ValueError(f"node ids must be >= 0: {nodes}")
        self.routes = {r.node: r for r in routes}
        self.rewriting = bool(bootstrap)
        self.bootstrap_upstreams = [(h, int(p)) for h, p in bootstrap]
        self.listen_host = listen_host
        self.advertise_host = advertise_host or listen_host
        self.bootstrap_route: Route | None = None
        if self.rewriting:
            first = self.bootstrap_upstreams[0]
            self.bootstrap_route = Route(BOOTSTRAP, listen_host, bootstrap_listen_port, *first)
        self.events = EventLog(events_path)
        self.connect_timeout = connect_timeout
        self.rules = RuleSet()
        self.stats: dict[int, NodeStats] = {}
        self.conns: dict[int, set[Connection]] = {}
        self.latency: dict[int | None, Latency] = {}
        self.blackholes: dict[int | None, Blackhole] = {}
        self._gates: dict[int, asyncio.Event] = {}
        for n in [*self.routes, *([BOOTSTRAP] if self.rewriting else [])]:
            self._add_node_state(n)
        self._servers: dict[int, asyncio.Server] = {}
        self._rng = random.Random()
        self._next_conn_id = 1
        self._next_bootstrap = 0
        self._discovery = asyncio.Lock()
        self._rewrite_warned: set[tuple[int, int]] = set()

    def _add_node_state(self, node: int) -> None:
        self.stats[node] = NodeStats()
        self.conns[node] = set()
        self._gates[node] = asyncio.Event()
        self._update_gates()  # a blackhole may already target this node

    # -- lifecycle -----------------------------------------------------------------------------

    async def _listen(self, route: Route) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept(route, reader, writer)

        self._servers[route.node] = await asyncio.start_server(
            accept, route.listen_host, route.listen_port
        )

    async def start(self, **started_detail: Any) -> None:
        """Open every listener; raises OSError if a port is taken."""
        for route in self.routes.values():
            await self._listen(route)
        if self.bootstrap_route is not None:
            await self._listen(self.bootstrap_route)
        for node, route in self.routes.items():
            host, port = self.address(node)
            self.events.emit(
                ProxyRecord.PROXY_STARTED,
                node,
                listen=f"{host}:{port}",
                upstream=f"{route.upstream_host}:{route.upstream_port}",
                pid=os.getpid(),
                **started_detail,
            )
        if self.bootstrap_route is not None:
            host, port = self.address(BOOTSTRAP)
            self.events.emit(
                ProxyRecord.PROXY_STARTED,
                None,
                mode="rewrite",
                listen=f"{host}:{port}",
                bootstrap=self.bootstrap_address(),
                upstream=",".join(f"{h}:{p}" for h, p in self.bootstrap_upstreams),
                pid=os.getpid(),
                **started_detail,
            )

    def address(self, node: int) -> tuple[str, int]:
        """The (host, port) actually bound for a node (useful with port 0)."""
        host, port = self._servers[node].sockets[0].getsockname()[:2]
        return host, port

    def bootstrap_address(self) -> str:
        """Rewrite mode: the HOST:PORT clients bootstrap from (the advertised host)."""
        if not self.rewriting:
            raise RuntimeError("no bootstrap listener: the proxy is not in rewrite mode")
        return f"{self.advertise_host}:{self.address(BOOTSTRAP)[1]}"

    def upstreams(self, node: int) -> list[tuple[str, int]]:
        """Where a new connection of `node` goes; the bootstrap rotates over its upstreams."""
        if node == BOOTSTRAP:
            ups = self.bootstrap_upstreams
            start = self._next_bootstrap % len(ups)
            self._next_bootstrap += 1
            return ups[start:] + ups[:start]
        route = self.routes[node]
        return [(route.upstream_host, route.upstream_port)]

    async def stop(self) -> None:
        """Close listeners and connections (gracefully, no fault actions)."""
        for server in list(self._servers.values()):
            server.close()
        for bh in self.blackholes.values():
            if bh.handle is not None:
                bh.handle.cancel()
        self.blackholes.clear()
        self._update_gates()
        conns = [c for cs in self.conns.values() for c in cs]
        for c in conns:
            c.close()
        tasks = [c.task for c in conns if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        for server in list(self._servers.values()):
            await server.wait_closed()
        self.events.close()

    async def _accept(
        self, route: Route, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        conn = Connection(self, route, self._next_conn_id, reader, writer)
        self._next_conn_id += 1
        conn.task = asyncio.current_task()
        self.stats[route.node].connections_accepted += 1
        self.conns[route.node].add(conn)
        for bh in self.blackholes.values():
            if bh.node is None or bh.node == route.node:
                bh.conns.add(conn)
        try:
            await conn.run()
        except Exception as e:  # keep asyncio's accept loop free of stray tracebacks
            log(f"node {route.node} conn {conn.conn_id}: {e!r}")
        finally:
            self.conns[route.node].discard(conn)
            for bh in self.blackholes.values():
                bh.conns.discard(conn)

    # -- rewrite mode --------------------------------------------------------------------------

    async def rewrite_response(self, conn: Connection, info: Inflight, payload: bytes) -> bytes:
        """Point the broker addresses in a response at this proxy (others pass unchanged)."""
        if info.api_key == API_VERSIONS:
            return cap_api_versions(info.api_version, payload, MAX_VERSIONS)
        if not may_carry_addresses(info.api_key, info.api_version):
            return payload
        try:
            decoded = decode_response(info.api_key, info.api_version, payload)
        except FrameError as e:
            # Forwarded as is, the client may now bypass the proxy: make that visible (once per
            # api version for Produce/Fetch, which are many and rarely hold an address).
            what = (info.api_key, info.api_version)
            unsupported = isinstance(e, UnsupportedResponse)
            if info.api_key in REWRITE_APIS or what not in self._rewrite_warned:
                self._rewrite_warned.add(what)
                log(f"node {conn.node} conn {conn.conn_id}: cannot rewrite {e!r}")
                self.events.emit(
                    ProxyRecord.REWRITE_FAILED,
                    conn.node,
                    api=api_name(info.api_key),
                    api_version=info.api_version,
                    correlation_id=info.correlation_id,
                    unsupported_version=unsupported,
                    error=str(e),
                    **conn._detail(),
                )
            return payload
        addresses: dict[int, tuple[str, int]] = {}
        for ep in decoded.endpoints():
            if ep.node_id < 0 or not ep.host or ep.port <= 0:
                continue  # "no coordinator" answers carry node -1, host "", port -1
            if ep.node_id not in addresses:
                addresses[ep.node_id] = await self.ensure_node(
                    ep.node_id, ep.host, ep.port, via=api_name(info.api_key)
                )
        if not rewrite_addresses(decoded, addresses):
            return payload  # nothing to change (e.g. a Fetch without leader hints)
        return decoded.encode()

    async def ensure_node(self, node: int, host: str, port: int, via: str = "?") -> tuple[str, int]:
        """The advertised (host, port) for a broker, opening its listener on first sight."""
        async with self._discovery:
            route = self.routes.get(node)
            if route is None:
                self._add_node_state(node)
                route = Route(node, self.listen_host, 0, host, port)
                await self._listen(route)
                lhost, lport = self.address(node)
                self.routes[node] = replace(route, listen_port=lport)
                self.events.emit(
                    ProxyRecord.BROKER_DISCOVERED,
                    node,
                    upstream=f"{host}:{port}",
                    listen=f"{lhost}:{lport}",
                    advertised=f"{self.advertise_host}:{lport}",
                    via=via,
                )
                log(f"node {node}: {host}:{port} is proxied on {lhost}:{lport}")
            elif (route.upstream_host, route.upstream_port) != (host, port):
                old = f"{route.upstream_host}:{route.upstream_port}"
                self.routes[node] = replace(route, upstream_host=host, upstream_port=port)
                self.events.emit(
                    ProxyRecord.BROKER_ADDRESS_CHANGED,
                    node,
                    old_upstream=old,
                    upstream=f"{host}:{port}",
                )
            return self.advertise_host, self.address(node)[1]

    # -- helpers used by connections -----------------------------------------------------------

    def gate(self, node: int) -> asyncio.Event:
        """Set while the node is not blackholed."""
        return self._gates[node]

    def release_time(self, node: int) -> float:
        """When a frame read now may be written, given the node's latency."""
        lat = self.latency.get(node) or self.latency.get(None)
        now = asyncio.get_running_loop().time()
        return now + lat.sample(self._rng) if lat is not None else now

    def _update_gates(self) -> None:
        for node, gate in self._gates.items():
            if None in self.blackholes or node in self.blackholes:
                gate.clear()
            else:
                gate.set()

    def _check_node(self, node: int | None) -> None:
        if self.rewriting:
            return  # brokers are discovered as clients ask: any node id may still appear
        if node is not None and node not in self.routes:
            raise RuleError(f"unknown node {node}; known: {sorted(self.routes)}")

    def _open_conns(self, node: int | None) -> list[Connection]:
        return [
            c
            for n, cs in self.conns.items()
            if node is None or n == node
            for c in cs
            if not c.closed
        ]

    # -- commands ------------------------------------------------------------------------------

    def add_drop_rule(self, **params: Any) -> DropRule:
        """Add a drop_produce_responses rule (see rules.DropRule); RuleError if invalid."""
        rule = self.rules.add(**params)
        try:
            self._check_node(rule.node)
        except RuleError:
            self.rules.remove(rule.rule_id)
            raise
        return rule

    def remove_rule(self, rule_id: int) -> bool:
        return self.rules.remove(rule_id)

    def clear(self) -> dict[str, Any]:
        """Remove every rule and the latency, and end blackholes (with their `then`)."""
        rules = self.rules.clear()
        latency = bool(self.latency)
        self.latency.clear()
        healed = self.heal()
        self.events.emit(
            ProxyRecord.RULES_CLEARED,
            None,
            rules=rules,
            latency_removed=latency,
            blackholes_ended=healed,
        )
        return {"rules_removed": rules, "latency_removed": latency, "blackholes_ended": healed}

    def set_latency(self, ms: float, jitter_ms: float = 0.0, node: int | None = None) -> None:
        """One-way delay for frames in both directions; ms <= 0 removes it."""
        self._check_node(node)
        if ms < 0 or jitter_ms < 0:
            raise RuleError("ms and jitter_ms must be >= 0")
        if ms == 0 and jitter_ms == 0:
            self.latency.pop(node, None)
        else:
            self.latency[node] = Latency(ms, jitter_ms)
        self.events.emit(ProxyRecord.LATENCY_SET, node, ms=ms, jitter_ms=jitter_ms)

    def blackhole(self, duration_s: float, node: int | None = None, then: str = "flush") -> None:
        """Partition a node (or everything) for duration_s; a repeat call re-arms the timer."""
        self._check_node(node)
        if not duration_s > 0:
            raise RuleError(f"duration_s must be > 0, got {duration_s}")
        if then not in THEN_CHOICES:
            raise RuleError(f"then must be one of {THEN_CHOICES}, got {then!r}")
        now = time.time()
        bh = self.blackholes.get(node)
        if bh is None:
            bh = Blackhole(node, then, now, now + duration_s, conns=set(self._open_conns(node)))
            self.blackholes[node] = bh
        elif bh.handle is not None:
            bh.handle.cancel()
        bh.then, bh.ends_ts = then, now + duration_s
        loop = asyncio.get_running_loop()
        bh.handle = loop.call_later(duration_s, self._end_blackhole, node, "expired")
        self._update_gates()
        self.events.emit(
            ProxyRecord.BLACKHOLE_START,
            node,
            duration_s=duration_s,
            then=then,
            connections=len(bh.conns),
        )

    def heal(self, node: int | None = None) -> int:
        """End blackholes early (all, or the one for `node`); returns how many ended."""
        keys = list(self.blackholes) if node is None else [node]
        return sum(self._end_blackhole(k, "healed") for k in keys)

    def _end_blackhole(self, key: int | None, reason: str) -> bool:
        bh = self.blackholes.get(key)
        if bh is None:
            return False
        if bh.handle is not None:
            bh.handle.cancel()
        reset = 0
        if bh.then == "reset":  # before the gate opens, so no buffered byte slips through
            reset = sum(c.reset("blackhole_end") for c in list(bh.conns))
        del self.blackholes[key]
        self._update_gates()
        self.events.emit(
            ProxyRecord.BLACKHOLE_END,
            key,
            then=bh.then,
            reason=reason,
            duration_s=time.time() - bh.started_ts,
            connections_reset=reset,
        )
        return True

    def reset_connections(self, node: int | None = None) -> int:
        """RST every open client connection (of one node); returns how many."""
        self._check_node(node)
        return sum(c.reset("reset_connections") for c in self._open_conns(node))

    def _node_status(self, node: int, upstream: str) -> dict[str, Any]:
        open_conns = self._open_conns(node)
        lat = self.latency.get(node) or self.latency.get(None)
        listen = "{}:{}".format(*self.address(node)) if node in self._servers else None
        out: dict[str, Any] = {"listen": listen}
        if self.rewriting and node in self._servers:
            out["advertised"] = f"{self.advertise_host}:{self.address(node)[1]}"
        return {
            **out,
            "upstream": upstream,
            "open_connections": len(open_conns),
            "held_connections": sum(c.held for c in open_conns),
            "in_flight": sum(len(c.inflight) for c in open_conns),
            "blackholed": not self._gates[node].is_set(),
            "latency_ms": lat.ms if lat else 0.0,
            "jitter_ms": lat.jitter_ms if lat else 0.0,
            **asdict(self.stats[node]),
        }

    def status(self) -> dict[str, Any]:
        now = time.time()
        nodes: dict[str, Any] = {}
        for node in sorted(self.routes):
            route = self.routes[node]
            nodes[str(node)] = self._node_status(
                node, f"{route.upstream_host}:{route.upstream_port}"
            )
        extra: dict[str, Any] = {"mode": "rewrite" if self.rewriting else "routes"}
        if self.rewriting:
            ups = ",".join(f"{h}:{p}" for h, p in self.bootstrap_upstreams)
            extra["bootstrap"] = self._node_status(BOOTSTRAP, ups)
        return {
            **extra,
            "nodes": nodes,
            "rules": [r.to_dict(now) for r in self.rules.rules.values()],
            "active_rules": [r.rule_id for r in self.rules.active(now)],
            "blackholes": [bh.to_dict(now) for bh in self.blackholes.values()],
            "latency": [
                {"node": k, "ms": v.ms, "jitter_ms": v.jitter_ms} for k, v in self.latency.items()
            ],
        }


__all__ = ["BOOTSTRAP", "Blackhole", "Connection", "EventLog", "NodeStats", "Proxy", "Route"]
