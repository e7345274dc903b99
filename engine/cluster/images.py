"""The container images docker-compose.yml runs, and local stand-ins where they cannot be pulled.

The compose file names official images (apache/kafka at the version kafka/pom.xml pins,
postgres, and python and docker:cli as the dashboard's bases), each behind a variable. A
machine whose Docker engine reaches no image registry can still run the lab: `./lab images`
builds a stand-in for each image it can neither find nor pull, from

- a Debian base made by `debootstrap --variant=minbase` against the mirror apt uses, imported
  with `docker import` (so it needs root and debootstrap, as the Docker tests' set-up has);
- the Dockerfiles in containers/, which install Debian's packages on that base;
- for Kafka, the jars the lab already fetched from Maven Central into .cache.

A stand-in's tag carries a hash of everything it is built from, so a build is done once per
content and later runs find it in the engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import docker
import docker.errors
import requests

from engine.base import paths, settings
from engine.base.errors import LabError, MissingToolError

BASE_IMAGE = "kafka-failure-lab/debian:bookworm"
STANDIN_DIR = paths.REPO_ROOT / "containers"
COMPOSE_FILE = paths.REPO_ROOT / "docker-compose.yml"
DASHBOARD_IMAGE = "kafka-failure-lab-dashboard"
_DEFAULT_MIRROR = "http://deb.debian.org/debian"
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


class ImageBuildError(LabError):
    """A stand-in image (or its Debian base) could not be built."""


@dataclass(frozen=True)
class Standin:
    """A local image built to stand in for an official one."""

    name: str  # its folder in containers/
    variable: str  # the compose variable that names the image to use instead of the official

    @property
    def official(self) -> str:
        """The official image: the variable's default in docker-compose.yml; for the brokers,
        that of the lab's Kafka version (the file's default is kafka/pom.xml's)."""
        if self.variable == settings.KAFKA_IMAGE.name:
            return f"apache/kafka:{paths.kafka_version()}"
        found = re.search(
            r"\$\{" + re.escape(self.variable) + r":-([^}]+)\}", COMPOSE_FILE.read_text()
        )
        if not found:
            raise LabError(f"docker-compose.yml does not use ${{{self.variable}:-...}}.")
        return found.group(1)

    @property
    def folder(self) -> Path:
        return STANDIN_DIR / self.name

    def extra_files(self) -> dict[str, Path]:
        """Files beyond its folder that go into its build context (name in context -> file)."""
        if self.name != "kafka":
            return {}
        from engine.kafka import jars

        libs = Path(jars.kafka_classpath()).parent
        return {f"libs/{jar.name}": jar for jar in sorted(libs.glob("*.jar"))}

    def content_hash(self, base_id: str) -> str:
        """A hash of the base image, the folder's files and the extra files' names and sizes."""
        digest = hashlib.sha256(base_id.encode())
        for file in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            digest.update(str(file.relative_to(self.folder)).encode())
            digest.update(file.read_bytes())
            digest.update(str(file.stat().st_mode & 0o111).encode())  # executable bits
        # The jars' names carry their versions (pinned by kafka/pom.xml); hashing 44 MB of
        # bytes at every test session would cost more than it could catch.
        for name, file in self.extra_files().items():
            digest.update(f"{name}:{file.stat().st_size}".encode())
        return digest.hexdigest()[:12]

    def tag(self, base_id: str) -> str:
        version = self.official.rsplit(":", 1)[-1]
        return f"kafka-failure-lab/{self.name}-standin:{version}-{self.content_hash(base_id)}"


STANDINS = {
    s.name: s
    for s in (
        Standin("kafka", settings.KAFKA_IMAGE.name),
        Standin("postgres", settings.POSTGRES_IMAGE.name),
        Standin("python", settings.PYTHON_IMAGE.name),
        Standin("docker-cli", settings.DOCKER_CLI_IMAGE.name),
    )
}


# ---- the engine -----------------------------------------------------------------------------
def has_image(client: docker.DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def try_pull(client: docker.DockerClient, image: str) -> str | None:
    """Pull an image; None when it worked, else why not (one line)."""
    try:
        client.images.pull(image)
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        detail = getattr(exc, "explanation", None) or str(exc)
        return " ".join(str(detail).split())[-200:]


# ---- the Debian base ------------------------------------------------------------------------
def debian_mirror() -> str:
    """The Debian mirror apt uses here (LAB_DEBIAN_MIRROR overrides it)."""
    if mirror := settings.DEBIAN_MIRROR.get():
        return mirror
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for source in sources:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for line in source.read_text().splitlines():
                # One-line format (`deb URI suite ...`) or deb822 (`URIs: URI`).
                found = re.match(r"\s*(?:deb\s+(?:\[[^]]*\]\s+)?|URIs:\s*)(https?://\S+)", line)
                if found and "security" not in found.group(1):
                    return found.group(1).rstrip("/")
    return _DEFAULT_MIRROR


def ensure_base(client: docker.DockerClient, log: IO[str]) -> str:
    """The local Debian base's image id, made with debootstrap the first time."""
    with contextlib.suppress(docker.errors.ImageNotFound):
        return str(client.images.get(BASE_IMAGE).id)
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None
    )
    if debootstrap is None or os.geteuid() != 0:
        raise MissingToolError(
            f"Building the local Debian base ({BASE_IMAGE}) needs root and debootstrap "
            "(Debian: apt-get install debootstrap); or pull the official images where a "
            "registry answers."
        )
    mirror = debian_mirror()
    with tempfile.TemporaryDirectory(prefix="lab-debian-", dir="/var/tmp") as root:
        log.write(f"$ debootstrap --variant=minbase bookworm {root} {mirror}\n")
        log.flush()
        done = subprocess.run(
            [debootstrap, "--variant=minbase", "bookworm", root, mirror],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            raise ImageBuildError(
                f"debootstrap of Debian bookworm from {mirror} failed (exit {done.returncode}); "
                f"see {log.name}. Set LAB_DEBIAN_MIRROR to a reachable Debian mirror."
            )
        _add_local_cas(Path(root), log)
        # `docker import` of the tree, streamed: nothing of its 200 MB is held in memory.
        with subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE) as tar:
            repository, tag = BASE_IMAGE.rsplit(":", 1)
            client.api.import_image_from_stream(tar.stdout, repository=repository, tag=tag)
    return str(client.images.get(BASE_IMAGE).id)


def _add_local_cas(root: Path, log: IO[str]) -> None:
    """Trust in the base what this machine trusts beyond Debian's list: its own added CAs.

    A machine whose HTTPS goes through an inspecting proxy trusts that proxy's authority in
    /usr/local/share/ca-certificates. Images built on the base install `ca-certificates`
    where they need HTTPS (PyPI, Maven Central), which then adds these files too, so their
    builds reach what the host reaches. Certificates are public; no key is copied.
    """
    source = LOCAL_CA_DIR
    found = sorted(source.rglob("*.crt")) if source.is_dir() else []
    target = root / "usr/local/share/ca-certificates"
    target.mkdir(parents=True, exist_ok=True)
    for cert in found:
        shutil.copy2(cert, target / cert.name)
    log.write(f"added {len(found)} locally trusted CA certificate(s) from {source}\n")


# ---- stand-ins and the dashboard image --------------------------------------------------------
@contextlib.contextmanager
def _context(standin: Standin) -> Iterator[Path]:
    """The stand-in's build context: its folder, plus its extra files (hard links if possible)."""
    with tempfile.TemporaryDirectory(prefix=f"lab-{standin.name}-") as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(standin.folder, context)
        for name, file in standin.extra_files().items():
            target = context / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(file, target)
            except OSError:
                shutil.copy2(file, target)
        yield context


def docker_build(
    client: docker.DockerClient,
    context: Path,
    tag: str,
    buildargs: dict[str, str],
    log: IO[str],
    dockerfile: str = "Dockerfile",
) -> None:
    """`docker build` through the engine's API, its output into `log`; one line if it fails."""
    args = " ".join(f"--build-arg {k}={v}" for k, v in buildargs.items())
    log.write(f"$ docker build -t {tag} {args} {context}\n")
    log.flush()
    last = ""
    try:
        for chunk in client.api.build(
            path=str(context),
            tag=tag,
            buildargs=buildargs,
            dockerfile=dockerfile,
            rm=True,
            forcerm=True,
            decode=True,
        ):
            if "stream" in chunk:
                log.write(chunk["stream"])
                last = chunk["stream"].strip() or last
            if "error" in chunk:
                raise ImageBuildError(
                    f"Building {tag} failed: {' '.join(chunk['error'].split())[-300:]} "
                    f"(full output: {log.name})."
                )
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise ImageBuildError(f"Building {tag} failed: {exc} (full output: {log.name}).") from exc
    finally:
        log.flush()
    if not has_image(client, tag):
        raise ImageBuildError(f"Building {tag} ended without an image ({last}); see {log.name}.")


def ensure_standin(client: docker.DockerClient, name: str, log: IO[str]) -> str:
    """The tag of the stand-in `name`, built now unless the engine has this content's build."""
    standin = STANDINS[name]
    base_id = ensure_base(client, log)
    tag = standin.tag(base_id)
    if not has_image(client, tag):
        with _context(standin) as context:
            docker_build(client, context, tag, {"BASE_IMAGE": BASE_IMAGE}, log)
    return tag


def resolve_images(
    client: docker.DockerClient,
    names: list[str],
    log: IO[str],
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, str]:
    """For each image: the official one if the engine has it or can pull it, else a stand-in.

    Returns {variable: image to use} for those that need a stand-in (the official ones are
    the compose file's defaults and need no variable).
    """
    chosen: dict[str, str] = {}
    for name in names:
        standin = STANDINS[name]
        official = standin.official
        if has_image(client, official):
            progress(f"{official}: in the engine")
            continue
        why = try_pull(client, official)
        if why is None:
            progress(f"{official}: pulled")
            continue
        progress(f"{official} cannot be pulled ({why}); building a stand-in")
        chosen[standin.variable] = ensure_standin(client, name, log)
        progress(f"{standin.variable}={chosen[standin.variable]}")
    return chosen


def build_dashboard(
    client: docker.DockerClient, log: IO[str], buildargs: dict[str, str], tag: str = DASHBOARD_IMAGE
) -> str:
    """Build the dashboard image from the repository (its Dockerfile, its .dockerignore)."""
    docker_build(client, paths.REPO_ROOT, tag, buildargs, log)
    return tag
