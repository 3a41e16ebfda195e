"""Helpers shared by integration tests (plain functions; fixtures live in conftest.py)."""

import threading

from django.db import connection


def together(calls):
    """Run each callable in its own thread (own connection), released at once."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results
