"""AIToolbox's callbacks, one module per family as in AIToolbox.

``abstract`` (the base classes), ``basic`` (stopping rules, data subsets, functions on
hooks, notices), ``gradient`` (clipping and gradient statistics), ``model_save``,
``model_load``, ``performance_eval`` (metrics into the history, reports), ``tensorboard`` and ``ddp``.
Import from the module, e.g.
``from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import EarlyStopping``.
"""
