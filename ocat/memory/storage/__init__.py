"""The store and everything kept beside it: Chroma (the primary store: exchanges, documents,
thread titles, pins) with its writes and deletes, the derived files (lexical index, prompt
vectors) and bringing them level on open, export and import. Callers go through `ocat.memory`."""
