"""Text as ocat handles it: made safe for the terminal, redacted, counted in tokens, bounded,
and cut into chunks for memory."""
