"""The gateway's process: the OpenAI-compatible HTTP API (``api``), admission, the router it
holds (``route``), a request's run and its attempts over P, RLD and MD (``run``, ``attempt``),
the control plane's configuration applied live (``control``) and the agents' health (``probe``).
``server.Gateway`` ties them together."""
