#!/usr/bin/env python3
"""Re-create or check the real-log corpus of ``tests/corpus/`` from its manifest.

Every file of the corpus is a byte-for-byte copy of a git blob, and ``tests/corpus/MANIFEST.toml``
says which: repository, commit, path in the repository, sha256 and size.  This script

* ``--check`` (default): checks every listed file against its sha256 and size, and that every
  file of ``tests/corpus/`` is listed (what ``test_every_file_is_listed_and_matches_its_checksum``
  checks too);
* ``--fetch``: writes every listed file from a bare clone of its repository
  (``git cat-file blob <commit>:<path>``), refusing any whose sha256 or size differs from the
  manifest (and any Git LFS pointer).  The clones are looked for in ``--mirrors``
  (default ``/work/.mirror``), as ``<owner>+<name>/repo`` or ``<owner>+<name>.git``; a
  repository without a clone there is named and skipped.

Exit status: 0 when every file is present and matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"
OWN_FILES = {"MANIFEST.toml", "README.md", "test_real_logs.py", "__init__.py", "conftest.py"}


def listed_files(manifest: dict) -> dict[str, tuple[dict, dict]]:
    """``tests/corpus``-relative path -> (log entry, file entry)."""
    out = {}
    for entry in manifest["log"]:
        base = entry["path"]
        for f in entry["files"]:
            # a log is a file (its one entry names it) or a directory of files
            rel = base if len(entry["files"]) == 1 and Path(base).name == f["name"] else f"{base}/{f['name']}"
            out[rel] = (entry, f)
    return out


def mirror_for(mirrors: Path, repository: str) -> Path | None:
    owner_name = repository.replace("/", "+")
    for cand in (mirrors / owner_name / "repo", mirrors / f"{owner_name}.git", mirrors / owner_name):
        if (cand / "HEAD").is_file():
            return cand
    return None


def blob(git_dir: Path, commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "blob", f"{commit}:{path}"],
        capture_output=True,
        check=True,
    ).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetch", action="store_true", help="write the files from the mirrors")
    parser.add_argument(
        "--mirrors", type=Path, default=Path("/work/.mirror"), help="where the bare clones are"
    )
    args = parser.parse_args(argv)

    manifest = tomllib.loads((CORPUS / "MANIFEST.toml").read_text(encoding="utf-8"))
    files = listed_files(manifest)
    bad = 0
    for rel, (entry, f) in sorted(files.items()):
        target = CORPUS / rel
        if args.fetch:
            git_dir = mirror_for(args.mirrors, entry["repository"])
            if git_dir is None:
                print(f"skip {rel}: no clone of {entry['repository']} under {args.mirrors}", file=sys.stderr)
            else:
                try:
                    data = blob(git_dir, entry["commit"], f["source"])
                except subprocess.CalledProcessError as exc:
                    print(f"FAIL {rel}: {exc.stderr.decode(errors='replace').strip()}", file=sys.stderr)
                    bad += 1
                    continue
                if data.startswith(b"version https://git-lfs"):
                    print(f"FAIL {rel}: {entry['repository']} stores it in Git LFS", file=sys.stderr)
                    bad += 1
                    continue
                if len(data) != f["size"] or hashlib.sha256(data).hexdigest() != f["sha256"]:
                    print(f"FAIL {rel}: the blob does not match the manifest's sha256/size", file=sys.stderr)
                    bad += 1
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        if not target.is_file():
            print(f"MISSING {rel}", file=sys.stderr)
            bad += 1
            continue
        data = target.read_bytes()
        if len(data) != f["size"] or hashlib.sha256(data).hexdigest() != f["sha256"]:
            print(f"MISMATCH {rel}", file=sys.stderr)
            bad += 1
    present = {
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in OWN_FILES and "__pycache__" not in p.parts
    }
    for rel in sorted(present - set(files)):
        print(f"NOT LISTED {rel}", file=sys.stderr)
        bad += 1
    total = sum(f["size"] for _, f in files.values())
    print(f"{len(files)} files, {total:,} bytes, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
