"""The in-container side of the sandbox: a supervisor and its worker. Standard library only.

This package is copied into the sandbox image as ``tooltree_supervisor`` and started as the
container's main process (``python3 -I -m tooltree_supervisor``). Its modules import each other
relatively so they run under either name.

::

    host ──frames over attached stdio──► supervisor (this process)      owns the channel
                                           │  pipes: control (frames), stdout, stderr
                                           ▼
                                         worker (long-lived child)      runs user code in one namespace

The supervisor never runs user code, so user code cannot write raw bytes to the channel: the
worker's stdout and stderr are pipes the supervisor reads as captured output, and the worker's
control pipe carries only frames the supervisor parses and relays with limits.
"""
