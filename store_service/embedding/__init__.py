"""The embedding job: queued memories turned into vectors through the embed service."""
