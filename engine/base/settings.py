"""Every LAB_* environment variable the lab reads: its name, default and meaning, here only.

The rest of the lab reads them through the `Setting` handles below (a test keeps any other
module from reading a LAB_* variable itself). docs/settings.md is generated from this list:
`python -m engine.base.settings --markdown > docs/settings.md` (a unit test fails when it is
stale).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

REPO_ROOT_TEXT = "the repository"


@dataclass(frozen=True)
class Setting:
    """One LAB_* variable. `default` is what an unset (or empty) variable means, as text;
    None where unset means "not given" (the code then decides, as `meaning` says)."""

    name: str
    group: str
    meaning: str
    default: str | None = None
    # Set by the lab itself for a process it starts, never by a user.
    internal: bool = False

    def get(self, env: Mapping[str, str] | None = None) -> str | None:
        """The variable's value, or the default when it is unset or empty."""
        value = (os.environ if env is None else env).get(self.name)
        return value if value else self.default

    def is_set(self, env: Mapping[str, str] | None = None) -> bool:
        """Whether the variable is in the environment at all (even empty)."""
        return self.name in (os.environ if env is None else env)

    def raw(self, env: Mapping[str, str] | None = None) -> str | None:
        """The variable exactly as set (an empty one stays empty); None when unset."""
        return (os.environ if env is None else env).get(self.name)

    def flag(self, env: Mapping[str, str] | None = None) -> bool:
        """A switch: "1" is on, anything else off (the default when unset)."""
        return self.get(env) == "1"

    def integer(self, *, minimum: int | None = None) -> int:
        """A whole number; a value that is not one means the default (never an error)."""
        assert self.default is not None, f"{self.name} has no default number"
        try:
            value = int(self.get() or self.default)
        except ValueError:
            value = int(self.default)
        return value if minimum is None else max(minimum, value)


ALL: list[Setting] = []


def _setting(name: str, group: str, meaning: str, default: str | None = None, **kw) -> Setting:
    setting = Setting(name, group, meaning, default, **kw)
    ALL.append(setting)
    return setting


# ---- the dashboard ------------------------------------------------------------------------
ADDRESS = _setting(
    "LAB_ADDRESS",
    "Dashboard",
    "The address `./lab dashboard` listens on. Anything but 127.0.0.1, localhost or ::1 "
    "serves a room: every browser is a viewer except the presenter's.",
    "127.0.0.1",
)
PORT = _setting("LAB_PORT", "Dashboard", "The port `./lab dashboard` listens on.", "8501")
PYTHON = _setting(
    "LAB_PYTHON",
    "Dashboard",
    "The Python `./lab` makes `.venv` with (python3.11, python3.12 or python3.13); unset, the "
    "newest of those found. A venv made by another Python is made again.",
)
PRESENTER_KEY = _setting(
    "LAB_PRESENTER_KEY",
    "Dashboard",
    "The presenter key in a room's presenter link; unset, one is made at start and printed "
    "once. An empty one is refused.",
)
PUBLISHED_ADDRESS = _setting(
    "LAB_PUBLISHED_ADDRESS",
    "Dashboard",
    "Where the dashboard is reached when that is not where it listens (in a container, "
    "where Docker publishes its port); 127.0.0.1 makes it one person's dashboard.",
)
AUTOSTART = _setting(
    "LAB_AUTOSTART",
    "Dashboard",
    "1: the dashboard starts a cluster when a page is first opened; 0: it waits to be asked.",
    "1",
)
BACKEND = _setting(
    "LAB_BACKEND",
    "Dashboard",
    "The cluster the dashboard starts: local (embedded Kafka JVMs) or docker.",
    "local",
)
NODES = _setting(
    "LAB_NODES",
    "Dashboard",
    "How many Kafka nodes the dashboard's cluster has (unset: the backend's default).",
)
SPARK_AUTOSTART = _setting(
    "LAB_SPARK_AUTOSTART",
    "Dashboard",
    "1: the presenter's dashboard starts Spark when it opens; 0: when Metrics is opened.",
    "1",
)
STREAMING_METRICS = _setting(
    "LAB_STREAMING_METRICS",
    "Dashboard",
    "1: when Spark is up, the presenter's runs are followed by a Spark streaming query, the "
    "Metrics page charts its counts while they run, and their metrics are finished after the "
    "verdict; 0: computed after the run (off by default: ack-loss's click to verdict took "
    "0% to 13% longer on quiet 2-core machines, more with runs back to back, 2x under load, "
    "benchmarks/METRICS.md).",
    "0",
)
ONE_LEVEL_AT_A_TIME = _setting(
    "LAB_ONE_LEVEL_AT_A_TIME",
    "Dashboard",
    "1: the dashboard runs every scenario's levels one after the other, never side by side.",
    "0",
)

# ---- runs ---------------------------------------------------------------------------------
RUNS_DIR = _setting(
    "LAB_RUNS_DIR", "Runs and files", "Where recorded runs are kept.", f"{REPO_ROOT_TEXT}/runs"
)
STATE_DIR = _setting(
    "LAB_STATE_DIR",
    "Runs and files",
    "Where running clusters keep their data, logs and state files.",
    f"{REPO_ROOT_TEXT}/.lab",
)
CACHE_DIR = _setting(
    "LAB_CACHE_DIR",
    "Runs and files",
    "Where downloaded artefacts (Kafka's and Spark's jars) are kept.",
    f"{REPO_ROOT_TEXT}/.cache",
)
KEEP_RUNS = _setting(
    "LAB_KEEP_RUNS",
    "Runs and files",
    "How many recorded runs to keep; older ones are deleted after each run.",
    "200",
)
DEDUP_DSN = _setting(
    "LAB_DEDUP_DSN",
    "Runs and files",
    "The PostgreSQL the idempotency-key level keeps its keys in; unset, SQLite in the run folder.",
)

# ---- Kafka --------------------------------------------------------------------------------
KAFKA_VERSION = _setting(
    "LAB_KAFKA_VERSION",
    "Kafka",
    "The Kafka release the lab runs, e.g. 4.4.0 (4.0.0 or newer): its jars, fetched from "
    "Maven Central on first use and cached per version, the Java roles' kafka-clients and "
    "Kafka Streams, and the docker backend's image apache/kafka:VERSION. Unset: the version "
    "pinned in kafka/pom.xml. `--kafka-version` on `./lab dashboard`, `./lab engine cluster "
    "up` and `./lab engine run` sets it for that command.",
)

# ---- metrics (Spark) ----------------------------------------------------------------------
SPARK_MASTER = _setting(
    "LAB_SPARK_MASTER",
    "Metrics (Spark)",
    "The Spark master the metrics run on (e.g. spark://host:7077); unset: local[*].",
)
METRICS_BOOTSTRAP = _setting(
    "LAB_METRICS_BOOTSTRAP",
    "Metrics (Spark)",
    "The Kafka bootstrap Spark reads the run's topics through; unset: the cluster's direct "
    "listener.",
)
SPARK_DRIVER_MEMORY = _setting(
    "LAB_SPARK_DRIVER_MEMORY", "Metrics (Spark)", "Spark's driver memory.", "2g"
)
SPARK_EXECUTOR_MEMORY = _setting(
    "LAB_SPARK_EXECUTOR_MEMORY", "Metrics (Spark)", "Spark's executor memory.", "1g"
)
SPARK_BIG_DRIVER_MEMORY = _setting(
    "LAB_SPARK_BIG_DRIVER_MEMORY",
    "Metrics (Spark)",
    "Spark's driver memory for a big run's metrics (computed in a process of their own).",
    "6g",
)
SPARK_JAVA_OPTIONS = _setting(
    "LAB_SPARK_JAVA_OPTIONS", "Metrics (Spark)", "Extra JVM options for Spark's driver.", ""
)
SPARK_SHUFFLE_PARTITIONS = _setting(
    "LAB_SPARK_SHUFFLE_PARTITIONS",
    "Metrics (Spark)",
    "spark.sql.shuffle.partitions for a class's runs (at least 1; bigger runs get one per 2 "
    "million verdict rows, and at least 4 in a big run's process). 2, one per core of a "
    "2-core machine: each task deserializes its stage's plan and generates its own "
    "projections, and with 4 a class's run's metrics took 8-15% longer "
    "(benchmarks/METRICS.md).",
    "2",
)
SPARK_NICENESS = _setting(
    "LAB_SPARK_NICENESS",
    "Metrics (Spark)",
    "The nice value (0 to 19) of the CPU group Spark's driver JVM runs in (a session of its "
    "own) and of its threads: above 0, a run's own processes and the page come first while "
    "Spark follows it.",
    "10",
)
METRICS_BIG_RUN = _setting(
    "LAB_METRICS_BIG_RUN",
    "Metrics (Spark)",
    "From this many verdict rows (levels x messages) on, a run is big: its metrics are "
    "computed in a process of their own with big-run settings.",
    "1000000",
)
VERDICT_ROWS = _setting(
    "LAB_VERDICT_ROWS",
    "Metrics (Spark)",
    "The most per-message verdict rows kept in metrics.json; a bigger table goes to Parquet.",
    "100000",
)

# ---- Docker -------------------------------------------------------------------------------
KAFKA_IMAGE = _setting(
    "LAB_KAFKA_IMAGE",
    "Docker",
    "The Kafka brokers' image (unset: docker-compose.yml's default, or the stand-in "
    "`./lab images` builds).",
)
POSTGRES_IMAGE = _setting(
    "LAB_POSTGRES_IMAGE", "Docker", "The PostgreSQL image (unset: the official one)."
)
PYTHON_IMAGE = _setting(
    "LAB_PYTHON_IMAGE", "Docker", "The dashboard's Python base image (unset: the official one)."
)
DOCKER_CLI_IMAGE = _setting(
    "LAB_DOCKER_CLI_IMAGE", "Docker", "The Docker CLI image (unset: the official one)."
)
DEBIAN_MIRROR = _setting(
    "LAB_DEBIAN_MIRROR",
    "Docker",
    "The Debian mirror the stand-in images are built from (unset: this machine's apt mirror).",
)
DOCKER_PROXY_UPSTREAMS = _setting(
    "LAB_DOCKER_PROXY_UPSTREAMS",
    "Docker",
    "In the dashboard container: where the fault proxy forwards each node, "
    "`1=kafka-1:9092,2=kafka-2:9092,3=kafka-3:9092` (docker-compose.yml sets it).",
    internal=True,
)
DOCKER_DIRECT_BOOTSTRAP = _setting(
    "LAB_DOCKER_DIRECT_BOOTSTRAP",
    "Docker",
    "In the dashboard container: the brokers' direct addresses, in node order "
    "(docker-compose.yml sets it).",
    internal=True,
)
PROXY_LISTEN_HOST = _setting(
    "LAB_PROXY_LISTEN_HOST",
    "Docker",
    "In the dashboard container: the address the fault proxy listens on "
    "(docker-compose.yml sets it).",
    internal=True,
)

# ---- debugging and the lab's own ----------------------------------------------------------
DEBUG = _setting(
    "LAB_DEBUG",
    "Debugging",
    "1: the command line shows the traceback of an unexpected error, not one line.",
)
LOG_LEVEL = _setting(
    "LAB_LOG_LEVEL",
    "Debugging",
    "The command line's log level (e.g. INFO shows the Kafka clients' connection logs); "
    "unset: warnings, and the Kafka clients' errors only.",
)
LEASH_OWNER = _setting(
    "LAB_LEASH_OWNER",
    "Debugging",
    "PID:START of the process that started this one, which it dies with (engine.proc.leash).",
    internal=True,
)
METRICS_BIG_PROCESS = _setting(
    "LAB_METRICS_BIG_PROCESS",
    "Debugging",
    "Set in the process that computes a big run's metrics, so it starts no other.",
    internal=True,
)

BY_NAME = {s.name: s for s in ALL}


def markdown() -> str:
    """docs/settings.md: every setting, by group, with its default and meaning."""
    lines = [
        "# Settings",
        "",
        "Every `LAB_*` environment variable the lab reads. Generated from",
        "`engine/base/settings.py` by `python -m engine.base.settings --markdown >",
        "docs/settings.md`; do not edit by hand.",
        "Those marked *set by the lab* are set for processes the lab starts, not by you.",
    ]
    groups: dict[str, list[Setting]] = {}
    for setting in ALL:
        groups.setdefault(setting.group, []).append(setting)
    for group, settings in groups.items():
        lines += ["", f"## {group}", "", "| Variable | Default | Meaning |", "|---|---|---|"]
        for s in settings:
            default = "(unset)" if s.default is None else f"`{s.default}`" if s.default else '""'
            meaning = (s.meaning + (" *Set by the lab.*" if s.internal else "")).replace("|", "/")
            lines.append(f"| `{s.name}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--markdown"]:
        print(
            "usage: python -m engine.base.settings --markdown > docs/settings.md", file=sys.stderr
        )
        return 2
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
