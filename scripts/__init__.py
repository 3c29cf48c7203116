"""Repository tools that are neither part of the product nor benchmarks."""
