"""Start-up checks: the rights the store needs on a real server, missing or bad settings, and a port
already taken (one line naming the port and the variable that sets it, never a traceback)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from conftest import starts
from psycopg.conninfo import make_conninfo

from client.system import free_port
from store_service.database import StartupError, check_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def limited(pg):
    """A login role without CREATEDB on the test server."""
    with psycopg.connect(pg, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'recallatron_limited'").fetchone() is None:
            conn.execute("CREATE ROLE recallatron_limited LOGIN NOCREATEDB")
    return make_conninfo(pg, user="recallatron_limited")


def test_role_without_createdb_is_named(pg, limited):
    with pytest.raises(StartupError, match="lacks CREATEDB"):
        check_server(limited)
    check_server(pg)  # the real one passes


def test_unreachable_database_is_a_clear_error(tmp_path):
    with pytest.raises(StartupError, match="cannot connect"):
        check_server(f"host={tmp_path} dbname=nothing connect_timeout=2")


def run_cli(*args, **env):
    full = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )


def test_store_without_database_url_stops_with_a_message():
    out = run_cli("serve", "store")
    assert out.returncode != 0 and "DATABASE_URL" in out.stderr


def test_invalid_setting_names_the_variable():
    out = run_cli("serve", "rank", RECALLATRON_RERANK_TOP_N="lots")
    assert out.returncode != 0 and "RECALLATRON_RERANK_TOP_N" in out.stderr


def test_store_on_a_database_url_checks_rights(limited):
    out = run_cli(
        "serve", "store", DATABASE_URL=limited, RECALLATRON_STORE_ADDR="127.0.0.1:0", RECALLATRON_STORE_METRICS_PORT="0"
    )
    assert out.returncode != 0 and "lacks CREATEDB" in out.stderr


def taken_port(listen: bool = True) -> socket.socket:
    """A loopback socket holding a port: listening (what a running service does) or only bound (a
    port a connection finds closed, yet no one else may bind)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if listen:
        sock.listen()
    return sock


def test_a_metrics_port_in_use_is_one_line_naming_port_and_variable(tmp_path):
    with taken_port() as taken:
        port = taken.getsockname()[1]
        out = run_cli(
            "serve",
            "rank",
            RECALLATRON_HOME=str(tmp_path),
            RECALLATRON_RANK_ADDR="127.0.0.1:0",
            RECALLATRON_RANK_METRICS_PORT=str(port),
        )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"rank: metrics port {port} on 127.0.0.1 is already in use; set RECALLATRON_RANK_METRICS_PORT to "
        "another port (0: any free one)"
    )
    # An address the machine does not have: the same one line, naming both variables.
    out = run_cli(
        "serve",
        "rank",
        RECALLATRON_HOME=str(tmp_path),
        RECALLATRON_RANK_ADDR="127.0.0.1:0",
        RECALLATRON_METRICS_ADDR="192.0.2.1",
        RECALLATRON_RANK_METRICS_PORT="9",
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "rank: cannot serve metrics on 192.0.2.1:9 (Cannot assign requested address); RECALLATRON_METRICS_ADDR "
        "and RECALLATRON_RANK_METRICS_PORT set them"
    )


def up_env(home: Path, **env) -> dict[str, str]:
    """`recallatron up`'s environment in data folder ``home`` on free ports, with ``env``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_") and k != "DATABASE_URL"}
    full |= {"RECALLATRON_HOME": str(home), "RECALLATRON_WEB_ADDR": f"127.0.0.1:{free_port()}"}
    for name in ("gateway", "store", "embed", "rank"):
        full[f"RECALLATRON_{name.upper()}_ADDR"] = f"127.0.0.1:{free_port()}"
        full[f"RECALLATRON_{name.upper()}_METRICS_PORT"] = str(free_port())
    return full | env


def test_up_refuses_a_metrics_port_in_use_before_starting_anything(tmp_path):
    """Something listening on a service's metrics port: `up` names it and its variable, starts nothing."""
    with taken_port() as taken:
        port = taken.getsockname()[1]
        env = up_env(tmp_path, RECALLATRON_GATEWAY_METRICS_PORT=str(port))
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(
        f"recallatron: already in use: gateway metrics (127.0.0.1:{port}; RECALLATRON_GATEWAY_METRICS_PORT). "
    ), out.stderr
    assert "set the variables named to other ports (a service's or metrics port 0: one `up` chooses)" in out.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "pg").exists()


@pytest.mark.system
def test_up_says_why_a_service_would_not_start(tmp_path):
    """A port bound but not listening passes `up`'s check (nothing answers on it) and the service's own
    bind fails: `up` stops, its message carrying the service's one line, no traceback anywhere."""
    starts("system")
    with taken_port(listen=False) as taken:
        port = taken.getsockname()[1]
        env = up_env(tmp_path, RECALLATRON_RANK_METRICS_PORT=str(port))
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "recallatron: rank exited with status 1 during start-up: rank: metrics port "
        f"{port} on 127.0.0.1 is already in use; set RECALLATRON_RANK_METRICS_PORT to another port (0: any free "
        f"one); see {tmp_path / 'logs' / 'rank.log'}"
    ) in out.stderr, out.stderr
    assert "Traceback" not in out.stdout + out.stderr + (tmp_path / "logs" / "rank.log").read_text()
    assert "recallatron stopped" in out.stdout
