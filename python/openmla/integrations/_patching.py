"""Rebinding an engine's module attributes to OpenMLA: at once for modules already imported, and
right after the engine imports the others (a meta-path finder that wraps their loader)."""

from __future__ import annotations

import dataclasses
import importlib.abc
import logging
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

_log = logging.getLogger("openmla.integrations")


@dataclasses.dataclass(frozen=True)
class Installed:
    """What an engine's install() did. ``patched``: the "module.attribute" names that now resolve
    to OpenMLA. ``waiting``: modules the engine has not imported yet; they are patched when it
    imports them (so ``patched`` grows: install() again, or installed(), reports it)."""

    engine: str
    patched: Tuple[str, ...]
    waiting: Tuple[str, ...]


# A replacement is made from the engine's original (e.g. to match its parameter order).
Replacement = Callable[[Any], Any]


def enabled_by(variable: str) -> bool:
    """Whether the environment variable is set to something other than '', '0', 'false', 'no'."""
    return os.environ.get(variable, "").strip().lower() not in ("", "0", "false", "no", "off")


class _PatchingLoader(importlib.abc.Loader):
    """The engine's loader, followed by the patch. The module sees its own loader while it runs."""

    def __init__(self, loader: Any, on_import: Callable[[Any], None]) -> None:
        self._loader = loader
        self._on_import = on_import

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._on_import(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the engine's loader
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the watched names it asks the finders after it and wraps the
    loader of the spec they return."""

    def __init__(self, names: Iterable[str], on_import: Callable[[Any], None]) -> None:
        self._names = frozenset(names)
        self._on_import = on_import

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: Any = None) -> Any:
        if fullname not in self._names:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self._on_import)
        return spec


class Patcher:
    """install() / uninstall() for one engine: `targets` maps a module name to the attributes to
    rebind there and how to make each replacement. Attributes a module does not have are left
    alone (an engine version without them does not use them)."""

    def __init__(self, engine: str, targets: Mapping[str, Mapping[str, Replacement]]) -> None:
        self.engine = engine
        self._targets = {module: dict(attrs) for module, attrs in targets.items()}
        self._originals: Dict[Tuple[str, str], Any] = {}
        self._replacements: Dict[Tuple[str, str], Any] = {}
        self._finder: Optional[_PostImportFinder] = None
        self._lock = threading.RLock()

    def _patch(self, module: Any) -> None:
        with self._lock:
            if self._finder is None:  # uninstalled while the engine was importing it
                return
            name = module.__name__
            for attr, make in self._targets.get(name, {}).items():
                if not hasattr(module, attr):
                    continue
                key = (name, attr)
                current = getattr(module, attr)
                if key in self._replacements and current is self._replacements[key]:
                    continue  # ours already
                replacement = make(current)
                self._originals[key] = current
                self._replacements[key] = replacement
                setattr(module, attr, replacement)
                _log.info("%s.%s -> %s.%s", name, attr, replacement.__module__, replacement.__qualname__)

    def install(self) -> Installed:
        with self._lock:
            if self._finder is None:
                self._finder = _PostImportFinder(self._targets, self._patch)
                sys.meta_path.insert(0, self._finder)
            for name in self._targets:
                module = sys.modules.get(name)
                if module is not None:
                    self._patch(module)
            return self.installed()

    def installed(self) -> Installed:
        with self._lock:
            patched = tuple(f"{name}.{attr}" for (name, attr), replacement in self._replacements.items()
                            if getattr(sys.modules.get(name), attr, None) is replacement)
            waiting = tuple(name for name in self._targets if name not in sys.modules) if self._finder else ()
            return Installed(self.engine, patched, waiting)

    def uninstall(self) -> Tuple[str, ...]:
        with self._lock:
            if self._finder is not None and self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
            restored = []
            for (name, attr), replacement in self._replacements.items():
                module = sys.modules.get(name)
                if module is not None and getattr(module, attr, None) is replacement:
                    setattr(module, attr, self._originals[(name, attr)])
                    restored.append(f"{name}.{attr}")
            self._originals.clear()
            self._replacements.clear()
            return tuple(restored)
