"""AIToolbox's ``aitoolbox.experiment.result_reporting`` modules."""
