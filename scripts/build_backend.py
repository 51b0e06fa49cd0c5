"""jetcheck's build backend (pyproject's build-system): setuptools' own, less one note its editable installs print.

setuptools installs a layout like jetcheck's (fixtures/, conformance/, load/ and reports/ installed as jetcheck.*
through package-dir) editable through a meta path finder, and says so on every `pip install -e .` with an
InformationOnly warning, "Editable installation ... Please be careful with folders in your working directory with
the same name as your package": a note about the layout, not a fault, which pip shows as a warning. Only that note
is filtered; every other warning of every hook still shows. The note goes away by itself once the folders live
under jetcheck/ in a src layout."""

from __future__ import annotations

import warnings

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 (the PEP 517 hooks, unchanged)
from setuptools.warnings import InformationOnly


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)
        return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)
