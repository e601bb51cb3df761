"""What undogate can prove to someone who does not trust its server: the ledger's hash
chain (``ledger_check``), a job's receipt that checks without the ledger
(``receipt``), and a passkey's signature over the exact preview it approved
(``preview_digest``, ``assertions``). docs/proof.md says what each proves and what not.
"""
