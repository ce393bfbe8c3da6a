"""vLLM as a PDD engine: a KV connector, a block store and an agent-side adapter.

- ``connector.PddBlockConnector`` is a vLLM v1 KV connector (``KVConnectorBase_V1``) loaded
  by vLLM through ``kv_connector_module_path``: it saves the blocks a prefill computed into the
  ``store`` and loads the blocks a request can reuse from it.
- ``store.BlockStore`` is where vLLM's worker and the PDD agent meet: one file per block,
  named by the PDD chain hash, holding exactly a ``KVBlock``'s bytes.
- ``engine.VLLMEngine`` speaks ``engine.protocol.Engine`` to the agents over vLLM's
  OpenAI-compatible HTTP server, so P, RLD and MD run unchanged on a vLLM instance.
- ``config`` reads the topology's ``engine.vllm`` section and builds each role's server command.

Only ``connector`` and ``checkpoint`` import vLLM, torch or safetensors, and only when used:
``pdd_core`` imports without them.
"""
