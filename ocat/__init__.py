"""ocat: a terminal chat client with episodic memory."""

__version__ = "0.1.0"
