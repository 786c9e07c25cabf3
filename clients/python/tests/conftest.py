"""The servers the tests run against: real `loom serve` processes, on SQLite
in a temporary directory and on a throwaway PostgreSQL.

The loom binary is $LOOM_BIN, else built once from the repository (two
levels up); PostgreSQL comes from the repository's pgserve command
($LOOM_PGSERVE, else built the same way). Without Go or PostgreSQL the
tests that need them are skipped, unless LOOM_REQUIRE_SERVERS=1, which
makes that a failure (as in CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import LoomServer, PgServe, build_go

ROOT = Path(__file__).resolve().parents[3]


def _missing(what: str) -> None:
    if os.environ.get("LOOM_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{what} (LOOM_REQUIRE_SERVERS=1)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bin")


@pytest.fixture(scope="session")
def loom_bin(bin_dir: Path) -> str:
    if env := os.environ.get("LOOM_BIN"):
        return env
    if shutil.which("go") is None:
        _missing("no Go toolchain to build loom (set LOOM_BIN)")
    try:
        return build_go(ROOT, "./cmd/loom", bin_dir / "loom")
    except subprocess.CalledProcessError as e:
        pytest.fail(f"go build ./cmd/loom: {e.stderr}")


@pytest.fixture(scope="session")
def pgserve_bin(bin_dir: Path) -> str:
    if env := os.environ.get("LOOM_PGSERVE"):
        return env
    if shutil.which("go") is None:
        _missing("no Go toolchain to build pgserve (set LOOM_PGSERVE)")
    try:
        return build_go(ROOT, "./internal/testserver/pgserve", bin_dir / "pgserve")
    except subprocess.CalledProcessError as e:
        pytest.fail(f"go build pgserve: {e.stderr}")


@pytest.fixture(scope="session")
def sqlite_server(loom_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomServer]:
    d = tmp_path_factory.mktemp("loom-sqlite")
    with LoomServer(loom_bin, f"sqlite://{d}/loom.db") as srv:
        yield srv


@pytest.fixture(scope="session")
def scripted_server(loom_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomServer]:
    """loom serve on SQLite with the scripted demo model, which answers the
    OpenAI-compatible Responses API (/openai/v1) without a key or network."""
    d = tmp_path_factory.mktemp("loom-scripted")
    with LoomServer(loom_bin, f"sqlite://{d}/loom.db", "--provider", "scripted") as srv:
        yield srv


@pytest.fixture(scope="session")
def pg_urls(pgserve_bin: str) -> Iterator[list[str]]:
    try:
        pg = PgServe(pgserve_bin, 1)
    except RuntimeError as e:
        _missing(f"pgserve: {e}")
    with pg:
        yield pg.urls


@pytest.fixture(scope="session")
def postgres_server(loom_bin: str, pg_urls: list[str]) -> Iterator[LoomServer]:
    with LoomServer(loom_bin, pg_urls[0]) as srv:
        yield srv


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> LoomServer:
    """loom serve on each store in turn."""
    srv: LoomServer = request.getfixturevalue(f"{request.param}_server")
    return srv
