"""MongoDB time-series collections (5.0+): their options, what they refuse by server version, and their
buckets as a dump holds them.

- ``options.py``: a collection's ``timeseries`` options (granularity or a custom bucket span), and the
  granularity a measured cadence calls for;
- ``limits.py``: what a time-series collection refuses, by MongoDB version, against a declared workload;
- ``buckets.py``: bucket documents (``system.buckets.<name>``): packed from measurements as the server does
  (uncompressed, version 1), unpacked back, and what a compressed bucket tells without its columns.
"""
