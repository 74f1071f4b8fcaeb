#!/usr/bin/env python3
"""Builds banner.tar, the example add-on's image: an OCI archive holding one image,
docker.io/berth/banner:1.0.0, whose one layer is the static program `/banner` (banner.c).

Run from this folder: python3 build.py. Needs gcc. The output is byte-for-byte the same on
each run with the same compiler, so banner.tar is committed and building the add-on needs
no compiler.
"""
import gzip, hashlib, io, json, subprocess, tarfile, tempfile, os

REFERENCE = "docker.io/berth/banner:1.0.0"

with tempfile.TemporaryDirectory() as work:
    binary = os.path.join(work, "banner")
    subprocess.run(["gcc", "-static", "-nostdlib", "-Os", "-s", "-o", binary, "banner.c"], check=True)
    program = open(binary, "rb").read()


def tar_bytes(entries):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


layer_tar = tar_bytes([("banner", program, 0o755)])
layer = gzip.compress(layer_tar, compresslevel=9, mtime=0)
blobs = {}


def blob(data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


config = json.dumps({
    "architecture": "amd64", "os": "linux",
    "config": {"Entrypoint": ["/banner"]},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
}, sort_keys=True).encode()
manifest = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": blob(config, "application/vnd.oci.image.config.v1+json"),
    "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
}, sort_keys=True).encode()
entry = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
entry["annotations"] = {"io.containerd.image.name": REFERENCE, "org.opencontainers.image.ref.name": "1.0.0"}
index = json.dumps({"schemaVersion": 2, "manifests": [entry]}, sort_keys=True).encode()

files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644), ("index.json", index, 0o644)]
files += [(f"blobs/sha256/{d[7:]}", data, 0o644) for d, data in sorted(blobs.items())]
open("banner.tar", "wb").write(tar_bytes(files))
print(f"banner.tar: {REFERENCE}, program {len(program)} bytes")
