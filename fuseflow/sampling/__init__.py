"""Sampled simulation: a region estimated from a sample of its row units, with a stated interval (docs/sampling.md)."""
