"""A member's own conversation turns: appending, sessions, their keyword index and search."""
