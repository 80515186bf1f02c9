"""The dump-folder backend: migrations on mongodump or mongoexport files, each step rewriting whole files
atomically.

``runner.py`` holds what every kind of step shares (the folder, the lease, progress, a step's context
read from the files); ``files.py`` the changelog, lock and collection files; ``rewrites.py`` the file
rewrite of document and bucket steps; the kinds are ``document_steps.py``, ``bucket_steps.py`` (with
``bucket_lines.py``, relaxed JSON lines bucketed on several processes cut by ``file_parts.py``) and
``collection_steps.py`` (through ``catalog.py``).
"""
