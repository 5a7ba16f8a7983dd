// Plain C++ for g++: an unused variable, a template error with its instantiation, a call with notes.
#include <vector>

struct Point
{
    int x;
};

template <typename T>
T sum(const std::vector<T>& v)
{
    T total = 0;
    for (const T& item : v) total += item;
    return total;
}

int area(int w, int h);

int main()
{
    int unused_count = 3;
    std::vector<Point> points(4);
    return sum(points).x + area(2);
}
