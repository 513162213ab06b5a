"""The store and everything kept beside it: Chroma (the primary store: exchanges, documents,
thread titles), the derived files (lexical index, prompt vectors) and bringing them level on
open, export and import. Callers go through `ocat.memory`."""
