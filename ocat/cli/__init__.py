"""The `ocat` command: `dispatch` (parse argv once, load settings, run one face; exit codes),
`parser` (the grammar: the `ocat` and `ocat mcp` argument parsers) and `reference` (docs/cli.md
rendered from that grammar). Nothing here is imported up front, so `--help` stays quick."""
