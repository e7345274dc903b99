"""`python -m engine ...`: the lab's command line.

Every failure a user can meet ends as one line on stderr and a non-zero exit code; set
LAB_DEBUG=1 to see the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence

from engine.base import paths, settings
from engine.base.errors import ClusterNotRunningError
from engine.commands.cli_common import run_command


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def cmd_setup(args: argparse.Namespace) -> int:
    from engine.base import tools
    from engine.kafka import jars

    java = tools.find_java()
    libs = jars.ensure_kafka_jars()
    print(f"Java: {java}")
    print(f"Kafka {paths.kafka_version()} jars: {libs}")
    from engine.proc.java_roles import ensure_java_roles

    print(f"The lab's Java roles (Kafka Streams, Java producer): {ensure_java_roles()}")
    from engine.metrics.session import check_versions, connector_dir, ensure_connector_jars

    check_versions()
    ensure_connector_jars()
    print(f"Spark's Kafka connector jars: {connector_dir()}")
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    """What `./lab dashboard` checks before starting Streamlit: Java, the jars, the port."""
    from engine.base import tools
    from engine.cluster.ports import require_free
    from engine.kafka import jars

    tools.find_java()
    jars.ensure_kafka_jars()
    if args.port:
        require_free(args.port, "the dashboard", host=args.address)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Preflight, then Streamlit in this process; a room's presenter link is printed once."""
    from engine.commands.dashboard import streamlit_command
    from engine.run.recovery import recover
    from engine.teach.room import KEY_ENV, configured_key, make_key, presenter_links, serves_a_room

    cmd_preflight(args)
    recover()  # a dashboard killed before this one: its clients ended, its runs interrupted
    env = dict(os.environ)
    if serves_a_room(args.address):
        key = configured_key(args.address, env) or make_key()
        env[KEY_ENV] = key
        print(
            f"The dashboard serves a room on {args.address}: every browser is a viewer, except "
            "those that open the presenter link:",
            file=sys.stderr,
        )
        import socket

        for link in presenter_links(args.address, args.port, key, socket.gethostname()):
            print(f"    {link}", file=sys.stderr)
    else:
        print(f"opening the dashboard on http://{args.address}:{args.port}", file=sys.stderr)
    sys.stderr.flush()
    command = streamlit_command(args.address, args.port, headless=False) + args.streamlit_args
    os.execvpe(command[0], command, env)
    return 0  # not reached: Streamlit replaced this process


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from engine.cluster import (
        current_cluster,
        default_nodes,
        make_cluster,
        require_same_version,
        start_cluster,
    )

    try:
        existing = current_cluster()
        if existing.status().reachable:
            require_same_version(existing)
            print(f"A {existing.backend} cluster is already running; reusing it.", file=sys.stderr)
            _print_status(existing, as_json=args.json)
            return 0
    except ClusterNotRunningError:
        pass
    nodes = args.nodes if args.nodes is not None else default_nodes(args.backend)
    cluster = make_cluster(args.backend, nodes=nodes, bootstrap=args.bootstrap)
    began = time.monotonic()
    if args.backend == "external":
        print(f"Connecting to the external cluster at {args.bootstrap}...", file=sys.stderr)
    else:
        print(f"Starting a {nodes}-node {args.backend} cluster...", file=sys.stderr)
    start_cluster(cluster, timeout=args.timeout)
    print(f"Ready in {time.monotonic() - began:.1f}s.", file=sys.stderr)
    _print_status(cluster, as_json=args.json)
    return 0


def cmd_images(args: argparse.Namespace) -> int:
    """Find, pull or build the images docker-compose.yml runs; print the variables to set."""
    from engine.cluster import images
    from engine.cluster.docker_backend import connect_engine

    client = connect_engine()
    log_path = paths.state_dir() / "images.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:
        chosen = images.resolve_images(
            client,
            args.names or list(images.STANDINS),
            log,
            progress=lambda step: print(step, file=sys.stderr),
        )
        if args.dashboard:
            buildargs = {
                "PYTHON_IMAGE": chosen.get(
                    settings.PYTHON_IMAGE.name, images.STANDINS["python"].official
                ),
                "DOCKER_CLI_IMAGE": chosen.get(
                    settings.DOCKER_CLI_IMAGE.name, images.STANDINS["docker-cli"].official
                ),
            }
            print(f"Building {images.DASHBOARD_IMAGE} (log: {log_path})...", file=sys.stderr)
            images.build_dashboard(client, log, buildargs)
    if chosen:
        print("Set these (in lab.env for `docker compose --env-file lab.env`):", file=sys.stderr)
    for variable, image in chosen.items():
        print(f"{variable}={image}")
    return 0


def _print_status(cluster, *, as_json: bool) -> None:
    status = cluster.status()
    if as_json:
        _print_json(status.to_json())
        return
    print(f"backend:           {status.backend} (Kafka {status.kafka_version})")
    print(f"reachable:         {'yes' if status.reachable else 'NO'}")
    print(f"direct bootstrap:  {status.direct_bootstrap}   (admin, checkers, kcat)")
    print(f"proxied bootstrap: {status.proxied_bootstrap or '-'}   (clients under test)")
    if status.controller_id is not None:
        print(f"active controller: node {status.controller_id}")
    for node in status.nodes:
        pid = f" pid {node.pid}" if node.pid else ""
        print(f"  node {node.node_id}: {node.state}{pid}  {node.direct_address}")


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from engine.cluster import current_cluster

    _print_status(current_cluster(), as_json=args.json)
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from engine.cluster import current_cluster, forget_current

    try:
        cluster = current_cluster()
    except ClusterNotRunningError:
        print("No cluster is running; nothing to stop.", file=sys.stderr)
        return 0
    cluster.stop()
    forget_current()
    print(f"Stopped the {cluster.backend} cluster.", file=sys.stderr)
    return 0


def _node_action(action: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from engine.cluster import current_cluster

        cluster = current_cluster()
        getattr(cluster, f"{action}_node")(args.node)
        print(f"node {args.node}: {action} done", file=sys.stderr)
        return 0

    return run


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from engine.cluster import current_cluster, make_cluster, require_same_version
    from engine.run.recovery import recover
    from engine.run.runner import run_scenario
    from engine.scenarios.scenario import ScenarioError, load_scenario, with_client

    scenario = load_scenario(args.scenario)
    source_text = Path(args.scenario).read_text()
    if args.client and args.client != scenario.client:
        scenario = with_client(scenario, args.client)
        # The run's copy of the file says which client ran (a later key wins in YAML).
        source_text += f"\n# --client {args.client}\nclient: {args.client}\n"
    # What the Failure lab refuses before a run, the command line refuses too.
    if (why := scenario.cannot_teach()) is not None:
        raise ScenarioError(f"{args.scenario}: {why}")
    recover()  # what a crashed dashboard or run left: its clients ended, its runs interrupted
    owned = None
    try:
        cluster = current_cluster()
        if not cluster.status(timeout=3).reachable:
            raise ClusterNotRunningError("the recorded cluster does not answer")
    except ClusterNotRunningError:
        print(
            f"No cluster is running; starting a {scenario.nodes}-node embedded one for this run.",
            file=sys.stderr,
        )
        owned = make_cluster(
            "local", nodes=scenario.nodes, name=f"run-{os.getpid()}", owner_pid=os.getpid()
        )
        owned.start()
        cluster = owned
    else:
        require_same_version(cluster)

    def progress(what: str, fraction: float) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {what}", file=sys.stderr)

    try:
        output = run_scenario(
            scenario,
            cluster,
            levels=args.guarantee or None,
            source_text=source_text,
            progress=progress,
            side_by_side=False if args.one_at_a_time else None,
        )
    finally:
        if owned is not None:
            owned.stop()
    if args.json:
        _print_json(output)
    else:
        _print_results(output)
    if output.get("not_run"):
        # The others' results are printed and recorded above; this is the one line to act on.
        from engine.run.runner import LevelUnavailableError

        raise LevelUnavailableError(" ".join(output["not_run"].values()))
    return 0


def _print_results(output: dict) -> None:
    print(f"run {output['run_id']} ({output['scenario']})")
    print(
        f"{'level':<18}{'sent':>6}{'acked':>7}{'deliv':>7}{'dups':>6}{'lost':>6}{'reord':>7}"
        f"{'w-ref':>7}{'c-ref':>7}{'t-ref':>7}{'p50 ms':>9}"
    )
    for level, r in output["results"].items():
        p50 = r["latency_ms"]["p50"]
        print(
            f"{level:<18}{r['sent']:>6}{r['acked']:>7}{r['delivered']:>7}{r['duplicates']:>6}"
            f"{r['lost']:>6}{r['reordered']:>7}"
            f"{r['writes_refused']:>7}{r['commits_refused']:>7}{r['txn_calls_refused']:>7}"
            f"{'-' if p50 is None else f'{p50:.0f}':>9}"
        )
    print(
        "refused: w-ref writes (producer epoch), c-ref by the consumer group (a commit, or "
        "the member fenced), t-ref transaction calls (transaction coordinator)"
    )


def cmd_runs(args: argparse.Namespace) -> int:
    from engine.run import record

    record.interrupt_orphaned_runs()
    runs = record.list_runs()
    if args.json:
        _print_json(runs)
        return 0
    for meta in runs:
        print(f"{meta['run_id']:<50} {meta.get('status', '?'):<9} {meta.get('scenario', '')}")
    if not runs:
        print("No recorded runs yet.", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engine.run import record

    run = record.load_run(args.run_id)
    output = {
        "run_id": run.run_id,
        "scenario": run.meta["scenario"],
        "status": run.meta.get("status"),
        "results": run.results,
    }
    if args.json:
        _print_json(output)
    else:
        _print_results(output)
    return 0


def _add_kafka_version(parser: argparse.ArgumentParser) -> None:
    """`--kafka-version X`: LAB_KAFKA_VERSION for this command (and what it starts)."""
    parser.add_argument(
        "--kafka-version",
        metavar="X.Y.Z",
        help=f"the Kafka release to run, 4.0.0 or newer (sets {settings.KAFKA_VERSION.name}; "
        "default: kafka/pom.xml's)",
    )


def apply_kafka_version(args: argparse.Namespace) -> None:
    """Put `--kafka-version` into the environment, where the lab and the processes it starts
    (Streamlit, the nodes, the Java roles) read it; check the version either way, so that a
    bad one is one line before anything starts."""
    if not hasattr(args, "kafka_version"):
        return  # a command that starts nothing runs no Kafka version
    if args.kafka_version is not None:
        os.environ[settings.KAFKA_VERSION.name] = paths.check_kafka_version(
            args.kafka_version, "--kafka-version"
        )
    paths.kafka_version()


def _with_kafka_version(args: argparse.Namespace) -> int:
    apply_kafka_version(args)
    return args.command_func(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    setup = sub.add_parser(
        "setup", help="check Java and fetch the pinned Kafka jars and Spark's Kafka connector"
    )
    _add_kafka_version(setup)
    setup.set_defaults(func=cmd_setup)

    preflight = sub.add_parser("preflight", help="check Java, the jars and a port")
    preflight.add_argument("--port", type=int)
    preflight.add_argument("--address", default="127.0.0.1")
    _add_kafka_version(preflight)
    preflight.set_defaults(func=cmd_preflight)
    dash = sub.add_parser(
        "dashboard",
        help="check what the dashboard needs, then serve it (what ./lab dashboard runs)",
    )
    dash.add_argument("--port", type=int, default=8501)
    dash.add_argument("--address", default="127.0.0.1")
    _add_kafka_version(dash)
    dash.add_argument("streamlit_args", nargs=argparse.REMAINDER, help="passed to streamlit run")
    dash.set_defaults(func=cmd_dashboard)

    cluster = sub.add_parser("cluster", help="start, inspect, hurt and stop the Kafka cluster")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start a cluster that runs until `cluster down`")
    up.add_argument(
        "--nodes", type=int, choices=(1, 3), help="1 or 3 (local; default 1); docker runs 3"
    )
    up.add_argument("--backend", choices=("local", "docker", "external"), default="local")
    up.add_argument("--bootstrap", help="host:port[,host:port] of an external cluster")
    up.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for readiness")
    up.add_argument("--json", action="store_true", help="print the status as JSON")
    _add_kafka_version(up)
    up.set_defaults(func=cmd_cluster_up)
    status = csub.add_parser("status", help="show the running cluster")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_cluster_status)
    down = csub.add_parser("down", help="stop the running cluster and delete its data")
    down.set_defaults(func=cmd_cluster_down)
    for action, text in (
        ("kill", "SIGKILL a node"),
        ("pause", "SIGSTOP a node (it hangs without closing sockets)"),
        ("resume", "SIGCONT a paused node"),
        ("restart", "start a node again on its old data"),
    ):
        node_cmd = csub.add_parser(action, help=text)
        node_cmd.add_argument("node", type=int)
        node_cmd.set_defaults(func=_node_action(action))
    imgs = sub.add_parser(
        "images",
        help="find or pull docker-compose.yml's images; build local stand-ins for those that "
        "cannot be pulled, and print the variables that name them",
    )
    imgs.add_argument("names", nargs="*", help="kafka, postgres, python, docker-cli (default: all)")
    imgs.add_argument("--dashboard", action="store_true", help="also build the dashboard image")
    imgs.set_defaults(func=cmd_images)
    run = sub.add_parser("run", help="run a scenario file and print its results")
    run.add_argument("scenario", help="a scenario file, e.g. scenarios/ack-loss.yaml")
    run.add_argument(
        "--guarantee",
        action="append",
        metavar="LEVEL",
        help="run only this level (repeatable); default: the scenario's levels",
    )
    run.add_argument("--json", action="store_true", help="print the results as JSON")
    run.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="run the levels one after the other (default: side by side in time, unless a "
        "fault hurts brokers or the whole network and the scenario does not share it)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    run.add_argument(
        "--client",
        choices=("librdkafka", "java"),
        help="the producer's client (default: the scenario's, librdkafka unless it says); "
        "with --guarantee client-defaults each client's own defaults apply",
    )
    _add_kafka_version(run)
    run.set_defaults(func=cmd_run)
    runs = sub.add_parser("runs", help="list recorded runs")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs)
    show = sub.add_parser("show", help="print a recorded run's results (no cluster needed)")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    # The partition log views: compaction before/after and the broker's own record batches.
    from engine.commands.logs_cli import add_commands as add_log_commands

    add_log_commands(sub)
    # The PySpark metrics of a recorded run (pyspark is imported only when they run).
    from engine.metrics.cli import add_commands as add_metrics_commands

    add_metrics_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    level = settings.LOG_LEVEL.get()
    logging.basicConfig(level=level or "WARNING")
    if level:
        logging.getLogger("engine.kafka").setLevel(level)
    args = build_parser().parse_args(argv)
    args.command_func = args.func
    return run_command(_with_kafka_version, args)
