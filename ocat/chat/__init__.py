"""The chat: a session (its thread, its memory, what was not saved yet), one turn at a time,
the messages a turn sends, and the prompts typed before. Every face drives the same `Turn`."""
