"""Tracing: calling a user lambda once on symbolic proxies to get an expression tree.

A ``Traced`` value stands for "the value of this expression for the current event". Its
operators build IR nodes instead of computing. Python constructs that need a real value
(``and``/``or``/``not``, ``if``, ``in``, chained comparisons, f-strings, ``len()``,
``math`` functions...) call ``__bool__``, ``__contains__``, ``__float__`` and the like,
which raise a ``TraceError``. The tracer then finds the failing spot in the lambda's own
code (its bytecode position and source text) and says what was called, in the user's own
spelling, and what to write instead.

Two traps give no error from Python at all: ``is``/``is not`` (``r.v is None`` is simply
``False`` at trace time) and ``in`` on a Python container. Their result is a plain
constant where a traced value was expected; ``trace`` refuses such a constant for every
predicate, key and aggregate argument (``tempo.lit`` spells a constant that is meant).
"""

from __future__ import annotations

import ast
import contextvars
import dis
import inspect
import linecache
import os
import types
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from tempo.errors import QueryBuildError, TraceError
from tempo.expr import nodes as n
from tempo.expr.schema import is_record, is_record_type, record_fields

_CONTROL_FLOW_HELP = (
    "a traced lambda cannot use Python control flow on event values: "
    "write `a & b`, `a | b`, `~a` (or tempo.not_(a)) instead of `and`, `or`, `not`; "
    "tempo.when(cond, x, y) instead of `x if cond else y`; "
    "tempo.coalesce(x, default) instead of `x or default`; "
    "tempo.is_in(x, [...]) instead of `x in [...]`; "
    "tempo.is_null(x) / tempo.is_not_null(x) instead of `x is None` / `x is not None`; "
    "and (a < x) & (x < b) instead of the chained `a < x < b`"
)

_SUPPORTED = (
    "traced lambdas support + - * / // %, comparisons, & | ~, abs(), tempo.when, tempo.is_in, "
    "tempo.is_null, tempo.is_not_null and tempo.coalesce"
)

_TEMPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _expr(value: object) -> n.Expr:
    """Any value a lambda may produce, as an expression."""
    if isinstance(value, Traced):
        return value._expr
    if is_record(value):
        return record_expr(value)
    if isinstance(value, (list, dict, set)):
        raise QueryBuildError(f"cannot use a {type(value).__name__} in a traced expression: {value!r}")
    return n.Lit(value)


def record_expr(value: object) -> n.Record:
    """A record instance whose fields hold traced values, as a ``Record`` node."""
    cls = type(value)
    names = tuple(f.name for f in record_fields(cls))
    return n.Record(cls, names, tuple(_expr(getattr(value, name)) for name in names))


class Traced:
    """A symbolic value inside a traced lambda. Typed as the payload type for the IDE."""

    __slots__ = ("_expr",)
    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so no hashing
    _expr: n.Expr  # declared for mypy; otherwise ``self._expr`` resolves via ``__getattr__``

    def __init__(self, expr: n.Expr) -> None:
        object.__setattr__(self, "_expr", expr)

    def __getattr__(self, name: str) -> Traced:
        if name.startswith("__"):
            raise AttributeError(name)
        dtype = self._expr.dtype
        if not is_record_type(dtype):
            shown = n.render(self._expr)
            if hasattr(dtype, name):
                member = getattr(dtype, name)
                how = (
                    f"tempo.udf({dtype.__name__}.{name}, <result type>)({shown})"
                    if callable(member)
                    else f"tempo.udf(lambda v: v.{name}, <result type>)({shown})"
                )
                raise TraceError(
                    f"`{shown}.{name}` uses a {dtype.__name__} {'method' if callable(member) else 'attribute'}, "
                    f"which cannot run on a traced value (it has no value until the query runs); "
                    f"wrap it in a udf: {how}"
                )
            raise QueryBuildError(f"{shown} is a {dtype.__name__}, which has no field {name!r}")
        return Traced(n.attr(self._expr, name))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise TraceError("traced events are read-only: build a new record in select()")

    def __repr__(self) -> str:
        return f"<traced {n.render(self._expr)}: {self._expr.dtype.__name__}>"

    # Python protocols that need a real value: refuse, naming the fix.
    def __bool__(self) -> NoReturn:
        raise TraceError(_CONTROL_FLOW_HELP)

    def __contains__(self, item: object) -> NoReturn:
        raise TraceError("`in` on a traced value cannot be traced; use tempo.udf for substring tests")

    def __iter__(self) -> NoReturn:
        raise TraceError("a traced value cannot be iterated")

    def __len__(self) -> NoReturn:
        raise TraceError("len() of a traced value: use tempo.udf(len, int)(x)")

    def __format__(self, spec: str) -> NoReturn:
        raise TraceError("a traced value cannot be formatted into a string; use tempo.udf for string formatting")

    def __str__(self) -> NoReturn:
        raise TraceError("a traced value has no string value at trace time; use tempo.udf(str, str)(x)")

    def __index__(self) -> NoReturn:
        raise TraceError("a traced value cannot be used as an index at trace time")

    def __float__(self) -> NoReturn:
        raise TraceError("float() of a traced value: use arithmetic such as `x * 1.0`")

    def __int__(self) -> NoReturn:
        raise TraceError("int() of a traced value: use `x // 1` (it floors)")

    def __round__(self, ndigits: int | None = None) -> NoReturn:
        raise TraceError("round() of a traced value: use tempo.udf(round, int)(x)")

    def __pow__(self, other: object) -> NoReturn:
        raise TraceError("`**` is not traced: write `x * x` for a square, or tempo.udf(pow, float)(x, y)")

    def __rpow__(self, other: object) -> NoReturn:
        raise TraceError("`**` is not traced: use tempo.udf(pow, float)(x, y)")

    def __getitem__(self, item: object) -> NoReturn:
        raise TraceError("a traced value cannot be indexed or sliced; use tempo.udf")

    # Operators build nodes.
    def _bin(self, op: str, other: object, reflected: bool = False) -> Traced:
        if other is None and op in ("==", "!="):
            shown = n.render(self._expr)
            fix = "tempo.is_null" if op == "==" else "tempo.is_not_null"
            raise TraceError(
                f"`{shown} {op} None` is null for every event (a comparison with null is null, which counts as false): write {fix}({shown})"
            )
        if isinstance(other, bool) and op in ("&", "|"):
            raise TraceError(_constant_operand(other, f"`{op}`"))
        left, right = self._expr, _expr(other)
        if reflected:
            left, right = right, left
        return Traced(n.Binary(op, left, right))

    def __add__(self, o: object) -> Traced:
        return self._bin("+", o)

    def __radd__(self, o: object) -> Traced:
        return self._bin("+", o, True)

    def __sub__(self, o: object) -> Traced:
        return self._bin("-", o)

    def __rsub__(self, o: object) -> Traced:
        return self._bin("-", o, True)

    def __mul__(self, o: object) -> Traced:
        return self._bin("*", o)

    def __rmul__(self, o: object) -> Traced:
        return self._bin("*", o, True)

    def __truediv__(self, o: object) -> Traced:
        return self._bin("/", o)

    def __rtruediv__(self, o: object) -> Traced:
        return self._bin("/", o, True)

    def __floordiv__(self, o: object) -> Traced:
        return self._bin("//", o)

    def __rfloordiv__(self, o: object) -> Traced:
        return self._bin("//", o, True)

    def __mod__(self, o: object) -> Traced:
        return self._bin("%", o)

    def __rmod__(self, o: object) -> Traced:
        return self._bin("%", o, True)

    def __eq__(self, o: object) -> Traced:  # type: ignore[override]
        return self._bin("==", o)

    def __ne__(self, o: object) -> Traced:  # type: ignore[override]
        return self._bin("!=", o)

    def __lt__(self, o: object) -> Traced:
        return self._bin("<", o)

    def __le__(self, o: object) -> Traced:
        return self._bin("<=", o)

    def __gt__(self, o: object) -> Traced:
        return self._bin(">", o)

    def __ge__(self, o: object) -> Traced:
        return self._bin(">=", o)

    def __and__(self, o: object) -> Traced:
        return self._bin("&", o)

    def __rand__(self, o: object) -> Traced:
        return self._bin("&", o, True)

    def __or__(self, o: object) -> Traced:
        return self._bin("|", o)

    def __ror__(self, o: object) -> Traced:
        return self._bin("|", o, True)

    def __neg__(self) -> Traced:
        return Traced(n.Unary("neg", self._expr))

    def __pos__(self) -> Traced:
        return self

    def __abs__(self) -> Traced:
        return Traced(n.Unary("abs", self._expr))

    def __invert__(self) -> Traced:
        return Traced(n.Unary("not", self._expr))


def _constant_operand(value: bool, where: str) -> str:
    """Why a Python bool where a traced condition belongs is refused."""
    return (
        f"a condition given to {where} is the Python constant {value!r}, evaluated when the lambda "
        "was traced (by `is` / `is not`, `in` on a Python container, or a Python function), so it "
        "would be the same for every event; write tempo.is_null(x) / tempo.is_not_null(x) instead "
        f"of `x is None` / `x is not None`, tempo.is_in(x, [...]) instead of `x in [...]`, or "
        f"tempo.lit({value!r}) if a constant is really meant"
    )


def require_condition(value: object, where: str) -> object:
    """``value`` unless it is a plain Python bool, which cannot be a traced condition."""
    if isinstance(value, bool):
        raise TraceError(_constant_operand(value, where))
    return value


# The inputs of the lambda being traced, so that tempo.col() can find them.
_current_inputs: contextvars.ContextVar[tuple[n.Expr, ...]] = contextvars.ContextVar("tempo_trace_inputs", default=())


# ---- where a trace failed, in the user's own code -------------------------------------------


def param_names(fn: Callable[..., Any]) -> list[str]:
    """The positional parameter names of ``fn`` (``lambda reading: ...`` -> ``["reading"]``)."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    return list(code.co_varnames[: code.co_argcount])


def _segment(code: types.CodeType, lineno: int | None, end_lineno: int | None, col: int | None, end_col: int | None) -> str | None:
    """The source text between two positions of ``code``'s file, on one line."""
    if lineno is None or end_lineno is None or col is None or end_col is None:
        return None
    lines = [linecache.getline(code.co_filename, i) for i in range(lineno, end_lineno + 1)]
    if not all(lines):
        return None
    if len(lines) == 1:
        text = lines[0].encode()[col:end_col].decode(errors="replace")
    else:
        text = lines[0].encode()[col:].decode(errors="replace") + "".join(lines[1:-1])
        text += lines[-1].encode()[:end_col].decode(errors="replace")
    text = " ".join(text.split())
    return text or None


def _body(code: types.CodeType) -> str | None:
    """The source text of a lambda's body (of a function's statements, shortened)."""
    spans: list[Any] = []
    for ins in dis.get_instructions(code):
        pos: Any = getattr(ins, "positions", None)  # Python 3.11+
        if pos is None or pos.col_offset is None or (pos.col_offset, pos.end_col_offset) == (0, 0):
            continue
        if ins.opname not in ("RESUME", "RETURN_VALUE", "RETURN_CONST"):
            spans.append(pos)
    if not spans:
        return None
    first = min(spans, key=lambda p: (p.lineno or 0, p.col_offset or 0))
    last = max(spans, key=lambda p: (p.end_lineno or 0, p.end_col_offset or 0))
    text = _segment(code, first.lineno, last.end_lineno, first.col_offset, last.end_col_offset)
    if text is not None and len(text) > 160:
        text = text[:157] + "..."
    return text


def _failing_spot(tb: types.TracebackType | None, code: types.CodeType | None) -> tuple[str, str | None, bool] | None:
    """(instruction name, source text, whether it called a tempo function that raised) of the
    lambda's instruction that raised, if found."""
    found: tuple[types.CodeType, int] | None = None
    api = False
    while tb is not None:
        c = tb.tb_frame.f_code
        if (c is code) if code is not None else not os.path.abspath(c.co_filename).startswith(_TEMPO_DIR):
            found = (c, tb.tb_lasti)
            nxt = tb.tb_next.tb_frame.f_code if tb.tb_next is not None else None
            api = nxt is not None and os.path.abspath(nxt.co_filename).startswith(_TEMPO_DIR) and not nxt.co_name.startswith("__")
        tb = tb.tb_next
    if found is None:
        return None
    c, lasti = found
    at = None  # the instruction at lasti, or whose inline caches hold it (a call into Python code)
    for ins in dis.get_instructions(c):
        if ins.offset > lasti:
            break
        at = ins
    if at is None:
        return None
    pos = getattr(at, "positions", None)
    text = None if pos is None else _segment(c, pos.lineno, pos.end_lineno, pos.col_offset, pos.end_col_offset)
    return at.opname, text, api


def _call_parts(text: str) -> tuple[str, list[str]] | None:
    """(function, argument texts) when ``text`` is a call expression."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Call):
        return None
    func = ast.get_source_segment(text, tree.func) or "f"
    return func, [ast.get_source_segment(text, a) or "x" for a in tree.args]


_CALL_HELP: dict[str, str] = {
    "round": "round() is not traced; use tempo.udf(round, int)({args})",
    "len": "len() is not traced; use tempo.udf(len, int)({args})",
    "str": "str() is not traced; use tempo.udf(str, str)({args})",
    "int": "int() is not traced; `{args} // 1` floors (or tempo.udf(int, int)({args}) truncates)",
    "float": "float() is not traced; write `{args} * 1.0`",
    "bool": "bool() asks Python for a truth value now; a traced condition already is one, and `x != 0` tests a number",
    "pow": "pow() is not traced; write `x * x` for a square, or tempo.udf(pow, float)({args})",
    "max": "max() compares with Python's `if`; write tempo.when(a > b, a, b)",
    "min": "min() compares with Python's `if`; write tempo.when(a < b, a, b)",
    "sum": "sum() of a traced value is not traced; add the fields with `+` (window sums are w.sum)",
    "any": "any() needs Python truth values; combine conditions with `|`",
    "all": "all() needs Python truth values; combine conditions with `&`",
}


def _explain_failure(opname: str, text: str | None, exc: BaseException) -> str:
    """Why the instruction ``opname`` (source ``text``) cannot be traced, and what to write."""
    original = str(exc) if isinstance(exc, TraceError) else ""
    if opname in ("CALL", "PRECALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_EX", "CALL_KW") and text:
        parts = _call_parts(text)
        if parts is not None:
            func, args = parts
            joined = ", ".join(args)
            bare = func.rsplit(".", 1)[-1]
            if func in _CALL_HELP:
                return _CALL_HELP[func].format(args=joined)
            if func == "isinstance":
                return "isinstance() asks about the symbolic value, not the event's; a field's type is its annotation"
            result = "float" if func.startswith(("math.", "numpy.", "np.")) else "<result type>"
            how = f"tempo.udf({func}, {result})({joined})"
            if "." in func and not func.split(".")[0].isidentifier():
                how = f"tempo.udf(lambda v: v.{bare}(), <result type>)(...)"
            return (
                f"{func} is a Python function: it runs once, when the lambda is traced, on a symbolic value, "
                f"not once per event; {_SUPPORTED}; for anything else wrap the function: {how}"
            )
    if opname == "CONTAINS_OP":
        if original.startswith("`in` on a traced value"):
            return original
        return "`x in container` on a Python container asks Python for a truth value now; write tempo.is_in(x, [...]) (constant values)"
    if opname.startswith(("POP_JUMP", "JUMP_IF", "UNARY_NOT", "TO_BOOL")):
        return "it is used as a Python truth value (`if`, `and`, `or`, `not`, a chained comparison); " + _CONTROL_FLOW_HELP
    if opname == "BINARY_OP" and isinstance(exc, TypeError) and not isinstance(exc, TraceError):
        return f"{exc}; {_SUPPORTED}; for other operators use tempo.udf"
    if opname in ("GET_ITER", "FOR_ITER", "UNPACK_SEQUENCE"):
        return "a traced value cannot be iterated or unpacked; use tempo.udf"
    if isinstance(exc, TypeError) and not isinstance(exc, TraceError):
        return f"{exc}; {_SUPPORTED}; for anything else use tempo.udf"
    return str(exc)


def _located(exc: BaseException, fn: Callable[..., Any], what: str) -> BaseException:
    """``exc`` again, its message naming the failing spot of ``fn`` and the operator ``what``."""
    code = getattr(fn, "__code__", None)
    spot = _failing_spot(exc.__traceback__, code if isinstance(code, types.CodeType) else None)
    opname, text, api = spot if spot is not None else ("", None, False)
    if isinstance(exc, QueryBuildError) and not isinstance(exc, TraceError):
        reason = str(exc)
        cls: type[QueryBuildError] = QueryBuildError
    elif isinstance(exc, TraceError) and api:  # a tempo function refused its arguments: it says why
        reason = str(exc)
        cls = TraceError
    else:
        reason = _explain_failure(opname, text, exc)
        cls = TraceError
    where = f"in {what}" if text is None else f"`{text}` in {what}"
    new = cls(f"cannot trace {where}: {reason}")
    new._tempo_located = True  # type: ignore[attr-defined]
    return new


def _role(arg: object, records: int) -> str:
    """What an argument of a traced lambda is, as the expected form names it."""
    if isinstance(arg, Traced):
        e = arg._expr
        if isinstance(e, n.Input):
            return ("left", "right")[e.index] if records == 2 and e.index < 2 else "event"
        if isinstance(e, n.KeyRef):
            return "key"
        return "value"
    if isinstance(arg, tuple):
        return "key"
    return {"Window": "w", "Analytics": "a", "Stream": "group"}.get(type(arg).__name__, "arg")


_FORMS = {
    ("key", "w"): "a grouped aggregate takes (key, w)",
    ("w",): "an aggregate without group_by takes (w) alone",
    ("key", "event", "a"): "a grouped analytic takes (key, event, a)",
    ("event", "a"): "an analytic without group_by takes (event, a)",
}

_ROLES = {"the top_k select=": ("event", "rank"), "the apply() select=": ("key", "result")}
"""The arguments' names where their proxies do not tell them (fields of a record tempo builds)."""


def _check_arity(fn: Callable[..., Any], args: Sequence[object], what: str) -> None:
    """A lambda taking another number of arguments than ``what`` passes is refused with the
    form it must have, not Python's message about positional arguments."""
    records = sum(1 for a in args if isinstance(a, Traced) and isinstance(a._expr, n.Input))
    check_arity(fn, _ROLES.get(what) or tuple(_role(a, records) for a in args), what)


def check_arity(fn: Callable[..., Any], roles: Sequence[str], what: str) -> None:
    """``fn`` can be called with one argument per role, else a ``QueryBuildError`` giving the
    form to write: for an operator that calls ``fn`` later, through another (whose own name
    would mislead), as ``left_outer_join``'s ``select`` and ``unmatched``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or a callable without one: let the call say
        return
    try:
        signature.bind(*roles)
    except TypeError:
        given = [p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        form = _FORMS.get(tuple(roles), f"{what} takes ({', '.join(roles)})")
        raise QueryBuildError(
            f"{form}, as in lambda {', '.join(roles)}: ...; the function given for {what} takes ({', '.join(given)})"
        ) from None


def call_traced(fn: Callable[..., Any], args: Sequence[object], what: str) -> object:
    """Call ``fn`` once on ``args`` (proxies, built by the caller); a failure names its spot."""
    if not callable(fn):
        raise QueryBuildError(f"{what} must be a function (a lambda), got {fn!r}")
    _check_arity(fn, args, what)
    inputs = tuple(a._expr for a in args if isinstance(a, Traced))
    token = _current_inputs.set(inputs)
    try:
        return fn(*args)
    except (QueryBuildError, TypeError) as exc:
        if getattr(exc, "_tempo_located", False):
            raise
        raise _located(exc, fn, what) from (None if isinstance(exc, QueryBuildError) else exc)
    finally:
        _current_inputs.reset(token)


# ---- constants where a traced value was expected --------------------------------------------


def _constant_cause(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """(why the lambda gave a constant, what to write instead), read from its code."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    body = _body(code)
    tree: ast.AST | None = None
    if body is not None:
        try:
            tree = ast.parse(body, mode="eval")
        except SyntaxError:
            tree = None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for op, right in zip(node.ops, node.comparators):
                    left = ast.get_source_segment(body or "", node.left) or "x"
                    if isinstance(op, (ast.Is, ast.IsNot)):
                        word = "is" if isinstance(op, ast.Is) else "is not"
                        if isinstance(right, ast.Constant) and right.value is None:
                            fix = f"tempo.{'is_null' if isinstance(op, ast.Is) else 'is_not_null'}({left})"
                        else:
                            fix = "`==` / `!=`"
                        return (
                            f"`{word}` compares Python objects when the lambda is traced (a traced field is "
                            f"never None itself), so it cannot test an event's value",
                            f"write {fix}",
                        )
                    if isinstance(op, (ast.In, ast.NotIn)):
                        values = ast.get_source_segment(body or "", right) or "[...]"
                        fix = f"tempo.is_in({left}, {values})"
                        return (
                            "`in` on a Python container is evaluated by Python when the lambda is traced",
                            f"write {fix if isinstance(op, ast.In) else f'tempo.not_({fix})'}",
                        )
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id
                in (
                    "bool",
                    "len",
                    "isinstance",
                    "callable",
                    "hasattr",
                    "id",
                    "type",
                )
            ):
                return (
                    f"{node.func.id}() is evaluated by Python when the lambda is traced",
                    "use the traced operators (or tempo.udf for a Python function)",
                )
    names = {i.opname for i in dis.get_instructions(code)}
    if "IS_OP" in names:
        return ("`is` / `is not` compare Python objects when the lambda is traced", "write tempo.is_null(x) / tempo.is_not_null(x)")
    if "CONTAINS_OP" in names:
        return ("`in` on a Python container is evaluated when the lambda is traced", "write tempo.is_in(x, [...])")
    if not any(i.opname == "LOAD_FAST" and i.argval in code.co_varnames[: code.co_argcount] for i in dis.get_instructions(code)):
        return ("the lambda does not use its argument", "use the event's fields")
    return (
        "a Python expression or function was evaluated eagerly on the symbolic value",
        "use the traced operators (or tempo.udf for a Python function)",
    )


def _constant_error(value: object, fn: Callable[..., Any], what: str, consequence: str) -> TraceError:
    code = getattr(fn, "__code__", None)
    body = _body(code) if isinstance(code, types.CodeType) else None
    cause = _constant_cause(fn)
    shown = f"`{body}`" if body else "the lambda"
    why, fix = cause if cause is not None else ("it was evaluated by Python when the lambda was traced", "use the traced operators")
    error = TraceError(
        f"{what} {shown} gives the Python constant {value!r} when traced, not an expression over the "
        f"event, so {consequence}: {why}; {fix} (if a constant is really meant, write tempo.lit({value!r}))"
    )
    error._tempo_located = True  # type: ignore[attr-defined]
    return error


_CONSEQUENCE = {
    "predicate": "it would be the same for every event",
    "key": "every event would get the same key",
    "value": "it would be the same for every event",
}


def require_traced(value: object, fn: Callable[..., Any], what: str, kind: str = "value") -> n.Expr:
    """``value`` as an expression; a plain Python constant is a ``TraceError``. ``kind`` is
    ``predicate``, ``key``, ``value`` or ``record`` (a projection: a record of any fields)."""
    if isinstance(value, Traced):
        return value._expr
    if kind == "record":
        if is_record(value):
            _check_record_fields(value, fn, what)
            return record_expr(value)
        raise _constant_error(value, fn, what, "it is no record (a projection builds a payload record)")
    if kind == "predicate" and isinstance(value, bool):
        if "join" in what:
            consequence = "every pair would match" if value else "no pair would match"
        else:
            consequence = "it would keep every event" if value else "it would keep no event"
        raise _constant_error(value, fn, what, consequence)
    raise _constant_error(value, fn, what, _CONSEQUENCE.get(kind, _CONSEQUENCE["value"]))


def _check_record_fields(value: object, fn: Callable[..., Any], what: str) -> None:
    """A record field holding a plain bool from ``is`` / ``in`` is the same trap as a predicate."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return
    ops = {i.opname for i in dis.get_instructions(code)}
    if not ops & {"IS_OP", "CONTAINS_OP"}:
        return
    for f in record_fields(type(value)):
        v = getattr(value, f.name)
        if isinstance(v, bool):
            raise _constant_error(v, fn, f"{what} (field {f.name!r})", f"field {f.name!r} would be the same for every event")


def trace(fn: Callable[..., Any], args: Sequence[object], what: str = "the lambda", kind: str = "any") -> n.Expr:
    """Call ``fn`` once on ``args`` (proxies, built by the caller) and return its expression.

    ``kind`` says what the result must be (see ``require_traced``); ``any`` takes constants too.
    """
    result = call_traced(fn, args, what)
    if kind == "any":
        return _expr(result)
    return require_traced(result, fn, what, kind)


def record_proxies(fn: Callable[..., Any], records: Sequence[type]) -> list[Traced]:
    """One proxy per payload record argument, named as ``fn`` names its parameters."""
    names = param_names(fn)
    return [Traced(n.Input(i, cls, names[i] if i < len(names) else "")) for i, cls in enumerate(records)]


def trace_records(fn: Callable[..., Any], records: Sequence[type], what: str = "the lambda", kind: str = "any") -> n.Expr:
    """Trace a lambda whose arguments are payload records of the given types."""
    return trace(fn, record_proxies(fn, records), what, kind)


def current_input(index: int) -> n.Expr:
    """Argument ``index`` of the lambda being traced (for ``tempo.col``)."""
    inputs = _current_inputs.get()
    if not inputs:
        raise QueryBuildError("tempo.col() can only be used inside a lambda given to a stream operator")
    if index >= len(inputs):
        raise QueryBuildError(f"tempo.col(..., input={index}): this lambda has {len(inputs)} input(s)")
    return inputs[index]


def expr_of(value: object) -> n.Expr:
    """Public form of ``_expr`` for the API layer."""
    return _expr(value)
