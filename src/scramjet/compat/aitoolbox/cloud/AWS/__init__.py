"""AIToolbox's ``aitoolbox.cloud.AWS``: S3 savers, loaders and data access."""
