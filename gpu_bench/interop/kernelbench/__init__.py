"""KernelBench: a problem module imported as a task (its constants, values, generated code, task folder)."""
