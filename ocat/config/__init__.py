"""Configuration: the layers read (`loading`), the file and its keys, the typed settings,
where ocat keeps its files, and themes."""
