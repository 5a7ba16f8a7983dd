"""Stage ⑦ Nsight Compute profiles: the ncu command, its CSV parsed, and the program ncu runs."""
