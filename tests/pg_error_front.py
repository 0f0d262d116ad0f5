"""A fake PostgreSQL server front, named as such: it logs every client in and answers every query
with an error, as a connection pooler in front of a database that is down does. No real server can
be made to answer an empty query with an error, and this is the one behaviour it stands in for."""

from __future__ import annotations

import socket
import struct
import threading

SSL_OR_GSS_REQUEST = (80877103, 80877104)


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _serve(conn: socket.socket) -> None:
    try:
        while True:  # the startup packet, after any SSL or GSS request (refused with "N")
            size = struct.unpack("!I", conn.recv(4, socket.MSG_WAITALL))[0]
            body = conn.recv(size - 4, socket.MSG_WAITALL)
            if struct.unpack("!I", body[:4])[0] in SSL_OR_GSS_REQUEST:
                conn.sendall(b"N")
                continue
            break
        out = _message(b"R", struct.pack("!I", 0))  # authentication ok
        for key, value in (("client_encoding", "UTF8"), ("server_version", "16.0"), ("DateStyle", "ISO, MDY")):
            out += _message(b"S", key.encode() + b"\0" + value.encode() + b"\0")
        conn.sendall(out + _message(b"K", struct.pack("!II", 1, 2)) + _message(b"Z", b"I"))
        while True:
            head = conn.recv(5, socket.MSG_WAITALL)
            if len(head) < 5 or head[:1] == b"X":
                return
            size = struct.unpack("!I", head[1:])[0]
            if size > 4:
                conn.recv(size - 4, socket.MSG_WAITALL)
            error = b"SERROR\0VERROR\0C08P01\0Mcannot connect to the database behind this front\0\0"
            conn.sendall(_message(b"E", error) + _message(b"Z", b"I"))
    except OSError:
        pass
    finally:
        conn.close()


def start() -> str:
    """Starts the front on a free loopback port; returns a libpq conninfo for it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"host=127.0.0.1 port={listener.getsockname()[1]} user=x dbname=x sslmode=disable"
