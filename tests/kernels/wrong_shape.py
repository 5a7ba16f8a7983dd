"""Value-returning: returns one element too few."""


def run(x, y):
    return (2 * x + y)[:-1]
