"""AIToolbox's ``aitoolbox.cloud``: S3 and Google Cloud Storage savers and loaders.

Every transfer goes through :mod:`scramjet.tracking.storage` (fsspec, bounded waits,
retries with backoff), the same layer that mirrors a scramjet run folder.
"""
