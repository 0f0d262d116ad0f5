"""Serving the screen: uvicorn on one address until SIGTERM or Ctrl-C (`recallatron web`)."""

from __future__ import annotations

import logging

import uvicorn

from web.app import build

log = logging.getLogger("recallatron.web")


def run(host: str, port: int, gateway_addr: str) -> None:
    """Serves the screen at ``http://host:port/`` over the gateway at ``gateway_addr``; returns once
    uvicorn stopped (SIGTERM or SIGINT: it lets the requests in flight finish).

    uvicorn's access log is off: a request line holds the search query and memory ids, which no log
    of the project carries (servicekit/logs.py). Its other records go to the root logger as JSON."""
    config = uvicorn.Config(build(gateway_addr), host=host, port=port, log_config=None, access_log=False, lifespan="on")
    log.info("web screen on http://%s:%d/, gateway %s", host, port, gateway_addr)
    uvicorn.Server(config).run()
