"""Datasets through the running gateway: reading them, loading their rows, and waiting for the embeddings.

A dataset is a corpus folder holding ``memories.jsonl`` (rows with ``id``, ``title``, ``body`` and an
optional ISO-8601 ``occurred_at``) and ``queries.jsonl`` (rows with ``id``, ``question``,
``relevant_ids`` and an optional ``category``/``category_name``), or a folder of such corpora. Used by
``recallatron load``, ``eval``, ``calibrate-floor``, ``calibrate-inject`` and the demo.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import options
from servicekit import limits

BACKLOG_TIMEOUT_SECONDS = 1800
LOAD_THREADS = 4
BATCH_ROWS = limits.MAX_REMEMBER_BATCH  # RememberBatch's limit
BATCH_BYTES = 8 * 1024 * 1024  # and a bound on a request's size (bodies may be 64 KiB each)
SHOWN_ERRORS = 5

# (dataset row or question id, status code name, message) of one failed call
Failure = tuple[str, str, str]


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON Lines file; SystemExit naming the line when one is not JSON."""
    return [row for _, row in read_jsonl_lines(path)]


def read_jsonl_lines(path: Path) -> list[tuple[int, object]]:
    """(line number, parsed value) of every non-blank line; SystemExit naming the file when it is missing
    or not a file, and the line when one is not JSON (before anything is written)."""
    if not path.is_file():
        raise SystemExit(f"{path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    rows = []
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        rows.append((n, json.loads(line)))
                    except json.JSONDecodeError as exc:
                        raise SystemExit(f"{path}:{n}: not JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return rows


def _usable_id(value: object) -> bool:
    """Whether a row's ``id`` can name it (and its request id ``load:<id>``): a non-empty string or an integer."""
    return isinstance(value, str | int) and not isinstance(value, bool) and str(value) != ""


def row_problem(row: object) -> str | None:
    """Why a dataset row cannot become a Remember (checked here because it never reaches the server:
    a row that is not an object, has no id, or has fields of the wrong type), or None. The content
    rules (blank body, sizes) are the server's, checked per row there."""
    if not isinstance(row, dict):
        return f"a row must be a JSON object, not {type(row).__name__}"
    if not _usable_id(row.get("id")):
        return "a row needs an id (a string or an integer)"
    for field in ("title", "body", "occurred_at"):
        if row.get(field) is not None and not isinstance(row[field], str):
            return f"{field} must be a string"
    try:
        occurred_at(row.get("occurred_at"))
    except ValueError as exc:
        return f"occurred_at: {exc}"
    size = len(row.get("body", "") or "") + len(row.get("title", "") or "")
    if size > BATCH_BYTES:
        return f"title and body hold {size:,} characters; a request carries at most {BATCH_BYTES:,} bytes"
    return None


def corpora(dataset: Path, memories_from: Path | None = None) -> list[Path]:
    """The corpus folders of a dataset: itself, or its sub-folders holding memories.jsonl. With
    ``memories_from`` (a set of questions kept apart from the memories they ask about, as
    eval/time-scoped/ is from LoCoMo), the folders holding queries.jsonl, each of whose memories is
    the same-named corpus's under ``memories_from``."""
    name = "queries.jsonl" if memories_from else "memories.jsonl"
    if (dataset / name).is_file():
        found = [dataset]
    else:
        found = sorted(p for p in dataset.iterdir() if (p / name).is_file()) if dataset.is_dir() else []
    if not found:
        raise SystemExit(f"{dataset}: no {name} here or in its sub-folders")
    for folder in found:
        memories_file(folder, memories_from)  # every corpus has its memories before anything is loaded
    return found


def memories_file(folder: Path, memories_from: Path | None = None) -> Path:
    """A corpus's memories.jsonl: its own, or with ``memories_from`` the same-named corpus's there."""
    path = (memories_from / folder.name if memories_from else folder) / "memories.jsonl"
    if not path.is_file():
        raise SystemExit(f"{folder}: its memories, {path}, are missing")
    return path


def progress(label: str, done: int, total: int) -> None:
    """Shows ``label: done/total`` on stderr (every 500 rows and at the end when not a terminal)."""
    if sys.stderr.isatty() or done == total or done % 500 == 0:
        print(f"\r{label}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)


def occurred_at(value: str | None) -> datetime.datetime | None:
    """A row's ``occurred_at`` (ISO 8601; a time without a zone is taken as UTC), or None when absent."""
    return options.iso_instant(value) if value else None


def _request(row: dict, purpose: int) -> g.RememberRequest:
    """The Remember of one dataset row (workspace audience, request id ``load:<row id>``)."""
    req = g.RememberRequest(
        purpose=purpose,
        kind=m.KIND_NOTE,
        title=row.get("title") or "",
        body=row.get("body") or "",
        audience=m.AUDIENCE_WORKSPACE,
        request_id=f"load:{row['id']}",
    )
    when = occurred_at(row.get("occurred_at"))
    if when is not None:
        req.occurred_at.FromDatetime(when)
    return req


def _batches(rows: list[dict]) -> list[list[dict]]:
    """Consecutive rows in batches of at most ``BATCH_ROWS`` rows and about ``BATCH_BYTES`` of text."""
    batches: list[list[dict]] = []
    size = 0
    for row in rows:
        row_size = len((row.get("body") or "").encode()) + len((row.get("title") or "").encode())
        if not batches or len(batches[-1]) >= BATCH_ROWS or (size + row_size > BATCH_BYTES and batches[-1]):
            batches.append([])
            size = 0
        batches[-1].append(row)
        size += row_size
    return batches


def remember_rows(
    gw: client.Gateway, token: str, numbered: list[tuple[int, object]], purpose: int, label: str = "load"
) -> tuple[dict[str, str], list[Failure]]:
    """Remembers every row as the member of ``token`` through RememberBatch (``LOAD_THREADS``
    concurrent batches). ``numbered`` holds (line number, row) pairs, as ``read_jsonl_lines``
    returns them. A row ``row_problem`` refuses is not sent and fails alone
    (INVALID_ARGUMENT); so does a row the server refuses. Returns dataset id -> memory id of the rows
    stored, and (dataset id, or "at line N" without a usable id; status code name; message) of each
    row that failed: first the rows refused here, then the server's, each in file order."""
    md = client.bearer(token)

    def send(batch: list[dict]) -> list[tuple[dict, g.RememberBatchResult]]:
        resp = gw.memory.RememberBatch(
            g.RememberBatchRequest(requests=[_request(r, purpose) for r in batch]), metadata=md, timeout=300
        )
        return list(zip(batch, resp.results, strict=True))

    ids: dict[str, str] = {}
    errors: list[Failure] = []
    valid = []
    for n, row in numbered:
        problem = row_problem(row)
        if problem is None:
            valid.append(row)
        else:  # never sent; the row's id when it has a usable one, else its line
            ident = str(row["id"]) if isinstance(row, dict) and _usable_id(row.get("id")) else None
            errors.append((ident or f"at line {n}", "INVALID_ARGUMENT", problem))
    done = len(errors)
    with ThreadPoolExecutor(LOAD_THREADS) as pool:
        for results in pool.map(send, _batches(valid)):
            for row, result in results:
                if result.HasField("memory"):
                    ids[row["id"]] = result.memory.id
                else:
                    errors.append((str(row["id"]), code_pb2.Code.Name(result.error.code), result.error.message))
            done += len(results)
            progress(label, done, len(numbered))
    return ids, errors


def report_failures(failures: list[Failure], total: int, noun: str = "row", verb: str = "failed") -> None:
    """Prints how many of ``total`` calls failed and the first few (id, status code, message) to stderr,
    e.g. ``2 of 4 rows failed`` then ``  row bad-1: INVALID_ARGUMENT: body must not be empty or blank``."""
    print(f"{len(failures)} of {total} {noun}s {verb}", file=sys.stderr)
    for item_id, code, message in failures[:SHOWN_ERRORS]:
        print(f"  {noun} {item_id}: {code}: {message}", file=sys.stderr)
    if len(failures) > SHOWN_ERRORS:
        print(f"  ... and {len(failures) - SHOWN_ERRORS} more", file=sys.stderr)


def load_rows(gw: client.Gateway, token: str, rows: list[dict], purpose: int, label: str = "load") -> dict[str, str]:
    """Remembers every row (workspace audience) as the member of ``token``; returns dataset id -> memory id.

    Exits (status 1) after reporting them when any row fails: an evaluation needs every row."""
    ids, errors = remember_rows(gw, token, list(enumerate(rows, start=1)), purpose, label)
    if errors:
        report_failures(errors, len(rows))
        raise SystemExit(1)
    return ids


def load_file(gw: client.Gateway, workspace_id: str, path: str, purpose: int) -> tuple[int, list[Failure]]:
    """Adds a member to the workspace and remembers every row of ``path`` as it; returns the number
    stored and the rows that failed (see ``remember_rows``)."""
    rows = read_jsonl_lines(Path(path))
    member = gw.admin.AddMember(
        g.AddMemberRequest(workspace_id=workspace_id, display_name="loader"), metadata=gw.metadata
    )
    ids, errors = remember_rows(gw, member.token, rows, purpose)
    return len(ids), errors


# The workspaces ``fresh_member`` made inside ``temporary_workspaces`` blocks (innermost last).
_made: list[list[str]] = []


@contextlib.contextmanager
def temporary_workspaces(gw: client.Gateway, keep: bool) -> Iterator[None]:
    """Deletes the workspaces ``fresh_member`` makes inside the block when it ends (however it ends),
    unless ``keep``: eval, calibrate and the demo leave nothing behind but what --keep keeps. Each
    kept workspace is named on stderr."""
    _made.append([])
    try:
        yield
    finally:
        made = _made.pop()
        for workspace_id in made:
            if keep:
                print(f"kept workspace {workspace_id}", file=sys.stderr)
                continue
            try:
                gw.admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=workspace_id), metadata=gw.metadata)
            except grpc.RpcError as exc:
                print(f"could not delete workspace {workspace_id}: {exc.code().name}: {exc.details()}", file=sys.stderr)


def fresh_member(gw: client.Gateway, workspace_name: str, display_name: str = "") -> tuple[str, str]:
    """Creates a workspace (``workspace_name``, or ``... (2)`` when taken) and adds a member to it
    (operator calls); returns (workspace id, member token). Inside ``temporary_workspaces``, the
    workspace goes when the block ends."""
    workspace_id, _ = gw.new_workspace(workspace_name)
    if _made:
        _made[-1].append(workspace_id)
    member = gw.admin.AddMember(
        g.AddMemberRequest(workspace_id=workspace_id, display_name=display_name), metadata=gw.metadata
    )
    return workspace_id, member.token


def load_corpus(
    gw: client.Gateway, folder: Path, purpose: str, memories_from: Path | None = None
) -> tuple[str, str, dict[str, str]]:
    """Loads one corpus folder's memories (``memories_file``) into a fresh workspace (named ``purpose``
    and the folder) as its member, and waits for the embeddings; returns (workspace id, member
    token, dataset id -> memory id)."""
    workspace_id, token = fresh_member(gw, f"{purpose} {folder.name}", purpose)
    rows = read_jsonl(memories_file(folder, memories_from))
    ids = load_rows(gw, token, rows, m.PURPOSE_CONVERSATION, f"{folder.name} memories")
    wait_for_backlog(gw)
    return workspace_id, token, ids


def fit_half(query_id: str) -> bool:
    """Whether a query belongs to the fit half of a calibration (else the held-out half): a fixed
    split by a hash of its id, so every run and every command splits alike."""
    return hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0


def wait_for_backlog(gw: client.Gateway) -> None:
    """Blocks until the embedding backlog is empty, showing it while it drains (operator GetStatus
    every second); SystemExit after ``BACKLOG_TIMEOUT_SECONDS``."""
    deadline = time.monotonic() + BACKLOG_TIMEOUT_SECONDS
    tty, shown = sys.stderr.isatty(), 0.0
    while time.monotonic() < deadline:
        backlog = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata).embedding_backlog
        if backlog == 0:
            if tty:
                print(file=sys.stderr)
            return
        if tty or time.monotonic() - shown >= 10:
            print(f"\rembedding backlog: {backlog}   ", end="" if tty else "\n", file=sys.stderr, flush=True)
            shown = time.monotonic()
        time.sleep(1.0)
    raise SystemExit("the embedding backlog did not drain; is the embed service up? (`recallatron status`)")
