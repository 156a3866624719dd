# Test OCI images made from host files (sourced by t710 and t810).
# mkimage KIND OUT: KIND docker (a docker-save layout, two layers: one whites out a file of
# the first and makes a directory opaque), oci (an OCI image layout with a gzip layer), or
# hostile (a layer that writes through a symlink to $OUTSIDE). IMG_MOTD=TEXT adds /etc/motd.
# The images hold dash, cat and ls with their libraries (from the host).
mkimage() {
    python3 - "$1" "$2" <<'PY'
import gzip, hashlib, io, json, os, subprocess, sys, tarfile
kind, out = sys.argv[1], sys.argv[2]
def ti(name, **kw):
    t = tarfile.TarInfo(name); t.mtime = 1700000000
    for k, v in kw.items(): setattr(t, k, v)
    return t
def layer(entries):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for t, data in entries:
            tf.addfile(t, io.BytesIO(data) if data is not None else None)
    return b.getvalue()
seen = {}
def add_host(path, ents):
    # every component as the host has it: symlinks as symlinks, then the file
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        p = "/" + "/".join(parts[:i])
        if os.path.islink(p):
            if p not in seen:
                seen[p] = 1
                tgt = os.readlink(p)
                ents.append((ti(p[1:], type=tarfile.SYMTYPE, linkname=tgt), None))
                add_host(os.path.normpath(os.path.join(os.path.dirname(p), tgt)), ents)
            rest = "/".join(parts[i:])
            if rest: add_host(os.path.realpath(p) + "/" + rest, ents)
            return
        if p in seen: continue
        seen[p] = 1
        if os.path.isdir(p):
            ents.append((ti(p[1:] + "/", type=tarfile.DIRTYPE, mode=0o755), None))
        else:
            data = open(p, "rb").read()
            ents.append((ti(p[1:], size=len(data), mode=0o755), data))
l1 = []
for b in ["/bin/sh", "/bin/cat", "/bin/ls"]:
    add_host(b, l1)
    for line in subprocess.check_output(["ldd", os.path.realpath(b)], text=True).splitlines():
        for w in line.split():
            if w.startswith("/"): add_host(w, l1)
if os.environ.get("IMG_MOTD"):  # a file the image's owner chose (t810: whose template runs)
    m = os.environ["IMG_MOTD"].encode()
    l1 += [(ti("etc/", type=tarfile.DIRTYPE, mode=0o755), None), (ti("etc/motd", size=len(m)), m)]
l1 += [(ti("data/", type=tarfile.DIRTYPE, mode=0o755), None),
       (ti("data/keep", size=5), b"keep\n"), (ti("data/old", size=4), b"old\n"),
       (ti("opq/", type=tarfile.DIRTYPE, mode=0o755), None),
       (ti("opq/lower", size=6), b"lower\n"),
       (ti("home/user/", type=tarfile.DIRTYPE, mode=0o755, uid=1000, gid=1000), None),
       (ti("home/user/mine", size=5, uid=1000, gid=1000, mode=0o600), b"mine\n")]
l2 = [(ti("data/.wh.old", size=0), b""), (ti("data/new", size=4), b"new\n"),
      (ti("opq/.wh..wh..opq", size=0), b""), (ti("opq/upper", size=6), b"upper\n")]
L1, L2 = layer(l1), layer(l2)
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {
    "Env": ["PATH=/usr/bin:/bin", "IMG=t710"], "Cmd": ["/bin/sh"], "WorkingDir": "/data"}}).encode()
def sha(b): return hashlib.sha256(b).hexdigest()
files = []
if kind == "docker":
    files = [("manifest.json", json.dumps([{"Config": sha(cfg) + ".json", "RepoTags": ["t710:1"],
              "Layers": ["l1/layer.tar", "l2/layer.tar"]}]).encode()),
             (sha(cfg) + ".json", cfg), ("l1/layer.tar", L1), ("l2/layer.tar", L2)]
elif kind == "oci":
    G2 = gzip.compress(L2)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + sha(cfg), "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + sha(L1), "size": len(L1)},
                   {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + sha(G2), "size": len(G2)}]}).encode()
    idx = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + sha(man), "size": len(man), "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", idx)] + \
            [("blobs/sha256/" + sha(b), b) for b in (man, cfg, L1, G2)]
else:  # hostile: a symlink to a directory outside, then a file through it; "..", absolute
    evil = layer([(ti("escape", type=tarfile.SYMTYPE, linkname=os.environ["OUTSIDE"]), None),
                  (ti("escape/planted", size=5), b"evil\n")])
    files = [("manifest.json", json.dumps([{"Config": "c.json", "Layers": ["e/layer.tar"]}]).encode()),
             ("c.json", cfg), ("e/layer.tar", evil)]
with tarfile.open(out, "w") as tf:
    for n, d in files:
        tf.addfile(ti(n, size=len(d)), io.BytesIO(d))
PY
}
