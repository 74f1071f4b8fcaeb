#!/usr/bin/env python3
"""Writes an OCI image archive (`oci-archive`: a tar of an OCI image layout) of one folder,
byte for byte the same for the same folder: one layer whose entries are sorted, owned by root,
stamped with SOURCE_DATE_EPOCH, gzip without a name or time; the config carries no history.

Usage: oci-image.py ROOTFS REFERENCE OUT.tar [--entrypoint JSON] [--env K=V]...
REFERENCE is the full name (`k8s.gcr.io/pause:3.2`): containerd imports the archive under it
(`io.containerd.image.name`), skopeo reads its tag (`org.opencontainers.image.ref.name`)."""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def layer_tar(rootfs):
    """The folder as an uncompressed tar, entries in sorted order."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        paths = []
        for folder, folders, files in os.walk(rootfs):
            folders.sort()
            for name in sorted(folders + files):
                paths.append(os.path.join(folder, name))
        for path in sorted(paths, key=lambda p: os.path.relpath(p, rootfs)):
            name = os.path.relpath(path, rootfs)
            info = tar.gettarinfo(path, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = EPOCH
            # Group- and world-writable bits are dropped, but for /tmp's.
            if name != "tmp":
                info.mode &= 0o7755
            if info.isreg():
                with open(path, "rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    return raw.getvalue()


def blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": f"sha256:{digest}", "size": len(data)}


def add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = EPOCH
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def add_folder(tar, name):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mtime = EPOCH
    info.mode = 0o755
    tar.addfile(info)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rootfs")
    parser.add_argument("reference")
    parser.add_argument("out")
    parser.add_argument("--entrypoint", type=json.loads)
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args()
    if ":" not in args.reference.rsplit("/", 1)[-1]:
        sys.exit(f"oci-image.py: {args.reference}: the reference needs a tag")
    tag = args.reference.rsplit(":", 1)[1]

    layer = layer_tar(args.rootfs)
    compressed = gzip.compress(layer, compresslevel=6, mtime=0)
    blobs = {}
    config = {
        "created": datetime.datetime.fromtimestamp(EPOCH, datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
                   + args.env},
        "rootfs": {"type": "layers",
                   "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    if args.entrypoint:
        config["config"]["Entrypoint"] = args.entrypoint
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   **blob(blobs, config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    **blob(blobs, compressed)}],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            **blob(blobs, manifest_bytes),
            "annotations": {"io.containerd.image.name": args.reference,
                            "org.opencontainers.image.ref.name": tag},
        }],
    }
    temporary = args.out + ".partial"
    with open(temporary, "wb") as out, tarfile.open(fileobj=out, mode="w",
                                                    format=tarfile.GNU_FORMAT) as tar:
        add_folder(tar, "blobs")
        add_folder(tar, "blobs/sha256")
        for digest in sorted(blobs):
            add(tar, f"blobs/sha256/{digest}", blobs[digest])
        add(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    os.replace(temporary, args.out)


if __name__ == "__main__":
    main()
