"""``python -m undogate.mcp_server``: the name agent configurations written before
``undogate.mcp`` became a package still launch; it runs the same program as
``undogate mcp`` (``mcp.bridge``)."""
