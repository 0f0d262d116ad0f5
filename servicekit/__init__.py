"""Plumbing every Recallatron service shares: settings, the server factory, errors, metrics, clients."""
