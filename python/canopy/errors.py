# SPDX-License-Identifier: Apache-2.0
"""The exceptions of the canopy module.

Every error Canopy raises derives from :class:`Error`, and also from the built-in class a caller
would catch without knowing Canopy: bad input is a ``ValueError``, a failed run a
``RuntimeError``. The C++ core raises these same classes (python/src/errors_py.cpp), with the
attributes below. A missing file is Python's own ``FileNotFoundError``.
"""

__all__ = [
    "Error",
    "InputError",
    "InvariantError",
    "GraphError",
    "OptionError",
    "RunError",
    "BackendUnavailableError",
]


class Error(Exception):
    """Base class of every Canopy error."""


class InputError(Error, ValueError):
    """Bad input: a malformed or truncated file, a non-finite or negative value, an unknown name,
    a parameter out of range.

    ``source`` is the file path when the input is a file, else the argument (``"max_leaf"``,
    ``"build_octree: max_depth"``); ``problem`` says what is wrong. ``str(e)`` is
    ``"<source>: <problem>"``, the line the ``canopy`` tool prints.
    """

    def __init__(self, message, source=None, problem=None):
        super().__init__(message)
        self.source = source
        self.problem = problem

    @classmethod
    def of(cls, source, problem):
        """The error for ``source`` (a path or an argument name) and ``problem``."""
        return cls(f"{source}: {problem}", source=source, problem=problem)


class InvariantError(Error, ValueError):
    """An octree that breaks a layout invariant (``Octree.check()``); ``node`` is the first
    offending node, or -1."""

    def __init__(self, message, node=-1):
        super().__init__(message)
        self.node = node


class GraphError(Error, ValueError):
    """A task graph that cannot be scheduled: a cycle, a self-loop, a duplicate edge, a task out of
    range. ``tasks`` lists the tasks involved where the C++ side names them separately (the cycle
    of a DOT file); the message always names them. ``kind`` is ``"cycle"``,
    ``"multiple_parents"``, ``"multiple_roots"`` or ``"rejected"`` (an edge list the scheduler's
    graph refused)."""

    def __init__(self, message, tasks=(), kind="rejected"):
        super().__init__(message)
        self.tasks = list(tasks)
        self.kind = kind


class OptionError(Error, ValueError):
    """Scheduler options the backend refused before running (more blocks than fit the GPU,
    threads not a multiple of 32, ...). ``status`` is ``"invalid argument"``."""

    def __init__(self, message, status="invalid argument", task=-1):
        super().__init__(message)
        self.status = status
        self.task = task


class RunError(Error, RuntimeError):
    """A run that failed: ``status`` is ``"timeout"``, ``"queue overflow"``, ``"aborted"``,
    ``"device error"`` or ``"task error"``; ``task`` the task it concerns (-1 if none)."""

    def __init__(self, message, status="unknown", task=-1):
        super().__init__(message)
        self.status = status
        self.task = task


class BackendUnavailableError(Error, RuntimeError):
    """The gpu backend was asked for where this module has none (built without CUDA) or where no
    CUDA device is usable."""
