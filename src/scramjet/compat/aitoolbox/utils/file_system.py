"""AIToolbox's file-system helpers: folder hierarchies and zip archives."""

from __future__ import annotations

import os
import shutil
import zipfile

__all__ = ["create_folder_hierarchy", "unzip_file", "zip_folder"]


def create_folder_hierarchy(
    base_folder_path: str, folder_names: list[str]
) -> tuple[str, list[str]]:
    """Create ``base/f1/f2/...`` (existing folders are kept).

    Returns:
        The innermost folder, and every folder of the chain starting with ``base``.

    Raises:
        ValueError: ``base_folder_path`` does not exist.
    """
    if not os.path.isdir(base_folder_path):
        raise ValueError(
            f"base folder {base_folder_path!r} does not exist; create it first or pass an "
            f"existing folder."
        )
    path, created = base_folder_path, [base_folder_path]
    for name in folder_names:
        path = os.path.join(path, name)
        os.makedirs(path, exist_ok=True)
        created.append(path)
    return path, created


def zip_folder(source_dir_path: str, zip_path: str) -> str:
    """Zip the contents of ``source_dir_path`` into ``zip_path`` (``.zip`` added if missing).

    Returns:
        The path of the archive.
    """
    base = zip_path[: -len(".zip")] if zip_path.endswith(".zip") else zip_path
    return shutil.make_archive(base, "zip", root_dir=source_dir_path)


def unzip_file(file_path: str, target_dir_path: str) -> str:
    """Extract the archive ``file_path`` into ``target_dir_path``; returns the target folder."""
    with zipfile.ZipFile(file_path, "r") as archive:
        archive.extractall(target_dir_path)
    return target_dir_path
