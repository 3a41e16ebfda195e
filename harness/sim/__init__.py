"""The simulated cluster: Kueue/Volcano controllers and a DCGM exporter.

``python -m harness.sim`` runs them beside the API emulator (see ``__main__``).
"""
