"""Finding memories: ranking candidates (dense + lexical), neighbour spreading, the verdicts of
the gate with its per-store floor, metadata filters, and searching several stores at once.
Callers go through `ocat.memory`."""
