"""Real servers for the tests: `loom serve` and the repository's pgserve."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

# loom serve's start line: {"time":…,"level":"INFO","msg":"listening","url":"http://…",…}.
_SERVING = re.compile(r'"msg":"listening","url":"(http://[^"]+)"')


def build_go(root: Path, pkg: str, out: Path) -> str:
    """Builds the Go command pkg of the repository at root into out."""
    subprocess.run(
        ["go", "build", "-o", str(out), pkg], cwd=root, check=True, capture_output=True, text=True
    )
    return str(out)


def _drain(stream: IO[str], sink: list[str], found: threading.Event) -> None:
    for line in stream:
        sink.append(line)
        if _SERVING.search(line):
            found.set()
    found.set()


class _Process:
    """A server process: a context manager that stops it on exit."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LoomServer(_Process):
    """`loom serve --store <store>` on a free port, its URL once it says it
    serves; stopped with SIGTERM. extra holds more flags (--keys ...)."""

    def __init__(self, binary: str, store: str, *extra: str, timeout: float = 60.0) -> None:
        self.store = store
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            [binary, "serve", "--addr", "127.0.0.1:0", "--store", store, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        found = threading.Event()
        threading.Thread(target=_drain, args=(self.proc.stderr, self.log, found), daemon=True).start()
        if not found.wait(timeout) or not (m := _SERVING.search("".join(self.log))):
            self.stop()
            raise RuntimeError("loom serve did not start:\n" + "".join(self.log))
        self.url = m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class PgServe(_Process):
    """The repository's pgserve: n fresh PostgreSQL database URLs, kept
    until its standard input closes."""

    def __init__(self, binary: str, n: int = 1, timeout: float = 120.0) -> None:
        self.proc = subprocess.Popen(
            [binary, "-n", str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.urls: list[str] = []
        deadline = time.monotonic() + timeout
        while len(self.urls) < n and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.urls.append(line.strip())
        if len(self.urls) < n:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self.stop()
            raise RuntimeError(f"pgserve gave {len(self.urls)} of {n} URLs: {err}")

    def stop(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()


__all__ = ["LoomServer", "PgServe", "build_go"]
