"""A Docker engine and images for the Docker tests: the user's own engine, or one started here.

On a machine where an engine answers (Docker Desktop, a docker service), the tests use it as
it is and touch nothing but the lab's compose project. Where none answers and this user is
root with Debian's docker.io installed (`./lab test` installs it where apt can), the session
starts `dockerd` itself, keeps its log in test-artifacts/dockerd.log, and stops it at the end.

Images: the official ones when the engine has them or can pull them, else the stand-ins of
engine/cluster/images.py, built once per content (their tags carry a hash) and kept in the
engine between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import docker

from engine.base import paths
from engine.cluster import images

ARTIFACTS = paths.REPO_ROOT / "test-artifacts"
_DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def project_leftovers(client: docker.DockerClient) -> list[str]:
    """Every container, network and volume of the lab's compose project, by name."""
    from engine.cluster.docker_backend import PROJECT

    label = {"label": f"com.docker.compose.project={PROJECT}"}
    return (
        [f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
        + [f"network {n.name}" for n in client.networks.list(filters=label)]
        + [f"volume {v.name}" for v in client.volumes.list(filters=label)]
    )


def engine_problem() -> str | None:
    """Why no Docker engine answers here, or None when one does."""
    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:
        host = os.environ.get("DOCKER_HOST") or _DEFAULT_SOCKET
        return f"no Docker engine answers at {host} ({type(exc).__name__})"
    return None


def wait_for_engine(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
    """Wait until the engine answers; why not, if it exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine_problem() is None:
            return None
        if proc.poll() is not None:
            return f"dockerd exited with code {proc.returncode}"
        time.sleep(0.3)
    return f"dockerd did not answer within {timeout:.0f}s"


@dataclass
class DockerEnv:
    """The engine the Docker tests use, the images they run, and whether this session owns it."""

    client: docker.DockerClient
    log: IO[str]  # test-artifacts/docker-images.log: what building the stand-ins printed
    dockerd: subprocess.Popen[bytes] | None = None
    dockerd_log: Path | None = None
    images: dict[str, str] = field(default_factory=dict)  # variable -> stand-in image
    # Seconds spent on each step of the set-up and of the tests' own starts, written to
    # test-artifacts/docker-timings.json at the end (docs/backends.md quotes them).
    timings: dict[str, float] = field(default_factory=dict)

    def timed(self, step: str, seconds: float) -> None:
        self.timings[step] = round(self.timings.get(step, 0.0) + seconds, 1)

    def require(self, *names: str) -> dict[str, str]:
        """Make the named images usable, official or stand-in; {variable: image} of each.

        A stand-in's variable is set in this process's environment (which the compose
        commands inherit) until the session ends.
        """
        began = time.monotonic()
        chosen = images.resolve_images(self.client, list(names), self.log)
        self.images.update(chosen)
        os.environ.update(chosen)
        self.timed("images: " + ", ".join(names), time.monotonic() - began)
        wanted = [images.STANDINS[name] for name in names]
        return {s.variable: os.environ.get(s.variable) or s.official for s in wanted}

    def close(self) -> None:
        (ARTIFACTS / "docker-timings.json").write_text(json.dumps(self.timings, indent=1) + "\n")
        for variable in self.images:
            os.environ.pop(variable, None)
        self.client.close()
        self.log.close()
        if self.dockerd is not None:
            stop_dockerd(self.dockerd)


def start_dockerd(log_path: Path) -> tuple[subprocess.Popen[bytes] | None, str | None]:
    """Start Debian's dockerd as root; (the process, None) or (None, why it cannot be)."""
    if os.environ.get("DOCKER_HOST"):
        return None, f"DOCKER_HOST={os.environ['DOCKER_HOST']} names an engine that does not answer"
    dockerd = shutil.which("dockerd") or shutil.which("dockerd", path="/usr/sbin:/usr/bin")
    if dockerd is None:
        return None, "dockerd is not installed (Debian: apt-get install docker.io)"
    if os.geteuid() != 0:
        return None, "starting dockerd needs root"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [dockerd, "--storage-driver=overlay2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # not in the test's process group: Ctrl+C reaches it last
        )
    why = wait_for_engine(proc, timeout=90)
    if why is not None:
        stop_dockerd(proc)
        return None, f"{why}; see {log_path}"
    return proc, None


def stop_dockerd(proc: subprocess.Popen[bytes]) -> None:
    """Stop the dockerd this session started (it stops its own containerd)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def open_docker_env() -> tuple[DockerEnv | None, str | None]:
    """The engine for the Docker tests, started here if need be; (env, None) or (None, why)."""
    began = time.monotonic()
    ARTIFACTS.mkdir(exist_ok=True)
    proc = None
    dockerd_log = None
    why = engine_problem()
    if why is not None:
        dockerd_log = ARTIFACTS / "dockerd.log"
        proc, not_started = start_dockerd(dockerd_log)
        if proc is None:
            return None, f"{why}, and none could be started here: {not_started}"
    env = DockerEnv(
        client=docker.from_env(timeout=300),
        log=(ARTIFACTS / "docker-images.log").open("a"),
        dockerd=proc,
        dockerd_log=dockerd_log,
    )
    env.timed("engine: " + ("dockerd started here" if proc else "the machine's own"),
              time.monotonic() - began)  # fmt: skip
    return env, None
