"""AIToolbox's ``aitoolbox.utils``: function, file-system and dict helpers."""
