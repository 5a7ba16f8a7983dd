// Runaway template recursion: a long instantiation context with elided entries.
template <int N>
struct Depth
{
    static const int value = Depth<N + 1>::value;
};

__global__ void deep(int* out) { out[0] = Depth<0>::value; }
