"""ListExpiringMemories: the memories the expiry gate (``store_service.access.expiry``) hides that
the caller can read, listed as ListMemories lists (``store_service.records.listing``)."""

from __future__ import annotations

import psycopg
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from store_service import page_tokens
from store_service.access import expiry
from store_service.records import listing


def list_expiring(
    conn: psycopg.Connection, caller: m.Caller, req: s.ListExpiringMemoriesRequest
) -> s.ListExpiringMemoriesResponse:
    """One page of the memories the gate hides that ``caller`` can read (the readability rule of
    ListMemories, chain included), oldest ``updated_at`` first, then id, with ``total_size`` counting
    them all. The filters are ListMemories' purpose and superseded filters, checked the same way;
    with the gate off the page is empty (the request is still checked). INVALID_ARGUMENT for a bad
    page size, filter or page token (a ListMemories token included); PERMISSION_DENIED for a purpose
    filter not granted."""
    days = expiry.check_days(req.expiry_days)
    size = page_tokens.page_size(req.page_size, listing.DEFAULT_PAGE_SIZE, listing.MAX_PAGE_SIZE)
    where, params, bound = listing.where(caller, s.ListMemoriesRequest(purpose=req.purpose, superseded=req.superseded))
    fingerprint = page_tokens.fingerprint(["expiring", *bound])
    position = listing.position(req.page_token, fingerprint, listing.OLDEST_UPDATED)
    if not days:
        return s.ListExpiringMemoriesResponse()
    page = listing.page(
        conn,
        caller,
        f"{where} AND {expiry.HIDDEN}",
        {**params, "expiry_days": days},
        fingerprint,
        position,
        size,
        listing.OLDEST_UPDATED,
    )
    hidden_before = timestamp_pb2.Timestamp()
    hidden_before.FromDatetime(expiry.hidden_before(page.now, days))
    return s.ListExpiringMemoriesResponse(
        memories=page.memories,
        next_page_token=page.next_page_token,
        total_size=page.total,
        expiry_days=days,
        hidden_before=hidden_before,
    )
