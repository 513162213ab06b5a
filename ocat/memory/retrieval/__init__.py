"""Finding memories: ranking candidates (dense + lexical), neighbour spreading, the verdicts of
the gate with its per-store floor (probed with generic questions), metadata filters, the time
and the project a prompt names, and searching several stores at once.
Callers go through `ocat.memory`."""
