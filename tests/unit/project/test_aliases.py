"""Where a path may be reached under another name (envman/project/aliases.py): the mount table
read with its escapes, the places a second mount shows again, and the folder listings that tell
whether a name may lead elsewhere (a link, another spelling, a folder that cannot be listed)."""

from __future__ import annotations

import os

import pytest

from envman.project.aliases import OWN_IDENTITY_TYPES, leading_out, mount_table, path_chain, shared_places


def test_a_name_another_listed_name_may_answer_to_is_resolved_with_the_policy(tmp_path):
    """On a file system that ignores case, ``.ssh`` looks up a listed ``.SSH`` (or a name whose
    letters fold to its letters): such a name may be a link, so it is not left for later."""
    (tmp_path / ".SSH").mkdir()
    (tmp_path / ".config").mkdir()
    (tmp_path / ".config" / "FISH").mkdir()
    (tmp_path / ".bashrc").write_text("x")
    names = ((".ssh", "c"), (".config/fish", "s"), (".bashrc", "s"), (".config/gh", "c"), ("bin", "s"))
    assert leading_out(str(tmp_path), names) == {0, 1}
    (tmp_path / ".SSH").rmdir()
    (tmp_path / ".\u017fsh").mkdir()  # LATIN SMALL LETTER LONG S folds to s
    assert leading_out(str(tmp_path), names) == {0, 1}


def test_a_link_on_the_way_or_a_folder_that_cannot_be_listed_is_resolved_with_the_policy(tmp_path, monkeypatch):
    (tmp_path / ".config").symlink_to(tmp_path)
    (tmp_path / ".local" / "share").mkdir(parents=True)
    (tmp_path / "bin").write_text("x")
    names = ((".config/fish", "s"), (".local/share/fish", "s"), ("bin/x", "s"), (".ssh", "c"), (".cache/x", "c"))
    assert leading_out(str(tmp_path), names) == {0}
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: (_ for _ in ()).throw(PermissionError(13, "no")) if str(p).endswith(
        "share") else real(p))
    assert leading_out(str(tmp_path), names) == {0, 1}
    assert leading_out(str(tmp_path / "missing"), names) == set()
    assert leading_out(str(tmp_path / "bin"), names) == set()


def test_a_name_whose_kind_cannot_be_read_is_resolved_with_the_policy(tmp_path, monkeypatch):
    """An entry that vanished or cannot be looked at while it is listed may be anything, a link
    included: its paths are resolved, never believed by name."""
    (tmp_path / ".config" / "fish").mkdir(parents=True)
    (tmp_path / ".ssh").mkdir()
    names = ((".config/fish", "s"), (".ssh", "c"))
    assert leading_out(str(tmp_path), names) == set()

    class Unreadable:
        def __init__(self, entry):
            self.name, self.path, self._entry = entry.name, entry.path, entry

        def is_symlink(self):
            if self.name == ".config":
                raise OSError(2, "vanished")
            return self._entry.is_symlink()

        def is_dir(self, *, follow_symlinks=True):
            return self._entry.is_dir(follow_symlinks=follow_symlinks)

    class Listing:
        def __init__(self, path):
            self._it = real(path)

        def __enter__(self):
            return (Unreadable(e) for e in self._it)

        def __exit__(self, *exc):
            self._it.close()

    real = os.scandir
    monkeypatch.setattr(os, "scandir", Listing)
    assert leading_out(str(tmp_path), names) == {0}


@pytest.mark.parametrize("table,places,foreign", [
    ([("/", "/", "8:1", "ext4")], [], []),
    # a folder mounted on itself (as container engines do): one path for each file still
    ([("/", "/", "8:1", "ext4"), ("/var/lib/docker", "/var/lib/docker", "8:1", "ext4")], [], []),
    # a folder of a file system shown again elsewhere: both places
    ([("/", "/", "8:1", "ext4"), ("/mnt/k", "/home/u/.ssh", "8:1", "ext4")], ["/home/u/.ssh", "/mnt/k"], []),
    # a file system mounted twice at the same root
    ([("/a", "/", "8:2", "xfs"), ("/b", "/", "8:2", "xfs")], ["/a", "/b"], []),
    # a sub-folder of a file system whose own root is mounted elsewhere
    ([("/", "/", "8:1", "ext4"), ("/srv", "/", "8:2", "xfs"), ("/x", "/data", "8:2", "xfs")], ["/srv/data", "/x"], []),
    # a sub-folder of a file system whose folder above it (not its root) is mounted elsewhere
    ([("/mnt/a", "/a", "8:2", "xfs"), ("/srv/b", "/a/b", "8:2", "xfs")], ["/mnt/a/b", "/srv/b"], []),
    ([("/mnt/a", "/a", "8:2", "xfs"), ("/srv/c", "/a/b/c", "8:2", "xfs")], ["/mnt/a/b/c", "/srv/c"], []),
    # different file systems, one root name each
    ([("/", "/", "8:1", "ext4"), ("/home", "/", "8:2", "ext4")], [], []),
    # subvolumes side by side
    ([("/", "/@", "0:31", "btrfs"), ("/home", "/@home", "0:31", "btrfs")], [], []),
    # roots that are names, not paths (as nsfs shows them): the same one twice is shared
    ([("/run/a", "net:[1]", "0:4", "tmpfs"), ("/run/b", "net:[2]", "0:4", "tmpfs")], [], []),
    ([("/run/a", "net:[1]", "0:4", "tmpfs"), ("/run/b", "net:[1]", "0:4", "tmpfs")], ["/run/a", "/run/b"], []),
    # the kernel's own file systems count as any other
    ([("/run/a", "net:[1]", "0:4", "nsfs"), ("/proc", "/", "0:5", "proc")], ["/proc", "/run/a"], ["/proc", "/run/a"]),
    # a file system that reports other files' identities; FUSE reports its own
    ([("/", "/", "0:50", "overlay"), ("/f", "/", "0:51", "fuse.sshfs")], ["/"], ["/"]),
])
def test_the_places_where_two_paths_may_be_one_file(table, places, foreign):
    got_places, got_set, got_foreign = shared_places(table)
    assert got_places == sorted(places) and got_set == frozenset(places) and got_foreign == frozenset(foreign)


@pytest.mark.parametrize("fstype", ["ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "nfs", "nfs4", "cifs",
                                    "smb3", "9p", "virtiofs", "autofs", "vfat", "exfat", "ntfs3", "squashfs", "erofs",
                                    "fuse", "fuseblk", "fuse.sshfs", "fuse.gocryptfs"])
def test_the_file_systems_homes_live_on_report_their_own_identities(fstype):
    assert shared_places([("/home", "/", "8:1", fstype)]) == ([], frozenset(), frozenset())


@pytest.mark.parametrize("fstype", ["overlay", "aufs", "shiftfs", "unionfs", "proc", "fuseblk2", "xfs2", "ext"])
def test_any_other_file_system_may_report_another_file_s_identity(fstype):
    assert shared_places([("/home", "/", "8:1", fstype)]) == (["/home"], frozenset({"/home"}), frozenset({"/home"}))


def test_the_mount_table_is_read_with_its_escapes(monkeypatch):
    import envman.safefile

    text = ("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
            "42 27 254:0 /my\\040dir /mnt/a\\040b rw,relatime shared:1 master:2 - ext4 /dev/vda rw\n")
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: text.encode())
    assert mount_table() == [("/", "/", "254:0", "ext4"), ("/mnt/a b", "/my dir", "254:0", "ext4")]
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: b"27 1 254:0 / / rw\n")
    assert mount_table() is None  # not a table: every home made at once
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: b"27 1 254:0 / / rw,relatime shared:1 a b c\n")
    assert mount_table() is None  # ten fields, no separator
    text = ("27 1 254:0 / / rw shared:1 master:2 - ext4 /dev/vda\n"  # no super options
            "28 1 0:4 - /run/x rw - nsfs nsfs rw\n")  # a root spelled like the separator
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: text.encode())
    assert mount_table() == [("/", "/", "254:0", "ext4"), ("/run/x", "-", "0:4", "nsfs")]


def test_the_mount_table_is_read_by_the_safe_reader_up_to_its_limit(monkeypatch):
    import envman.safefile
    from envman.errors import UserError

    calls = []

    def fake(path, **kw):
        calls.append((path, kw))
        raise UserError(f"the {kw['what']} is more than {kw['limit']} bytes", where=path, fix="x")

    monkeypatch.setattr(envman.safefile, "read_file", fake)
    assert mount_table() is None
    assert calls == [("/proc/self/mountinfo", {"what": "mount table", "limit": 1 << 24})]


def test_the_mount_table_of_this_machine_is_read():
    table = mount_table()
    if table is None:
        pytest.skip("no /proc/self/mountinfo")
    assert any(point == "/" for point, *_ in table)


@pytest.mark.parametrize("path, chain", [
    ("/", ["/"]),
    ("/a", ["/a", "/"]),
    ("/a/b/c", ["/a/b/c", "/a/b", "/a", "/"]),
    ("a/b", ["a/b", "a", ""]),  # a relative path ends at the empty parent
])
def test_a_path_chain_is_the_path_and_each_parent_up_to_the_top(path, chain):
    assert path_chain(path) == chain


def test_every_file_system_counted_as_reporting_its_own_identity_is_one_the_table_may_show():
    """The set and the parametrised list above agree: a type added to one is added to the other."""
    assert OWN_IDENTITY_TYPES <= {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "nfs", "nfs4",
                                  "cifs", "smb3", "9p", "virtiofs", "autofs", "vfat", "exfat", "ntfs3", "squashfs",
                                  "erofs", "fuse", "fuseblk"}
    assert not any(t.startswith("fuse.") for t in OWN_IDENTITY_TYPES)  # FUSE subtypes are matched by prefix


@pytest.mark.parametrize("line", [
    "",  # an empty line: fewer than ten fields
    "27 1 254:0 / / rw - ext4",  # nine fields
    "27 1 254:0 / / rw a b c d e",  # ten fields and no separator after the options
])
def test_a_mount_table_line_that_is_not_one_makes_the_whole_table_unknown(monkeypatch, line):
    import envman.safefile

    text = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" + line + "\n"
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: text.encode())
    assert mount_table() is None


def test_a_mount_point_with_an_escaped_newline_or_backslash_reads_as_its_characters(monkeypatch):
    import envman.safefile

    text = "42 27 254:0 /a\\134b /mnt/x\\012y rw - ext4 /dev/vda rw\n"
    monkeypatch.setattr(envman.safefile, "read_file", lambda *a, **k: text.encode())
    assert mount_table() == [("/mnt/x\ny", "/a\\b", "254:0", "ext4")]


def test_one_listing_of_the_root_and_of_each_folder_on_the_way_that_exists(tmp_path, monkeypatch):
    """Each folder is listed once, however many names go through it: the walk ends (a listing
    without end would hang every run that mounts something into a home)."""
    (tmp_path / ".config" / "fish").mkdir(parents=True)
    (tmp_path / ".local").mkdir()
    (tmp_path / "notes").write_text("x")
    names = ((".config/fish/conf.d", "s"), (".config/fish/x", "s"), (".config/gh", "c"), (".local/share/fish", "s"),
             ("notes/a", "s"), (".cache/x", "c"))
    listed = []
    real = os.scandir

    def counted(path):
        listed.append(os.fspath(path))
        if len(listed) > 20:
            raise AssertionError(f"listed without end: {listed[-3:]}")
        return real(path)

    monkeypatch.setattr(os, "scandir", counted)
    assert leading_out(str(tmp_path), names) == set()
    assert sorted(listed) == sorted(str(p) for p in (tmp_path, tmp_path / ".config", tmp_path / ".config" / "fish",
                                                     tmp_path / ".local"))
