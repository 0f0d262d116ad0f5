"""Memory rows and their life cycle: remember, read, links, evidence, supersede and forget, conflict
flags, idempotency, entities, pins, listing, the context bundle's parts and session memory."""
