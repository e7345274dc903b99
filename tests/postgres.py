"""A throwaway PostgreSQL server for tests: Debian's postgresql package, started by the test.

initdb refuses to run as root, so as root the server runs as the `postgres` user that the
package creates; as anyone else it runs as that user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from engine.cluster.ports import free_ports


def pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert found, "PostgreSQL is installed by `./lab test` (Debian package postgresql)"
    return Path(found[-1]).parent


class PostgresServer:
    def __init__(self) -> None:
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="lab-pg-"))
        self.port = free_ports(1)[0]
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def dsn(self) -> str:
        return f"postgresql://lab@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        data = self.dir / "data"
        self.run(str(self.bin / "initdb"), "-D", str(data), "-U", "lab", "-A", "trust")
        self.run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.dir / "log"),
            "-w",
            "-o",
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1",
            "start",
        )
        deadline = time.monotonic() + 30
        import psycopg

        while True:
            try:
                psycopg.connect(self.dsn).close()
                return self
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self.run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
