"""Tests of the repository as people meet it: docs, packaging, the setup and GPU-check scripts, the hub recipe, Binder, and the import rule between the packages."""
