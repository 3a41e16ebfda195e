"""Kueue: the backend (``backend.py``), its objects, jobs and scheduler model."""
