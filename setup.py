"""Kept for tools that still call setup.py: the package's metadata is in pyproject.toml."""
from setuptools import setup

setup()
