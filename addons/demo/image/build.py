#!/usr/bin/env python3
"""Builds the demo add-on's images: one OCI archive per version, demo-<version>.tar, holding
docker.io/berth/demo:<version>, whose one layer is the static program `/demo` (demo.c built
with that version).

Run from this folder: python3 build.py. Needs gcc. The output is byte-for-byte the same on
each run with the same compiler, so the archives are committed and building the add-on needs
no compiler.
"""
import gzip, hashlib, io, json, subprocess, tarfile, tempfile, os

VERSIONS = ["1.0.0", "2.0.0"]


def tar_bytes(entries):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def program(version):
    with tempfile.TemporaryDirectory() as work:
        binary = os.path.join(work, "demo")
        subprocess.run(["gcc", "-static", "-nostdlib", "-ffreestanding", "-fno-builtin", "-fno-stack-protector", "-Os", "-s",
                        f'-DVERSION="{version}"', "-o", binary, "demo.c"], check=True)
        return open(binary, "rb").read()


def archive(version):
    reference = f"docker.io/berth/demo:{version}"
    blobs = {}

    def blob(data, media_type):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    binary = program(version)
    layer_tar = tar_bytes([("demo", binary, 0o755)])
    layer = gzip.compress(layer_tar, compresslevel=9, mtime=0)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/demo"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config, "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
    }, sort_keys=True).encode()
    entry = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    entry["annotations"] = {"io.containerd.image.name": reference, "org.opencontainers.image.ref.name": version}
    index = json.dumps({"schemaVersion": 2, "manifests": [entry]}, sort_keys=True).encode()
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644), ("index.json", index, 0o644)]
    files += [(f"blobs/sha256/{d[7:]}", data, 0o644) for d, data in sorted(blobs.items())]
    open(f"demo-{version}.tar", "wb").write(tar_bytes(files))
    print(f"demo-{version}.tar: {reference}, program {len(binary)} bytes")


for version in VERSIONS:
    archive(version)
