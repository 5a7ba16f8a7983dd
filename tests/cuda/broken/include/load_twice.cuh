// A header template that is wrong for pointers to non-class types.
template <typename T>
__device__ T load_twice(const T* p)
{
    return p->missing + p[1];
}
