"""``python -m undogate.mcp``: the same as ``undogate mcp``."""

from .bridge import main

main()
