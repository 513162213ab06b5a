"""Sharing a store folder between ocat processes: one owner holds its lock and serves it through
a Chroma server child; the others reach it there, and are told who holds it. Callers go through
`ocat.memory`."""
