"""Models: a tiny causal LM made here with no download; later, loading and generation.

Importing this package (or :mod:`monte.models.tiny`) imports neither torch nor transformers.
"""
