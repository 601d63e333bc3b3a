"""The safe expression language: values, error positions, bounds, fuzzing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ExpressionError
from core.expr import MAX_DEPTH, MAX_LENGTH, compile_expression

T = np.linspace(0.0, 1.0, 11)
FR = np.arange(11.0) + 5.0

CASES = [
    ("1 + 2*3", lambda t, f: 7 + 0 * t),
    ("-2^2", lambda t, f: -4 + 0 * t),
    ("2^-1", lambda t, f: 0.5 + 0 * t),
    ("2^3^2", lambda t, f: 512 + 0 * t),
    ("2**3", lambda t, f: 8 + 0 * t),
    ("(1 + t) * (2 - t) / 4", lambda t, f: (1 + t) * (2 - t) / 4),
    ("10 - 4 - 3", lambda t, f: 3 + 0 * t),
    ("12 / 3 / 2", lambda t, f: 2 + 0 * t),
    ("sin(2*pi*t) + cos(t) - tan(t/2)", lambda t, f: np.sin(2 * np.pi * t) + np.cos(t) - np.tan(t / 2)),
    ("asin(t) + acos(t) + atan(t) + atan2(t, 1 - t)", lambda t, f: np.arcsin(t) + np.arccos(t) + np.arctan(t) + np.arctan2(t, 1 - t)),
    ("sqrt(t) * abs(t - 0.5) + exp(-t) + log(1 + t)", lambda t, f: np.sqrt(t) * np.abs(t - .5) + np.exp(-t) + np.log1p(t)),
    ("floor(frame / 3) + ceil(t * 2.5)", lambda t, f: np.floor(f / 3) + np.ceil(t * 2.5)),
    ("min(t, 0.3) + max(t, 0.2, 0.7*t)", lambda t, f: np.minimum(t, .3) + np.maximum(np.maximum(t, .2), .7 * t)),
    ("clamp(3*t - 1, 0, 1)", lambda t, f: np.clip(3 * t - 1, 0, 1)),
    ("(t < 0.5) + (t <= 0.5) + (t > 0.5) * 2 + (t >= 0.5) + (t == 0.5) + (t != 0.5)",
     lambda t, f: 1.0 * (t < .5) + 1.0 * (t <= .5) + (t > .5) * 2.0 + 1.0 * (t >= .5) + 1.0 * (t == .5) + 1.0 * (t != .5)),
    ("if(t < 0.5, 2*t, if(t < 0.8, 1, 5 - 5*t))",
     lambda t, f: np.where(t < .5, 2 * t, np.where(t < .8, 1, 5 - 5 * t))),
    ("1e-3 * frame + .5 + 2. + 1.5E2", lambda t, f: 1e-3 * f + .5 + 2 + 150),
    ("e^t * pi", lambda t, f: np.exp(t) * np.pi),
    ("+ - + t", lambda t, f: -t),
]


@pytest.mark.parametrize("text,ref", CASES)
def test_values_match_numpy(text, ref):
    got = compile_expression(text).evaluate(T, FR)
    assert got.shape == T.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, ref(T, FR), rtol=1e-13, atol=1e-13)


def test_variables_and_constant_broadcast():
    assert compile_expression("t + frame * pi").variables == frozenset({"t", "frame"})
    assert compile_expression("3").variables == frozenset()
    np.testing.assert_array_equal(compile_expression("3").evaluate(T, FR), np.full(11, 3.0))


@pytest.mark.parametrize("text,pos", [
    ("", 0), ("   ", 3), ("1 +", 3), ("foo + 1", 0), ("t + bar", 4), ("sin(1, 2)", 0),
    ("clamp(t, 1)", 0), ("(1 + 2", 6), ("1 + 2)", 5), ("2 $ 3", 2), ("t = 1", 2),
    ("sin t", 0), ("nope(1)", 0), ("1 2", 2), ("max(1)", 0), ("min()", 0), ("1e+", 1), ("()", 1),
    ("t,", 1), ("__import__('os')", 11), ("__import__(1)", 0), ("é", 0),
])
def test_error_positions(text, pos):
    with pytest.raises(ExpressionError) as ei:
        compile_expression(text)
    assert ei.value.position == pos, ei.value


def test_bounds():
    with pytest.raises(ExpressionError):
        compile_expression("1+" * (MAX_LENGTH // 2) + "1")
    deep = "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(ExpressionError) as ei:
        compile_expression(deep)
    assert "deep" in str(ei.value)
    ok = "(" * (MAX_DEPTH - 1) + "t" + ")" * (MAX_DEPTH - 1)
    np.testing.assert_array_equal(compile_expression(ok).evaluate(T, FR), T)
    # Long left-associative runs are not nesting: they parse and evaluate without recursion.
    long_sum = "+".join(["t"] * 1000)
    np.testing.assert_allclose(compile_expression(long_sum).evaluate(T, FR), 1000 * T)
    with pytest.raises(ExpressionError):
        compile_expression("-" * 200 + "1")
    with pytest.raises(ExpressionError):
        compile_expression(123)  # type: ignore[arg-type]


def test_overflow_and_domain_errors_are_values_not_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.all(np.isinf(compile_expression("9^9^9^9").evaluate(T, FR)))
        assert np.all(np.isnan(compile_expression("sqrt(-1 - t)").evaluate(T, FR)))
        assert np.isinf(compile_expression("1 / t").evaluate(T, FR)[0])


TOKENS = ["t", "frame", "pi", "e", "1", "2.5", "1e3", ".5", "+", "-", "*", "/", "^", "**", "(", ")",
          ",", "<", "<=", ">", "==", "!=", "sin", "atan2", "min", "clamp", "if", "sqrt", "log", "x",
          "=", "@", " ", "9^9^9", "__class__", ".", "[", "'"]


def _check(text):
    try:
        ex = compile_expression(text)
    except ExpressionError as err:
        assert 0 <= err.position <= len(text)
        return
    out = ex.evaluate(T, FR)
    assert isinstance(out, np.ndarray) and out.shape == T.shape and out.dtype == np.float64


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_random_text(text):
    _check(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_fuzz_token_sequences(tokens):
    _check("".join(tokens))


def _trees():
    leaf = st.sampled_from(["t", "frame", "pi", "0", "1", "2.5", "1e308", "-3"])
    def extend(sub):
        return st.one_of(
            st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "^", "<", "=="]), sub).map(lambda x: f"({x[0]} {x[1]} {x[2]})"),
            st.tuples(st.sampled_from(["sin", "sqrt", "log", "exp", "floor", "abs", "acos"]), sub).map(lambda x: f"{x[0]}({x[1]})"),
            st.tuples(sub, sub, sub).map(lambda x: f"if({x[0]}, {x[1]}, {x[2]})"),
            st.tuples(sub, sub).map(lambda x: f"max({x[0]}, {x[1]})"),
            sub.map(lambda x: f"-{x}"),
        )
    return st.recursive(leaf, extend, max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_trees())
def test_fuzz_valid_trees_always_evaluate(text):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compile_expression(text).evaluate(T, FR)
    assert out.shape == T.shape and out.dtype == np.float64
