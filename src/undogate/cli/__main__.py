"""``python -m undogate.cli``: the same as ``undogate``."""

from . import main

main()
