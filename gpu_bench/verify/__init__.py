"""Stage ⑤ correctness: the inputs of a trial, the reference as a solution, output comparison, integrity."""
