#!/usr/bin/env python3
"""Writes an add-ons repository for the install and bundle benchmarks: COUNT add-ons, each
with one image (a local OCI archive) of a base layer of BASE_MB shared by all and a unique
layer of UNIQUE_MB, all random (incompressible), plus an install hook that only logs.

Usage: make-addons.py OUT_DIR [COUNT] [UNIQUE_MB] [BASE_MB]. Also writes OUT_DIR/versions.json
and OUT_DIR/installer.yaml asking for every add-on.
"""
import gzip, hashlib, io, json, os, random, sys, tarfile

out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
unique_mb = int(sys.argv[3]) if len(sys.argv) > 3 else 8
base_mb = int(sys.argv[4]) if len(sys.argv) > 4 else 16
rng = random.Random(7)
MB = 1024 * 1024


def tar_bytes(entries):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def layer(name, size):
    # In 1 MiB pieces: one call for hundreds of MiB overflows random's C int.
    data = b"".join(rng.randbytes(min(MB, size - offset)) for offset in range(0, size, MB))
    plain = tar_bytes([(name, data)])
    return gzip.compress(plain, compresslevel=1, mtime=0), "sha256:" + hashlib.sha256(plain).hexdigest()


def oci_archive(path, reference, layers):
    blobs = {}

    def blob(data, media_type):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [d for _, d in layers]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": blob(config, "application/vnd.oci.image.config.v1+json"),
                           "layers": [blob(g, "application/vnd.oci.image.layer.v1.tar+gzip") for g, _ in layers]}).encode()
    entry = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    entry["annotations"] = {"io.containerd.image.name": reference}
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
             ("index.json", json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode())]
    files += [(f"blobs/sha256/{d[7:]}", data) for d, data in sorted(blobs.items())]
    with open(path, "wb") as f:
        f.write(tar_bytes(files))


base = layer("base.bin", base_mb * MB)
os.makedirs(f"{out}/images", exist_ok=True)
names = [f"bench-{number:02d}" for number in range(1, count + 1)]
for name in names:
    folder = f"{out}/addons/{name}/1.0.0"
    os.makedirs(folder, exist_ok=True)
    oci_archive(f"{out}/images/{name}.tar", f"docker.io/berth/{name}:1.0.0",
                [base, layer(f"{name}.bin", unique_mb * MB)])
    with open(f"{folder}/Manifest", "w") as f:
        f.write(f"image {name} images/{name}.tar\n")
    # Every phase kURL runs, named as kURL names them (dashes kept): on a re-run pre_init,
    # already_applied, post_init and outro all run.
    with open(f"{folder}/install.sh", "w") as f:
        f.write(f'function {name}_pre_init() {{\n    export {name.replace("-", "_").upper()}_SEEN=1\n}}\n')
        f.write(f'function {name}() {{\n    logStep "{name} installed"\n}}\n')
        f.write(f'function {name}_already_applied() {{\n    logStep "{name} already applied"\n}}\n')
        f.write(f'function {name}_post_init() {{\n    logSuccess "{name} post_init"\n}}\n')
        f.write(f'function {name}_outro() {{\n    printf "%s ready\\n" "{name}"\n}}\n')
with open(f"{out}/versions.json", "w") as f:
    json.dump({"addons": [{"name": n, "versions": [{"version": "1.0.0"}]} for n in names]}, f, indent=2)
with open(f"{out}/installer.yaml", "w") as f:
    f.write("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n")
    f.writelines(f"  {n}:\n    version: latest\n" for n in names)
