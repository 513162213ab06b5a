"""The Textual chat app: the only package that imports Textual."""
