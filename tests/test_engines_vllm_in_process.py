"""When the vllm engine runs vLLM in the stage's own process (the start-up itself is measured by
benchmarks/vllm_in_process.py and exercised by every real-engine test, in-process being the default)."""

from pipeline.engines.vllm_engine import VLLMOptions, runs_in_process


def test_in_process_unless_the_kwargs_need_processes():
    assert runs_in_process(VLLMOptions())
    assert not runs_in_process(VLLMOptions(in_process=False))
    assert not runs_in_process(VLLMOptions(llm_kwargs={"distributed_executor_backend": "mp"}))
    assert not runs_in_process(VLLMOptions(llm_kwargs={"tensor_parallel_size": 2}))
    assert runs_in_process(VLLMOptions(llm_kwargs={"tensor_parallel_size": 1, "seed": 3}))
