"""One long-lived SparkSession for the metrics, with Spark's Kafka source on its classpath.

The Kafka source (spark-sql-kafka-0-10) is not part of pyspark. `spark-deps/pom.xml` pins it
and Maven copies its four jars into `.cache/spark-kafka/VERSION/jars` once, the way
`kafka/pom.xml` caches Kafka itself. A session then names those files in `spark.jars`, so
starting one resolves nothing and needs no network (`spark.jars.packages` would run an Ivy
resolution at every JVM start).

Settings from the environment:
- LAB_SPARK_MASTER: the master URL (default `local[*]`).
- LAB_METRICS_BOOTSTRAP: the Kafka bootstrap the job reads from, instead of the run's own
  cluster's direct listener.
- LAB_SPARK_SHUFFLE_PARTITIONS (default 2), LAB_SPARK_DRIVER_MEMORY (default 2g).
- LAB_SPARK_JAVA_OPTIONS: JVM options for the driver, after the lab's own (DRIVER_JIT).
- LAB_SPARK_BIG_DRIVER_MEMORY (default 6g): the heap of the process for big runs.
- LAB_SPARK_EXECUTOR_MEMORY (default 1g): each executor's heap on a Spark cluster.
- LAB_SPARK_NICENESS (default 10): the nice of the driver JVM's CPU group and threads
  (launch_in_own_cpu_group).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from engine.base import paths, settings
from engine.base.errors import LabError

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

Progress = Callable[[str, float], None]  # (what is happening, fraction done)

CONNECTOR_POM = Path(__file__).resolve().parent / "spark-deps" / "pom.xml"
_COMPLETE_MARKER = ".complete"

_lock = threading.Lock()
_session: SparkSession | None = None


class MetricsSetupError(LabError):
    """Spark or its Kafka connector could not be set up."""


@cache
def connector_version() -> str:
    """The spark-sql-kafka version pinned in spark-deps/pom.xml."""
    match = re.search(
        r"<spark\.kafka\.version>([^<]+)</spark\.kafka\.version>", CONNECTOR_POM.read_text()
    )
    if not match:
        raise RuntimeError(f"{CONNECTOR_POM} has no <spark.kafka.version> property")
    return match.group(1).strip()


def connector_dir() -> Path:
    return paths.cache_dir() / "spark-kafka" / connector_version() / "jars"


def check_versions(pyspark_version: str | None = None) -> None:
    """A connector from another Spark line than pyspark's would fail at the first query."""
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    ours = connector_version().split(".")[:2]
    if pyspark_version.split(".")[:2] != ours:
        raise MetricsSetupError(
            f"pyspark {pyspark_version} does not match the pinned Kafka connector "
            f"{connector_version()} (engine/metrics/spark-deps/pom.xml); install pyspark "
            f"{'.'.join(ours)}.x or change <spark.kafka.version>."
        )


def ensure_connector_jars(*, offline: bool = False) -> list[Path]:
    """The connector's jars, fetched from Maven Central with spark-deps/pom.xml if missing."""
    from engine.base.tools import maven_into

    jars_dir = maven_into(
        CONNECTOR_POM,
        ("spark.kafka.jars", connector_dir()),
        stamp=connector_version(),
        expect="spark-sql-kafka-*.jar",
        what=f"Spark's Kafka connector {connector_version()}",
        marker=_COMPLETE_MARKER,
        error=MetricsSetupError,
        offline=offline,
    )
    return sorted(jars_dir.glob("*.jar"))


def spark_master(master: str | None = None) -> str | None:
    """`master`, else LAB_SPARK_MASTER, else local[*]; None under spark-submit (its --master)."""
    chosen = master or settings.SPARK_MASTER.get()
    if chosen is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    return chosen or "local[*]"


def shuffle_partitions() -> int:
    """LAB_SPARK_SHUFFLE_PARTITIONS: the shuffle partitions of a class's runs (at least 1)."""
    return settings.SPARK_SHUFFLE_PARTITIONS.integer(minimum=1)


def metrics_bootstrap(default: str | None = None) -> str | None:
    """The bootstrap the job reads Kafka through: LAB_METRICS_BOOTSTRAP, else `default`."""
    return settings.METRICS_BOOTSTRAP.get() or default


def get_spark(master: str | None = None, progress: Progress | None = None) -> SparkSession:
    """The process's one SparkSession, started on first use.

    A JVM holds one SparkContext, so a later call with another master gets the running
    session; stop it with `stop_spark()` first to change masters.
    """
    global _session
    report = progress or (lambda _what, _fraction: None)
    with _lock:
        if _session is not None and not _session.sparkContext._jsc.sc().isStopped():
            report("ready", 1.0)
            return _session
        check_versions()
        report("fetching Spark's Kafka connector (once)", 0.05)
        jars = ensure_connector_jars()
        from engine.base.tools import find_java

        find_java()  # a clear message instead of pyspark's "Java gateway process exited"
        report("starting the Spark JVM", 0.2)
        from pyspark import SparkConf
        from pyspark.sql import SparkSession

        # Spark guesses the machine's address from its hostname and warns; the lab is local.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

        conf = SparkConf(loadDefaults=False)
        if chosen := spark_master(master):
            conf.setMaster(chosen)
        conf = (
            conf.setAppName("kafka-failure-lab-metrics")
            .set("spark.jars", ",".join(str(j) for j in jars))
            # Runs are small: a few partitions beat the default 200 by seconds per query.
            .set("spark.sql.shuffle.partitions", str(shuffle_partitions()))
            # A run's metrics are a handful of small shuffles; adaptive execution re-plans
            # after each one and turns 2 Spark jobs into 8, which triples the time here.
            .set("spark.sql.adaptive.enabled", "false")
            .set("spark.driver.memory", settings.SPARK_DRIVER_MEMORY.get())
            # Only on a cluster: each executor's heap (Spark's default is 1g).
            .set("spark.executor.memory", settings.SPARK_EXECUTOR_MEMORY.get())
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.sql.session.timeZone", "UTC")
            # One judgement generates about 120 classes; with Spark's default of 100 cached
            # ones, 26 of them were compiled again by Janino on every judgement.
            .set("spark.sql.codegen.cache.maxEntries", "1000")
            # Spark's start-up WARN lines would land in the CLI's and dashboard's stderr.
            .set(
                "spark.driver.extraJavaOptions",
                " ".join(
                    (
                        f"-Dlog4j2.configurationFile={_quiet_log4j_config().as_uri()}",
                        DRIVER_JIT,
                        settings.SPARK_JAVA_OPTIONS.get() or "",
                    )
                ),
            )
        )
        if chosen is None or chosen.startswith("local"):
            # PySpark starts its Python workers with PYSPARK_PYTHON, else `python3` from PATH,
            # which on a machine with several Pythons is not the lab's (3.11 on PATH, the
            # venv on 3.13): they then refuse to run ("PYTHON_VERSION_MISMATCH"). Locally,
            # the workers are this interpreter unless the user named another.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        launch_in_own_cpu_group(conf)
        session = SparkSession.builder.config(conf=conf).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        report("warming up", 0.8)
        _warm_up(session)
        _session = session
        report("ready", 1.0)
        return session


def launch_in_own_cpu_group(conf: SparkConf) -> None:
    """Start Spark's driver JVM (pyspark's gateway) in a session of its own, at the
    LAB_SPARK_NICENESS of its CPU group; nothing if a JVM runs already or spark-submit
    started it.

    Linux schedules each session as one group (autogroup, sched(7)): CPU time is shared
    between groups first, then between the threads of a group, and a thread's own nice
    value counts only inside its group. pyspark's launch_gateway starts the JVM with a plain
    Popen, in the caller's session, so in the dashboard's group, beside nothing else of the
    run (the roles, brokers and proxy have sessions of their own): a follower's
    micro-batches took the group's full share while the run ran, and made click-to-verdict
    about 32% longer (benchmarks/METRICS.md); lowering the JVM's threads' own nice changed
    nothing there. In a group of its own with a lower nice, Spark takes what the run leaves
    of the CPU, and all of it when the run is over. Where autogroup does not apply, the
    threads' nice is what counts, so both are set.
    """
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    # pyspark adds stdin (the JVM exits when it closes) and its SIGINT guard to these.
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    SparkContext._ensure_initialized(gateway=gateway)
    niceness = min(19, settings.SPARK_NICENESS.integer(minimum=0))
    with contextlib.suppress(OSError):  # no autogroup in this kernel: the threads' nice counts
        Path(f"/proc/{gateway.proc.pid}/autogroup").write_text(f"{niceness}\n")
    renice_threads(gateway.proc.pid, niceness)


def renice_threads(pid: int, niceness: int) -> None:
    """Give every thread of a process the nice value `niceness`.

    Where the kernel does not group CPU time by session (autogroup off, or the process in a
    cgroup of the CPU controller other than the root: autogroup_task_group in the kernel's
    kernel/sched/autogroup.h), threads compete one by one and each thread's own nice is
    what counts. Linux keeps nice per thread and a new thread inherits its creator's, so the
    JVM's later threads (Spark's, Py4J's) start at this nice once the threads that exist now
    carry it; a second pass catches one born meanwhile. Nothing without Linux's /proc.
    """
    for _ in range(2):
        with contextlib.suppress(OSError):  # no /proc, or the process or a thread ended
            for task in list(Path(f"/proc/{pid}/task").iterdir()):
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)


# The driver JVM compiles with C1 only. A judgement is a burst of short queries over a few
# thousand rows: on 2 cores, C2's compiler threads competed with the queries for the first
# dozen judgements (the first took 11-16 s, the second about 4 s), while C1 code reaches the
# same 2.5-3 s from the second judgement on (first 6.5-9 s), and a session starts in 8 s, not
# 13.6. Big local jobs would pay (a million messages took 59 s instead of 35), so big runs
# are computed in a process of their own with C2 (BIG_RUN_JIT). benchmarks/METRICS.md.
# With C1 alone, HotSpot (Java 17) reserves 48 MB for compiled code, not the 240 MB it
# gives tiered compilation (`java -XX:+PrintFlagsFinal -version`: ReservedCodeCacheSize
# 50331648 with -XX:TieredStopAtLevel=1, 251658240 without). Spark's generated classes
# filled that in about 25 judgements, or 50 s of a followed run, and HotSpot then printed
# "CodeCache is full. Compiler has been disabled" and stopped compiling for the rest of the
# session; so the driver gets the tiered size back.
DRIVER_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


# A big run's metrics run in a process of their own with C2 and a larger heap
# (engine.metrics.compute): there, long CPU-bound loops over millions of rows dominate, and
# C2's code does them 1.7 to 2.5 times faster than C1's. benchmarks/METRICS.md.
BIG_RUN_JIT = "-XX:TieredStopAtLevel=4"
# A big run's shuffle partitions start from 4, as its figures were measured: a class's
# runs are faster with 2 (one task per core, LAB_SPARK_SHUFFLE_PARTITIONS), but a million
# messages took 26.1 s with 2 against 22.0 s with 4 (one benchmark each, not paired:
# benchmarks/METRICS.md), so big runs keep what they had.
BIG_RUN_SHUFFLE_PARTITIONS = 4


def big_run_environment() -> dict[str, str]:
    """The environment of a process that computes a big run's metrics."""
    return {
        settings.SPARK_JAVA_OPTIONS.name: f"{BIG_RUN_JIT} {settings.SPARK_JAVA_OPTIONS.get()}",
        settings.SPARK_DRIVER_MEMORY.name: str(settings.SPARK_BIG_DRIVER_MEMORY.get()),
        settings.SPARK_SHUFFLE_PARTITIONS.name: str(
            max(BIG_RUN_SHUFFLE_PARTITIONS, shuffle_partitions())
        ),
    }


def _quiet_log4j_config() -> Path:
    """A log4j2 configuration that lets only errors through (written once to the cache)."""
    path = paths.cache_dir() / "spark-kafka" / "log4j2-errors-only.properties"
    text = (
        "rootLogger.level = error\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def _warm_up(spark: SparkSession) -> None:
    """Load the Kafka source and run one shuffle, so the first real query is not the slow one."""
    jvm = spark.sparkContext._jvm
    try:
        # What spark.read.format("kafka") does first: find the source by its short name.
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "kafka", spark._jsparkSession.sessionState().conf()
        )
    except Exception as exc:
        jars = ",".join(str(j) for j in ensure_connector_jars())
        if os.environ.get("PYSPARK_GATEWAY_PORT"):
            # Under spark-submit the driver JVM was started before spark.jars was set.
            raise MetricsSetupError(
                "Under spark-submit, give Spark the Kafka connector: spark-submit --jars "
                f"{jars} engine/metrics/spark_job.py RUN_ID"
            ) from exc
        raise MetricsSetupError(
            f"Spark started, but its Kafka source is not on the classpath ({exc}). Delete "
            f"{connector_dir()} and try again."
        ) from exc
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()


def start_spark_in_background(
    progress: Progress | None = None,
    master: str | None = None,
    then: Callable[[SparkSession], None] | None = None,
) -> Future[SparkSession]:
    """Start the session in a thread; the Future holds it (or the error) when ready.

    The dashboard calls this at start-up and shows `progress` while people look at other
    pages, and keeps the Future in st.cache_resource. `then` runs on the new session before
    the Future is done (the dashboard warms the metrics job up with it).
    """
    future: Future[SparkSession] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            session = get_spark(master, progress)
            if then is not None:
                then(session)
            future.set_result(session)
        except BaseException as exc:  # handed to whoever waits on the Future
            future.set_exception(exc)

    threading.Thread(target=run, name="spark-start", daemon=True).start()
    return future


def stop_spark() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
