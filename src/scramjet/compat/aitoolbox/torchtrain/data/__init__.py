"""Datasets and batch feed definitions for the ``TrainLoop`` family."""
