"""Watches ``.evoteam/`` (journals, knowledge) and the folders of the kernel files with watchdog, and calls back
once per burst of changes (debounced), from watchdog's thread: the callback must hand over to the event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

DEBOUNCE_S = 0.15
MAX_WAIT_S = 0.75


class Watcher(Protocol):
    def watch(self, folder: Path, recursive: bool) -> None: ...

    def stop(self) -> None: ...


class _Burst(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[set[Path]], None], debounce_s: float) -> None:
        self.on_change = on_change
        self.debounce_s = debounce_s
        self._paths: set[Path] = set()
        self._timer: threading.Timer | None = None
        self._burst_start = 0.0
        self._lock = threading.Lock()

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        with self._lock:
            for raw in (event.src_path, getattr(event, "dest_path", "")):
                if raw:
                    self._paths.add(Path(raw if isinstance(raw, str) else raw.decode()))
            now = time.monotonic()
            if self._timer is not None:
                self._timer.cancel()
            else:
                self._burst_start = now
            # a long burst (a run writing its journal) still fires every MAX_WAIT_S, not only when it pauses
            wait = 0.0 if now - self._burst_start >= MAX_WAIT_S else self.debounce_s
            self._timer = threading.Timer(wait, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            paths, self._paths, self._timer = self._paths, set(), None
        if paths:
            self.on_change(paths)

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


class FileWatcher:
    """The real watcher. ``watch`` a folder once (again is a no-op); ``stop`` ends the observer thread."""

    def __init__(self, on_change: Callable[[set[Path]], None], debounce_s: float = DEBOUNCE_S) -> None:
        self._handler = _Burst(on_change, debounce_s)
        self._observer = Observer()
        self._observer.daemon = True
        self._watched: set[tuple[Path, bool]] = set()
        self._started = False

    def watch(self, folder: Path, recursive: bool) -> None:
        key = (folder.resolve(), recursive)
        if key in self._watched or not folder.is_dir():
            return
        self._observer.schedule(self._handler, str(key[0]), recursive=recursive)
        self._watched.add(key)
        if not self._started:
            self._observer.start()
            self._started = True

    def stop(self) -> None:
        self._handler.cancel()
        if self._started:
            self._observer.stop()
            self._observer.join(timeout=2)


class FakeWatcher:
    """Records what it was asked to watch; ``fire`` plays a change."""

    def __init__(self, on_change: Callable[[set[Path]], None]) -> None:
        self.on_change = on_change
        self.watched: list[tuple[Path, bool]] = []
        self.stopped = False

    def watch(self, folder: Path, recursive: bool) -> None:
        self.watched.append((folder, recursive))

    def stop(self) -> None:
        self.stopped = True

    def fire(self, paths: Iterable[Path]) -> None:
        self.on_change(set(paths))
