nvcc -arch=sm_90a -lineinfo -ptx /tmp/evoteam-cuda/broken/bad_inline_ptx.cu -o /tmp/evoteam-cuda/bad_inline_ptx.ptx
