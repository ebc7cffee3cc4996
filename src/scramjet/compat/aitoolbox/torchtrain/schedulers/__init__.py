"""AIToolbox's learning-rate schedulers as callbacks: ``basic`` (torch schedulers) and ``warmup``."""
