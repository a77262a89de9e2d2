import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _kernel_not_broken():
    """Every solver test fails if the compiled loops stopped compiling or running (then
    ``solve`` falls back to numpy silently, and the tests that compare the compiled loop with
    numpy would compare numpy with itself)."""
    yield
    from jacobian_ik.solvers import kernel

    assert not kernel.BROKEN, f"the compiled loops are switched off: {kernel.BROKEN[0]}"
