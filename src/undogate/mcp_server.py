"""``python -m undogate.mcp_server``: the same as ``undogate mcp`` (the name agent
configurations written before ``undogate.mcp`` became a package still launch)."""

from .mcp.bridge import main

if __name__ == "__main__":  # pragma: no cover
    main()
