"""AIToolbox's small function helpers."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["copy_function", "flatten_list_of_lists", "function_exists", "is_empty_function"]


def function_exists(object_to_check: Any, fn_name: str) -> bool:
    """True if ``object_to_check.<fn_name>`` exists and is callable."""
    return callable(getattr(object_to_check, fn_name, None))


def copy_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A new plain function with ``fn``'s code; a bound method's ``self`` becomes its first argument.

    The copy can be attached to another object and called with that object as ``self``.
    """
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        raise TypeError(
            f"copy_function takes a Python function or method; received {type(fn).__name__}."
        )
    copied = types.FunctionType(
        func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
    )
    copied.__kwdefaults__ = func.__kwdefaults__
    copied.__dict__.update(func.__dict__)
    copied.__qualname__ = func.__qualname__
    return copied


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def is_empty_function(fn: Callable[..., Any]) -> bool:
    """True if the function's body holds only ``pass`` (and possibly a docstring)."""
    func = getattr(fn, "__func__", fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    body = node.body[1:] if node.body and _is_docstring(node.body[0]) else node.body
    return all(isinstance(stmt, ast.Pass) for stmt in body)


def flatten_list_of_lists(nested_list: Iterable[Iterable[Any]] | None) -> list[Any] | None:
    """Join the inner lists into one list (one level); None stays None."""
    if nested_list is None:
        return None
    return [item for sub_list in nested_list for item in sub_list]
