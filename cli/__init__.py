"""The ``evoteam`` command line: the one place that wires the product's parts together."""
