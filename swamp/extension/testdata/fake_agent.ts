// A stand-in for `syncledger swamp agent` in the extension's unit tests. It
// appends every request to $FAKE_LOG and answers by $FAKE_MODE:
//   ok   hello → version; pull → 3 files; lock.acquire → after 300 ms;
//        push → an error for hints ["conflict"] or ["lock-lost"]; for
//        ["wait"], a waiting note on stderr, then an "unreachable" error;
//        else the hints count;
//        cp.put/cp.get → an in-memory store; hint → no answer
//   die  writes "boom" on stderr and exits 3 before answering
const mode = Deno.env.get("FAKE_MODE") ?? "ok";
const log = Deno.env.get("FAKE_LOG")!;
if (mode === "die") {
  await Deno.stderr.write(new TextEncoder().encode("boom\n"));
  Deno.exit(3);
}
const store = new Map<string, string>();
const enc = new TextEncoder();
const out = (v: unknown) => Deno.stdout.write(enc.encode(JSON.stringify(v) + "\n"));
let buf = "";
for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const req = JSON.parse(buf.slice(0, i));
    buf = buf.slice(i + 1);
    Deno.writeTextFileSync(log, JSON.stringify({ args: Deno.args, ...req }) + "\n", { append: true });
    const id = req.id;
    switch (req.op) {
      case "hello": out({ id, result: { version: req.version, protocol: 1 } }); break;
      case "pull": out({ id, result: { files: 3, hwm: 7, head: 7 } }); break;
      case "lock.acquire": setTimeout(() => out({ id, result: true }), 300); break;
      case "push":
        if (req.hints?.includes("conflict")) {
          out({ id, error: { kind: "conflict", message: "syncledger: another host changed a/b too", paths: ["a/b"] } });
        } else if (req.hints?.includes("lock-lost")) {
          out({ id, error: { kind: "lock-lost", message: "syncledger: swamp's lock data/t/id/.lock was lost: bob@desk took it" } });
        } else if (req.hints?.includes("wait")) {
          await Deno.stderr.write(enc.encode("syncledger: commit: waiting for the blob store (s3://b/x) to store content: no answer for 3s; giving up after 1m0s\n"));
          out({ id, error: { kind: "unreachable", message: "syncledger: commit: gave up after waiting 1m0s for the blob store to store content" } });
        } else out({ id, result: { files: req.hints?.length ?? 0 } });
        break;
      case "hint": break;
      case "cp.put": store.set(req.key, req.data); out({ id, result: true }); break;
      case "cp.get": out({ id, result: store.get(req.key) ?? null }); break;
      default: out({ id, error: { kind: "error", message: `unknown ${req.op}` } });
    }
  }
}
