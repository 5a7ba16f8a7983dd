"""Stage ② compile: solutions into loadable artifacts (g++, nvcc), compile-only checks, the build cache."""
