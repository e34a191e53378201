// Unit tests of the extension against a fake agent (testdata/fake_agent.ts);
// lock_test.ts runs its locks against real agents (SYNCLEDGER_BIN):
//   deno test -A swamp/extension/
// The real agent and the real swamp CLI: cmd/syncledger/swamp_real_test.go.
import { datastore, HOST_FILE, PROTOCOL } from "./syncledger.ts";

const here = new URL(".", import.meta.url).pathname;
const opts = { sanitizeOps: false, sanitizeResources: false };

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

/** A temporary directory, removed when the test process ends. */
const tempDirs: string[] = [];
function tempDir(): string {
  const dir = Deno.makeTempDirSync({ prefix: "syncledger-ext-test-" });
  tempDirs.push(dir);
  return dir;
}
globalThis.addEventListener("unload", () => {
  for (const dir of tempDirs) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // gone already
    }
  }
});
async function rejects(p: Promise<unknown>, want: string): Promise<Error> {
  try {
    await p;
  } catch (e) {
    assert((e as Error).message.includes(want), `error ${JSON.stringify((e as Error).message)} lacks ${JSON.stringify(want)}`);
    return e as Error;
  }
  throw new Error(`no error; wanted one with ${JSON.stringify(want)}`);
}

/** A fake binary (a script running the fake agent) and the log of its requests. */
function fake(mode: string) {
  const dir = tempDir();
  const bin = `${dir}/syncledger`;
  Deno.writeTextFileSync(bin, `#!/bin/sh\nFAKE_MODE=${mode} FAKE_LOG=${dir}/log exec "${Deno.execPath()}" run -A "${here}testdata/fake_agent.ts" "$@"\n`);
  Deno.chmodSync(bin, 0o755);
  const requests = () => {
    try {
      return Deno.readTextFileSync(`${dir}/log`).trim().split("\n").map((l) => JSON.parse(l));
    } catch {
      return [];
    }
  };
  return { bin, requests };
}

let n = 0;
function provider(binary: string, extra: Record<string, unknown> = {}) {
  // A config of its own: each test gets its own agent.
  return datastore.createProvider({ binary, cache: "/cache", nats: "nats://127.0.0.1:1", ledger: `t${n++}`, ...extra });
}

Deno.test("exports a datastore swamp can load", () => {
  assert(datastore.type === "@syncledger/datastore", "type");
  let threw = false;
  try {
    datastore.createProvider({ cache: "/c" });
  } catch {
    threw = true;
  }
  assert(threw, "a config without binary, nats and ledger was accepted");
  const p = provider("/bin/false");
  assert(p.resolveCachePath("/repo") === "/cache", "cache path");
  assert(p.resolveDatastorePath("/repo") === "/repo/.swamp", "datastore path");
  const caps = p.createSyncService("/repo", "/cache").capabilities();
  assert(caps.scopedSync === false && caps.twoPhaseSync && caps.lazyHydration && caps.controlPlane, "capabilities");
});

Deno.test("one agent per config: hello first, answers matched by id", opts, async () => {
  const f = fake("ok");
  const cfg = { binary: f.bin, cache: "/cache", nats: "nats://127.0.0.1:1", ledger: "shared", host: "h1", flags: ["--nats-creds", "/x.creds"] };
  const p = datastore.createProvider(cfg);
  const sync = p.createSyncService("/repo", "/cache");
  const lock = p.createLock("/repo/.swamp", { lockKey: "data/t/id/.lock", maxWaitMs: 5000 });
  // The lock answers late: the pull's answer, sent after it, arrives first.
  const acquired = lock.acquire().then(() => Date.now());
  const pulled = sync.pullChanged({ metadataOnly: true }).then((files) => [files, Date.now()] as const);
  const [files, pulledAt] = await pulled;
  assert(files === 3, `pulled ${files}`);
  assert(pulledAt < await acquired, "the pull waited for the lock's answer");
  // A second provider of the same config shares the agent.
  await datastore.createProvider({ ...cfg }).createSyncService("/repo", "/cache").pullChanged();
  const reqs = f.requests();
  assert(reqs[0].op === "hello" && reqs[0].version === undefined && reqs[0].protocol === PROTOCOL && reqs[0].repo === "/repo", `first request ${JSON.stringify(reqs[0])}`);
  assert(reqs.filter((r) => r.op === "hello").length === 1, "more than one agent for one config");
  const args = reqs[0].args.join(" ");
  assert(args.includes("--ledger shared") && args.includes("--host h1") && args.includes("--nats-creds /x.creds") && args.endsWith("swamp agent"), args);
  const acq = reqs.find((r) => r.op === "lock.acquire");
  assert(acq.key === "data/t/id/.lock" && acq.maxWaitMs === 5000 && acq.ttlMs === 30000 && acq.holder.nonce, JSON.stringify(acq));
  assert(reqs.find((r) => r.op === "pull").metadataOnly === true, "metadataOnly not passed");
});

Deno.test("per-host settings come from the host file, not the repo's config", opts, async () => {
  const f = fake("ok");
  const repo = tempDir();
  Deno.mkdirSync(`${repo}/.swamp`);
  Deno.writeTextFileSync(`${repo}/${HOST_FILE}`, JSON.stringify({ binary: f.bin, host: "h9", flags: ["--nats-creds", "/h9.creds"] }));
  // The config every host shares: no binary, no cache.
  const p = datastore.createProvider({ nats: "nats://127.0.0.1:1", ledger: `hf${n++}` });
  assert(p.resolveDatastorePath(repo) === `${repo}/.swamp`, "datastore path");
  assert(p.resolveCachePath(repo) === `${repo}/.swamp/syncledger-cache`, `default cache ${p.resolveCachePath(repo)}`);
  await p.createSyncService(repo, `${repo}/.swamp/syncledger-cache`).pullChanged();
  const args = f.requests()[0].args.join(" ");
  assert(args.includes("--host h9") && args.includes("--nats-creds /h9.creds") && args.includes(`--cache ${repo}/.swamp/syncledger-cache`), args);
  // A verifier made without the repo (swamp's datastore status) finds it.
  const v = await datastore.createProvider({ nats: "nats://127.0.0.1:1", ledger: `hf${n - 1}` }).createVerifier().verify();
  assert(f.requests().filter((r) => r.op === "hello").length === 1, "the verifier started a second agent");
  assert(v.message.includes("unknown verify") || v.healthy, JSON.stringify(v));
  // A host file that does not parse is named.
  const bad = tempDir();
  Deno.mkdirSync(`${bad}/.swamp`);
  Deno.writeTextFileSync(`${bad}/${HOST_FILE}`, `{"binry": "x"}`);
  let err = "";
  try {
    datastore.createProvider({ ledger: "x" }).resolveDatastorePath(bad);
  } catch (e) {
    err = (e as Error).message;
  }
  assert(err.includes(HOST_FILE) && err.includes("syncledger swamp setup"), err);
});

Deno.test("markDirty waits for nothing; its paths go to the agent at once and with the next push", opts, async () => {
  const none = provider("/nonexistent/syncledger").createSyncService("/repo", "/cache");
  await none.markDirty({ relPath: "data/t/id/result" }); // no agent: nothing to start, nothing thrown
  const f = fake("ok");
  const sync = provider(f.bin).createSyncService("/repo", "/cache");
  await sync.markDirty({ relPath: "data/t/id/early" }); // before the agent is up: kept for the push only
  await sync.pullChanged(); // the agent is up
  await sync.markDirty({ relPath: "data/t/id/result" });
  await sync.markDirty({ relPath: "outputs/t/execute/id-1.yaml" });
  await new Promise((r) => setTimeout(r, 300));
  const hints = f.requests().filter((r) => r.op === "hint").map((r) => r.hints.join());
  assert(hints.join(" ") === "data/t/id/result outputs/t/execute/id-1.yaml", `hints sent: ${JSON.stringify(hints)}`);
  assert(f.requests().filter((r) => r.op === "hint").every((r) => r.id === undefined), "a hint expects an answer");
  assert(await sync.pushChanged() === 3, "push did not carry the hints");
  assert(await sync.pushChanged() === 0, "hints were sent twice");
});

Deno.test("an agent's error is the error swamp shows", opts, async () => {
  const f = fake("ok");
  const p = provider(f.bin);
  const sync = p.createSyncService("/repo", "/cache");
  await sync.markDirty({ relPath: "conflict" });
  const e = await rejects(sync.pushChanged(), "another host changed a/b") as Error & { kind: string; paths: string[] };
  assert(e.kind === "conflict" && e.paths[0] === "a/b", JSON.stringify(e));
  // At swamp's exit (unload) a command whose push failed says that its changes
  // are not published and what happens next, and exits non-zero.
  const printed: string[] = [];
  const print = console.error;
  console.error = (...args: unknown[]) => printed.push(args.join(" "));
  try {
    p.agent.finish();
  } finally {
    console.error = print;
  }
  const code = Deno.exitCode;
  Deno.exitCode = 0;
  const out = printed.join("\n");
  assert(code === 1, `exit code at swamp's exit ${code}, want 1`);
  assert(out.includes("not published to the ledger: syncledger: another host changed a/b") && out.includes("the next swamp command publishes them"), out);
});

Deno.test("a push refused for a lock lost says so at swamp's exit, and what the next command does", opts, async () => {
  const f = fake("ok");
  const p = provider(f.bin);
  const sync = p.createSyncService("/repo", "/cache");
  await sync.markDirty({ relPath: "lock-lost" });
  const e = await rejects(sync.pushChanged(), "was lost: bob@desk took it") as Error & { kind: string };
  assert(e.kind === "lock-lost", JSON.stringify(e));
  const printed: string[] = [];
  const print = console.error;
  console.error = (...args: unknown[]) => printed.push(args.join(" "));
  try {
    p.agent.finish();
  } finally {
    console.error = print;
  }
  const code = Deno.exitCode;
  Deno.exitCode = 0;
  const out = printed.join("\n");
  assert(code === 1, `exit code at swamp's exit ${code}, want 1`);
  assert(out.includes("not published to the ledger: syncledger: swamp's lock data/t/id/.lock was lost") &&
    out.includes("they stay in this host's cache (/cache), uncommitted") &&
    out.includes("pulls the other host's run and publishes this one after it") && !out.includes("once the ledger answers"), out);
});

Deno.test("what the agent waits for is printed on swamp's stderr while it waits", opts, async () => {
  const f = fake("ok");
  const p = provider(f.bin);
  const sync = p.createSyncService("/repo", "/cache");
  await sync.markDirty({ relPath: "wait" });
  const printed: string[] = [];
  const print = console.error;
  console.error = (...args: unknown[]) => printed.push(args.join(" "));
  try {
    const e = await rejects(sync.pushChanged(), "gave up after waiting 1m0s") as Error & { kind: string };
    assert(e.kind === "unreachable", JSON.stringify(e));
    // The note and the answer come on two pipes: the note may be read after.
    const want = "@syncledger/datastore: commit: waiting for the blob store (s3://b/x) to store content: no answer for 3s; giving up after 1m0s";
    for (let i = 0; i < 100 && !printed.includes(want); i++) await new Promise((r) => setTimeout(r, 20));
    assert(printed.includes(want), `printed ${JSON.stringify(printed)}, want ${JSON.stringify(want)}`);
    p.agent.finish(); // swamp's exit: the changes not published, said so
  } finally {
    console.error = print;
  }
  const code = Deno.exitCode;
  Deno.exitCode = 0;
  const out = printed.join("\n");
  assert(code === 1 && out.includes("not published to the ledger: syncledger: commit: gave up after waiting"), out);
});

Deno.test("a missing binary says where and what to run, at the first call", opts, async () => {
  const sync = provider("/nonexistent/syncledger").createSyncService("/repo", "/cache"); // no throw here
  await rejects(sync.pullChanged(), "/nonexistent/syncledger is not found");
  await rejects(sync.pullChanged(), "syncledger swamp setup");
});

Deno.test("an agent that dies fails its calls with its stderr", opts, async () => {
  const f = fake("die");
  const p = provider(f.bin);
  await rejects(p.createSyncService("/repo", "/cache").pullChanged(), "exited with code 3");
  const v = await p.createVerifier().verify();
  assert(!v.healthy && v.message.includes("boom"), JSON.stringify(v));
});

Deno.test("the control-plane store round-trips bytes", opts, async () => {
  const f = fake("ok");
  const cp = provider(f.bin).createSyncService("/repo", "/cache").controlPlaneStore();
  const data = new Uint8Array([0, 1, 2, 250, 255]);
  await cp.put("vault/k", data);
  const got = await cp.get("vault/k");
  assert(got !== null && got.length === 5 && got[3] === 250, `got ${got}`);
  assert(await cp.get("vault/none") === null, "missing key");
});
