"""The seed libraries' documented names, implemented over scramjet's core.

- :mod:`scramjet.compat.nebulgym` — ``accelerate_model``, ``accelerate_dataset``, ...
- :mod:`scramjet.compat.aitoolbox` — ``TrainLoop`` family, ``TTModel``, result packages
- :mod:`scramjet.compat.nebulae` — ``FuelGenerator``, ``Tank``, ``DashBoard``, ...
- :mod:`scramjet.compat.pytorch_accelerated` — pytorch-accelerated's module paths
  (``Trainer``, callbacks, schedulers, fine-tuning, tracking, utils); see docs/compat.md
"""
