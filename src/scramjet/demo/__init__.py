"""``scramjet demo``: generated data, packed, trained on and tracked, end to end.

``run.py`` is the command; ``data.py`` makes the images and the small CNN it trains.
"""
