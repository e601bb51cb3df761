"""Signed webhooks (docs/webhooks.md): operators hear when a job is prepared, needs review, is
applied, undone or rejected.

- ``settings``: the ``webhooks:`` config section (pure; ``config`` imports it).
- ``events``: which job state makes which event, and the outbox rows a state change
  adds in its own transaction (ids, states, a review link; never values).
- ``signing``: the Standard Webhooks signature.
- ``delivery``: the background task that sends what the outbox holds, with bounded
  retries, through the network policy of docs/security.md; it never holds up a write.

Nothing is imported here, so ``config`` can import ``settings`` without the rest.
"""
