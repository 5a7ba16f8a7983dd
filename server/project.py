"""The repository the editor has open: its git root, and which open file is which kernel task.

A repository may hold several ``evoteam.toml`` files (one per task folder); the one that governs a file is the
nearest above it. Task lists are cached per ``evoteam.toml`` by its modification time, so asking on every
request costs a ``stat``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from evoteam.gpu_bench.api import KernelTask, TaskError, find_config, load_tasks


@dataclass(frozen=True)
class TaskFile:
    """An open file that is a task's entry source (``extra`` False) or one of its extra sources."""

    task: KernelTask
    config: Path
    extra: bool = False


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._tasks: dict[Path, tuple[int, list[KernelTask] | TaskError]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def open(folder: Path) -> Project:
        """The project of a workspace folder: its git root when it is in a repository, else the folder."""
        for candidate in [folder, *folder.parents]:
            if (candidate / ".git").exists():
                return Project(candidate.resolve())
        return Project(folder.resolve())

    def tasks(self, config: Path) -> list[KernelTask]:
        """The tasks of one ``evoteam.toml`` (raises ``TaskError`` when it is invalid)."""
        try:
            stamp = config.stat().st_mtime_ns
        except OSError as exc:
            raise TaskError(f"cannot read {config}: {exc.strerror}") from None
        with self._lock:
            cached = self._tasks.get(config)
        if cached is None or cached[0] != stamp:
            try:
                loaded: list[KernelTask] | TaskError = load_tasks(config)
            except TaskError as exc:
                loaded = exc
            cached = (stamp, loaded)
            with self._lock:
                self._tasks[config] = cached
        if isinstance(cached[1], TaskError):
            raise cached[1]
        return cached[1]

    def task_for(self, path: Path) -> TaskFile | None:
        """The task whose source (or extra source) ``path`` is, or None; an invalid evoteam.toml is None too."""
        config = find_config(path.parent)
        if config is None:
            return None
        try:
            tasks = self.tasks(config)
        except TaskError:
            return None
        resolved = path.resolve()
        for task in tasks:
            if task.source.resolve() == resolved:
                return TaskFile(task, config)
        for task in tasks:
            if any(p.resolve() == resolved for p in task.extra_sources):
                return TaskFile(task, config, extra=True)
        return None

    def config_error(self, path: Path) -> str | None:
        """Why the ``evoteam.toml`` governing ``path`` cannot be read, or None when it can (or there is none)."""
        config = find_config(path.parent)
        if config is None:
            return None
        try:
            self.tasks(config)
        except TaskError as exc:
            return str(exc)
        return None
