// Type mismatches the front end only warns about: a truncating conversion and a printf format.
#include <cstdio>

__global__ void narrow(float* out)
{
    unsigned char small = 300;
    printf("%d\n", out[0]);
    out[0] = small;
}
