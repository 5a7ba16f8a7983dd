"""Public benchmarks in and out: FlashInfer Trace datasets, KernelBench problems, synthesized inputs."""
