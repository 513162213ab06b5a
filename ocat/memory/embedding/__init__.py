"""Turning text into vectors: the local ONNX MiniLM model (its files found or fetched on first
use) and any embedding model litellm reaches. Callers go through `ocat.memory`."""
