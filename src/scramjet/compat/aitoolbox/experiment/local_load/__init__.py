"""AIToolbox's ``aitoolbox.experiment.local_load`` modules."""
