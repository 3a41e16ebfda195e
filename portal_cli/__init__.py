"""``gpuq``: the GPU quota portal from a terminal, over its REST API.

See :mod:`portal_cli.main` for the commands and exit codes, :mod:`portal_cli.config`
for where the URL and the token come from.
"""

__version__ = "0.1.0"
