"""All grpolab tests run torch on one CPU thread by default, as the demo notebook does.

Reductions, hence sampled tokens, can depend on the thread count, and for this tiny model two threads on
a busy 2-core machine were measured ten times slower than one. GRPOLAB_TEST_THREADS=2 runs the same
tests with two threads (the tests must pass either way, as with MKL_CBWR=COMPATIBLE: nothing here
compares a sampled trajectory beyond what is exact on every CPU).
"""
import os

import pytest
import torch

THREADS = int(os.environ.get("GRPOLAB_TEST_THREADS", "1"))


@pytest.fixture(autouse=True)
def torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)
