"""undogate: agents prepare changes, people confirm them, every write has a receipt."""

__version__ = "0.1.0"
