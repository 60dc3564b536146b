"""The lab the tests of this folder share (one a module): see tests/support/labs.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from leases.lab.layout import Lab
from tests.support.labs import made_lab
from tests.support.unixusers import LabUsers, lab_users  # noqa: F401


@pytest.fixture(scope="module")
def lab(lab_users: LabUsers) -> Iterator[Lab]:  # noqa: F811
    """A lab made by `zuka lab init` as root, with the test session's groups and users."""
    yield from made_lab(lab_users)
