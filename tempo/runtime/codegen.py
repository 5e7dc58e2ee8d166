"""Expression IR to Python functions, generated as source once per query.

Generated code runs per event, so it avoids interpretation overhead: one Python function
per traced lambda. Null semantics follow SQL (and Spark), so both executors agree:
arithmetic and comparisons with a null operand give null, ``&``/``|`` are three-valued,
and a null condition counts as false. Division by zero and integer results outside 64 bits
raise ``EvaluationError``, and floats compare in Spark's total order (docs/semantics.md 7.4).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from tempo.dispatch import Registry
from tempo.errors import EvaluationError, EvaluationRule
from tempo.expr import nodes as x
from tempo.expr.schema import is_record_type, record_fields
from tempo.plan.nodes import Aggregate, AggregateKind
from tempo.ticks import to_ticks

_PY_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "//": "//", "%": "%", "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _OneNaN(float):
    """The NaN that float keys and distinct values are made (``canonical_key``): dicts and
    sets find NaN by identity, so there is one, and it stays the one when a live engine's
    state is pickled and read back."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_one_nan, ())


def _one_nan() -> float:
    return _NAN


_NAN: float = _OneNaN("nan")


def _and3(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or3(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not3(a: Any) -> Any:
    return None if a is None else not a


def _div(a: Any, b: Any, fail: Any) -> Any:
    if a is None or b is None:
        return None
    if b == 0:
        fail(a, b)
    return float(a) / b  # both as floats first, as Spark and polars divide


def _ifloordiv(a: Any, b: Any, fail: Any, overflow: Any) -> Any:
    if a is None or b is None:
        return None
    if b == 0:
        fail(a, b)
    v = a // b
    return v if v <= x.INT_MAX else overflow(a, b)  # the least integer by -1


def _ffloordiv(a: Any, b: Any, fail: Any) -> Any:
    """``floor(a / b)`` as a float (SQL's and polars' rule; Python's own ``//`` on floats
    corrects the quotient's rounding, which no engine does)."""
    if a is None or b is None:
        return None
    if b == 0:
        fail(a, b)
    q = float(a) / b
    return float(math.floor(q)) if math.isfinite(q) else q


def _mod(a: Any, b: Any, fail: Any) -> Any:
    if a is None or b is None:
        return None
    if b == 0:
        fail(a, b)
    return a % b  # the divisor's sign: C's fmod, then the divisor added when the signs differ


def _int_op(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def checked(a: Any, b: Any, fail: Any) -> Any:
        if a is None or b is None:
            return None
        v = op(a, b)
        return v if x.INT_MIN <= v <= x.INT_MAX else fail(a, b)

    return checked


def _int_unary(op: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def checked(a: Any, fail: Any) -> Any:
        if a is None:
            return None
        v = op(a)
        return v if v <= x.INT_MAX else fail(a)

    return checked


def fits_64_bits(v: Any, fail: Any) -> Any:
    """An exact integer total (a window's sum) as it is, if it fits 64 bits; else ``fail``."""
    return v if v is None or x.INT_MIN <= v <= x.INT_MAX else fail(v)


def evaluation_failure(expression: str, rule: EvaluationRule) -> Callable[..., Any]:
    def fail(*values: Any) -> Any:
        raise EvaluationError(expression, rule, repr(values))

    return fail


# Floats compare in one total order on every executor, as Spark and polars compare them:
# NaN equals NaN and is greater than every other number (-0.0 equals 0.0 already).
def _feq(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return a == b or (a != a and b != b)


def _fne(a: Any, b: Any) -> Any:
    eq = _feq(a, b)
    return None if eq is None else not eq


def _flt(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if a != a:
        return False
    return b != b or a < b


def _fle(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if b != b:
        return True
    return a == a and a <= b


def _as_float(v: Any) -> Any:
    return None if v is None else float(v)


def _as_int(v: Any) -> Any:
    return None if v is None else int(v)


def _instant(v: Any) -> Any:
    return to_ticks(v) if isinstance(v, datetime) else v


def canonical_key(v: Any) -> Any:
    """A float group or join key as every engine groups it: one NaN, and 0.0 for -0.0."""
    if v is None:
        return None
    return _NAN if v != v else v + 0.0


_HELPERS: dict[str, Any] = {
    "_and3": _and3,
    "_or3": _or3,
    "_not3": _not3,
    "_div": _div,
    "_ifloordiv": _ifloordiv,
    "_ffloordiv": _ffloordiv,
    "_mod": _mod,
    "_iadd": _int_op(operator.add),
    "_isub": _int_op(operator.sub),
    "_imul": _int_op(operator.mul),
    "_ineg": _int_unary(operator.neg),
    "_iabs": _int_unary(abs),
    "_feq": _feq,
    "_fne": _fne,
    "_flt": _flt,
    "_fle": _fle,
    "_fgt": lambda a, b: _flt(b, a),
    "_fge": lambda a, b: _fle(b, a),
    "_instant": _instant,
    "_key": canonical_key,
    "_as_float": _as_float,
    "_as_int": _as_int,
}
_FLOAT_COMPARISON = {"==": "_feq", "!=": "_fne", "<": "_flt", "<=": "_fle", ">": "_fgt", ">=": "_fge"}
_INT_ARITHMETIC = {"+": "_iadd", "-": "_isub", "*": "_imul"}


class _Gen:
    def __init__(self, arg_names: Sequence[str]) -> None:
        self.args = list(arg_names)
        self.env: dict[str, Any] = dict(_HELPERS)
        self.temps = 0

    def const(self, value: object) -> str:
        name = f"_c{len(self.env)}"
        self.env[name] = value
        return name

    def gen(self, e: x.Expr) -> str:
        """The Python source computing ``e``, by the rule of its class (``_CODE`` below)."""
        return _CODE(self, e)

    def coalesce(self, e: x.Coalesce) -> str:
        """The first non-null value, evaluating the later ones only when needed (as Spark's
        ``coalesce``); an int becomes a float where the result is a float, as on Spark."""
        to_float = e.dtype is float
        out = ""
        for i, v in enumerate(reversed(e.values)):
            code = self.gen(v)
            if to_float and v.dtype in (int, bool):
                code = f"(lambda _v: None if _v is None else float(_v))({code})"
            if i == 0:
                out = code
                continue
            self.temps += 1
            t = f"_t{self.temps}"
            out = f"({t} if ({t} := {code}) is not None else {out})"
        return out

    def instant(self, e: x.Expr, code: str) -> str:
        """``code`` (the code of ``e``) as ticks when it is a datetime."""
        if isinstance(e, x.Lit):
            return repr(_instant(e.value))
        return f"_instant({code})"

    def failure(self, e: x.Expr, rule: EvaluationRule) -> str:
        """The name of a function raising ``e``'s ``EvaluationError`` for ``rule``."""
        return self.const(evaluation_failure(x.render(e), rule))

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def binary(self, e: x.Binary) -> str:
        a, b = self.gen(e.left), self.gen(e.right)
        nullable = e.left.nullable or e.right.nullable
        if e.op in x.COMPARISON and datetime in (e.left.dtype, e.right.dtype):
            # Datetimes compare as instants (naive means UTC), as on Spark: naive against aware
            # works. A constant is made an instant once, here, not for every event.
            a, b = (self.instant(side, code) for side, code in ((e.left, a), (e.right, b)))
        # ``&`` and ``|`` evaluate their right side only when the left does not decide (as
        # Python's ``and``/``or`` and Spark's AND/OR): a division guarded by the left side
        # is not evaluated where the guard fails.
        if e.op == "&":
            if not nullable:
                return f"({a} and {b})"
            t = self.temp()
            return f"(False if ({t} := {a}) is False else _and3({t}, {b}))"
        if e.op == "|":
            if not nullable:
                return f"({a} or {b})"
            t = self.temp()
            return f"(True if ({t} := {a}) is True else _or3({t}, {b}))"
        zero = EvaluationRule.DIVISION_BY_ZERO
        if e.op == "/":
            return f"_div({a}, {b}, {self.failure(e, zero)})"
        if e.op == "//":
            if e.dtype is int:
                return f"_ifloordiv({a}, {b}, {self.failure(e, zero)}, {self.failure(e, EvaluationRule.INTEGER_OVERFLOW)})"
            return f"_ffloordiv({a}, {b}, {self.failure(e, zero)})"
        if e.op == "%":
            return f"_mod({a}, {b}, {self.failure(e, zero)})"
        if e.op in _INT_ARITHMETIC and e.dtype is int:
            return f"{_INT_ARITHMETIC[e.op]}({a}, {b}, {self.failure(e, EvaluationRule.INTEGER_OVERFLOW)})"
        if e.op in x.COMPARISON and float in (e.left.dtype, e.right.dtype):
            # An integer meets a float as a float, as Spark and polars compare them (Python
            # compares the exact values: 2**53 + 1 > 2.0**53 there, not here).
            a, b = (f"_as_float({code})" if side.dtype in (int, bool) else code for side, code in ((e.left, a), (e.right, b)))
            return f"{_FLOAT_COMPARISON[e.op]}({a}, {b})"
        op = _PY_OPS[e.op]
        if nullable:
            return f"(lambda _a, _b: None if _a is None or _b is None else _a {op} _b)({a}, {b})"
        return f"({a} {op} {b})"


_CODE: Registry[_Gen, str] = Registry("in-memory", "expression", lambda e: f"the expression {x.render(e)}")
"""Code generation rules, one per expression class (run once per query, not per event)."""


@_CODE.rule(x.Input)
def _input(g: _Gen, e: x.Input) -> str:
    return g.args[e.index]


@_CODE.rule(x.Attr)
def _attr(g: _Gen, e: x.Attr) -> str:
    base = g.gen(e.base)
    if e.base.nullable:
        return f"(None if {base} is None else {base}.{e.name})"
    return f"{base}.{e.name}"


@_CODE.rule(x.Lit)
def _lit(g: _Gen, e: x.Lit) -> str:
    if isinstance(e.value, (bool, int, float, str)) or e.value is None:
        return repr(e.value) if not isinstance(e.value, float) else g.const(e.value)
    return g.const(e.value)


@_CODE.rule(x.Unary)
def _unary(g: _Gen, e: x.Unary) -> str:
    v = g.gen(e.operand)
    if e.op == "not":
        return f"_not3({v})" if e.operand.nullable else f"(not {v})"
    if e.dtype is int:
        checked = {"neg": "_ineg", "abs": "_iabs"}[e.op]
        return f"{checked}({v}, {g.failure(e, EvaluationRule.INTEGER_OVERFLOW)})"
    fn = {"neg": "-", "abs": "abs"}[e.op]
    if e.operand.nullable:
        return f"(lambda _v: None if _v is None else {fn}(_v))({v})"
    return f"{fn}({v})"


@_CODE.rule(x.When)
def _when(g: _Gen, e: x.When) -> str:
    return f"({g.gen(e.then)} if {g.gen(e.condition)} else {g.gen(e.otherwise)})"


@_CODE.rule(x.IsIn)
def _is_in(g: _Gen, e: x.IsIn) -> str:
    values = g.const(frozenset(e.values)) if _hashable(e.values) else g.const(tuple(e.values))
    v = g.gen(e.operand)
    if e.operand.nullable:
        return f"(lambda _v: None if _v is None else _v in {values})({v})"
    return f"({v} in {values})"


@_CODE.rule(x.PyCall)
def _py_call(g: _Gen, e: x.PyCall) -> str:
    fn = g.const(x.checked_udf(e.fn, e.returns, getattr(e.fn, "__name__", "udf"), local=True))
    return f"{fn}({', '.join(g.gen(a) for a in e.args)})"


@_CODE.rule(x.IsNull)
def _is_null(g: _Gen, e: x.IsNull) -> str:
    return f"({g.gen(e.operand)} is {'not ' if e.negate else ''}None)"


@_CODE.rule(x.Record)
def _record(g: _Gen, e: x.Record) -> str:
    cls = g.const(e.cls)
    fields = {f.name: f.dtype for f in record_fields(e.cls)}
    values = []
    for n, v in zip(e.names, e.values):
        code = g.gen(v)
        if x.widened(fields[n], v.dtype):  # a field holds the type it declares
            code = f"{'_as_float' if fields[n] is float else '_as_int'}({code})"
        values.append(f"{n}={code}")
    return f"{cls}({', '.join(values)})"


@_CODE.rule(x.AggRef)
def _agg_ref(g: _Gen, e: x.AggRef) -> str:
    return f"aggs[{e.index}]"


@_CODE.rule(x.KeyRef)
def _key_ref(g: _Gen, e: x.KeyRef) -> str:
    return f"key[{e.index}]"


@_CODE.rule(x.WindowBound)
def _window_bound(g: _Gen, e: x.WindowBound) -> str:
    return "ws" if e.which == "start" else "we"


@_CODE.rule(x.ExplodedItem)
def _exploded_item(g: _Gen, e: x.ExplodedItem) -> str:
    return "item"


_CODE.rule(x.Binary)(_Gen.binary)
_CODE.rule(x.Coalesce)(_Gen.coalesce)


def _hashable(values: tuple[Any, ...]) -> bool:
    try:
        hash(values)
    except TypeError:
        return False
    return True


def compile_function(
    exprs: Sequence[x.Expr], arg_names: Sequence[str], as_tuple: bool = False, inputs: Sequence[str] | None = None
) -> Callable[..., Any]:
    """A Python function of ``arg_names`` returning the value of ``exprs[0]`` (or a tuple of all).

    ``inputs`` names what each traced lambda argument (``Input(i)``) is bound to; by default
    the i-th of ``arg_names``.
    """
    g = _Gen(arg_names if inputs is None else inputs)
    body = [g.gen(e) for e in exprs]
    result = "(" + ", ".join(body) + ("," if len(body) == 1 else "") + ")" if as_tuple else body[0]
    fn: Callable[..., Any] = define_function(f"def _f({', '.join(arg_names)}):\n    return {result}\n", g.env)
    return fn


def compile_expression(expr: x.Expr, arity: int) -> Callable[..., Any]:
    """``expr`` as a function of ``arity`` payloads (a predicate's null and False both reject;
    an ``Input`` projection returns the payload itself)."""
    return compile_function([expr], [f"a{i}" for i in range(arity)])


def compile_keys(exprs: Sequence[x.Expr], side: int = 0) -> Callable[[Any], tuple[Any, ...]]:
    """A key tuple of one payload: traced lambda argument ``side`` (a join's right side is 1).
    Float keys are made what every engine groups and joins by (``canonical_key``: one NaN, 0.0 for -0.0)."""
    g = _Gen(["None"] * side + ["a0"])
    body = [f"_key({g.gen(k)})" if k.dtype is float else g.gen(k) for k in exprs]
    fn: Callable[[Any], tuple[Any, ...]] = define_function(f"def _f(a0):\n    return ({', '.join(body)},)\n", g.env)
    return fn


def compile_aggregate_values(aggregates: Sequence[Aggregate], payload_type: type) -> Callable[[Any, int], tuple[Any, ...]]:
    """An event's values for ``Accumulator.add``, from its payload and start: per aggregate
    with an argument, the argument's value; for the kinds that depend on the events' order
    (first, last, collect), ``((start, payload order), value)``, or None for a null value."""
    g = _Gen(["a0"])
    order = g.const(payload_order(payload_type)) if any(a.kind.ordered for a in aggregates) else ""
    parts = []
    for a in aggregates:
        if a.arg is None:
            continue
        if a.kind is AggregateKind.TOP:  # (the values ranked by, the payload)
            parts.append("((" + "".join(f"{g.gen(e)}, " for e in a.order) + "), a0)")
            continue
        code = g.gen(a.arg)
        parts.append(f"_with_order({code}, start, {order}, a0)" if a.kind.ordered else code)
    body = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    fn: Callable[[Any, int], tuple[Any, ...]] = define_function(f"def _f(a0, start):\n    return {body}\n", g.env)
    return fn


def _with_order(value: Any, start: int, order: Order, payload: Any) -> Any:
    return None if value is None else ((start, order(payload)), value)


_HELPERS["_with_order"] = _with_order


def define_function(src: str, env: dict[str, Any]) -> Any:
    """The function ``_f`` that ``src`` defines, with the names of ``env`` in scope."""
    namespace = dict(env)
    exec(compile(src, "<tempo generated>", "exec"), namespace)
    fn = namespace["_f"]
    fn.__doc__ = src
    return fn


def compile_window_projection(expr: x.Expr) -> Callable[[tuple[Any, ...], list[Any], datetime, datetime], Any]:
    """The aggregate record of one window from its key, aggregate values and bounds."""
    return compile_function([expr], ["key", "aggs", "ws", "we"])


Order = Callable[[Any], tuple[Any, ...]]


def payload_order(cls: type) -> Order:
    """A sort key for payloads of ``cls``: field by field in declaration order, nulls first,
    NaN after every number, records field by field; the order Spark sorts the same columns
    in (ascending, nulls first), so that ties in time break alike on every executor."""
    parts = [(f.name, value_order(f.dtype, f.element)) for f in record_fields(cls)]

    def order(payload: Any) -> tuple[Any, ...]:
        return tuple(part(getattr(payload, name)) for name, part in parts)

    return order


def value_order(dtype: type, element: type | None = None) -> Callable[[Any], tuple[Any, ...]]:
    inner: Callable[[Any], Any]
    if element is not None:  # a list: element by element, a prefix first (Spark's array order)
        each = value_order(element)

        def inner(v: Any) -> Any:
            return tuple(each(i) for i in v)
    elif is_record_type(dtype):
        inner = payload_order(dtype)
    elif dtype is float:

        def inner(v: Any) -> Any:
            return (1, 0.0) if math.isnan(v) else (0, v)
    elif dtype is datetime:  # naive and aware instants alike (a naive one is UTC)
        inner = to_ticks
    elif dtype in (bool, int, str):

        def inner(v: Any) -> Any:
            return v
    else:  # any other value (an ``object`` field, in memory only): by type, then by text

        def inner(v: Any) -> Any:
            return (type(v).__name__, repr(v))

    def order(v: Any) -> tuple[Any, ...]:
        return (0,) if v is None else (1, inner(v))

    return order
