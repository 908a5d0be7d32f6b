"""A small client of the RabbitMQ management HTTP API (``/api``), with ``requests``: a session
from ``orchard_sdk.requests_transport.session()``, over wasi:http inside the component and
requests' own transport natively. Answers other than 2xx (and 404 where it means "not there")
become the SDK's failures through ``http.check``.

Credentials come from the object's credentials Secret: ``url`` (e.g.
``http://127.0.0.1:15672``, without ``/api``), ``username`` and ``password`` of a user with
the ``administrator`` tag.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from orchard_sdk import Object, http
from orchard_sdk.http import quote
# At module level, so that requests is in the component (it holds what the build imports).
from orchard_sdk.requests_transport import session


class Client:
    """A connection to one RabbitMQ node's management API."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.base = url.rstrip("/") + "/api"
        self.session = session()
        self.session.auth = (username, password)

    @staticmethod
    def for_object(obj: Object) -> "Client":
        """The node named by the object's credentials."""
        return Client(obj.credential("url"), obj.credential("username"), obj.credential("password"))

    def get(self, path: str, what: str) -> Optional[Any]:
        """The JSON at ``path``; ``None`` on 404."""
        r = self.session.get(self.base + path)
        if r.status_code == 404:
            return None
        return http.check(r, what).json()

    def send(self, method: str, path: str, what: str, body: Any = None) -> None:
        """A write that must succeed (2xx). (requests' ``Accept: */*`` is fine; an
        ``Accept: application/json`` makes the vhost-limits endpoints answer 406.)"""
        http.check(self.session.request(method, self.base + path, json=body), what)

    def remove(self, path: str, what: str) -> None:
        """A DELETE that is done when the object is already gone (404)."""
        r = self.session.delete(self.base + path)
        if r.status_code != 404:
            http.check(r, what)

    # -- virtual hosts -----------------------------------------------------------------------

    def vhost(self, name: str) -> Optional[Dict[str, Any]]:
        return self.get(f"/vhosts/{quote(name)}", f"get vhost {name}")

    def vhosts(self) -> List[Dict[str, Any]]:
        return self.get("/vhosts", "list vhosts") or []

    def put_vhost(self, name: str, description: str, tags: List[str], tracing: bool) -> None:
        body = {"description": description, "tags": ",".join(tags), "tracing": tracing}
        self.send("PUT", f"/vhosts/{quote(name)}", f"put vhost {name}", body)

    def delete_vhost(self, name: str) -> None:
        self.remove(f"/vhosts/{quote(name)}", f"delete vhost {name}")

    def vhost_limits(self, name: str) -> Dict[str, int]:
        """``{"max-queues": 10, ...}``; empty when none is set."""
        found = self.get(f"/vhost-limits/{quote(name)}", f"get limits of vhost {name}") or []
        return dict(found[0].get("value", {})) if found else {}

    def set_vhost_limit(self, name: str, limit: str, value: int) -> None:
        self.send(
            "PUT", f"/vhost-limits/{quote(name)}/{limit}", f"set {limit} of vhost {name}",
            {"value": value},
        )

    def delete_vhost_limit(self, name: str, limit: str) -> None:
        self.remove(f"/vhost-limits/{quote(name)}/{limit}", f"delete {limit} of vhost {name}")

    # -- queues ------------------------------------------------------------------------------

    def queue(self, vhost: str, name: str) -> Optional[Dict[str, Any]]:
        return self.get(f"/queues/{quote(vhost)}/{quote(name)}", f"get queue {name} of vhost {vhost}")

    def queues(self, vhost: str) -> List[Dict[str, Any]]:
        """Queues of a vhost; empty when the vhost does not exist."""
        return self.get(f"/queues/{quote(vhost)}", f"list queues of vhost {vhost}") or []

    def put_queue(self, vhost: str, name: str, body: Dict[str, Any]) -> None:
        self.send("PUT", f"/queues/{quote(vhost)}/{quote(name)}", f"declare queue {name} in vhost {vhost}", body)

    def delete_queue(self, vhost: str, name: str) -> None:
        self.remove(f"/queues/{quote(vhost)}/{quote(name)}", f"delete queue {name} of vhost {vhost}")

    def queue_bindings(self, vhost: str, name: str) -> List[Dict[str, Any]]:
        """Bindings of a queue, without the implicit one of the default exchange."""
        found = self.get(
            f"/queues/{quote(vhost)}/{quote(name)}/bindings", f"list bindings of queue {name}"
        ) or []
        return [b for b in found if b.get("source")]

    def bind(self, vhost: str, exchange: str, queue: str, routing_key: str) -> None:
        self.send(
            "POST", f"/bindings/{quote(vhost)}/e/{quote(exchange)}/q/{quote(queue)}",
            f"bind queue {queue} to exchange {exchange}", {"routing_key": routing_key, "arguments": {}},
        )

    def unbind(self, vhost: str, exchange: str, queue: str, properties_key: str) -> None:
        self.remove(
            f"/bindings/{quote(vhost)}/e/{quote(exchange)}/q/{quote(queue)}/{quote(properties_key)}",
            f"unbind queue {queue} from exchange {exchange}",
        )

    # -- policies ----------------------------------------------------------------------------

    def policy(self, vhost: str, name: str) -> Optional[Dict[str, Any]]:
        return self.get(f"/policies/{quote(vhost)}/{quote(name)}", f"get policy {name}")

    def put_policy(self, vhost: str, name: str, body: Dict[str, Any]) -> None:
        self.send("PUT", f"/policies/{quote(vhost)}/{quote(name)}", f"put policy {name}", body)

    def delete_policy(self, vhost: str, name: str) -> None:
        self.remove(f"/policies/{quote(vhost)}/{quote(name)}", f"delete policy {name}")
