"""``python -m undogate.mcp_server``: the same as ``undogate mcp``."""

from ..mcp.bridge import main

main()
