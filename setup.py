"""The package's one compiled part, built by ``pip install`` with the machine's C compiler.

Everything else is in pyproject.toml. The extension is optional: where it cannot be built
(no compiler, no Python headers) the install goes on without it and
:mod:`constrain.kernel` falls back to numpy, slower on first visits but the same masks.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("constrain._kernel", ["constrain/_kernel.c"], optional=True),
    ],
)
