// The extension's locks against a real `syncledger swamp agent` per provider
// (one per swamp process) and a real NATS server (`syncledger serve`, started
// here): contention, a holder killed with kill -9 losing the lock after its
// TTL, fencing (a holder whose lock expired can neither renew nor release its
// new holder's lock) and forceRelease's nonce check.
//   SYNCLEDGER_BIN=/path/to/syncledger deno test -A swamp/extension/
// SYNCLEDGER_BIN unset: these tests do not run (.ci/run sets it); set and
// unusable: they fail.
import type { LockInfo, Provider } from "./syncledger.ts";

const bin = Deno.env.get("SYNCLEDGER_BIN");
// The extension as `syncledger swamp setup` writes it: this file, verbatim.
const { datastore } = await import("./syncledger.ts");
const opts = { ignore: !bin, sanitizeOps: false, sanitizeResources: false };
const TTL = 1500;

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

/** A NATS server with JetStream and a ledger, in a directory of its own. */
async function serve(): Promise<{ url: string; dir: string; stop: () => Promise<void> }> {
  const dir = Deno.makeTempDirSync({ prefix: "syncledger-lock-test-" });
  const child = new Deno.Command(bin!, {
    args: ["serve", "--data", `${dir}/data`, "--listen", "127.0.0.1:0", "--json", "--log-level", "warn"],
    stdout: "piped", stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  while (!buf.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${bin} serve exited before it printed its URL: ${buf}`);
    buf += value;
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  const url = JSON.parse(buf.slice(0, buf.indexOf("\n"))).url as string;
  return {
    url, dir,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

let hosts = 0;
/** A provider as one swamp process on its own host makes it: its own agent and cache. */
function host(url: string, dir: string): Provider {
  const n = hosts++;
  return datastore.createProvider({
    binary: bin!, cache: `${dir}/cache-${n}`, nats: url, ledger: "default", host: `h${n}`, lockTtlMs: TTL,
  });
}

const key = "data/command/shell/m1/.lock";
const lock = (p: Provider, maxWaitMs = 20000) => p.createLock("/repo/.swamp", { lockKey: key, maxWaitMs });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("locks: the second host waits, then gets the lock; a wait is bounded by maxWaitMs", opts, async () => {
  const s = await serve();
  try {
    const a = host(s.url, s.dir), b = host(s.url, s.dir), c = host(s.url, s.dir);
    await lock(a).acquire();
    const t0 = Date.now();
    const got = lock(b).acquire().then(() => Date.now() - t0);
    await sleep(600);
    // c gives up after its 300 ms, naming the holder.
    let err = "";
    const c0 = Date.now();
    await lock(c, 300).acquire().catch((e) => err = (e as Error).message);
    const cWaited = Date.now() - c0;
    assert(err.includes("is held by") && err.includes(`pid ${Deno.pid}`) && err.includes("waited 300ms"), `c's bounded wait: ${JSON.stringify(err)}`);
    assert(cWaited >= 200 && cWaited < 3000, `c waited ${cWaited} ms for a 300 ms maxWaitMs`);
    await lock(a).release();
    const waited = await got;
    assert(waited >= 600, `b got the lock after ${waited} ms, while a held it`);
    const info = await lock(c).inspect();
    assert(info?.hostname === Deno.hostname() && info.ttlMs === TTL, `inspect: ${JSON.stringify(info)}`);
    await lock(b).release();
    assert(await lock(c).inspect() === null, "released lock still held");
  } finally {
    await s.stop();
  }
});

Deno.test("locks: a holder killed with kill -9 loses the lock after its TTL", opts, async () => {
  const s = await serve();
  try {
    const a = host(s.url, s.dir), b = host(s.url, s.dir);
    await lock(a).acquire();
    const held = (await lock(b).inspect())!;
    Deno.kill(a.agent.pid!, "SIGKILL");
    const killed = Date.now();
    await lock(b).acquire();
    const after = Date.now() - killed;
    // a renewed at most TTL/3 before the kill.
    assert(after >= TTL * 2 / 3 - 100 && after < TTL + 2000, `b got the lock ${after} ms after the kill (TTL ${TTL})`);
    const now = (await lock(b).inspect())!;
    assert(now.nonce !== held.nonce, "the lock is still the killed holder's");
    await lock(b).release();
  } finally {
    await s.stop();
  }
});

Deno.test("locks: fencing — a holder whose lock expired can neither renew nor release the new holder's", opts, async () => {
  const s = await serve();
  try {
    const a = host(s.url, s.dir), b = host(s.url, s.dir);
    const la = lock(a);
    await la.acquire();
    // a's agent stops (as a partitioned or frozen process): no renewals.
    Deno.kill(a.agent.pid!, "SIGSTOP");
    let bGot: LockInfo | null = null;
    try {
      await lock(b).acquire(); // after a's TTL
      bGot = await lock(b).inspect();
    } finally {
      Deno.kill(a.agent.pid!, "SIGCONT");
    }
    assert(bGot !== null, "b does not hold the lock");
    // a wakes: its renewal, conditioned on its old revision, is refused, and
    // its release leaves b's lock alone.
    await sleep(TTL); // a's renewal ticks at least once meanwhile
    await la.release();
    const after = await lock(a).inspect();
    assert(after !== null && after.nonce === bGot.nonce, `after a's release the lock is ${JSON.stringify(after)}, want b's ${bGot.nonce}`);
    assert(after.acquiredAt >= bGot.acquiredAt, "b's renewals stopped");
    await lock(b).release();
  } finally {
    await s.stop();
  }
});

Deno.test("locks: forceRelease with a wrong nonce is refused; with the holder's, it frees the lock", opts, async () => {
  const s = await serve();
  try {
    const a = host(s.url, s.dir), b = host(s.url, s.dir), c = host(s.url, s.dir);
    await lock(a).acquire();
    const info = (await lock(b).inspect())!;
    assert(await lock(b).forceRelease("not-the-nonce") === false, "a wrong nonce released the lock");
    assert((await lock(b).inspect())?.nonce === info.nonce, "the lock changed after a refused forceRelease");
    assert(await lock(b).forceRelease(info.nonce!) === true, "the holder's nonce did not release the lock");
    assert(await lock(b).inspect() === null, "the lock is still held after forceRelease");
    // c takes it; a's release, later, does not free c's lock.
    await lock(c).acquire();
    await lock(a).release();
    assert((await lock(b).inspect())?.hostname !== undefined, "a's release freed c's lock");
    await lock(c).release();
  } finally {
    await s.stop();
  }
});
