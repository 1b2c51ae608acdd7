"""Shared pytest configuration.

Under CI (``CI`` set in the environment) hypothesis runs derandomized, so a CI run is
reproducible; locally it explores new examples on every run.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
