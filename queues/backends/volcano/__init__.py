"""Volcano: the backend (``backend.py``), its objects, jobs, rules and scheduler model."""
