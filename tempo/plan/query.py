"""A whole query: the plan graph below one output node, checked as a unit.

Checks that need the whole graph run here, before any input is read: input names are
unique, every CTI import names an input of the same query, imports form no cycle, and no
payload class has a field named like a column tempo adds to its tables.
"""

from __future__ import annotations

import attrs

from tempo.clocks import TimeDomain, arrival_lag
from tempo.errors import QueryBuildError
from tempo.expr import nodes as x
from tempo.expr.schema import record_fields
from tempo.plan.group_apply import GroupInputNode
from tempo.plan.nodes import (
    AggregateKind,
    AlterLifetimeNode,
    ClipNode,
    EventTimeNode,
    ExplodeNode,
    JoinNode,
    Node,
    SelectNode,
    SourceNode,
    UnionNode,
    WhereNode,
    WindowNode,
)
from tempo.result import RESERVED_COLUMNS


def topological(root: Node) -> list[Node]:
    """Every node below ``root``, inputs before consumers, each once."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for child in reversed(node.inputs()):
            if id(child) not in seen:
                stack.append((child, False))
    return order


def _check_reserved(nodes: list[Node]) -> None:
    """No payload class of the query has a field named like one of the columns tempo's
    tables add (``tempo.result.RESERVED_COLUMNS``), so those tables never hold two columns
    of one name."""
    seen: set[type] = set()
    for node in nodes:
        cls = node.payload_type
        if cls in seen:
            continue
        seen.add(cls)
        for f in record_fields(cls):
            if f.name in RESERVED_COLUMNS:
                raise QueryBuildError(
                    f"payload class {cls.__qualname__} has a field named {f.name!r}, a column name tempo "
                    f"reserves for its tables (lifetimes and rejection details): rename the field; the "
                    f"reserved names are {', '.join(sorted(RESERVED_COLUMNS))}"
                )


@attrs.frozen(eq=False)
class Query:
    """A validated query: its output node and its inputs in declaration order."""

    root: Node
    nodes: tuple[Node, ...]
    sources: tuple[SourceNode, ...]
    substream_keys: dict[int, x.Expr | None] = attrs.Factory(dict)
    """By ``id(node)``: the substream key of the node's output (``Node.substream_key``)."""
    longest_lifetimes: dict[int, int | None] = attrs.Factory(dict)
    """By ``id(node)``: a bound on the node's output lifetimes (``Node.longest_lifetime``)."""
    time_domains: dict[int, TimeDomain] = attrs.Factory(dict)
    """By ``id(node)``: the notion of time of the node's output (``Node.time_domain``)."""

    @staticmethod
    def build(root: Node) -> Query:
        nodes = topological(root)
        for node in nodes:
            if isinstance(node, GroupInputNode):
                raise QueryBuildError(
                    "a stream built inside a group_by().apply() sub-query is used outside it: it reads one "
                    "group's events, which exist only within apply(); use the stream apply() returns"
                )
        found = [n for n in nodes if isinstance(n, SourceNode)]
        found.sort(key=lambda s: s.declared)  # declaration order: Stream.create call order
        names: dict[str, SourceNode] = {}
        for s in found:
            if s.name in names:
                raise QueryBuildError(f"two inputs are named {s.name!r}: input names must be unique in a query")
            names[s.name] = s
        for s in found:
            imp = s.settings.import_ if s.settings else None
            if imp is not None and imp.stream_name not in names:
                raise QueryBuildError(
                    f"input {s.name!r} imports CTIs from {imp.stream_name!r}, which is not an input of "
                    f"this query (inputs: {', '.join(repr(n) for n in names)})"
                )
        for s in found:
            chain = [s.name]
            cur = s
            while cur.settings and cur.settings.import_:
                nxt = names[cur.settings.import_.stream_name]
                if nxt.name in chain:
                    raise QueryBuildError("CTI imports form a cycle: " + " -> ".join(chain + [nxt.name]))
                chain.append(nxt.name)
                cur = nxt
        _check_reserved(nodes)
        keys: dict[int, x.Expr | None] = {}
        for node in nodes:
            keys[id(node)] = node.substream_key(tuple(keys[id(c)] for c in node.inputs()))
        lifetimes: dict[int, int | None] = {}
        for node in nodes:
            lifetimes[id(node)] = node.longest_lifetime(tuple(lifetimes[id(c)] for c in node.inputs()))
        domains: dict[int, TimeDomain] = {}
        for node in nodes:
            domains[id(node)] = node.time_domain(tuple(domains[id(c)] for c in node.inputs()))
        for s in found:
            imp = s.settings.import_ if s.settings else None
            if imp is not None and names[imp.stream_name].time is not s.time:
                raise QueryBuildError(
                    f"input {s.name!r} ({s.time.value}) imports CTIs from {imp.stream_name!r} "
                    f"({names[imp.stream_name].time.value}): CTIs of one notion of time mean nothing in another"
                )
        return Query(root, tuple(nodes), tuple(found), keys, lifetimes, domains)

    def substream_key(self, node: Node) -> x.Expr | None:
        """The substream key of ``node``'s output, or None."""
        return self.substream_keys[id(node)]

    def longest_lifetime(self, node: Node) -> int | None:
        """An upper bound on the length of ``node``'s output lifetimes in ticks, or None."""
        return self.longest_lifetimes[id(node)]

    @property
    def follows_input_order(self) -> bool:
        """Whether the released events may depend on the order in which events of equal
        start arrive (beyond the positions an error or rejection names, and the order within
        one release): False when every operator is one that does not look at it (where,
        select, the lifetime changes, explode, join, union, and windows without ``top_k`` or a
        user-defined aggregate, whose aggregates order values by start and payload).
        Conservative: an operator not on that list counts as following it. An input where
        nothing can be late may then be read in any order."""
        free = (SourceNode, WhereNode, EventTimeNode, SelectNode, ExplodeNode, ClipNode, AlterLifetimeNode, JoinNode, UnionNode)
        for node in self.nodes:
            if isinstance(node, WindowNode):
                if any(a.kind in (AggregateKind.TOP, AggregateKind.UDA) for a in node.aggregates):
                    return True
            elif not isinstance(node, free):
                return True
        return False

    def lifetimes_of(self, node: Node) -> SourceNode | None:
        """The input whose lifetimes ``node``'s are, or a subset of (filtered, with another
        payload), or None when an operator between makes or moves lifetimes."""
        while isinstance(node, (WhereNode, SelectNode, EventTimeNode)):
            node = node.input
        return node if isinstance(node, SourceNode) else None

    @property
    def imports(self) -> list[tuple[str, str]]:
        """(importing input, input it imports CTIs from), in declaration order."""
        return [(s.name, s.settings.import_.stream_name) for s in self.sources if s.settings and s.settings.import_]

    @property
    def ordered_by_arrival(self) -> set[str]:
        """Inputs that take part in an import, or are stamped with their arrivals (ingestion
        time, ``ArrivalClock``), so every item needs an arrival time."""
        stamped = {s.name for s in self.sources if arrival_lag(s.notion) is not None}
        return {name for pair in self.imports for name in pair} | stamped

    def source(self, name: str) -> SourceNode:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def explain(self) -> str:
        """The plan, one node a line with its CTI rule, output first."""
        lines: list[str] = []
        seen: dict[int, str] = {}

        def visit(node: Node, depth: int) -> None:
            pad = "  " * depth
            if id(node) in seen:
                lines.append(f"{pad}-> (shared) {seen[id(node)]}")
                return
            label = node.describe()
            seen[id(node)] = label
            lines.append(f"{pad}{label}")
            lines.append(f"{pad}    CTI: {node.CTI_RULE}")
            for child in node.inputs():
                visit(child, depth + 1)

        visit(self.root, 0)
        return "\n".join(lines)
