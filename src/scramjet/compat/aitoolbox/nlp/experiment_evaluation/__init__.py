"""AIToolbox's ``aitoolbox.nlp.experiment_evaluation``: NLP metrics, packages, heatmaps."""
