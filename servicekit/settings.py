"""Typed settings, parsed once from environment variables (pydantic-settings).

Every variable is prefixed ``RECALLATRON_`` except ``DATABASE_URL``. Defaults are documented in
README.md ("Configuration"). Invalid values stop start-up with a message naming the variable.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from servicekit import limits

SERVER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def check_server_name(name: str) -> str:
    """A database server's name: lowercase letters, digits, ``-`` and ``_``, starting with a
    letter, at most 63 characters; ValueError otherwise."""
    if not SERVER_NAME.fullmatch(name):
        raise ValueError(f"database server name {name!r}: use a-z, 0-9, - and _, starting with a letter (1..63)")
    return name


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); ValueError naming what it expects
    otherwise. The one rule for the HTTP listen addresses (``recallatron web``, ``recallatron mcp --http``)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT with a port 1..65535, got {text!r}")
    return host, int(port)


class Settings(BaseSettings):
    """All configuration of all services; each service reads the part it needs."""

    model_config = SettingsConfigDict(env_prefix="RECALLATRON_", extra="ignore")

    home: Path = Field(
        Path(limits.HOME),
        validate_default=True,  # the default is relative too: made absolute by _absolute
        description="data folder: embedded PostgreSQL, operator token, logs",
    )
    database_url: str | None = Field(
        None, validation_alias="DATABASE_URL", description="control-plane database URL; unset means the embedded server"
    )
    control_server: str = Field(
        "main", description="the name of DATABASE_URL's server among the database servers (docs/scaling.md)"
    )
    database_servers: dict[str, str] = Field(
        default_factory=dict,
        description="other PostgreSQL servers for workspace databases, a JSON object of name to connection string",
    )
    database_servers_file: Path | None = Field(
        None, description="a JSON file of the same form, read at start (its servers join RECALLATRON_DATABASE_SERVERS)"
    )

    gateway_addr: str = limits.GATEWAY_ADDR
    store_addr: str = "127.0.0.1:50052"
    embed_addr: str = "127.0.0.1:50053"
    rank_addr: str = "127.0.0.1:50054"
    web_addr: str = Field(
        "127.0.0.1:8080", description="HOST:PORT of the curation web screen (`recallatron web`, started by `up`)"
    )
    gateway_metrics_port: int = Field(9451, ge=0, le=65535)
    store_metrics_port: int = Field(9452, ge=0, le=65535)
    embed_metrics_port: int = Field(9453, ge=0, le=65535)
    rank_metrics_port: int = Field(9454, ge=0, le=65535)
    metrics_addr: str = "127.0.0.1"
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="lowest level of the JSON log lines a service writes (servicekit/logs.py)"
    )

    operator_token_file: Path | None = Field(None, description="default: <home>/operator-token")

    embed_deadline_seconds: float = Field(
        limits.EMBED_DEADLINE_SECONDS, gt=0, description="query embedding deadline before degrading"
    )
    rerank_deadline_seconds: float = Field(limits.RERANK_DEADLINE_SECONDS, gt=0)
    internal_deadline_seconds: float = Field(
        limits.INTERNAL_DEADLINE_SECONDS, gt=0, description="an internal call's deadline when its caller set none"
    )
    shutdown_grace_seconds: float = Field(
        limits.SHUTDOWN_GRACE_SECONDS, ge=0, description="on SIGTERM, how long calls in flight may finish"
    )
    rerank_top_n: int = Field(
        limits.RERANK_TOP_N, ge=1, le=limits.MAX_EMBED_BATCH, description="passed rows the cross-encoder scores"
    )
    reranker_model: str = Field(
        "", description="cross-encoder folder or cached name; empty (the default): no re-ranker is configured"
    )
    candidate_limit: int = Field(
        limits.CANDIDATE_LIMIT,
        ge=1,
        le=limits.MAX_CANDIDATE_LIMIT,
        description="rows each arm contributes before fusion",
    )
    embed_batch_size: int = Field(
        limits.EMBED_BATCH_SIZE, ge=1, le=limits.MAX_EMBED_BATCH, description="memories per embedding-job batch"
    )
    grpc_max_connection_age_seconds: float = Field(
        300.0,
        ge=1.0,
        le=86_400.0,
        description="each gRPC server closes a client connection after this long (calls in flight finish), so "
        "clients resolve names again and reach new replicas (docs/scaling.md)",
    )
    db_pool_max: int = Field(4, ge=1, le=50, description="connections per database pool (16 workspace pools + control)")
    mcp_max_tokens: int = Field(
        8_000, ge=1_000, le=200_000, description="most tokens (servicekit.render.tokens) of each part of an MCP result"
    )
    mcp_max_chars: int = Field(
        32_000, ge=4_000, le=800_000, description="most characters of each part of an MCP result"
    )

    @field_validator("web_addr")
    @classmethod
    def _web_addr(cls, value: str) -> str:
        host_port(value)
        return value

    @field_validator("control_server")
    @classmethod
    def _server_name(cls, value: str) -> str:
        return check_server_name(value)

    @field_validator("database_servers")
    @classmethod
    def _server_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, conninfo in value.items():
            check_server_name(name)
            if not conninfo.strip():
                raise ValueError(f"server {name!r} has an empty connection string")
        return value

    @field_validator("home", "operator_token_file", "database_servers_file")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        """A relative folder or file is taken from the current folder once, here: every path built
        from it and every message naming it is then absolute, so a message says exactly where it
        looked, and the processes ``up`` starts (which it passes the paths on to) find the same files."""
        return None if value is None else value.expanduser().resolve()

    def all_database_servers(self) -> dict[str, str]:
        """The other database servers: ``database_servers`` and those of ``database_servers_file``;
        ValueError naming the file or the server when it cannot be read or a name is given twice."""
        servers = dict(self.database_servers)
        if self.database_servers_file is not None:
            try:
                loaded = json.loads(self.database_servers_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ValueError(f"RECALLATRON_DATABASE_SERVERS_FILE {self.database_servers_file}: {exc}") from None
            if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
                raise ValueError(
                    f"RECALLATRON_DATABASE_SERVERS_FILE {self.database_servers_file}: "
                    "expected a JSON object of server name to connection string"
                )
            for name, conninfo in loaded.items():
                if name in servers:
                    raise ValueError(f"database server {name!r} is named twice (variable and file)")
                self._server_names({name: conninfo})
                servers[name] = conninfo
        return servers

    @property
    def operator_token_path(self) -> Path:
        """Where the operator credential lives (written by ``recallatron up``)."""
        return self.operator_token_file or self.home / "operator-token"

    def metrics_port(self, service: str) -> int:
        """The Prometheus port of ``service`` (0 means any free port)."""
        return getattr(self, f"{service}_metrics_port")


@lru_cache(maxsize=1)
def load() -> Settings:
    """Parses the environment once. Raises SystemExit with a readable message on invalid values."""
    try:
        return Settings()
    except SettingsError as exc:  # a value pydantic-settings could not even parse (JSON of a mapping)
        raise SystemExit(f"invalid configuration: {exc}") from None
    except ValidationError as exc:
        lines = [f"  RECALLATRON_{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()]
        raise SystemExit("invalid configuration:\n" + "\n".join(lines)) from None
