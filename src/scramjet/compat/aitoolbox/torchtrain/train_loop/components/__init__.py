"""The parts a ``TrainLoop`` is built from: callback handler, messages, prediction store."""
