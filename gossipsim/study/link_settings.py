"""The keys of ``[links]`` and their settings object (:class:`LinkSettings`): the walk's links, the
server's downlinks and uplinks, lossy links with ARQ and a channel of one's own;
:mod:`gossipsim.study.settings` lists the section in its schema."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gossipsim.core.frozen import FrozenDict, freeze_fields
from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.network.arq import DEFAULT_MAX_RETRIES, Link, LossyServerLinks, edge_channel
from gossipsim.network.channels import Channel, ChannelRequest, channel_class
from gossipsim.network.links import LinkModel, ServerLinks

if TYPE_CHECKING:
    from gossipsim.families.drawn import Drawn
    from gossipsim.scheduling import IndexedGraph


def jsonable_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


LINKS_KEYS = (
    Key("kind", "string", None, "a channel of one's own: an import path `module:Class` to a "
        "Channel subclass, whose own keys then take the place of those below "
        "([A channel of one's own](#a-channel-of-ones-own))",
        default_text="the built-in links"),
    Key("rate_bps", "number", math.inf, "link rate in bit/s (inf: no limit), or drawn per edge "
        "(`{ lognormal = [mu, sd] }`, `gamma`, `uniform`; "
        "[Lossy and per-edge links](#lossy-and-per-edge-links)); an edge attribute `rate_bps` "
        "overrides it", minimum=0, exclusive_minimum=True, finite=False),
    Key("latency_s", "number", 0.0, "one-way link latency (s), or drawn per edge as `rate_bps`; "
        "an edge attribute `latency_s` overrides it", minimum=0),
    Key("loss", "number", 0.0, "probability that one attempt of a hop is lost; lost attempts are "
        "sent again (stop-and-wait ARQ, [Lossy and per-edge links](#lossy-and-per-edge-links)); "
        "with the server, of each transfer unless `downlink_loss` / `uplink_loss` say otherwise; "
        "> 0: event engine", minimum=0, maximum=1, exclusive_maximum=True),
    Key("timeout_s", "number", None, "seconds from the start of a lost attempt until it is sent "
        "again (required when `loss` > 0)", minimum=0, exclusive_minimum=True),
    Key("max_retries", "integer", DEFAULT_MAX_RETRIES, "retries of a lost message before it is "
        "lost for good (on the walk the sender keeps the token)", minimum=0),
    Key("downlink_rate_bps", "number", None, "server architecture: rate of each server → agent "
        "link in bit/s (inf: no limit)", minimum=0, exclusive_minimum=True, finite=False,
        default_text="`rate_bps`"),
    Key("downlink_latency_s", "number", None, "server architecture: latency of each server → "
        "agent link (s)", minimum=0, default_text="`latency_s`"),
    Key("uplink_rate_bps", "number", None, "server architecture (and a centralised protocol's "
        "upload of the data): rate of each agent → server link in bit/s (inf: no limit)",
        minimum=0, exclusive_minimum=True, finite=False, default_text="`rate_bps`"),
    Key("uplink_latency_s", "number", None, "server architecture (and a centralised protocol's "
        "upload of the data): latency of each agent → server link (s)", minimum=0,
        default_text="`latency_s`"),
    Key("downlink_loss", "number", None, "server architecture: probability that one attempt of a "
        "download is lost (ARQ as on the walk); a download lost for good: the agent computes "
        "nothing and uploads nothing that slot ([Lost transfers with the "
        "server](#lost-transfers-with-the-server)); > 0: event engine", minimum=0, maximum=1,
        exclusive_maximum=True, default_text="`loss`"),
    Key("downlink_timeout_s", "number", None, "server architecture: seconds from the start of a "
        "lost download attempt until it is sent again (required when the downlink loses)",
        minimum=0, exclusive_minimum=True, default_text="`timeout_s`"),
    Key("downlink_max_retries", "integer", None, "server architecture: retries of a lost download "
        "before it is lost for good", minimum=0, default_text="`max_retries`"),
    Key("uplink_loss", "number", None, "server architecture: probability that one attempt of an "
        "upload is lost (ARQ as on the walk); an upload lost for good is not applied: the slot is "
        "an iteration without an update; > 0: event engine", minimum=0, maximum=1,
        exclusive_maximum=True, default_text="`loss`"),
    Key("uplink_timeout_s", "number", None, "server architecture: seconds from the start of a "
        "lost upload attempt until it is sent again (required when the uplink loses)", minimum=0,
        exclusive_minimum=True, default_text="`timeout_s`"),
    Key("uplink_max_retries", "integer", None, "server architecture: retries of a lost upload "
        "before it is lost for good", minimum=0, default_text="`max_retries`"),
)  # fmt: skip


def _default(name: str) -> Any:
    """The default of the ``[links]`` key ``name``."""
    return next(key.default for key in LINKS_KEYS if key.name == name)


#: the ``[links]`` keys an edge of the graph may set as an attribute of the same name
EDGE_LINK_KEYS = ("rate_bps", "latency_s", "loss", "timeout_s", "max_retries")
#: the ``[links]`` keys that may be drawn per edge from a distribution (``{ lognormal = [mu, sd] }``)
DRAWN_LINK_KEYS = ("rate_bps", "latency_s")
#: the values of each of the server's links: ``downlink_<name>`` and ``uplink_<name>``, each
#: defaulting to the walk's ``<name>``
SERVER_LINK_VALUES = ("rate_bps", "latency_s", "loss", "timeout_s", "max_retries")


@dataclass(frozen=True)
class LinkSettings:
    """``[links]``: the walk's links (``rate_bps``, ``latency_s``, ``loss`` with ARQ's
    ``timeout_s`` and ``max_retries``) and the server's downlinks and uplinks (None: the walk's
    value)."""

    rate_bps: float = _default("rate_bps")
    latency_s: float = _default("latency_s")
    loss: float = _default("loss")
    timeout_s: float | None = _default("timeout_s")
    max_retries: int = _default("max_retries")
    downlink_rate_bps: float | None = None
    downlink_latency_s: float | None = None
    uplink_rate_bps: float | None = None
    uplink_latency_s: float | None = None
    downlink_loss: float | None = None
    downlink_timeout_s: float | None = None
    downlink_max_retries: int | None = None
    uplink_loss: float | None = None
    uplink_timeout_s: float | None = None
    uplink_max_retries: int | None = None
    #: values drawn per edge (by key: :data:`DRAWN_LINK_KEYS`), the walk's only
    drawn: Mapping[str, Drawn] = field(default_factory=FrozenDict)
    #: a channel of one's own (``module:Class``, a :class:`Channel` subclass), or None: the
    #: built-in links of the keys above
    kind: str | None = None
    #: the values of the channel of one's own's keys (:attr:`Channel.link_keys`), by name
    options: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        freeze_fields(self, "drawn", "options")

    @property
    def own(self) -> type[Channel] | None:
        """The class of the channel of one's own (``kind``), imported by its path (in every
        process that builds the variant), or None for the built-in links."""
        return None if self.kind is None else channel_class(self.kind)

    def own_channel(
        self,
        architecture: str,
        graph: IndexedGraph,
        seed: np.random.SeedSequence,
        networkx: Any = None,
    ) -> Channel:
        """The channel of one's own (``kind``) built for ``graph`` by its
        :meth:`~gossipsim.network.channels.Channel.from_settings`."""
        cls = channel_class(self.kind or "")
        channel = cls.from_settings(
            ChannelRequest(self.options, graph, architecture, seed, networkx)
        )
        if not isinstance(channel, Channel):
            raise ConfigError(
                "links.kind",
                f"{self.kind}.from_settings returned {type(channel).__name__}, not a Channel",
            )
        return channel

    def server_value(self, direction: str, name: str) -> tuple[Any, str]:
        """The value of the server's ``direction`` link (``downlink``, ``uplink``) for ``name``
        (``rate_bps``, ``loss``, ...): its own key's, else the walk's; and the key it came from."""
        own = getattr(self, f"{direction}_{name}")
        if own is not None:
            return own, f"links.{direction}_{name}"
        return getattr(self, name), f"links.{name}"

    def server_lossy(self) -> bool:
        """Whether the server's downlinks or uplinks lose transfers."""
        return any(self.server_value(d, "loss")[0] > 0 for d in ("downlink", "uplink"))

    def check(self, architecture: str, *, centralised: bool = False, kind: Any = None) -> None:
        """Refuse what no run of ``architecture``'s links can do: values drawn per edge on the
        server's links, loss without a timeout; loss on a centralised protocol's upload of the
        data (``centralised``), and on the server's links for a protocol ``kind`` (a
        :class:`~gossipsim.protocols.registry.ProtocolKind`) that cannot take a slot back."""
        plugin = self.own
        if plugin is not None:
            if plugin.lossy and architecture == "server":
                raise ConfigError(
                    "links.kind",
                    f"{self.kind!r} can lose messages, which applies to the walk: the server's "
                    "lost transfers are [links] downlink_loss and uplink_loss (name a lossless "
                    'channel, or architecture = "walk")',
                )
            return
        if self.drawn and architecture == "server":
            name = next(iter(self.drawn))
            raise ConfigError(
                f"links.{name}",
                "is drawn per edge of the graph, which the server's links are not: give a number "
                "(or downlink_* and uplink_* keys)",
            )
        if architecture != "server":
            if self.loss > 0 and self.timeout_s is None:
                raise ConfigError(
                    "links.timeout_s",
                    f"is required with links.loss = {self.loss:g}: the seconds from the start of "
                    "a lost attempt until it is sent again (a number > 0)",
                )
            return
        for direction in ("downlink", "uplink") if not centralised else ("uplink",):
            loss, loss_key = self.server_value(direction, "loss")
            if loss == 0:
                continue
            if centralised:
                raise ConfigError(
                    loss_key,
                    f"is {loss:g}, but a centralised protocol's upload of every node's data to "
                    "the centre (slot 1) needs lossless uplinks: set it to 0",
                )
            if self.server_value(direction, "timeout_s")[0] is None:
                own = f"links.{direction}_timeout_s"
                raise ConfigError(
                    "links.timeout_s" if loss_key == "links.loss" else own,
                    f"is required with {loss_key} = {loss:g}: the seconds from the start of a "
                    f"lost attempt until it is sent again (a number > 0; {own} for the "
                    f"{direction}s alone)",
                )
            if kind is not None and not getattr(kind, "takes_back", False):
                raise ConfigError(
                    loss_key,
                    f"is {loss:g}, but protocol kind {getattr(kind, 'name', kind)!r} cannot take a "
                    "slot back (its ProtocolKind declares no takes_back): with the server a lost "
                    "transfer means a slot without an update; set it to 0",
                )

    def channel(
        self,
        architecture: str = "walk",
        edges: Iterable[tuple[int, int, tuple[Any, Any], Mapping[str, Any]]] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Channel:
        """The run's channel: for the walk, homogeneous links (:class:`LinkModel`, the fast path's)
        unless ``loss`` > 0 or an edge sets its own values (then :class:`~gossipsim.network.arq.EdgeLinks`
        or :class:`~gossipsim.network.arq.LossyLinks`); ``edges``: the graph's edges as
        ``(index u, index v, (label u, label v), attributes)``, whose attributes named like the
        keys (:data:`EDGE_LINK_KEYS`) override them for that edge. For the server, its downlinks
        and uplinks (each value not given taken from the walk's key of the same name:
        :data:`SERVER_LINK_VALUES`): :class:`ServerLinks` where neither loses anything, else
        :class:`~gossipsim.network.arq.LossyServerLinks`; edge attributes do not apply (no hop
        uses a graph edge). With values drawn per edge (:attr:`drawn`) ``edges`` must list every
        edge, in a fixed order, and ``rng`` draws each edge's values in that order (before its
        attributes override them). A channel of one's own (``kind``) is built by
        :meth:`own_channel` instead, once the graph is known."""
        if self.kind is not None:
            raise ValueError(f"links.kind = {self.kind!r} is built for a graph: own_channel")
        if architecture != "server":
            own, names = self._edge_links(edges, rng) if edges is not None else ({}, {})
            if self.loss == 0 and not own:
                return LinkModel(self.rate_bps, self.latency_s)
            self.check(architecture)
            return edge_channel(self._link(), own, names)
        self.check(architecture)
        down, up = (
            {name: self.server_value(d, name) for name in SERVER_LINK_VALUES}
            for d in ("downlink", "uplink")
        )
        if not self.server_lossy():
            return ServerLinks(
                LinkModel(down["rate_bps"][0], down["latency_s"][0]),
                LinkModel(up["rate_bps"][0], up["latency_s"][0]),
                (down["rate_bps"][1], down["latency_s"][1], up["rate_bps"][1],
                 up["latency_s"][1]),
            )  # fmt: skip
        links = []
        for values in (down, up):
            timeout = values["timeout_s"][0]
            links.append(Link(
                values["rate_bps"][0], values["latency_s"][0], values["loss"][0],
                timeout if timeout is not None else math.inf, values["max_retries"][0],
            ))  # fmt: skip
        keys = tuple(
            v[name][1] for v in (down, up) for name in ("rate_bps", "latency_s", "timeout_s")
        )
        return LossyServerLinks(links[0], links[1], keys)

    def _link(self) -> Link:
        timeout = self.timeout_s if self.timeout_s is not None else math.inf
        return Link(self.rate_bps, self.latency_s, self.loss, timeout, self.max_retries)

    def _edge_links(
        self,
        edges: Iterable[tuple[int, int, tuple[Any, Any], Mapping[str, Any]]],
        rng: np.random.Generator | None = None,
    ) -> tuple[dict[tuple[int, int], Link], dict[tuple[int, int], str]]:
        """Each edge that sets a link attribute: its :class:`~gossipsim.network.arq.Link` (the
        keys' values where it sets none) in both directions, and its name for errors."""
        keys = {k.name: k for k in LINKS_KEYS if k.name in EDGE_LINK_KEYS}
        own: dict[tuple[int, int], Link] = {}
        names: dict[tuple[int, int], str] = {}
        for u, v, (a, b), attributes in edges:
            given = [name for name in EDGE_LINK_KEYS if name in attributes]
            if not given and not self.drawn:
                continue
            where = f"topology edge ({a!r}, {b!r}) attribute "
            values: dict[str, Any] = {
                "rate_bps": self.rate_bps, "latency_s": self.latency_s, "loss": self.loss,
                "timeout_s": self.timeout_s, "max_retries": self.max_retries,
            }  # fmt: skip
            for name, drawn in self.drawn.items():  # every edge draws, attribute or not
                assert rng is not None
                values[name] = drawn.draw(rng)
            for name in given:
                value = attributes[name]
                if isinstance(value, np.generic):  # a NumPy number given from Python
                    value = value.item()
                values[name] = keys[name].check(value, where + name)
            if values["loss"] > 0 and values["timeout_s"] is None:
                raise ConfigError(
                    where + "timeout_s",
                    f"is required where loss = {values['loss']:g} (give the edge a timeout_s "
                    "attribute, or set links.timeout_s)",
                )
            if values["timeout_s"] is None:
                values["timeout_s"] = math.inf
            link = Link(**values)
            own[u, v] = own[v, u] = link
            names[u, v] = names[v, u] = where
        return own, names

    def resolved(self) -> dict[str, Any]:
        """Every value, the server's filled in from the walk's (plain data for summary.json); a
        channel of one's own's kind and its keys' values."""
        if self.kind is not None:
            return {
                "kind": self.kind,
                **{
                    name: jsonable_float(value) if isinstance(value, float) else value
                    for name, value in self.options.items()
                },
            }
        out: dict[str, Any] = {}
        for name in ("rate_bps", "latency_s", "downlink_rate_bps", "downlink_latency_s",
                     "uplink_rate_bps", "uplink_latency_s"):  # fmt: skip
            value = getattr(self, name)
            if value is None:
                value = getattr(self, name.split("_", 1)[1])
            out[name] = jsonable_float(value)
        for name, drawn in self.drawn.items():
            out[name] = drawn.describe()
        out["loss"] = self.loss
        out["timeout_s"] = self.timeout_s
        out["max_retries"] = self.max_retries
        for direction in ("downlink", "uplink"):
            for name in ("loss", "timeout_s", "max_retries"):
                out[f"{direction}_{name}"] = self.server_value(direction, name)[0]
        return out
