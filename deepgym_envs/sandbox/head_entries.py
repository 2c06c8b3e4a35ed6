"""HEAD's entries under a change's paths: the index a workspace diff needs, in time of the change.

:func:`~deepgym_envs.sandbox.base.workspace_diff` stages the agent's changed paths into a throw-away
index and diffs it. Filled with all of HEAD (``git read-tree HEAD``) that index, and the diff of
it against HEAD, cost time in proportion to the whole repository on every step. Filled with only
HEAD's entries under the changed paths, and diffed against the tree of exactly those entries, the
diff has the same pairs (every other path is HEAD's on both sides, so neither side shows it, nor
does rename detection see it) and so the same bytes, in time of the change.

What else ``git add`` reads of the index must answer as it would with all of HEAD there: a changed
path's directory in HEAD is a directory of the index (git walks into it, and an agent's ``git
init`` inside it does not turn it into an embedded repository), and a submodule on the way to a
changed path is a submodule. ``ls-tree -r -t`` names those on the way; a directory with no entry
of its own among the changed paths' gets one :data:`PLACEHOLDER`, a submodule entry that git never
reads and that is the same on both sides of the diff.

The backend's ``changed`` must name every path whose kind or presence changed (a file replaced by
a directory names the file's path, as an overlay's opaque directory or ``git diff-files`` does).
"""

from __future__ import annotations

from deepgym_envs.gitrepo import run_git

#: The name of the entry that makes a directory exist in the index. Longer than any file name can
#: be (NAME_MAX, 255 bytes), so no workspace path is it, and no changed path, which is a pathspec,
#: can match it.
PLACEHOLDER = "deepgym-directory-" + "d" * 256

#: Bytes of pathspecs per ``ls-tree`` (it reads them from argv only; the kernel's limit is 2 MiB).
_ARGV_BYTES = 256 * 1024


def stage_head_entries(base: list[str], changed: list[str], kw: dict) -> str:
    """Fill the (empty) index of ``kw`` with HEAD's entries under ``changed``; the tree of them.

    ``base``: git's arguments for the repository and work tree; ``kw``: :func:`run_git`'s, with
    literal pathspecs in its environment (a changed path ``*`` is that file, not a pattern)."""
    entries: dict[str, str] = {}  # path -> "mode oid", what update-index takes
    dirs: dict[str, str] = {}  # a directory of HEAD on the way to or under a changed path -> its oid
    _list(base, ["-r", "-t"], changed, kw, entries, dirs)
    # ls-tree names no file or submodule on the way to a path below it: ask for those by name.
    on_the_way = {_first_missing(path, dirs) for path in changed if path not in entries}
    _list(base, [], sorted(on_the_way - set(changed) - {None}), kw, entries, dirs)
    filled = {parent for path in entries for parent in _parents(path)}
    for path, oid in dirs.items():
        if path not in filled:
            entries[f"{path}/{PLACEHOLDER}"] = f"160000 {oid}"  # a submodule's commit is never read
    if entries:
        run_git(base + ["update-index", "-z", "--index-info"],
                input="".join(f"{meta}\t{path}\0" for path, meta in entries.items()), **kw)
    return run_git(base + ["write-tree"], **kw).strip()


def _list(base: list[str], flags: list[str], paths: list[str], kw: dict, entries: dict[str, str],
          dirs: dict[str, str]) -> None:
    """``ls-tree`` of ``paths`` in HEAD into ``entries`` (files, links, submodules) and ``dirs``."""
    for chunk in _chunks(paths):
        out = run_git(base + ["ls-tree", *flags, "-z", "--full-tree", "HEAD", "--", *chunk], **kw)
        for record in filter(None, out.split("\0")):
            meta, path = record.split("\t", 1)
            mode, _kind, oid = meta.split(" ")
            if mode == "040000":
                dirs[path] = oid
            else:
                entries[path] = f"{mode} {oid}"


def _first_missing(path: str, dirs: dict[str, str]) -> str | None:
    """The shortest of ``path``'s parents that is no directory of HEAD (None: all of them are)."""
    for parent in _parents(path):
        if parent not in dirs:
            return parent
    return None


def _parents(path: str) -> list[str]:
    """'a/b/c' -> ['a', 'a/b']."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _chunks(paths: list[str]) -> list[list[str]]:
    """``paths`` in argv-sized lists (none for none: ls-tree without a pathspec lists everything)."""
    chunks: list[list[str]] = []
    size = _ARGV_BYTES
    for path in paths:
        cost = len(path.encode("utf-8", "surrogateescape")) + 1
        if size + cost > _ARGV_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(path)
        size += cost
    return chunks
