"""The one resolver from a backend name to a :class:`Sandbox`; backends import lazily."""

from importlib import import_module

from vtbench.errors import SandboxError
from vtbench.sandbox._protocol import Sandbox

BACKENDS = {
    "bwrap": ("vtbench.sandbox._bwrap", "BwrapSandbox"),
    "none": ("vtbench.sandbox._none", "NoSandbox"),
    "docker": ("vtbench.sandbox._docker", "DockerSandbox"),
}
DEFAULT = "bwrap"


def get_sandbox(name: str = DEFAULT) -> Sandbox:
    """The backend called ``name``; an unknown name fails listing the valid ones, and a
    backend that cannot run here fails with :class:`SandboxUnavailable` naming the fix."""
    try:
        module_name, class_name = BACKENDS[name]
    except KeyError:
        valid = ", ".join(sorted(BACKENDS))
        raise SandboxError(f"unknown sandbox backend {name!r}", hint=f"valid: {valid}") from None
    backend: Sandbox = getattr(import_module(module_name), class_name)()
    return backend
