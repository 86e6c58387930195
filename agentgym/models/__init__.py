"""Models: loading (HF ids, local folders, SmolLM2 GGUF -> HF checkpoint), batched generation with
sampling log-probs, tiny random test models, and an OpenAI-compatible server.

This layer sits below agents and ``rl``: acting and training both use it, it uses neither.

* ``loading`` -- ``load_model`` for HF ids / folders / the offline SmolLM2.
* ``generation`` -- ``HFGenerator`` / ``VLLMGenerator``, chat prompt ids, stop strings, suppressed ids.
* ``tiny`` -- tiny random Qwen2/Llama models with a locally trained byte-level BPE (tests, CPU).
* ``serve`` -- ``agentgym serve`` / ``python -m agentgym.models.serve``: OpenAI-compatible chat completions
  (``--engine hf``: the built-in engine; ``--engine vllm``: vLLM's own server).
* ``engine`` -- the built-in engine: batched generation, time-sliced between requests, tokens as they come.
* ``openai_schema`` / ``openai_http`` -- the pydantic request/response models and the FastAPI app.
"""
