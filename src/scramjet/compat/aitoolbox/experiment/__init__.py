"""AIToolbox's ``aitoolbox.experiment`` package: result packages, metrics, savers, reports.

The sub-modules keep AIToolbox's module paths (``experiment.result_package``,
``experiment.core_metrics``, ``experiment.local_save``, ``experiment.local_load``,
``experiment.experiment_saver``, ``experiment.local_experiment_saver``,
``experiment.result_reporting``); import the names from them.
"""
