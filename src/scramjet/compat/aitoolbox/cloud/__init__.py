"""AIToolbox's ``aitoolbox.cloud``: S3 and Google Cloud Storage savers and loaders.

S3 transfers use a boto3 client when boto3 is installed (as AIToolbox does); the others,
and S3 without boto3, go through :mod:`scramjet.tracking.storage` (fsspec), the layer
that mirrors a scramjet run folder. Either way the waits are bounded and failed calls
are retried with backoff (see :mod:`._transfer`).
"""
