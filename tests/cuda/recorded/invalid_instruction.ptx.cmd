nvcc -arch=sm_90a -lineinfo -ptx /tmp/evoteam-cuda/broken/invalid_instruction.cu -o /tmp/evoteam-cuda/invalid_instruction.ptx
