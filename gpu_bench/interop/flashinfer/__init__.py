"""FlashInfer Trace: definitions imported as tasks, their starting kernels, solutions exported as datasets."""
