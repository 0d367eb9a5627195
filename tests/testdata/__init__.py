"""Test fixtures: generated corpora (``corpora.py``)."""
