"""The review pages (duplicates, conflict flags, expiring memories): routes added with their RPCs."""

from __future__ import annotations

ROUTES: list = []
