"""What the gateway does, one module per operation, each over a ``Context``:

``prepare`` (an agent's job), ``preview`` (current against planned, a single-use token),
``confirm`` and ``dispatch`` (the writes: intent, request, read-back, outcome),
``reconcile`` (accept an observed state), ``reject``, ``overlaps`` (which jobs hold a
resource), ``recovery`` (what a stop or a refused commit left behind), ``quotas``, and
``endpoint_check`` (earning the attestation on a test copy: each kind runs its probes).
"""
