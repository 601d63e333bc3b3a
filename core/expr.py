"""A small, safe expression language for IK targets, evaluated vectorised with numpy.

User text is never given to Python's ``eval``, ``exec``, ``compile`` or ``ast``: our own
tokenizer and recursive-descent parser build a small tree whose only operations are the
arithmetic operators below and a fixed whitelist of numpy functions.

Grammar (lowest to highest precedence)::

    expression  := comparison
    comparison  := additive (( '<' | '<=' | '>' | '>=' | '==' | '!=' ) additive)*   -> 1.0 / 0.0
    additive    := term (('+' | '-') term)*
    term        := unary (('*' | '/') unary)*
    unary       := ('-' | '+') unary | power
    power       := primary (('^' | '**') unary)?          right-associative: 2^3^2 = 2^9
    primary     := number | name | name '(' args ')' | '(' expression ')'

so ``-2^2`` is -4 and ``2^-1`` is 0.5. Numbers: ``3``, ``0.5``, ``.5``, ``1e-3``.
Variables: ``t`` (0 -> 1 over the baked range) and ``frame`` (the frame number).
Constants: ``pi``, ``e``. Functions: ``sin cos tan asin acos atan sqrt abs floor ceil exp log``
(one argument), ``atan2(y, x)``, ``min(a, b, ...)``, ``max(a, b, ...)``,
``clamp(x, lo, hi)`` and the one conditional form ``if(cond, a, b)`` (``a`` where ``cond`` is
non-zero, else ``b``; both are evaluated, element-wise). Piecewise definitions nest ``if``:
``if(t < 0.5, 2*t, if(t < 0.8, 1, 5 - 5*t))``.

Bounds: at most 4096 characters, nesting depth 64, 2048 tree nodes. Evaluation never raises
on overflow or domain errors (numpy warnings are silenced): such values come back as
``inf``/``nan`` and the caller decides (:func:`core.ik.targets.expression_targets` rejects them
with an :class:`~core.errors.ExpressionError`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ExpressionError

__all__ = ["Expression", "compile_expression", "MAX_LENGTH", "MAX_DEPTH", "MAX_NODES", "FUNCTIONS"]

MAX_LENGTH = 4096
MAX_DEPTH = 64
MAX_NODES = 2048


def _clamp(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi)


def _if(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c != 0, a, b)


def _reduce(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def go(*args: np.ndarray) -> np.ndarray:
        out = args[0]
        for a in args[1:]:
            out = fn(out, a)
        return out
    return go


# name -> (function, min arity, max arity or None for variadic)
FUNCTIONS: dict[str, tuple[Callable[..., np.ndarray], int, Any]] = {
    "sin": (np.sin, 1, 1), "cos": (np.cos, 1, 1), "tan": (np.tan, 1, 1),
    "asin": (np.arcsin, 1, 1), "acos": (np.arccos, 1, 1), "atan": (np.arctan, 1, 1),
    "atan2": (np.arctan2, 2, 2), "sqrt": (np.sqrt, 1, 1), "abs": (np.abs, 1, 1),
    "floor": (np.floor, 1, 1), "ceil": (np.ceil, 1, 1), "exp": (np.exp, 1, 1),
    "log": (np.log, 1, 1), "min": (_reduce(np.minimum), 2, None),
    "max": (_reduce(np.maximum), 2, None), "clamp": (_clamp, 3, 3), "if": (_if, 3, 3),
}
CONSTANTS = {"pi": float(np.pi), "e": float(np.e)}
VARIABLES = ("t", "frame")

_BINARY = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "^": np.power,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal,
}
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")
_TWO_CHAR = ("**", "<=", ">=", "==", "!=")
_ONE_CHAR = "+-*/^(),<>"


# -- tokens ---------------------------------------------------------------------------------
# (kind, text, position) with kind in "num", "name", "op", "end"

def _tokenize(text: str) -> list[tuple[str, str, int]]:
    toks: list[tuple[str, str, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if c.isascii() and (c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isascii() and text[i + 1].isdigit())):
            j = i
            while j < n and text[j].isascii() and text[j].isdigit():
                j += 1
            if j < n and text[j] == ".":
                j += 1
                while j < n and text[j].isascii() and text[j].isdigit():
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k].isascii() and text[k].isdigit():
                    while k < n and text[k].isascii() and text[k].isdigit():
                        k += 1
                    j = k
                elif not (k < n and (text[k].isalpha() or text[k] == "_")) or text[k - 1] in "+-":
                    raise ExpressionError("malformed number exponent", j, text)
            toks.append(("num", text[i:j], i))
            i = j
            continue
        if c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(("name", text[i:j], i))
            i = j
            continue
        if text[i:i + 2] in _TWO_CHAR:
            op = text[i:i + 2]
            toks.append(("op", "^" if op == "**" else op, i))
            i += 2
            continue
        if c in _ONE_CHAR:
            toks.append(("op", c, i))
            i += 1
            continue
        if c == "=":
            raise ExpressionError("'=' is not an operator (use '==' to compare)", i, text)
        raise ExpressionError(f"unexpected character {c!r}", i, text)
    toks.append(("end", "", n))
    return toks


# -- parser ---------------------------------------------------------------------------------
# Tree nodes: ("num", float) | ("var", name) | ("neg", node) | ("pow", a, b)
#             | ("chain", first, ((op, node), ...))  (left-associative run, evaluated in a loop)
#             | ("call", name, (args...))

class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.nodes = 0
        self.names: set[str] = set()

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def take(self) -> tuple[str, str, int]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def node(self, pos: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ExpressionError(f"expression is too large (more than {MAX_NODES} parts)", pos, self.text)

    def fail(self, msg: str, tok: tuple[str, str, int]) -> ExpressionError:
        return ExpressionError(msg, tok[2], self.text)

    def expect(self, op: str) -> tuple[str, str, int]:
        tok = self.peek()
        if tok[0] != "op" or tok[1] != op:
            what = "end of expression" if tok[0] == "end" else repr(tok[1])
            raise self.fail(f"expected {op!r} but found {what}", tok)
        return self.take()

    def parse(self) -> tuple:
        if self.peek()[0] == "end":
            raise self.fail("empty expression", self.peek())
        tree = self.expression(0)
        tok = self.peek()
        if tok[0] != "end":
            if tok[0] == "op" and tok[1] == ")":
                raise self.fail("unmatched ')'", tok)
            raise self.fail(f"unexpected {tok[1]!r}", tok)
        return tree

    def check_depth(self, depth: int, tok: tuple[str, str, int]) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(f"expression is nested too deeply (more than {MAX_DEPTH} levels)", tok)

    def chain(self, depth: int, ops: tuple[str, ...], sub: Callable[[int], tuple]) -> tuple:
        first = sub(depth)
        rest = []
        while True:
            tok = self.peek()
            if tok[0] == "op" and tok[1] in ops:
                self.take()
                self.node(tok[2])
                rest.append((tok[1], sub(depth)))
            else:
                break
        return first if not rest else ("chain", first, tuple(rest))

    def expression(self, depth: int) -> tuple:
        self.check_depth(depth, self.peek())
        return self.chain(depth, _COMPARE, self.additive)

    def additive(self, depth: int) -> tuple:
        return self.chain(depth, ("+", "-"), self.term)

    def term(self, depth: int) -> tuple:
        return self.chain(depth, ("*", "/"), self.unary)

    def unary(self, depth: int) -> tuple:
        tok = self.peek()
        if tok[0] == "op" and tok[1] in "+-":
            self.take()
            self.check_depth(depth + 1, tok)
            self.node(tok[2])
            inner = self.unary(depth + 1)
            return ("neg", inner) if tok[1] == "-" else inner
        return self.power(depth)

    def power(self, depth: int) -> tuple:
        base = self.primary(depth)
        tok = self.peek()
        if tok[0] == "op" and tok[1] == "^":
            self.take()
            self.check_depth(depth + 1, tok)
            self.node(tok[2])
            return ("pow", base, self.unary(depth + 1))
        return base

    def primary(self, depth: int) -> tuple:
        tok = self.take()
        kind, text, pos = tok
        self.node(pos)
        if kind == "num":
            try:
                return ("num", float(text))
            except ValueError:  # pragma: no cover - the tokenizer only passes valid numbers
                raise self.fail(f"bad number {text!r}", tok) from None
        if kind == "name":
            nxt = self.peek()
            if nxt[0] == "op" and nxt[1] == "(":
                if text not in FUNCTIONS:
                    raise self.fail(f"unknown function {text!r}", tok)
                self.take()
                self.check_depth(depth + 1, nxt)
                args = []
                if not (self.peek()[0] == "op" and self.peek()[1] == ")"):
                    args.append(self.expression(depth + 1))
                    while self.peek()[0] == "op" and self.peek()[1] == ",":
                        self.take()
                        args.append(self.expression(depth + 1))
                self.expect(")")
                _, lo, hi = FUNCTIONS[text]
                if len(args) < lo or (hi is not None and len(args) > hi):
                    want = str(lo) if hi == lo else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
                    raise self.fail(f"{text}() takes {want} argument(s), got {len(args)}", tok)
                return ("call", text, tuple(args))
            if text in CONSTANTS:
                return ("num", CONSTANTS[text])
            if text in VARIABLES:
                self.names.add(text)
                return ("var", text)
            if text in FUNCTIONS:
                raise self.fail(f"function {text!r} needs '(' and arguments", tok)
            raise self.fail(f"unknown name {text!r} (use t, frame, pi, e or a function)", tok)
        if kind == "op" and text == "(":
            self.check_depth(depth + 1, tok)
            inner = self.expression(depth + 1)
            self.expect(")")
            return inner
        if kind == "end":
            raise self.fail("unexpected end of expression", tok)
        raise self.fail(f"unexpected {text!r}", tok)


def _evaluate_node(node: tuple, env: dict[str, np.ndarray]) -> np.ndarray:
    kind = node[0]
    if kind == "num":
        return np.asarray(node[1])
    if kind == "var":
        return env[node[1]]
    if kind == "neg":
        return np.negative(_evaluate_node(node[1], env))
    if kind == "pow":
        return np.power(_evaluate_node(node[1], env), _evaluate_node(node[2], env))
    if kind == "chain":
        out = _evaluate_node(node[1], env)
        for op, sub in node[2]:
            out = _BINARY[op](out, _evaluate_node(sub, env))
            if op in _COMPARE:
                out = out.astype(np.float64)
        return out
    if kind == "call":
        fn = FUNCTIONS[node[1]][0]
        return fn(*[np.asarray(_evaluate_node(a, env), dtype=np.float64) for a in node[2]])
    raise AssertionError(f"bad node {kind}")  # pragma: no cover


class Expression:
    """A parsed expression; evaluate it with :meth:`evaluate`.

    Attributes
    ----------
    text : str
        The source text.
    variables : frozenset of str
        The variables it uses (a subset of ``{'t', 'frame'}``).
    """

    def __init__(self, text: str, tree: tuple, variables: frozenset[str]) -> None:
        self.text = text
        self._tree = tree
        self.variables = variables

    def evaluate(self, t: np.ndarray | float, frame: np.ndarray | float = 0.0) -> np.ndarray:
        """Evaluate element-wise.

        Parameters
        ----------
        t : array_like, shape (F,) or scalar
            Normalised time, 0 -> 1 over the range.
        frame : array_like, shape (F,) or scalar
            Frame numbers.

        Returns
        -------
        ndarray of float64, shape ``broadcast(t, frame)``
            May contain ``inf``/``nan`` (overflow, domain errors); no warnings are raised.
        """
        tt = np.asarray(t, dtype=np.float64)
        ff = np.asarray(frame, dtype=np.float64)
        tt, ff = np.broadcast_arrays(tt, ff)
        with np.errstate(all="ignore"):
            out = _evaluate_node(self._tree, {"t": tt, "frame": ff})
            out = np.array(np.broadcast_to(np.asarray(out, dtype=np.float64), tt.shape))
        return out

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def compile_expression(text: str) -> Expression:
    """Parse an expression (never executes it as Python).

    Parameters
    ----------
    text : str
        At most 4096 characters.

    Returns
    -------
    Expression

    Raises
    ------
    ExpressionError
        With ``position`` the 0-based character offset of the fault.
    """
    if not isinstance(text, str):
        raise ExpressionError("expression must be text", 0, "")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression is longer than {MAX_LENGTH} characters", MAX_LENGTH, text)
    p = _Parser(text)
    tree = p.parse()
    return Expression(text, tree, frozenset(p.names))
