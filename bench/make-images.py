#!/usr/bin/env python3
"""Writes OCI layouts for the build benchmark: 6 images sharing base layers.

Every image has base-a (shared by all six); images 1-3 also have base-b; each has one unique
layer. All content is random, so it does not compress. Usage: make-images.py OUT_DIR [MB_UNIQUE]
"""
import gzip, hashlib, io, json, os, sys, tarfile

out = sys.argv[1]
unique_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 17
rng = __import__("random").Random(42)


def random_bytes(size):
    return rng.getrandbits(8 * size).to_bytes(size, "little")


def layer(name, size):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = size
        info.mtime = 0
        tar.addfile(info, io.BytesIO(random_bytes(size)))
    data = raw.getvalue()
    return gzip.compress(data, compresslevel=1, mtime=0), hashlib.sha256(data).hexdigest()


def blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(f"{layout}/blobs/sha256", exist_ok=True)
    with open(f"{layout}/blobs/sha256/{digest}", "wb") as f:
        f.write(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


MB = 1024 * 1024
base_a = layer("base-a.bin", 30 * MB)
base_b = layer("base-b.bin", 10 * MB)
for number in range(1, 7):
    layout = f"{out}/img{number}"
    layers = [base_a] + ([base_b] if number <= 3 else []) + [layer(f"app{number}.bin", unique_mb * MB)]
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for _, d in layers]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(layout, config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(layout, gz)} for gz, _ in layers],
    }).encode()
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", **blob(layout, manifest),
             "annotations": {"org.opencontainers.image.ref.name": "1"}}
    with open(f"{layout}/index.json", "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [entry]}, f)
    with open(f"{layout}/oci-layout", "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
