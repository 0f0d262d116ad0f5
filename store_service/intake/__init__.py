"""Memories that come from outside a Remember: capture from conversation turns, imports."""
