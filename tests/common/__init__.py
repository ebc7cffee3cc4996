"""A tiny synthetic world shared by the tests: models, datasets and recording helpers."""
