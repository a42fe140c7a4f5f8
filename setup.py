"""Maps the repository layout onto the `cobalt` import package.

`services/` is the `cobalt` package (cobalt.executor, cobalt.orchestrator, ...) and
`shared/` is `cobalt.shared`, so the folders keep the architecture's names while the code
imports as one distribution.
"""

from setuptools import find_packages, setup

packages = (
    ["cobalt"]
    + [f"cobalt.{name}" for name in find_packages("services")]
    + ["cobalt.shared"]
    + [f"cobalt.shared.{name}" for name in find_packages("shared")]
)

setup(
    packages=packages,
    package_dir={"cobalt": "services", "cobalt.shared": "shared"},
    package_data={
        "cobalt.orchestrator.store.migrations": ["script.py.mako"],
        "cobalt.orchestrator.rollouts": ["templates/*.toml"],
        # The web UI's static files (HTML, CSS, ES modules; no build step).
        "cobalt.orchestrator": ["ui/*", "ui/js/*"],
    },
)
