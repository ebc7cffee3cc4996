"""AIToolbox's ``aitoolbox.cloud.GoogleCloud``: Google Cloud Storage savers and loaders."""
