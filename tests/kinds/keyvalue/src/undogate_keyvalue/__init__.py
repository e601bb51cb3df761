"""An undogate kind from outside undogate: ``keyvalue_entry``, one entry of a key-value
text store (``kind``), and a small store that speaks its protocol (``store``)."""
