"""Size of scramjet's source per package: files, lines, longest functions, type: ignores.

Usage: python scripts/code_stats.py [SRC_DIR]   (default: src/scramjet)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src/scramjet")
    files: dict[str, int] = defaultdict(int)
    lines: dict[str, int] = defaultdict(int)
    functions: list[tuple[int, str]] = []
    ignores = 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        package = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        text = path.read_text()
        files[package] += 1
        lines[package] += len(text.splitlines())
        ignores += text.count("type: ignore")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((length, f"{rel}:{node.name}"))
    print(f"{'package':<16}{'files':>6}{'lines':>8}")
    for package in sorted(files):
        print(f"{package:<16}{files[package]:>6}{lines[package]:>8}")
    print(f"{'total':<16}{sum(files.values()):>6}{sum(lines.values()):>8}")
    print(f"type: ignore comments: {ignores}")
    print("longest functions (lines, with docstring):")
    for length, name in sorted(functions, reverse=True)[:5]:
        print(f"  {length:>4}  {name}")


if __name__ == "__main__":
    main()
