nvcc -arch=sm_90a -lineinfo -ptx /tmp/evoteam-cuda/broken/too_much_shared.cu -o /tmp/evoteam-cuda/too_much_shared.ptx
