"""What an export is: the base of every exported module (``module.py``), the checks its signatures make in the
graph (``checks.py``), the atomic SavedModel writer (``writer.py``) and reading an export back (``loading.py``)."""
