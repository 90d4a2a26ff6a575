"""is_inside: the one containment check (workspace roots, the cancel sweep's process cwd)."""

import os

from boss_agent.paths import is_inside


def test_a_root_contains_itself_and_what_is_below_it(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert is_inside(tmp_path, tmp_path)
    assert is_inside(tmp_path / "a" / "b", tmp_path)
    assert is_inside(str(tmp_path / "a"), str(tmp_path))


def test_a_sibling_sharing_a_name_prefix_is_outside(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "workshop").mkdir()
    assert not is_inside(tmp_path / "workshop", tmp_path / "work")


def test_dot_dot_is_resolved_before_the_check(tmp_path):
    (tmp_path / "root").mkdir()
    assert not is_inside(tmp_path / "root" / ".." / "elsewhere", tmp_path / "root")


def test_a_symlink_that_leaves_the_root_is_outside(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", tmp_path / "root" / "link")
    assert not is_inside(tmp_path / "root" / "link", tmp_path / "root")


def test_a_root_reached_through_a_symlink_still_contains_its_files(tmp_path):
    (tmp_path / "real" / "src").mkdir(parents=True)
    os.symlink(tmp_path / "real", tmp_path / "alias")
    assert is_inside(tmp_path / "real" / "src", tmp_path / "alias")


def test_an_unresolvable_path_is_outside(tmp_path):
    assert not is_inside("bad\0path", tmp_path)
