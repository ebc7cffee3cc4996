"""AIToolbox's ``aitoolbox.experiment.core_metrics`` modules."""
