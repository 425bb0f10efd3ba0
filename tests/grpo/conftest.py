"""All grpolab tests run torch on one CPU thread, as the demo notebook does.

Reductions, hence sampled tokens, depend on the thread count, and for this tiny model two threads on a
busy 2-core machine were measured ten times slower than one.
"""
import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
