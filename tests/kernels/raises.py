def run(x, y, out):
    raise ValueError("this kernel always fails")
