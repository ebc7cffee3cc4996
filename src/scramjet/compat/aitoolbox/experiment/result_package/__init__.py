"""AIToolbox result packages: the base class, the ready-made packages and their wrappers."""
