"""Start-up checks: the rights the store needs on a real server, and missing or bad settings."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

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
