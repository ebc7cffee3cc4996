"""AIToolbox's ``aitoolbox.experiment.local_save`` modules."""
