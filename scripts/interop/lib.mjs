// Shared helpers for the interop scripts: a raw newline-delimited JSON-RPC
// client over a child's stdin/stdout (no SDK, so pipelining and kills are
// under our control), child bookkeeping so nothing outlives the script,
// and small check/report utilities.

import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";

export const PROTOCOL = "2025-06-18";

const children = new Set();

function killAll() {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      try {
        c.kill("SIGKILL");
      } catch {}
    }
  }
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });
}

// spawnTracked spawns a child that is SIGKILLed if this script exits first.
export function spawnTracked(cmd, args, opts) {
  const c = spawn(cmd, args, opts);
  children.add(c);
  c.on("exit", () => children.delete(c));
  return c;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function withTimeout(p, ms, what) {
  let t;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, rej) => {
      t = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]);
}

// Rpc drives one server process over stdio with raw JSON-RPC lines.
export class Rpc {
  constructor(cmd, args, { env = {}, cwd } = {}) {
    this.t0 = performance.now();
    this.child = spawnTracked(cmd, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...env },
      cwd,
    });
    this.waiters = new Map();
    this.responses = new Map();
    this.badLines = [];
    this.stderr = "";
    this.nextId = 1;
    this.exited = new Promise((resolve) =>
      this.child.on("exit", (code, signal) => resolve({ code, signal, at: performance.now() })),
    );
    this.child.stdin.on("error", () => {}); // EPIPE after the child died: expected here
    this.child.stderr.on("data", (d) => {
      this.stderr += d;
    });
    let buf = "";
    this.child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim() === "") continue;
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          this.badLines.push(line);
          continue;
        }
        this.#onMessage(msg);
      }
    });
  }

  #onMessage(msg) {
    if (msg.id !== undefined && msg.method === undefined) {
      this.responses.set(msg.id, msg);
      const w = this.waiters.get(msg.id);
      if (w) {
        this.waiters.delete(msg.id);
        w(msg);
      }
    } else if (msg.id !== undefined && msg.method !== undefined) {
      // A server-to-client request (roots/list, ...): we declared no
      // capabilities, so refuse it.
      this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "client supports no requests" } });
    }
  }

  send(obj) {
    if (!this.child.stdin.writable) return;
    this.child.stdin.write(JSON.stringify(obj) + "\n");
  }

  // requestMsg returns a request object with a fresh id, not yet sent.
  requestMsg(method, params) {
    return { jsonrpc: "2.0", id: this.nextId++, method, params };
  }

  // response resolves with the response to id (or never, if none comes).
  response(id) {
    if (this.responses.has(id)) return Promise.resolve(this.responses.get(id));
    return new Promise((r) => this.waiters.set(id, r));
  }

  async request(method, params, ms = 10000) {
    const m = this.requestMsg(method, params);
    this.send(m);
    return withTimeout(this.response(m.id), ms, `${method} response`);
  }

  initMsgs() {
    return this.requestMsg("initialize", {
      protocolVersion: PROTOCOL,
      capabilities: {},
      clientInfo: { name: "mcpkeep-interop", version: "0" },
    });
  }

  // initialize completes the handshake and returns the ms from spawn to the
  // initialize response.
  async initialize(ms = 10000) {
    const m = this.initMsgs();
    this.send(m);
    const r = await withTimeout(this.response(m.id), ms, "initialize response");
    if (r.error) throw new Error(`initialize: ${JSON.stringify(r.error)}`);
    const took = performance.now() - this.t0;
    this.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    return took;
  }

  callMsg(name, args) {
    return this.requestMsg("tools/call", { name, arguments: args });
  }

  async call(name, args, ms = 10000) {
    const r = await this.request("tools/call", { name, arguments: args }, ms);
    if (!ok(r)) throw new Error(`${name}: ${JSON.stringify(r.error ?? r.result)}`);
    return r.result;
  }

  endInput() {
    this.child.stdin.end();
  }

  kill(sig = "SIGKILL") {
    try {
      this.child.kill(sig);
    } catch {}
  }

  // stop closes stdin and waits up to ms for exit, then SIGKILLs.
  async stop(ms = 10000) {
    this.endInput();
    try {
      return await withTimeout(this.exited, ms, "exit after stdin EOF");
    } catch {
      this.kill();
      return { ...(await this.exited), forced: true };
    }
  }
}

// ok reports whether a tools/call response is an acknowledged success.
export function ok(r) {
  return r !== undefined && r.error === undefined && r.result !== undefined && r.result.isError !== true;
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// Checker collects named pass/fail checks and prints them.
export class Checker {
  constructor(prefix) {
    this.prefix = prefix;
    this.failed = 0;
    this.passed = 0;
  }
  check(name, cond, detail = "") {
    if (cond) {
      this.passed++;
      console.log(`  ok    ${this.prefix}: ${name}`);
    } else {
      this.failed++;
      console.log(`  FAIL  ${this.prefix}: ${name}${detail ? " — " + detail : ""}`);
    }
    return cond;
  }
  // done prints the closing count and sets the exit code.
  done() {
    console.log(`${this.prefix}: ${this.passed} passed, ${this.failed} failed`);
    if (this.failed > 0) process.exitCode = 1;
  }
}
