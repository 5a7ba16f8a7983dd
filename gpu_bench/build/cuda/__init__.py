"""CUDA compile facts without a GPU: nvcc builds, diagnostics, ptxas resources, constraints on PTX/SASS."""
