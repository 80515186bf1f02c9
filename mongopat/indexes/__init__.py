"""Index advice: which index serves a read, what a read examines with it, and what the server's planner did.

- :mod:`~mongopat.indexes.shape`: a read as the planner sees it (equalities, ``$in``, sort, ranges, the rest).
- :mod:`~mongopat.indexes.catalog`: an existing index as the report records it, and what it can serve.
- :mod:`~mongopat.indexes.planner`: the index MongoDB's equality, sort, range rule gives a read, and the keys
  and documents a read examines with a given index (or none), from the report's cardinalities.
- :mod:`~mongopat.indexes.explain`: the server's own plan for a read (``explain`` with executionStats),
  summarised in the same figures.

The rules that report findings (missing, redundant and unused indexes) live with the other rules.
"""
