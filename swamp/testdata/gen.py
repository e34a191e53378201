import hashlib, json, os, shutil
T = os.path.dirname(os.path.abspath(__file__))
def sha(b): return hashlib.sha256(b).hexdigest()
def w(root, rel, data):
    p = os.path.join(T, root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f: f.write(data)
def jdump(obj): return (json.dumps(obj, indent=2) + "\n").encode()

# The datastore tree shared by the fixtures: rel -> content.
tree = {
 "data/aws/ec2/vpc/abc-123/state-main/1/raw": b'{"vpcId":"vpc-0a1b2c","cidr":"10.0.0.0/16"}\n',
 "data/aws/ec2/vpc/abc-123/state-main/1/metadata.yaml": b"version: 1\ncontentType: application/json\n",
 "data/aws/ec2/vpc/abc-123/state-main/latest": b"1\n",
 "data/command/shell/consumer-1/out/1/raw": b"vpc-0a1b2c\n",
 "data/command/shell/consumer-1/out/1/metadata.yaml": b"version: 1\n",
 "outputs/command/shell/execute/consumer-1-20260101T000000Z.yaml": b"status: succeeded\n",
 "definitions-evaluated/command/shell/vpc.yaml": b"name: vpc\ntype: command/shell\n",
 "workflow-runs/wf-1/workflow-run-r1.yaml": b"workflowId: wf-1\nrunId: r1\n",
 "workflows-evaluated/workflow-deploy.yaml": b"name: deploy\n",
 "audit/2026-01-01.jsonl": b'{"event":"run","model":"vpc"}\n',
 ".catalog-export.json": b'{"rows":[]}\n',
}
T0 = "2026-01-01T00:00:00.000Z"
def entry(rel, data, with_sha=True, mtime=None):
    e = {"key": rel, "size": len(data), "lastModified": T0}
    if mtime: e["localMtime"] = mtime
    if with_sha: e["sha256"] = sha(data)
    return e

def pkey(rel):
    segs = rel.split("/")
    if len(segs) == 1: return "_root"
    if segs[0] in ("data","outputs","definitions-evaluated"):
        n=len(segs)
        if n<4: return None
        if n>=6: return "--".join(segs[:n-3])
        return "--".join(segs[:n-1])
    if segs[0]=="workflow-runs":
        return None if len(segs)<3 else "workflow-runs--"+segs[1]
    return segs[0]

def write_v2(root, prefix, files, seq, extra_shard_entries=None, no_sha=()):
    shards = {}
    for rel, data in files.items():
        shards.setdefault(pkey(rel), {})[rel] = entry(rel, data, rel not in no_sha, T0 if rel in no_sha else None)
        w(root, prefix+rel, data)
    for p, es in (extra_shard_entries or {}).items():
        shards.setdefault(p, {}).update(es)
    for p, es in shards.items():
        w(root, prefix+"_index/%s.json" % p, jdump({"version": 1, "entries": dict(sorted(es.items()))}))
    w(root, prefix+"_index/_meta.json", jdump({"version": 2, "partitions": sorted(shards), "commitSeq": seq}))

for d in ["v1","v2","namespaced","listing","mismatch","doctor"]:
    shutil.rmtree(os.path.join(T, d), ignore_errors=True)

# v2: meta + shards; one entry without sha256 (an old push); an internal entry
# in the _root shard; a frozen monolith that must be ignored.
write_v2("v2", "", tree, 7,
    extra_shard_entries={"_root": {"_catalog.db": {"key": "_catalog.db", "size": 3, "lastModified": T0}}},
    no_sha={"audit/2026-01-01.jsonl"})
w("v2", ".datastore-index.json", jdump({"version": 1, "lastPulled": T0, "entries": {
    "audit/old.jsonl": entry("audit/old.jsonl", b"stale\n")}}))
w("v2", "audit/old.jsonl", b"stale\n")  # an object only the frozen monolith lists

# v1: the monolith is authoritative; a v1 meta + a stale shard (dual-write)
# must not be read; an internal per-model lock entry is scrubbed.
mono = {rel: entry(rel, data) for rel, data in tree.items()}
mono["data/aws/ec2/vpc/abc-123/.lock"] = {"key": "data/aws/ec2/vpc/abc-123/.lock", "size": 10, "lastModified": T0}
for rel, data in tree.items(): w("v1", rel, data)
w("v1", "data/aws/ec2/vpc/abc-123/.lock", b'{"pid":1}\n')
w("v1", ".datastore-index.json", jdump({"version": 1, "lastPulled": T0, "entries": dict(sorted(mono.items()))}))
w("v1", "_index/_meta.json", jdump({"version": 1, "partitions": ["audit"]}))
w("v1", "_index/audit.json", jdump({"version": 1, "entries": {"audit/stale.jsonl": entry("audit/stale.jsonl", b"x")}}))

# namespaced: team-a is ours; team-b is another namespace in the same bucket.
nsfiles = {k: v for k, v in tree.items()}
write_v2("namespaced", "team-a/", nsfiles, 3)
w("namespaced", "team-a/.namespace.json", jdump({"namespace": "team-a", "repoId": "r-a", "registeredAt": T0}))
w("namespaced", "team-a/.catalog-export.json", tree[".catalog-export.json"])
write_v2("namespaced", "team-b/", {"audit/b.jsonl": b"team b\n"}, 1)
w("namespaced", "team-b/.namespace.json", jdump({"namespace": "team-b", "repoId": "r-b", "registeredAt": T0}))
w("namespaced", ".locks/team-a.lock", jdump({"holder": "u@h", "pid": 1, "ttlMs": 30000, "nonce": "n"}))
w("namespaced", ".datastore-index.json", jdump({"version": 1, "lastPulled": T0, "entries": {}}))

# listing: no index at all; internal files and another namespace's directory.
for rel, data in tree.items(): w("listing", rel, data)
w("listing", "data/a/b", b"too shallow for swamp's partitions\n")
internal = {
 "data/aws/ec2/vpc/abc-123/.lock": b'{"pid":1}\n',
 "_catalog.db": b"sqlite",
 "_catalog.db-wal": b"wal",
 "_catalog.db-shm": b"shm",
 ".namespace.json": b'{"namespace":"x"}\n',
 "_control/host-registry.json": b"{}\n",
 ".datastore.lock": b"{}\n",
 ".locks/other.lock": b"{}\n",
}
for rel, data in internal.items(): w("listing", rel, data)
w("listing", "team-x/.namespace.json", jdump({"namespace": "team-x", "repoId": "r-x", "registeredAt": T0}))
w("listing", "team-x/audit/x.jsonl", b"x\n")

# mismatch: one entry whose object differs from its sha256, one whose object is missing.
mm = {"audit/good.jsonl": b"good\n", "audit/bad.jsonl": b"what the index says\n", "audit/gone.jsonl": b"never uploaded\n"}
write_v2("mismatch", "", mm, 1)
w("mismatch", "audit/bad.jsonl", b"what the object holds\n")
os.remove(os.path.join(T, "mismatch", "audit/gone.jsonl"))

# doctor: the #3193 repro. writer committed vpc (and consumer); control pulled
# only consumer's shard and armed commitSeq 2.
remote = {k: v for k, v in tree.items()}
write_v2("doctor", "remote/", remote, 2)
vpc = [r for r in remote if "/vpc/" in r]
def cache(name, files, sidecar):
    for rel in files: w("doctor", name + "/" + rel, remote[rel])
    w("doctor", name + "/.datastore-sync-state.json", sidecar)
    w("doctor", name + "/.datastore-index.json", jdump({"version": 1, "lastPulled": T0,
        "entries": {r: entry(r, remote[r]) for r in sorted(files)}}))
armed = b'''{
  "version": 2,
  "remoteIndexETag": "",
  "lastVerifiedAt": "2026-01-02T00:00:00.000Z",
  "localDirty": false,
  "dirtyPaths": [],
  "bulkInvalidated": false,
  "lazyPullActive": false,
  "commitSeq": 2,
  "lastCatalogHash": "0000000000000000000000000000000000000000000000000000000000000000",
  "dataKeyMigrated": true
}
'''
cache("cache-3193", [r for r in remote if r not in vpc], armed)
cache("cache-healthy", list(remote), armed)
behind = armed.replace(b'"commitSeq": 2', b'"commitSeq": 0')
cache("cache-behind", [r for r in remote if r not in vpc], behind)

os.remove(os.path.join(T, "namespaced", ".datastore-index.json"))
# Goldens: what the ledger must hold after importing each fixture.
def golden(name, files, extra_parts={}):
    lines = []
    for rel, data in files.items():
        p = pkey(rel) or extra_parts[rel]
        lines.append("%s\t%s\t%d\t%s" % (p, rel, len(data), sha(data)))
    w("want", name + ".txt", ("\n".join(sorted(lines)) + "\n").encode())
shutil.rmtree(os.path.join(T, "want"), ignore_errors=True)
golden("v2", tree); golden("v1", tree); golden("namespaced", tree)
lt = dict(tree); lt["data/a/b"] = b"too shallow for swamp's partitions\n"
golden("listing", lt, {"data/a/b": "data"})
golden("mismatch", {"audit/good.jsonl": b"good\n"})
