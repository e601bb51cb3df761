"""The agent tools over MCP (docs/agents.md): ``list_resources`` and ``prepare_changes``.

One set of tools, two transports:

- **Streamable HTTP** (``http.McpApp``), mounted at ``/mcp`` on ``undogate serve``.
  Every HTTP request carries an agent token as bearer; it is authenticated by the
  ``Service`` on each request, and the tools call the ``Service`` in process
  (``http.ServiceBackend``).
- **stdio** (``bridge.run_stdio``, ``undogate mcp``; the transport is ``stdio``) for agents
  that launch tools as subprocesses. It forwards to a running gateway's HTTP API
  (``UNDOGATE_URL``) with the agent token from ``UNDOGATE_AGENT_TOKEN``.

Both transports read every message losslessly before the SDK does (``wire``), and
a tool takes its arguments from that reading, never from the SDK's float-parsed copy:
``prepare_changes`` parses them with the API's own parser, so numbers keep their exact
text and every refusal carries the code ``POST /api/v1/jobs`` gives for the same body.

An agent sees only the tools its config lists (``agents.opted_in``); there is no
tool to apply, confirm, undo, reconcile or reject: those are a person's acts. The
tools are thin: they call the same service functions as the API
(``agents.list_resources``, ``parse_prepare`` + ``agents.prepare``) and render the
same views (``views.resource_view``, ``views.agent_receipt``). Results never
carry URLs, tokens or before-values; refusals are MCP tool errors whose text starts
with the stable error code and says what the model can do next.
"""
