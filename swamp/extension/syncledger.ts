// @syncledger/datastore: swamp's datastore on a syncledger ledger.
//
// Written into a repo by `syncledger swamp setup` (docs/swamp.md). Every call
// goes to one `syncledger swamp agent` process per swamp command, started on
// first use, over JSON lines on its stdin/stdout (swamp/agent, the protocol below): the binary
// keeps the one implementation of the ledger protocol and its crash safety.
import { z } from "npm:zod@4";

// BEGIN protocol: generated from swamp/agent/protocol.go by `go generate ./swamp/agent`; do not edit.
/** The agent protocol (agent.Protocol in Go). */
export const PROTOCOL = 1;
export type HelloRequest = {
  protocol: number;
  repo?: string;
};
export type HelloResult = {
  version: string;
  protocol: number;
  cache: string;
  close?: string;
};
export type HintRequest = {
  hints?: string[];
};
export type PullRequest = {
  metadataOnly?: boolean;
  namespace?: string;
};
export type PullResult = {
  files: number;
  hwm: number;
  head: number;
  renumbered?: string[];
  offline?: string;
  healed?: string[];
};
export type PushRequest = {
  hints?: string[];
  namespace?: string;
};
export type PrepareResult = {
  files: number;
  bytes: number;
};
export type PushResult = {
  files: number;
  commit?: string;
  commits?: string[];
  hwm: number;
  hints: number;
  offline?: string;
};
export type HydrateRequest = {
  path: string;
  namespace?: string;
};
export type VerifyRequest = {
  namespace?: string;
};
export type VerifyResult = {
  head: number;
  hwm: number;
  ledger: string;
  uuid: string;
  cache: string;
  dirty: number;
  files: number;
  forked?: string;
};
export type ForeignCatalogsRequest = {
  namespaces: string[];
};
export type ForeignCatalog = {
  namespace: string;
  rows: Record<string, unknown>[];
};
export type ForeignContentRequest = {
  namespace: string;
  path: string;
};
export type LockHolder = {
  holder: string;
  hostname: string;
  pid: number;
  nonce?: string;
};
export type LockAcquireRequest = {
  key: string;
  holder: LockHolder;
  ttlMs?: number;
  retryMs?: number;
  maxWaitMs?: number;
};
export type LockKeyRequest = {
  key: string;
};
export type LockInfo = {
  holder: string;
  hostname: string;
  pid: number;
  acquiredAt: string;
  ttlMs: number;
  nonce?: string;
  heldSince?: string;
  host?: string;
};
export type LockForceReleaseRequest = {
  key: string;
  nonce: string;
};
export type ControlPutRequest = {
  key: string;
  data: string | null;
};
export type ControlKeyRequest = {
  key: string;
};
export type ControlListRequest = {
  prefix: string;
};
export type NamespaceRegisterRequest = {
  namespace: string;
  repoId: string;
};
export type NamespaceListRequest = Record<never, never>;
export type CloseRequest = {
  hints?: string[];
  publish: boolean;
};
export type Request = {
  id: number;
  op: string;
};
export type Failure = {
  kind: "conflict" | "version" | "unreachable" | "no-ledger" | "permission" | "lock-lost" | "error";
  message: string;
  paths?: string[];
};
export type Response = {
  id: number;
  result?: unknown;
  error?: Failure | null;
};
/** Each operation's request, besides id and op. */
export type Requests = {
  "hello": HelloRequest;
  "pull": PullRequest;
  "prepare": PushRequest;
  "push": PushRequest;
  "commit": PushRequest;
  "hydrate": HydrateRequest;
  "verify": VerifyRequest;
  "foreign.catalogs": ForeignCatalogsRequest;
  "foreign.content": ForeignContentRequest;
  "lock.acquire": LockAcquireRequest;
  "lock.release": LockKeyRequest;
  "lock.inspect": LockKeyRequest;
  "lock.forceRelease": LockForceReleaseRequest;
  "cp.put": ControlPutRequest;
  "cp.get": ControlKeyRequest;
  "cp.delete": ControlKeyRequest;
  "cp.list": ControlListRequest;
  "cp.putIfAbsent": ControlPutRequest;
  "ns.register": NamespaceRegisterRequest;
  "ns.list": NamespaceListRequest;
  "close": CloseRequest;
};
/** Each operation's result. */
export type Results = {
  "hello": HelloResult;
  "pull": PullResult;
  "prepare": PrepareResult;
  "push": PushResult;
  "commit": PushResult;
  "hydrate": boolean;
  "verify": VerifyResult;
  "foreign.catalogs": ForeignCatalog[];
  "foreign.content": string | null;
  "lock.acquire": boolean;
  "lock.release": boolean;
  "lock.inspect": LockInfo | null;
  "lock.forceRelease": boolean;
  "cp.put": boolean;
  "cp.get": string | null;
  "cp.delete": boolean;
  "cp.list": string[];
  "cp.putIfAbsent": boolean;
  "ns.register": boolean;
  "ns.list": string[];
  "close": PushResult;
};
/** Requests that get no answer. */
export type Notifications = {
  "hint": HintRequest;
};
export type Op = keyof Requests;
// END protocol
const TYPE = "@syncledger/datastore";

/**
 * Per-host settings: in HOST_FILE (setup writes it, git does not track it), or
 * for SWAMP_DATASTORE's config; in .swamp.yaml only from older setups.
 */
const hostSchema = z.object({
  binary: z.string().optional().describe("the syncledger binary (default: $SYNCLEDGER_BINARY, else syncledger on PATH)"),
  cache: z.string().optional().describe("this host's syncledger cache (default: REPO/.swamp/syncledger-cache)"),
  host: z.string().optional().describe("this host's id in commits (default: SYNCLEDGER_HOST, the config file, the hostname)"),
  nats: z.string().optional().describe("NATS URL of the ledger's server, without credentials"),
  flags: z.array(z.string()).optional().describe("more global syncledger flags, e.g. --nats-creds FILE"),
  offline: z.boolean().optional().describe(
    "when the server cannot be reached, let swamp run on this host's cache and publish at the next command that reaches it (default false: commands that need the ledger fail)",
  ),
});
/** The datastore's config in .swamp.yaml: the same on every host, no secret in it. */
export const configSchema = hostSchema.extend({
  ledger: z.string().describe("ledger name (with a namespace, the base ledger; the namespace's own is LEDGER_NS)"),
  namespace: z.string().optional().describe("the datastore's namespace, as in .swamp.yaml (syncledger swamp setup --namespace)"),
  lockTtlMs: z.number().int().positive().optional().describe("lock TTL (default 30000)"),
});
export type Config = z.infer<typeof configSchema>;
/** A host's own settings for a repo (swamp.HostFile in Go), relative to the repo. */
export const HOST_FILE = ".swamp/syncledger-host.json";

/** What an agent runs with: the repo's config, then the host file's keys, then defaults. */
export type Resolved = {
  binary: string; cache: string; ledger: string; nats?: string; namespace?: string; host?: string;
  flags: string[]; lockTtlMs?: number; repo: string; offline: boolean;
};

/** Resolves cfg for the repo at repo: HOST_FILE's keys win, SYNCLEDGER_BINARY over both for the binary. */
export function resolveConfig(cfg: Config, repo: string): Resolved {
  const file = `${repo}/${HOST_FILE}`;
  let h: z.infer<typeof hostSchema> = {};
  let text: string | undefined;
  try {
    text = Deno.readTextFileSync(file);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw failure(`${TYPE}: read ${file}: ${(e as Error).message}`);
  }
  if (text !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw failure(`${TYPE}: ${file} is not JSON (${(e as Error).message}): fix it, or run 'syncledger swamp setup --repo ${repo}' to rewrite it`);
    }
    const r = hostSchema.strict().safeParse(parsed);
    if (!r.success) {
      throw failure(`${TYPE}: ${file}: ${r.error.message}: fix it, or run 'syncledger swamp setup --repo ${repo}' to rewrite it`);
    }
    h = r.data;
  }
  return {
    binary: Deno.env.get("SYNCLEDGER_BINARY") || h.binary || cfg.binary || "syncledger",
    cache: h.cache ?? cfg.cache ?? `${repo}/.swamp/syncledger-cache`,
    nats: h.nats ?? cfg.nats,
    host: h.host ?? cfg.host,
    flags: [...(cfg.flags ?? []), ...(h.flags ?? [])],
    ledger: cfg.ledger, namespace: cfg.namespace, lockTtlMs: cfg.lockTtlMs, repo,
    offline: h.offline ?? cfg.offline ?? false,
  };
}

/** An error as swamp should print it: its message, without a stack. */
function failure(message: string): Error {
  const e = new Error(message);
  e.stack = `Error: ${message}`;
  return e;
}

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** One agent process, shared by every provider of this swamp process with the same config. */
export class Agent {
  private child?: Deno.ChildProcess;
  private writer?: WritableStreamDefaultWriter<Uint8Array>;
  private next = 1;
  private pending = new Map<number, Pending>();
  private ready?: Promise<unknown>;
  private stderr = "";
  private dead?: Error;
  private up = false; // the agent accepted this extension's version
  // The agent's close pipes (hello's "close"), opened while swamp runs: at
  // swamp's exit, when nothing asynchronous runs any more, they are written
  // and read synchronously (finish).
  private closeIn?: Deno.FsFile;
  private closeOut?: Deno.FsFile;
  /** Why this command's changes are not published, if a push failed and none succeeded since. */
  unpublished?: string;
  /** The failed push's kind ("lock-lost": swamp's lock passed to another host meanwhile). */
  unpublishedKind?: string;
  /** The markDirty paths of this command that no push has published yet. */
  readonly unpushed = new Set<string>();
  /** Why the ledger was not reached, once an answer said so (offline: swamp ran on the cache). */
  offline?: string;
  /** A request failed because the server could not be reached: swamp printed that. */
  unreachable = false;

  constructor(private cfg: Resolved) {}

  /** What this agent runs with. */
  get config(): Resolved {
    return this.cfg;
  }

  /** The agent's process id, once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  args(): string[] {
    const c = this.cfg;
    return [
      ...(c.nats ? ["--nats", c.nats] : []), "--ledger", c.ledger, "--cache", c.cache, "--log-level", "warn",
      ...(c.host ? ["--host", c.host] : []), ...c.flags, "swamp", "agent",
      ...(c.namespace ? ["--namespace", c.namespace] : []), ...(c.offline ? ["--offline-ok"] : []),
    ];
  }

  private start(): Promise<unknown> {
    try {
      this.child = new Deno.Command(this.cfg.binary, {
        args: this.args(), stdin: "piped", stdout: "piped", stderr: "piped",
      }).spawn();
    } catch (e) {
      const why = e instanceof Deno.errors.NotFound
        ? "not found"
        : e instanceof Deno.errors.PermissionDenied ? "not executable" : String(e);
      const where = this.cfg.binary.includes("/") ? "" : " on PATH";
      throw failure(
        `${TYPE}: the syncledger binary ${this.cfg.binary}${where} is ${why}: install syncledger${where || " there"}, ` +
          `set SYNCLEDGER_BINARY, or run 'syncledger swamp setup --repo ${this.cfg.repo} --binary PATH' on this host ` +
          `(it records the binary in ${HOST_FILE}, which git does not track)`,
      );
    }
    // Unreferenced while idle, so that the agent never keeps swamp from
    // exiting; referenced while an answer is awaited (see send).
    this.child.unref();
    this.writer = this.child.stdin.getWriter();
    this.readLines(this.child.stdout, (line) => this.answer(line));
    this.readLines(this.child.stderr, (line) => {
      this.stderr = (this.stderr + line + "\n").slice(-4000);
      // A wait of the agent's (the ledger's server or the blob store not
      // answering: "syncledger: commit: waiting for …") is swamp's user's to
      // see while it lasts, on swamp's stderr.
      const wait = line.match(/^syncledger: ([a-z]+: waiting for .*)$/);
      if (wait) console.error(`${TYPE}: ${wait[1]}`);
    });
    this.child.status.then((st) => {
      this.dead = failure(
        `${TYPE}: the syncledger agent (${this.cfg.binary}) exited with code ${st.code}` +
          (this.stderr.trim() ? `: ${this.stderr.trim()}` : ""),
      );
      for (const p of this.pending.values()) p.reject(this.dead);
      this.pending.clear();
    });
    // At swamp's exit (Deno.exit dispatches "unload"), what swamp wrote after
    // its last push is published before the process ends (finish).
    addEventListener("unload", () => this.finish());
    const hello: { op: "hello" } & Requests["hello"] = { op: "hello", protocol: PROTOCOL, repo: this.cfg.repo };
    return this.send(hello).then(async (r) => {
      this.up = true;
      const close = (r as HelloResult).close;
      if (close) {
        try {
          this.closeIn = await Deno.open(`${close}/in`, { write: true });
          this.closeOut = await Deno.open(`${close}/out`, { read: true });
        } catch { /* no close pipes: the agent publishes when its input ends */ }
      }
      return r;
    });
  }

  /**
   * Runs at swamp's exit, synchronously: asks the agent to publish what swamp
   * wrote since its last push (hints: the markDirty paths not pushed) and
   * waits for its answer. If this command's changes are not published (the
   * ledger is unreachable, a push failed), it says so and what happens next,
   * and makes a successful command exit non-zero.
   */
  finish(): void {
    if (!this.child || this.finished) return;
    this.finished = true;
    let why = this.unpublished;
    let closed: PushResult | undefined;
    if (this.closeIn && this.closeOut && !this.dead) {
      // A push of this command failed: the agent publishes nothing now (it
      // would meet the same failure, while swamp waits), the next command does.
      const req: { op: "close" } & Requests["close"] = { op: "close", hints: [...this.unpushed], publish: why === undefined };
      try {
        this.closeIn.writeSync(new TextEncoder().encode(JSON.stringify(req) + "\n"));
        const line = readLineSync(this.closeOut);
        const msg: Response = line ? JSON.parse(line) : { id: 0, error: { kind: "error", message: "the syncledger agent ended without answering" } };
        if (req.publish && msg.error) why = msg.error.message;
        if (!msg.error) closed = msg.result as PushResult;
      } catch (e) {
        if (req.publish) why = `the syncledger agent did not answer at swamp's exit: ${(e as Error).message}`;
      }
    }
    const offline = closed?.offline ?? this.offline;
    if (why === undefined && offline !== undefined && !this.unreachable) {
      // Offline: with the opt-in, what swamp wrote waits in the cache (the
      // pull said swamp ran on it); a command that wrote nothing and sent the
      // agent nothing (a read) read the cache as it is.
      if (this.unpushed.size > 0) {
        console.error(
          `${TYPE}: offline (${offline}): this command's changes stay in this host's cache (${this.cfg.cache}); ` +
            `the next swamp command that reaches the ledger publishes them (or 'swamp datastore sync' once it answers).`,
        );
      } else if (this.offline === undefined) {
        console.error(
          `${TYPE}: the ledger is unreachable (${offline}): this command read this host's cache as of its mark ` +
            `${closed?.hwm ?? "?"}, which may be stale.`,
        );
      }
      return;
    }
    if (why === undefined) return;
    const next = this.unpublishedKind === "lock-lost"
      ? `${TYPE}: they stay in this host's cache (${this.cfg.cache}), uncommitted; the next swamp command here ` +
        `(or 'swamp datastore sync') pulls the other host's run and publishes this one after it: a data version ` +
        `both runs numbered alike becomes the next free version, files swamp regenerates take the ledger's, and ` +
        `any other file both changed is a conflict it names, for 'syncledger resolve'.`
      : `${TYPE}: they stay in this host's cache (${this.cfg.cache}); the next swamp command publishes them ` +
        `once the ledger answers (or run 'swamp datastore sync').`;
    console.error(`${TYPE}: this command's changes were not published to the ledger: ${why}\n${next}`);
    if (!Deno.exitCode) Deno.exitCode = 1;
  }
  private finished = false;

  private async readLines(stream: ReadableStream<Uint8Array>, fn: (line: string) => void) {
    const dec = new TextDecoder();
    let buf = "";
    // deno-lint-ignore no-explicit-any
    const reader = stream.getReader() as any;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          fn(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      }
    } catch { /* the agent is gone: status reports it */ }
    if (buf) fn(buf);
  }

  private answer(line: string) {
    let msg: Response;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (this.pending.size === 0) this.child?.unref();
    if (msg.error) {
      // swamp prints a failed command's error with its stack: the message is
      // all there is to say, and kind and paths are for callers, not display.
      const e = failure(msg.error.message);
      if (msg.error.kind === "unreachable") this.unreachable = true;
      Object.defineProperty(e, "kind", { value: msg.error.kind });
      Object.defineProperty(e, "paths", { value: msg.error.paths ?? [] });
      p.reject(e);
    } else p.resolve(msg.result ?? null);
  }

  private send(req: Record<string, unknown>): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.next++;
    const line = new TextEncoder().encode(JSON.stringify({ ...req, id }) + "\n");
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.child?.ref();
      this.pending.set(id, { resolve, reject });
      this.writer!.write(line).catch((e) => {
        this.pending.delete(id);
        reject(this.dead ?? e);
      });
    });
  }

  /**
   * Starts the agent, if not started, without waiting for it: its start then
   * overlaps swamp's own work before the first call. A failure surfaces at
   * that call.
   */
  warm(): void {
    if (this.ready) return;
    try {
      this.ready = this.start();
    } catch (e) {
      this.ready = Promise.reject(e);
    }
    this.ready.catch(() => {}); // reported by call
  }

  /**
   * Sends a request that has no answer, if the agent is up; otherwise drops
   * it. It costs a pipe write: it never starts the agent nor waits for it.
   */
  notify<O extends keyof Notifications>(req: { op: O } & Notifications[O]): void {
    if (!this.up || this.dead) return;
    const line = new TextEncoder().encode(JSON.stringify(req) + "\n");
    this.writer!.write(line).catch(() => {});
  }

  /** Sends req once the agent is up and has accepted this extension's version. */
  async call<O extends Op>(req: { op: O } & Requests[O]): Promise<Results[O]> {
    this.warm();
    await this.ready;
    return await this.send(req) as Results[O];
  }
}

/** Reads one line from f, blocking; "" at its end. */
function readLineSync(f: Deno.FsFile): string {
  const buf = new Uint8Array(64 << 10);
  let out = "";
  const dec = new TextDecoder();
  for (;;) {
    const n = f.readSync(buf);
    if (n === null) return out;
    out += dec.decode(buf.subarray(0, n), { stream: true });
    const i = out.indexOf("\n");
    if (i >= 0) return out.slice(0, i);
  }
}

const agents = new Map<string, Agent>();
/** The one agent of this swamp process for cfg in repo. */
function agentFor(cfg: Config, repo: string): Agent {
  const key = JSON.stringify([cfg, repo]);
  let a = agents.get(key);
  if (!a) agents.set(key, a = new Agent(resolveConfig(cfg, repo)));
  return a;
}
/**
 * The repo swamp last resolved a config for: swamp names it to
 * resolveDatastorePath before anything else (even the verifier of
 * `datastore status`, made without it, comes after).
 */
const repos = new Map<string, string>();

function b64(data: Uint8Array): string {
  let s = "";
  for (const b of data) s += String.fromCharCode(b);
  return btoa(s);
}
function unb64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

type LockOptions = { lockKey?: string; ttlMs?: number; retryIntervalMs?: number; maxWaitMs?: number };

/** swamp's DistributedLock on the ledger's KV bucket (swamp/agent/lock.go). */
export class Lock {
  private key: string;
  constructor(private agent: Agent, private cfg: Resolved, private opts: LockOptions = {}) {
    this.key = opts.lockKey ?? ".datastore.lock";
  }
  async acquire(): Promise<void> {
    const hostname = Deno.hostname();
    const nonce = crypto.randomUUID();
    const writing = this.agent.unpushed.size > 0;
    const held = this.agent.call({
      op: "lock.acquire", key: this.key,
      holder: { holder: `${Deno.env.get("USER") ?? "swamp"}@${hostname}`, hostname, pid: Deno.pid, nonce },
      ttlMs: this.opts.ttlMs ?? this.cfg.lockTtlMs ?? 30000,
      retryMs: this.opts.retryIntervalMs ?? 100,
      maxWaitMs: this.opts.maxWaitMs ?? 60000,
    });
    // Still waiting after a second: say who holds the lock, and since when.
    const timer = setTimeout(() => {
      this.agent.call({ op: "lock.inspect", key: this.key }).then((h) => {
        if (h && h.nonce !== nonce) {
          console.error(
            `${TYPE}: waiting for lock ${this.key}, held by ${h.holder} (host ${h.host ?? h.hostname}, pid ${h.pid}) ` +
              `since ${h.heldSince ?? h.acquiredAt}`,
          );
        }
      }, () => {});
    }, 1000);
    try {
      await held;
    } catch (e) {
      // A lock refused after swamp wrote (the global lock of its push): the
      // push cannot happen, so this command's changes stay unpublished.
      if (writing) {
        this.agent.unpublished = (e as Error).message;
        this.agent.unpublishedKind = (e as { kind?: string }).kind;
      }
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }
  async release(): Promise<void> {
    await this.agent.call({ op: "lock.release", key: this.key });
  }
  async withLock<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      await this.release();
    }
  }
  inspect(): Promise<LockInfo | null> {
    return this.agent.call({ op: "lock.inspect", key: this.key });
  }
  forceRelease(nonce: string): Promise<boolean> {
    return this.agent.call({ op: "lock.forceRelease", key: this.key, nonce });
  }
}

type SyncOptions = { signal?: AbortSignal; namespace?: string; metadataOnly?: boolean };
/** A foreign namespace's catalog: the rows of its .catalog-export.json (swamp's CatalogExportEntry). */
export type CatalogExportEntry = ForeignCatalog;

/** swamp's DatastoreSyncService: every pull is a full sync of the ledger. */
export class SyncService {
  private hints = new Set<string>();
  constructor(private agent: Agent, private namespace: string) {}

  /**
   * Runs a push request: a failure is remembered for swamp's exit
   * (Agent.finish); a published push clears it and the paths it took.
   */
  private async pushing<O extends "push" | "prepare" | "commit">(req: { op: O } & Requests[O]): Promise<Results[O]> {
    const taken = [...this.agent.unpushed];
    try {
      const r = await this.agent.call(req);
      const off = (r as PushResult).offline;
      if (off !== undefined) {
        this.agent.offline ??= off; // nothing published: the paths stay for the next command
      } else if (req.op !== "prepare") {
        this.agent.unpublished = this.agent.unpublishedKind = undefined;
        for (const p of taken) this.agent.unpushed.delete(p);
      }
      return r;
    } catch (e) {
      this.agent.unpublished = (e as Error).message;
      this.agent.unpublishedKind = (e as { kind?: string }).kind;
      throw e;
    }
  }

  capabilities() {
    // scopedSync false: swamp's per-model pull names only the models a command
    // locks, not those it reads; a full sync with nothing new is one request.
    return { scopedSync: false, lazyHydration: true, namespacedSync: true, twoPhaseSync: true, controlPlane: true };
  }
  async pullChanged(opts?: SyncOptions): Promise<number> {
    // Lazy hydration: swamp asks for metadataOnly on its global pulls only. Its
    // per-model pull (no metadataOnly) is a full sync that also fetches what
    // lazy pulls left out: the command may read any model's data, and swamp
    // does not ask hydrateFile for data read through expressions.
    const r = await this.agent.call({
      op: "pull", metadataOnly: !!opts?.metadataOnly, namespace: opts?.namespace ?? "",
    });
    if (r.offline !== undefined && this.agent.offline === undefined) {
      this.agent.offline = r.offline;
      console.error(
        `${TYPE}: offline (${r.offline}): swamp runs on this host's cache as of its mark ${r.hwm}, which may be stale; ` +
          `what it writes is published by the next swamp command that reaches the ledger.`,
      );
    }
    for (const line of r.renumbered ?? []) {
      console.error(`${TYPE}: this host's run, published after another host's run of the same version: ${line}`);
    }
    for (const line of r.healed ?? []) {
      console.error(`${TYPE}: ${line}`);
    }
    return r.files;
  }
  markDirty(opts: { relPath: string }): Promise<void> {
    // A hint only: with a watch running on the cache, the push checks its
    // dirty set and these paths; without one it scans the whole cache. The
    // agent, if up, gets it at once: swamp calls this just before it writes,
    // so the agent starts the upload and the fsyncs of the files below a path
    // at the next hint, while swamp carries on (swamp/agent/cache.go, "hint").
    this.hints.add(opts.relPath);
    this.agent.unpushed.add(opts.relPath);
    if (opts.relPath) this.agent.notify({ op: "hint", hints: [opts.relPath] });
    return Promise.resolve();
  }
  private takeHints(): string[] {
    const h = [...this.hints];
    this.hints.clear();
    return h;
  }
  async pushChanged(opts?: SyncOptions): Promise<number> {
    const r = await this.pushing({ op: "push", hints: this.takeHints(), namespace: opts?.namespace ?? "" });
    return r.files;
  }
  /** Uploads the changed content; publishes nothing (outside swamp's global lock). */
  async preparePush(opts?: SyncOptions): Promise<unknown> {
    return await this.pushing({ op: "prepare", hints: [...this.hints], namespace: opts?.namespace ?? "" });
  }
  /** Publishes the one commit (under swamp's global lock); nothing changed: nothing published. */
  async commitPush(_manifest: unknown, opts?: SyncOptions): Promise<number> {
    const r = await this.pushing({ op: "commit", hints: this.takeHints(), namespace: opts?.namespace ?? "" });
    return r.files;
  }
  hydrateFile(relPath: string, _opts?: SyncOptions): Promise<boolean> {
    return this.agent.call({ op: "hydrate", path: relPath, namespace: this.namespace });
  }
  /** swamp writes NS/.catalog-export.json itself: this publishes it (and whatever else changed) now. */
  async exportCatalog(namespace: string): Promise<void> {
    await this.markDirty({ relPath: `${namespace}/.catalog-export.json` });
    await this.pushChanged({ namespace });
  }
  /**
   * Other namespaces' catalogs, each read from its own ledger (read only):
   * the rows of its .catalog-export.json; a namespace with no ledger or no
   * export yet is left out.
   */
  pullForeignCatalogs(namespaces: string[], _signal?: AbortSignal): Promise<CatalogExportEntry[]> {
    return this.agent.call({ op: "foreign.catalogs", namespaces });
  }
  /** A file of another namespace's ledger (read only; relPath without the namespace), or null. */
  async fetchForeignContent(namespace: string, relPath: string, _signal?: AbortSignal): Promise<Uint8Array | null> {
    const r = await this.agent.call({ op: "foreign.content", namespace, path: relPath });
    return r === null ? null : unb64(r);
  }
  controlPlaneStore() {
    const a = this.agent;
    return {
      put: (key: string, data: Uint8Array) => a.call({ op: "cp.put", key, data: b64(data) }),
      get: async (key: string) => {
        const r = await a.call({ op: "cp.get", key });
        return r === null ? null : unb64(r);
      },
      delete: (key: string) => a.call({ op: "cp.delete", key }),
      list: (prefix: string) => a.call({ op: "cp.list", prefix }),
      putIfAbsent: (key: string, data: Uint8Array) => a.call({ op: "cp.putIfAbsent", key, data: b64(data) }),
    };
  }
}

export class Provider {
  private key: string;
  constructor(private cfg: Config) {
    this.key = JSON.stringify(cfg);
  }
  /** The agent for repo (default: the repo swamp last resolved this config for, else the working directory). */
  agentIn(repo?: string): Agent {
    // swamp passes "." when it resolves SWAMP_DATASTORE without a repo dir.
    if (repo && !repo.startsWith("/")) repo = repo === "." ? Deno.cwd() : `${Deno.cwd()}/${repo}`;
    if (repo) repos.set(this.key, repo);
    return agentFor(this.cfg, repo ?? repos.get(this.key) ?? Deno.cwd());
  }
  get agent(): Agent {
    return this.agentIn();
  }
  resolveDatastorePath(repoDir: string) {
    // swamp resolves the datastore early in every command that uses it: the
    // agent starts now, and its start overlaps swamp's own work.
    this.agentIn(repoDir).warm();
    return `${repoDir}/.swamp`;
  }
  resolveCachePath(repoDir: string) {
    return this.agentIn(repoDir).config.cache;
  }
  createSyncService(repoDir: string, _cachePath: string) {
    return new SyncService(this.agentIn(repoDir), this.cfg.namespace ?? "");
  }
  createLock(datastorePath: string, options?: LockOptions) {
    const a = this.agentIn(datastorePath.replace(/\/\.swamp\/?$/, ""));
    return new Lock(a, a.config, options);
  }
  createVerifier() {
    const a = this.agent, cfg = a.config;
    return {
      async verify() {
        const t0 = performance.now();
        try {
          const d = await a.call({ op: "verify", namespace: cfg.namespace ?? "" });
          const behind = d.head - d.hwm;
          if (d.forked) {
            // Never "up to date": the ledger lost commits this host applied.
            return {
              healthy: false, latencyMs: Math.round(performance.now() - t0), datastoreType: TYPE, details: d,
              message: `ledger ${d.ledger}${cfg.nats ? ` at ${cfg.nats}` : ""}: FORKED: ${d.forked} ` +
                "(the next swamp command that pulls, or 'swamp datastore sync', republishes them from this host; nothing is deleted)",
            };
          }
          return {
            healthy: true, latencyMs: Math.round(performance.now() - t0), datastoreType: TYPE, details: d,
            message: `ledger ${d.ledger}${cfg.nats ? ` at ${cfg.nats}` : ""}: head ${d.head}, this host's mark ${d.hwm}, ` +
              (behind > 0 ? `${behind} behind (the next swamp command that pulls, or 'swamp datastore sync', catches up)` : "up to date"),
          };
        } catch (e) {
          return {
            healthy: false, latencyMs: Math.round(performance.now() - t0), datastoreType: TYPE,
            message: (e as Error).message,
          };
        }
      },
    };
  }
  async registerNamespace(datastorePath: string, namespace: string, repoId: string) {
    await this.agentIn(datastorePath.replace(/\/\.swamp\/?$/, "")).call({ op: "ns.register", namespace, repoId });
  }
  listNamespaces(datastorePath: string): Promise<string[]> {
    return this.agentIn(datastorePath.replace(/\/\.swamp\/?$/, "")).call({ op: "ns.list" });
  }
}

export const datastore = {
  type: "@syncledger/datastore",
  name: "syncledger",
  description: "swamp's datastore on a syncledger ledger (NATS JetStream log + blob store)",
  configSchema,
  createProvider(config: Record<string, unknown>) {
    return new Provider(configSchema.parse(config));
  },
};
