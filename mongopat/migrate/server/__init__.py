"""The server backend: migrations on a live deployment while the application writes.

``runner.py`` holds what every kind of step shares (scan in ``_id`` order, catch-up passes, checkpoints,
pacing, lag, lease); ``steps.py`` is what a kind of step gets from it; the kinds are ``document_steps.py``
(with ``in_server_steps.py`` for the steps MongoDB computes itself, and ``document_versions.py`` for the
versions read, the compare-and-swap filters and the backups), ``bucket_steps.py`` and
``collection_steps.py`` (through ``catalog.py``).
"""
