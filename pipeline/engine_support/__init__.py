"""What the engines run on, kept out of the engines' plugin folder (whose every module is an engine): vLLM's
environment (:mod:`~pipeline.engine_support.vllm_env`) and the watchdog that fails a stream when an engine's worker
process dies (:mod:`~pipeline.engine_support.watchdog`)."""
