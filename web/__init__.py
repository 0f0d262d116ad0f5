"""The curation web screen (`recallatron web`): server-rendered pages over the gateway (web.app)."""
