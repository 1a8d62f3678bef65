"""A plug-in module whose own import fails: it needs a package that is not installed."""

import no_such_dependency_xyz  # noqa: F401
