"""Adding to memory: texts and files as chunked documents, folders as knowledge folders, and
the one path (`add_path`) that chooses between them. Callers go through `ocat.memory`."""
