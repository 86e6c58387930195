"""Write ``agentgym/data_manifest.json``: the sha256 and size of every data file agentgym reads.

The sums are taken from a data folder only after each file has been checked against that folder's
``MANIFEST.tsv`` (git blob ids and sizes of the files in their source repositories; a file marked DERIVED was
converted from its source, so only its size is checked), so the manifest
records the published data, not whatever copy happened to be on disk. Members of ``alfworld/train.tar.gz``
are checked inside the tarball; the manifest then lists the tarball itself.

Run: ``python tools/make_data_manifest.py ../shared/data``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "agentgym" / "data_manifest.json"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="data folder holding MANIFEST.tsv")
    args = parser.parse_args(argv)
    rows = [
        line.rstrip("\n").split("\t")
        for line in (args.data / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    files: dict[str, list] = {}
    members: dict[str, dict[str, tuple[str, int]]] = {}
    bad = []
    for row in rows:
        staged, blob, size = row[0], row[4], int(row[5])
        if "::" in staged:
            tar, member = staged.split("::", 1)
            members.setdefault(tar, {})[member] = (blob, size)
            continue
        data = (args.data / staged).read_bytes()
        derived = len(row) > 6 and row[6].startswith("DERIVED")  # the blob id is the source's: check the size
        if len(data) != size or (not derived and git_blob_id(data) != blob):
            bad.append(staged)
        files[staged] = [len(data), hashlib.sha256(data).hexdigest()]
    for tar, wanted in members.items():
        with tarfile.open(args.data / tar) as tf:
            for info in tf:
                if info.isfile() and info.name in wanted:
                    data = tf.extractfile(info).read()  # type: ignore[union-attr]
                    blob, size = wanted.pop(info.name)
                    if len(data) != size or git_blob_id(data) != blob:
                        bad.append(f"{tar}::{info.name}")
        bad += [f"{tar}::{m} (absent)" for m in wanted]
        data = (args.data / tar).read_bytes()
        files[tar] = [len(data), hashlib.sha256(data).hexdigest()]
    if bad:
        print(f"{len(bad)} file(s) differ from MANIFEST.tsv, no manifest written: {bad[:5]}", file=sys.stderr)
        return 1
    manifest = {
        "about": "sha256 and size of each data file agentgym reads, by path under the data folder; written by "
        "tools/make_data_manifest.py after checking each file against the data's MANIFEST.tsv",
        "files": dict(sorted(files.items())),
    }
    OUT.write_text(json.dumps(manifest, indent=0) + "\n", encoding="utf-8")
    print(f"{len(files)} files -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
