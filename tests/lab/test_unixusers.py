"""The real-users support itself: each person has exactly the groups the lab gives them."""

from __future__ import annotations

from tests.support.unixusers import LabUsers, lab_users  # noqa: F401


def test_each_person_has_the_groups_of_their_role(lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    expected = {
        u.viewer: {u.viewers},
        u.editor: {u.viewers, u.editors},
        u.offboarder: {u.viewers, u.editors, u.offboard},
        u.service: {u.viewers},
    }
    for user, groups in expected.items():
        out = u.run(user, ["id", "-Gn"])
        assert out.returncode == 0, out.stderr
        assert set(out.stdout.split()) == groups, user
    outsider = set(u.run(u.outsider, ["id", "-Gn"]).stdout.split())
    assert not outsider & {u.viewers, u.editors, u.offboard}
    assert u.run(u.viewer, ["id", "-un"]).stdout.strip() == u.viewer
