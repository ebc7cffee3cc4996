"""AIToolbox's result-package base class and the two wrappers built on it.

A result package is AIToolbox's evaluation of one task: a subclass implements
:meth:`AbstractResultPackage.prepare_results_dict`, which reads ``self.y_true``,
``self.y_predicted`` (and ``self.additional_results``) and returns ``{metric: value}``;
:meth:`AbstractResultPackage.prepare_result_package` stores the inputs and calls it.

Prepared packages combine: ``a + b`` returns a :class:`MultipleResultPackageWrapper` of
copies of both (results keyed by package name; a repeated name gets its position as a
suffix), ``a + {"metric": value}`` wraps the dict as a :class:`PreCalculatedResultPackage`,
and ``a += b`` merges ``b``'s metrics into ``a`` (a metric name present in both is an error).
"""

from __future__ import annotations

import copy
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["AbstractResultPackage", "MultipleResultPackageWrapper", "PreCalculatedResultPackage"]


def _as_array(values: Any) -> Any:
    """``np.array(values)``; ragged inputs (token lists of different lengths) stay as given."""
    try:
        return np.array(values)
    except ValueError:
        return values


def _not_prepared(pkg: AbstractResultPackage, action: str) -> ValueError:
    return ValueError(
        f"{type(pkg).__name__} ({pkg.pkg_name!r}) has no results yet, so it cannot {action}; "
        f"call prepare_result_package(y_true, y_predicted) on it first."
    )


def _check_dump_paths(paths: Any) -> None:
    """Raise unless ``paths`` is a list of ``[file_name, file_path]`` string pairs."""
    ok = isinstance(paths, list) and all(
        isinstance(pair, list | tuple)
        and len(pair) == 2
        and all(isinstance(part, str) for part in pair)
        for pair in paths
    )
    if not ok:
        raise ValueError(
            f"list_additional_results_dump_paths() must return a list of [file_name, file_path] "
            f"string pairs, e.g. [['plot.png', '/run/results/plot.png']]; received {paths!r}."
        )


class AbstractResultPackage(ABC):
    """Base of every result package.

    Args:
        pkg_name: the package's name (the key of its results in a combined package and the
            name of its results in a saved experiment).
        strict_content_check: raise :class:`ValueError` on missing results or
            hyperparameters instead of warning.
        np_array: convert ``y_true`` and ``y_predicted`` to numpy arrays before
            :meth:`prepare_results_dict` runs.
        **kwargs: kept as ``package_metadata``.
    """

    def __init__(
        self,
        pkg_name: str | None = None,
        strict_content_check: bool = False,
        np_array: bool = True,
        **kwargs: Any,
    ) -> None:
        self.pkg_name = pkg_name
        self.strict_content_check = strict_content_check
        self.np_array = np_array
        self.y_true: Any = None
        self.y_predicted: Any = None
        self.additional_results: dict[str, Any] | None = None
        self.results_dict: Any = None
        self.hyperparameters: Any = None
        self.package_metadata: dict[str, Any] = kwargs
        self.requires_loss = False
        self.additional_results_dump_paths: list[list[str]] | None = None

    @abstractmethod
    def prepare_results_dict(self) -> dict[str, Any]:
        """Compute the metrics from ``self.y_true`` and ``self.y_predicted``."""

    def prepare_result_package(
        self,
        y_true: Any,
        y_predicted: Any,
        hyperparameters: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Store targets, predictions and hyperparameters, then compute the results.

        Extra keyword arguments (``metadata``, ``training_history``, ...) are kept in
        ``self.additional_results``. Returns ``self.results_dict``.
        """
        self.y_true = _as_array(y_true) if self.np_array else y_true
        self.y_predicted = _as_array(y_predicted) if self.np_array else y_predicted
        self.hyperparameters = hyperparameters
        self.additional_results = kwargs
        self.results_dict = self.prepare_results_dict()
        return self.results_dict

    def get_results(self) -> Any:
        """The computed results (None, with a warning, before they are computed)."""
        if self.results_dict is None:
            self.warn_about_result_data_problem(
                f"{type(self).__name__} has no results yet; call prepare_result_package first."
            )
        return self.results_dict

    def get_hyperparameters(self) -> Any:
        """The hyperparameters given to :meth:`prepare_result_package`."""
        self.qa_check_hyperparameters_dict()
        return self.hyperparameters

    def get_additional_results_dump_paths(self) -> list[list[str]] | None:
        """Files the package wrote besides its results, checked: ``[[name, path], ...]``."""
        paths = self.list_additional_results_dump_paths()
        if paths is not None:
            _check_dump_paths(paths)
        self.additional_results_dump_paths = paths
        return paths

    def list_additional_results_dump_paths(self) -> list[list[str]] | None:
        """Override to report extra files (plots, dumps) the package wrote."""
        return None

    def qa_check_hyperparameters_dict(self) -> None:
        """Warn (or raise, when strict) if no hyperparameters were given."""
        if self.hyperparameters is None:
            self.warn_about_result_data_problem(
                f"{type(self).__name__} has no hyperparameters; pass hyperparameters= to "
                f"prepare_result_package."
            )

    def warn_about_result_data_problem(self, msg: str) -> None:
        """Warn with ``msg``; raise :class:`ValueError` instead when ``strict_content_check``."""
        if self.strict_content_check:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=3)

    def set_experiment_dir_path_for_additional_results(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        local_model_result_folder_path: str,
    ) -> None:
        """Called before evaluation with the run's location; override to write extra files."""
        return None

    def _require_results(self, action: str) -> dict[str, Any]:
        if self.results_dict is None:
            raise _not_prepared(self, action)
        return dict(self.results_dict)

    def __str__(self) -> str:
        results = self.results_dict or {}
        return "\n".join(f"{name}: {value}" for name, value in results.items())

    def __len__(self) -> int:
        return len(self.results_dict or {})

    def __contains__(self, metric: object) -> bool:
        return metric in self._require_results("be searched")

    def __getitem__(self, metric: str) -> Any:
        return self._require_results("be indexed")[metric]

    def __add__(self, other: Any) -> MultipleResultPackageWrapper:
        self._require_results("be combined")
        return _combined([copy.deepcopy(self), _as_package(other, "combined with")], self)

    def __radd__(self, other: Any) -> MultipleResultPackageWrapper:
        return self.__add__(other)

    def __iadd__(self, other: Any) -> AbstractResultPackage:
        mine = self._require_results("take more results")
        theirs = _as_package(other, "appended to")._require_results("be appended")
        clash = sorted(set(mine) & set(theirs))
        if clash:
            raise ValueError(
                f"cannot append results to {self.pkg_name!r}: metrics {clash} are in both; "
                f"rename them or combine the packages with + (results stay apart by package)."
            )
        self.results_dict = {**mine, **theirs}
        return self


def _as_package(other: Any, action: str) -> AbstractResultPackage:
    """A prepared package, or a dict of metrics wrapped as one."""
    if isinstance(other, AbstractResultPackage):
        other._require_results(f"be {action} another package")
        return copy.deepcopy(other)
    if isinstance(other, dict):
        return PreCalculatedResultPackage(other)
    raise ValueError(
        f"a result package can be {action} another prepared result package or a dict of "
        f"metrics; received {type(other).__name__} {other!r}."
    )


def _combined(
    packages: list[AbstractResultPackage], first: AbstractResultPackage
) -> MultipleResultPackageWrapper:
    wrapper = MultipleResultPackageWrapper(strict_content_check=first.strict_content_check)
    wrapper.prepare_result_package(packages, hyperparameters=first.hyperparameters)
    return wrapper


class PreCalculatedResultPackage(AbstractResultPackage):
    """Results computed elsewhere, given as a dict, so they combine with other packages.

    Args:
        results_dict: ``{metric: value}``.
        strict_content_check: see :class:`AbstractResultPackage`.
    """

    def __init__(
        self, results_dict: Mapping[str, Any], strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        super().__init__("PreCalculatedResult", strict_content_check, np_array=False, **kwargs)
        self.results_dict = dict(results_dict)
        self.hyperparameters = {}

    def prepare_results_dict(self) -> dict[str, Any]:
        """The given results, unchanged."""
        return dict(self.results_dict)


class MultipleResultPackageWrapper(AbstractResultPackage):
    """Several result packages evaluated together; results are keyed by package name.

    ``prepare_result_package([pkg_a, pkg_b])`` wraps prepared packages;
    ``prepare_result_package(y_true, y_predicted)`` (as a TrainLoop calls it) evaluates every
    wrapped package on the same predictions. A name that repeats gets its position as a suffix.
    """

    def __init__(self, strict_content_check: bool = False, **kwargs: Any) -> None:
        super().__init__("MultipleResultWrapper", strict_content_check, np_array=False, **kwargs)
        self.result_packages: list[AbstractResultPackage] = []

    def prepare_result_package(  # type: ignore[override]
        self, result_packages: Any, *args: Any, hyperparameters: Any = None, **kwargs: Any
    ) -> Any:
        """Wrap ``result_packages`` (a list), or evaluate the wrapped ones on ``(y_true, y_pred)``."""
        wrapping = isinstance(result_packages, Sequence) and all(
            isinstance(pkg, AbstractResultPackage) for pkg in result_packages
        )
        if wrapping and not isinstance(result_packages, str):
            if args:
                hyperparameters = args[0]
            self.result_packages = list(result_packages)
        elif len(args) == 1 and self.result_packages:
            for pkg in self.result_packages:
                pkg.prepare_result_package(
                    result_packages, args[0], hyperparameters=hyperparameters, **kwargs
                )
        else:
            raise ValueError(
                "MultipleResultPackageWrapper.prepare_result_package takes a list of result "
                "packages, or (y_true, y_predicted) once it wraps packages; received "
                f"{type(result_packages).__name__} and {len(args)} more positional arguments."
            )
        self.hyperparameters = hyperparameters
        self.additional_results = kwargs
        self.results_dict = self.prepare_results_dict()
        return self.results_dict

    def _named(self) -> list[tuple[str, AbstractResultPackage]]:
        names: list[tuple[str, AbstractResultPackage]] = []
        taken: set[str] = set()
        for i, pkg in enumerate(self.result_packages):
            name = str(pkg.pkg_name)
            if name in taken:
                name = f"{name}{i}"
            taken.add(name)
            names.append((name, pkg))
        return names

    def prepare_results_dict(self) -> dict[str, Any]:
        """``{package name: its results}``; also fills ``y_true``/``y_predicted`` by name."""
        named = self._named()
        self.y_true = {name: pkg.y_true for name, pkg in named}
        self.y_predicted = {name: pkg.y_predicted for name, pkg in named}
        return {
            name: pkg.get_results() if pkg.results_dict is not None else None for name, pkg in named
        }

    def get_additional_results_dump_paths(self) -> list[list[str]] | None:
        """The extra files of every wrapped package."""
        paths: list[list[str]] = []
        for pkg in self.result_packages:
            paths += pkg.get_additional_results_dump_paths() or []
        return paths or None

    def set_experiment_dir_path_for_additional_results(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        local_model_result_folder_path: str,
    ) -> None:
        """Passed on to every wrapped package."""
        for pkg in self.result_packages:
            pkg.set_experiment_dir_path_for_additional_results(
                project_name, experiment_name, experiment_timestamp, local_model_result_folder_path
            )

    def __str__(self) -> str:
        return "\n".join(f"--> {pkg.pkg_name}:\n{pkg}" for pkg in self.result_packages)

    def __len__(self) -> int:
        return len(self.result_packages)

    def __add__(self, other: Any) -> MultipleResultPackageWrapper:
        self._require_results("be combined")
        packages = copy.deepcopy(self.result_packages)
        return _combined([*packages, _as_package(other, "combined with")], self)

    def __iadd__(self, other: Any) -> MultipleResultPackageWrapper:
        self._require_results("take more results")
        self.result_packages.append(_as_package(other, "appended to"))
        self.results_dict = self.prepare_results_dict()
        return self
