"""A real wire-protocol server for the test session: SecantusDB's daemon, started as a separate process.

SecantusDB is GPL-2.0-only: the tests run its ``secantusd-py`` program and talk to it over TCP, like any
client of a server; nothing here or in ``mongopat`` imports it. It stores its data under a temporary folder
(kept across a restart, so a test can kill and restart the server) on a free loopback port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DAEMON = "secantusd-py"


def daemon_path() -> str | None:
    """The daemon next to this interpreter (a virtualenv's bin), else on PATH."""
    beside = Path(sys.executable).with_name(DAEMON)
    return str(beside) if beside.exists() else shutil.which(DAEMON)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """One daemon: ``start`` waits until it answers a ping, ``kill`` ends it at once (SIGKILL),
    ``restart`` starts it again on the same port and data."""

    def __init__(self, folder: Path, program: str) -> None:
        self.folder, self.program = folder, program
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "server.log"

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        import pymongo

        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        command = [self.program, "--host", "127.0.0.1", "--port", str(self.port), "--storage-path", str(data)]
        command += ["--log-level", "WARNING"]
        with self.log.open("ab") as log:
            # Its own session: a SIGINT aimed at pytest (Ctrl-C) does not reach it before the tests stop it.
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.program} exited with {self.process.returncode}: {self.tail()}")
            try:
                with pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=500) as client:
                    client.admin.command("ping")
                return
            except pymongo.errors.PyMongoError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.program} did not answer within {timeout:.0f} s: {self.tail()}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def environment_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
