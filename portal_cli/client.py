"""A small client of the portal's REST API (``/api/v1/``) over ``requests``."""

from __future__ import annotations

from typing import Any

import requests

from portal_cli import __version__
from portal_cli.config import Config


class ApiError(Exception):
    """The API answered with an error: ``status`` (HTTP) and ``body`` (parsed JSON or text)."""

    def __init__(self, status: int, body: Any, url: str) -> None:
        self.status, self.body, self.url = status, body, url
        super().__init__(f"{status} from {url}: {describe(body)}")


class Unreachable(Exception):
    """No answer from the portal (connection refused, DNS, timeout)."""


def describe(body: Any) -> str:
    """The API's error body in one line: ``field: message; ...`` or ``detail``."""
    if isinstance(body, dict):
        if set(body) == {"detail"}:
            return str(body["detail"])
        parts = []
        for key, value in body.items():
            messages = value if isinstance(value, list) else [value]
            parts.append(f"{key}: {' '.join(str(m) for m in messages)}")
        return "; ".join(parts)
    if isinstance(body, list):
        return "; ".join(str(item) for item in body)
    return str(body).strip()[:500]


class Client:
    """``get``/``post`` against ``<url>/api/v1/<path>`` with the token; JSON in and out."""

    def __init__(self, config: Config, *, timeout: float = 30.0) -> None:
        self.base = f"{config.url}/api/v1/"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update({
            "Authorization": f"{config.auth_scheme} {config.token}",
            "Accept": "application/json",
            "User-Agent": f"gpuq/{__version__}",
        })

    def _send(self, method: str, url: str, *, params: dict | None = None,
              body: dict | None = None):
        try:
            response = self.session.request(
                method, url, params={k: v for k, v in (params or {}).items() if v is not None},
                json=body, timeout=self.timeout)
        except requests.RequestException as error:
            raise Unreachable(f"cannot reach {url}: {error}") from None
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = response.text
        if response.status_code >= 400:
            raise ApiError(response.status_code, data, url)
        return data, response

    def request(self, method: str, path: str, *, params: dict | None = None,
                body: dict | None = None) -> Any:
        return self._send(method, self.base + path.lstrip("/"), params=params, body=body)[0]

    def get(self, path: str, **params) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: dict | None = None) -> Any:
        return self.request("POST", path, body=body)

    def list(self, path: str, *, limit: int | None = None, **params) -> list:
        """A list endpoint's items, every page: the API's body is the page's array and the
        next page is the ``Link: <...>; rel="next"`` header (RFC 8288). At most ``limit``."""
        data, response = self._send("GET", self.base + path.lstrip("/"), params=params)
        items = list(data or [])
        while "next" in response.links and (limit is None or len(items) < limit):
            data, response = self._send("GET", response.links["next"]["url"])
            items += data or []
        return items if limit is None else items[:limit]
