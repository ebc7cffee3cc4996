"""AIToolbox's ``aitoolbox.nlp.core``: text normalisation helpers and the vocabulary."""
