"""Versions of a fact that changed: the values a memory states, and the links found between an
older memory and the newer one that may update it (docs/memory.md, "Facts that change")."""
