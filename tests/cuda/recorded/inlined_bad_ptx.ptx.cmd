nvcc -arch=sm_90a -lineinfo -ptx /tmp/evoteam-cuda/broken/inlined_bad_ptx.cu -o /tmp/evoteam-cuda/inlined_bad_ptx.ptx
