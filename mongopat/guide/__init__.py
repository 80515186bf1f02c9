"""``mongopat migrate guide``: what the application must change when a migration changes the data's shape.

For every read of the access-pattern file that touches a collection a migration changes, the read as the
application runs it today and the read rewritten for the new shape, both as aggregation pipelines with the
query's values as ``{"$param": ...}`` placeholders; for every write it declares, the driver commands before
and after; the cost of each; the order of deploys; the indexes the new reads need.

- :mod:`placeholders`: the ``$param`` placeholders and their binding to values;
- :mod:`reads`: a read as a pipeline in parts a step can rewrite (:class:`ReadPlan`), and today's read
  built from the access file;
- :mod:`writes`: a write as driver commands (:class:`WritePlan`), and today's writes;
- the rewrites themselves live with each step type, in its module of :mod:`mongopat.migrate.operations`
  (``rewrite_read``, ``during_read``, ``writes`` and ``update_write``, ``deploy``, ``indexes``);
- :mod:`build`: the guide of a list of migrations; :mod:`cost`: documents examined and written;
- :mod:`proof`: runs a guide's reads and writes on the data before and after, and compares;
- :mod:`dump_check`: that comparison on a dump folder migrated by ``migrate up --dump``.
"""

GUIDE_VERSION = 1
