"""Stage ⑥ time: CPU and GPU timing, cache flushes, the per-GPU lock, and the statistics of samples."""
