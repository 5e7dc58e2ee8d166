"""The expression IR: immutable nodes that user lambdas are traced into.

Executors never see user lambdas, only these nodes: the in-memory executor turns them
into Python code once per query, the Spark compiler into native Columns. Every node
knows its result type (``dtype``, a Python type; ``object`` when unknown) and whether it
may be null. Types are checked when a node is built, so a bad expression fails when the
query is built, not halfway through a run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs

from tempo.errors import QueryBuildError
from tempo.expr.schema import record_fields

ARITHMETIC = ("+", "-", "*", "/", "//", "%")
COMPARISON = ("==", "!=", "<", "<=", ">", ">=")
LOGICAL = ("&", "|")

_NUMERIC = (bool, int, float)


@attrs.frozen
class Expr:
    """Base of every expression node."""

    @property
    def dtype(self) -> type:
        raise NotImplementedError

    @property
    def nullable(self) -> bool:
        return any(c.nullable for c in self.children())

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> list[Expr]:
        """This node and all below it, depth first."""
        out: list[Expr] = [self]
        for c in self.children():
            out.extend(c.walk())
        return out


@attrs.frozen
class Input(Expr):
    """Argument ``index`` of the traced lambda: a payload record."""

    index: int
    record: type
    name: str = attrs.field(default="", eq=False)
    """The lambda's own parameter name, for messages and ``explain()`` only (not compared)."""

    @property
    def dtype(self) -> type:
        return self.record

    @property
    def nullable(self) -> bool:
        return False


@attrs.frozen
class Attr(Expr):
    """A field of a record-valued expression: ``e.temperature``."""

    base: Expr
    name: str
    field_type: type
    field_nullable: bool

    @property
    def dtype(self) -> type:
        return self.field_type

    @property
    def nullable(self) -> bool:
        return self.field_nullable or self.base.nullable

    def children(self) -> tuple[Expr, ...]:
        return (self.base,)


def attr(base: Expr, name: str) -> Expr:
    """``base.name``, checked against the record type of ``base``. A field of a record built
    in place is the expression it was built from (when of the field's own type, so that no
    widening is lost)."""
    fields = {f.name: f for f in record_fields(base.dtype)}
    if name not in fields:
        raise QueryBuildError(f"{base.dtype.__qualname__} has no field {name!r}; its fields are {', '.join(fields)}")
    f = fields[name]
    if isinstance(base, Record) and name in base.names:
        value = base.values[base.names.index(name)]
        if value.dtype is f.dtype:
            return value
    return Attr(base, name, f.dtype, f.nullable)


def transform(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """``expr`` rebuilt bottom-up: each node's children transformed first, then ``fn`` given
    the node (rebuilt on the new children) for its replacement. A field read is rebuilt with
    ``attr``, so a field of a record ``fn`` builds in place folds to its value."""
    changes: dict[str, Any] = {}
    for f in attrs.fields(type(expr)):
        value = getattr(expr, f.name)
        if isinstance(value, Expr):
            new = transform(value, fn)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and all(isinstance(v, Expr) for v in value):
            news = tuple(transform(v, fn) for v in value)
            if any(a is not b for a, b in zip(news, value)):
                changes[f.name] = news
    if changes:
        expr = attr(changes["base"], expr.name) if isinstance(expr, Attr) else attrs.evolve(expr, **changes)
    return fn(expr)


@attrs.frozen
class Lit(Expr):
    """A constant."""

    value: Any

    @property
    def dtype(self) -> type:
        return type(self.value) if self.value is not None else object

    @property
    def nullable(self) -> bool:
        return self.value is None


def _numeric(t: type) -> bool:
    return t in _NUMERIC


def _unify(a: type, b: type, what: str) -> type:
    """The common type of two branches or operands, or an error naming both."""
    if a is object:
        return b
    if b is object or a is b:
        return a
    if _numeric(a) and _numeric(b):
        return float if float in (a, b) else int
    raise QueryBuildError(f"{what}: incompatible types {a.__name__} and {b.__name__}")


LISTS = (list, tuple)
"""The dtypes of list fields (``list[X]``, ``tuple[X, ...]``): passed along and exploded only."""


def refuse_lists(dtype: type, what: str) -> None:
    """A list field has no comparison, hash or arithmetic on every executor: refuse it as
    ``what`` (an operand, a key)."""
    if dtype in LISTS:
        raise QueryBuildError(
            f"{what} is a list field: lists are passed along and exploded (explode()), not compared, keyed or computed on"
        )


def _binary_dtype(op: str, a: type, b: type) -> type:
    for t in (a, b):
        refuse_lists(t, f"an operand of {op!r}")
    if op in COMPARISON:
        if a is not object and b is not object and not (_numeric(a) and _numeric(b)) and a is not b:
            raise QueryBuildError(f"cannot compare {a.__name__} {op} {b.__name__}")
        return bool
    if op in LOGICAL:
        for t in (a, b):
            if t not in (bool, object):
                raise QueryBuildError(f"'{op}' combines conditions (bool), got {t.__name__}; compare first, e.g. (x > 0) {op} (y > 0)")
        return bool
    if object in (a, b):
        return object
    if _numeric(a) and _numeric(b):
        if op == "/":
            return float
        return float if float in (a, b) else int
    if a is str and b is str and op == "+":
        return str
    if a is datetime and b is timedelta and op in ("+", "-"):
        return datetime
    if a is timedelta and b is datetime and op == "+":
        return datetime
    if a is datetime and b is datetime and op == "-":
        return timedelta
    if a is timedelta and b is timedelta and op in ("+", "-"):
        return timedelta
    raise QueryBuildError(f"unsupported operation {a.__name__} {op} {b.__name__}")


@attrs.frozen
class Binary(Expr):
    """``left op right`` for arithmetic, comparison and logical ``&`` / ``|``."""

    op: str
    left: Expr
    right: Expr

    def __attrs_post_init__(self) -> None:
        _binary_dtype(self.op, self.left.dtype, self.right.dtype)

    @property
    def dtype(self) -> type:
        return _binary_dtype(self.op, self.left.dtype, self.right.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@attrs.frozen
class Unary(Expr):
    """``-x``, ``abs(x)`` or logical not (``~cond``)."""

    op: str  # "neg", "abs", "not"
    operand: Expr

    def __attrs_post_init__(self) -> None:
        t = self.operand.dtype
        if self.op == "not" and t not in (bool, object):
            raise QueryBuildError(f"'~' negates a condition (bool), got {t.__name__}")
        if self.op in ("neg", "abs") and t not in (int, float, timedelta, object):
            raise QueryBuildError(f"cannot apply {self.op} to {t.__name__}")

    @property
    def dtype(self) -> type:
        return self.operand.dtype

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@attrs.frozen
class When(Expr):
    """``then`` where ``condition`` holds, else ``otherwise`` (a null condition is false)."""

    condition: Expr
    then: Expr
    otherwise: Expr

    def __attrs_post_init__(self) -> None:
        if self.condition.dtype not in (bool, object):
            raise QueryBuildError(f"tempo.when needs a condition (bool), got {self.condition.dtype.__name__}")
        _unify(self.then.dtype, self.otherwise.dtype, "tempo.when branches")

    @property
    def dtype(self) -> type:
        return _unify(self.then.dtype, self.otherwise.dtype, "tempo.when branches")

    @property
    def nullable(self) -> bool:
        return self.then.nullable or self.otherwise.nullable

    def children(self) -> tuple[Expr, ...]:
        return (self.condition, self.then, self.otherwise)


@attrs.frozen
class IsIn(Expr):
    """``operand`` equals one of the constant ``values``."""

    operand: Expr
    values: tuple[Any, ...]

    @property
    def dtype(self) -> type:
        return bool

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@attrs.frozen
class IsNull(Expr):
    """``operand`` is null (``tempo.is_null``), or with ``negate`` is not (``tempo.is_not_null``).

    Never null itself: the null test is the one way to ask about a null, since ``x == None``
    is null by the null rule.
    """

    operand: Expr
    negate: bool = False

    @property
    def dtype(self) -> type:
        return bool

    @property
    def nullable(self) -> bool:
        return False

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@attrs.frozen
class Coalesce(Expr):
    """The first of ``values`` that is not null (``tempo.coalesce``); null when all are."""

    values: tuple[Expr, ...]

    def __attrs_post_init__(self) -> None:
        if len(self.values) < 2:
            raise QueryBuildError("tempo.coalesce needs a value and at least one default")
        t = self.values[0].dtype
        for v in self.values[1:]:
            t = _unify(t, v.dtype, "tempo.coalesce arguments")

    @property
    def dtype(self) -> type:
        t = self.values[0].dtype
        for v in self.values[1:]:
            t = _unify(t, v.dtype, "tempo.coalesce arguments")
        return t

    @property
    def nullable(self) -> bool:
        return all(v.nullable for v in self.values)

    def children(self) -> tuple[Expr, ...]:
        return self.values


UDF_MARKER = "[tempo udf result]"
"""Marks a udf result error raised inside a Spark Python worker, so that the driver can raise
it again as ``UdfResultError`` (``tempo.spark.columns.udf_errors``)."""

UDF_RAISED_MARKER = "[tempo udf raised]"
"""Marks an exception a udf (or an aggregator's method) raised inside a Spark Python worker
or polars, carried as text, so that the driver can raise it as ``UdfError``."""


EVALUATION_MARKER = "[tempo evaluation]"
"""Marks an ``EvaluationError`` raised inside polars or by Spark's ``raise_error``, carried as
text, so that the driver can raise it again as the error it is."""

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""tempo's integers are 64-bit (Arrow's, Parquet's, Spark's ``long``, polars' ``Int64``): a
result outside these bounds is an ``EvaluationError`` on every executor (docs/semantics.md 7.4)."""


def evaluation_rules(e: Expr) -> tuple[Any, ...]:
    """The ``EvaluationRule`` values evaluating ``e`` itself (not its operands) may break: a
    division (``/``, ``//``, ``%``) by zero; an integer ``+``, ``-``, ``*``, ``//`` (the least
    integer by -1), negation or ``abs`` (of the least integer) outside 64 bits. The one
    statement of what fails, which every executor's expression compiler reads."""
    from tempo.errors import EvaluationRule

    rules: list[EvaluationRule] = []
    if isinstance(e, Binary) and e.op in ("/", "//", "%"):
        rules.append(EvaluationRule.DIVISION_BY_ZERO)
    integer = e.dtype is int
    if integer and ((isinstance(e, Binary) and e.op in ("+", "-", "*", "//")) or (isinstance(e, Unary) and e.op in ("neg", "abs"))):
        rules.append(EvaluationRule.INTEGER_OVERFLOW)
    return tuple(rules)


def evaluation_text(expression: str, rule: Any, values: str) -> str:
    """An ``EvaluationError``'s fields as marked text, for an engine that can only raise text."""
    import json

    return EVALUATION_MARKER + json.dumps([expression, rule.name, values]) + EVALUATION_MARKER


def marked_fields(exc: BaseException, marker: str, count: int) -> list[str] | None:
    """The ``count`` fields a worker wrote as a JSON list between two ``marker`` into the
    message of the error it raised, if ``exc`` (an engine's failure carrying the worker's
    error as text) has them."""
    import json

    text = str(exc)
    start = text.find(marker)
    end = text.find(marker, start + len(marker)) if start >= 0 else -1
    if end < 0:
        return None
    try:
        fields = json.loads(text[start + len(marker) : end])
    except ValueError:
        return None
    if not isinstance(fields, list) or len(fields) != count:
        return None
    return [str(f) for f in fields]


def udf_error(exc: BaseException) -> Any:
    """The ``UdfResultError`` or ``UdfError`` a udf raised in an engine's worker
    (``checked_udf`` with ``local=False``), or the ``EvaluationError`` an expression raised
    there (``evaluation_text``), if ``exc`` carries one; else None."""
    from tempo.errors import EvaluationError, EvaluationRule, UdfError, UdfResultError

    fields = marked_fields(exc, UDF_MARKER, 5)
    if fields is not None:
        return UdfResultError(*fields)
    raised = marked_fields(exc, UDF_RAISED_MARKER, 4)
    if raised is not None:
        return UdfError(*raised)
    failed = marked_fields(exc, EVALUATION_MARKER, 3)
    if failed is None or failed[1] not in EvaluationRule.__members__:
        return None
    return EvaluationError(failed[0], EvaluationRule[failed[1]], failed[2])


def checked_udf(fn: Callable[..., Any], returns: type, name: str, local: bool) -> Callable[..., Any]:
    """``fn`` checking each result against its declared type ``returns``.

    ``None`` passes; an ``int`` becomes a ``float`` where ``float`` is declared; a ``bool`` is
    no number unless ``bool`` is declared. A mismatch raises ``UdfResultError`` (``local``) or,
    for a Spark Python worker or polars, a ``ValueError`` carrying the error's fields as JSON
    between two ``UDF_MARKER``; an exception ``fn`` raises, ``UdfError`` (the exception its
    cause) or such a ``ValueError`` between two ``UDF_RAISED_MARKER``. The returned function
    refers to nothing of tempo's (only builtins and its closure), so Spark can ship it to
    workers that have no tempo installed (which is also why ``aggregator_runner`` writes its
    own copy of the failure's few lines rather than calling a helper).
    """
    marker, raised_marker = UDF_MARKER, UDF_RAISED_MARKER
    error: Any = None
    raised: Any = None
    if local:
        from tempo.errors import UdfError, UdfResultError

        error, raised = UdfResultError, UdfError
    numeric = returns is float or returns is int

    def check(*args: Any) -> Any:
        try:
            value = fn(*args)
        except Exception as exc:  # the user's function failed: UdfError, here or on the driver
            failure = (name, type(exc).__name__, str(exc), repr(tuple(args)))
            if raised is not None:
                raise raised(*failure) from exc
            import json

            raise ValueError(raised_marker + json.dumps(failure) + raised_marker) from None
        if value is None or returns is object:
            return value
        if isinstance(value, bool):
            ok = returns is bool
        elif returns is float and isinstance(value, int):
            return float(value)
        else:
            ok = isinstance(value, returns) and not (numeric and isinstance(value, bool))
        if ok:
            return value
        fields = (name, returns.__name__, type(value).__name__, repr(value), repr(tuple(args)))
        if error is not None:
            raise error(*fields)
        import json

        raise ValueError(marker + json.dumps(fields) + marker)

    check.__name__ = name
    return check


@attrs.frozen(eq=False)
class PyCall(Expr):
    """The escape hatch: an arbitrary Python function applied row by row (see ``tempo.udf``)."""

    fn: Callable[..., Any]
    args: tuple[Expr, ...]
    returns: type

    @property
    def dtype(self) -> type:
        return self.returns

    @property
    def nullable(self) -> bool:
        return True

    def children(self) -> tuple[Expr, ...]:
        return self.args


def widened(want: type, got: type) -> bool:
    """Whether a value of type ``got`` put in a record field declared ``want`` becomes a
    ``want``: an int or bool in a float field, a bool in an int field. Every executor makes it
    the declared type (docs/semantics.md 7.4), as a column holds one type."""
    return (want is float and got in (int, bool)) or (want is int and got is bool)


@attrs.frozen
class Record(Expr):
    """A payload record built from field expressions: ``Alert(device=e.device, ...)``."""

    cls: type
    names: tuple[str, ...]
    values: tuple[Expr, ...]

    def __attrs_post_init__(self) -> None:
        fields = {f.name: f for f in record_fields(self.cls)}
        for name, value in zip(self.names, self.values):
            want = fields[name].dtype
            got = value.dtype
            ok = (
                want is object
                or got is object
                or got is want
                or widened(want, got)
                or (isinstance(got, type) and isinstance(want, type) and issubclass(got, want))
            )
            if not ok:
                raise QueryBuildError(f"{self.cls.__qualname__}.{name} is declared {want.__name__} but the expression gives {got.__name__}")

    @property
    def dtype(self) -> type:
        return self.cls

    @property
    def nullable(self) -> bool:
        return False

    def children(self) -> tuple[Expr, ...]:
        return self.values


@attrs.frozen
class AggRef(Expr):
    """The value of aggregate ``index`` of the current window (see ``plan.Aggregate``)."""

    index: int
    result_type: type
    checked: str = attrs.field(default="", eq=False)
    """For a sum of integers (``Aggregate.wide_integers``): the aggregate as written, which an
    executor adding wider than 64 bits names when the value does not fit them."""

    @property
    def dtype(self) -> type:
        return self.result_type

    @property
    def nullable(self) -> bool:
        return True


@attrs.frozen
class KeyRef(Expr):
    """Component ``index`` of the current group key."""

    index: int
    key_type: type
    key_nullable: bool
    name: str = attrs.field(default="", eq=False)
    """How the aggregate lambda spells this key (``sensor``, ``key[1]``), for messages only."""

    @property
    def dtype(self) -> type:
        return self.key_type

    @property
    def nullable(self) -> bool:
        return self.key_nullable


@attrs.frozen
class WindowBound(Expr):
    """The start or end of the current window, as a datetime."""

    which: str  # "start" or "end"

    @property
    def dtype(self) -> type:
        return datetime

    @property
    def nullable(self) -> bool:
        return False


@attrs.frozen
class ExplodedItem(Expr):
    """The current element of the list ``explode`` goes through."""

    element_type: type
    element_nullable: bool

    @property
    def dtype(self) -> type:
        return self.element_type

    @property
    def nullable(self) -> bool:
        return self.element_nullable


def render(e: Expr) -> str:
    """A readable form of an expression, for ``explain()`` and error messages."""
    if isinstance(e, Input):
        if e.name:
            return e.name
        return ("e", "r")[e.index] if e.index < 2 else f"arg{e.index}"
    if isinstance(e, Attr):
        return f"{render(e.base)}.{e.name}"
    if isinstance(e, Lit):
        return repr(e.value)
    if isinstance(e, Binary):
        return f"({render(e.left)} {e.op} {render(e.right)})"
    if isinstance(e, Unary):
        return {"neg": "-", "not": "~"}.get(e.op, e.op) + f"({render(e.operand)})" if e.op != "abs" else f"abs({render(e.operand)})"
    if isinstance(e, When):
        return f"when({render(e.condition)}, {render(e.then)}, {render(e.otherwise)})"
    if isinstance(e, IsNull):
        return f"is_{'not_' if e.negate else ''}null({render(e.operand)})"
    if isinstance(e, Coalesce):
        return f"coalesce({', '.join(render(v) for v in e.values)})"
    if isinstance(e, IsIn):
        return f"is_in({render(e.operand)}, {list(e.values)!r})"
    if isinstance(e, PyCall):
        return f"udf:{getattr(e.fn, '__name__', 'fn')}({', '.join(render(a) for a in e.args)})"
    if isinstance(e, Record):
        inner = ", ".join(f"{n}={render(v)}" for n, v in zip(e.names, e.values))
        return f"{e.cls.__name__}({inner})"
    if isinstance(e, AggRef):
        return e.checked or f"agg{e.index}"
    if isinstance(e, KeyRef):
        return e.name or f"key{e.index}"
    if isinstance(e, WindowBound):
        return f"w.{e.which}"
    if isinstance(e, ExplodedItem):
        return "item"
    return repr(e)
