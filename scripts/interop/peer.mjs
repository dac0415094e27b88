// peer runs one harsh workload against helios (mcpkeep) and against
// @modelcontextprotocol/server-memory, the server a user would otherwise
// pick for "an MCP server that keeps state on disk", and counts
// acknowledged writes that are missing afterwards:
//
//  1. burst:   20 writes pipelined in one burst, then stdin is closed;
//  2. two:     two server processes on one home / one data file, each sent
//              10 pipelined writes at the same moment (helios: the second
//              attaches to the first, the home's one writer);
//  3. kill:    SIGKILL during a stream of writes, restart, repeated;
//  4. cold:    spawn to initialize response, median of N runs.
//
// A write is acknowledged when its tools/call response is a result that is
// not an error. What is on disk afterwards is read back through a fresh
// process of the same server. helios losing an acknowledged write fails
// the script; the peer's losses are reported only.
//
//	node peer.mjs HELIOS_BINARY SERVER_MEMORY_INDEX_JS [RESULTS_JSON [GOSDK_SERVER]]
//
// With GOSDK_SERVER (the go-sdk everything-server binary), its cold start
// over stdio is measured too, as a reference for a bare go-sdk server.
//
// Env: INTEROP_COLD_RUNS (default 11), INTEROP_KILL_ROUNDS (default 5).

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Checker, Rpc, median, ok, sleep, withTimeout } from "./lib.mjs";

const [helios, memoryJS, resultsPath, gosdkServer] = process.argv.slice(2);
if (!helios || !memoryJS) {
  console.error("usage: node peer.mjs HELIOS_BINARY SERVER_MEMORY_INDEX_JS [RESULTS_JSON]");
  process.exit(2);
}
const COLD_RUNS = Number(process.env.INTEROP_COLD_RUNS ?? 11);
const KILL_ROUNDS = Number(process.env.INTEROP_KILL_ROUNDS ?? 5);

const tmp = mkdtempSync(join(tmpdir(), "interop-peer-"));
let storeN = 0;

const servers = [
  {
    id: "helios",
    ours: true,
    newStore: () => join(tmp, `helios-home-${storeN++}`),
    start: (store) => new Rpc(helios, ["--home", store, "--registry", ""]),
    write: (rpc, tag) => rpc.callMsg("update_preference", { key: tag, value: `v-${tag}` }),
    async readBack(store) {
      const r = this.start(store);
      try {
        await r.initialize();
        const res = await r.call("get_persona", {});
        return new Set(Object.keys(res.structuredContent?.preferences ?? {}));
      } finally {
        await r.stop();
      }
    },
  },
  {
    id: "server-memory",
    ours: false,
    newStore: () => {
      const dir = join(tmp, `memory-${storeN++}`);
      mkdirSync(dir);
      return join(dir, "memory.jsonl");
    },
    start: (store) => new Rpc(process.execPath, [memoryJS], { env: { MEMORY_FILE_PATH: store } }),
    write: (rpc, tag) =>
      rpc.callMsg("create_entities", { entities: [{ name: tag, entityType: "interop", observations: [`v-${tag}`] }] }),
    async readBack(store) {
      const r = this.start(store);
      try {
        await r.initialize();
        const res = await r.call("read_graph", {});
        const g = res.structuredContent ?? JSON.parse(res.content?.[0]?.text ?? "{}");
        return new Set((g.entities ?? []).map((e) => e.name));
      } finally {
        await r.stop();
      }
    },
  },
];

// pipeline writes all msgs in one write(2)-sized burst.
function pipeline(rpc, msgs) {
  rpc.child.stdin.write(msgs.map((m) => JSON.stringify(m) + "\n").join(""));
}

function acked(rpc, msgs, tags) {
  return tags.filter((_, i) => ok(rpc.responses.get(msgs[i].id)));
}

function answered(rpc, msgs) {
  return msgs.filter((m) => rpc.responses.has(m.id)).length;
}

async function burst(s) {
  const store = s.newStore();
  const rpc = s.start(store);
  await rpc.initialize();
  const tags = Array.from({ length: 20 }, (_, i) => `burst-${String(i).padStart(2, "0")}`);
  const msgs = tags.map((t) => s.write(rpc, t));
  pipeline(rpc, msgs);
  const exit = await rpc.stop(20000);
  const ack = acked(rpc, msgs, tags);
  const disk = await s.readBack(store);
  return {
    writes: tags.length,
    answered: answered(rpc, msgs),
    acked: ack.length,
    persisted: tags.filter((t) => disk.has(t)).length,
    lost: ack.filter((t) => !disk.has(t)).length,
    exit: exit.code,
    badLines: rpc.badLines.length,
  };
}

async function two(s) {
  const store = s.newStore();
  const a = s.start(store);
  await a.initialize();
  const b = s.start(store);
  let bUp = true;
  try {
    await Promise.race([
      b.initialize(),
      b.exited.then((e) => {
        throw new Error(`exited ${e.code}`);
      }),
    ]);
  } catch {
    bUp = false;
  }
  let secondRole;
  if (bUp && s.ours) {
    const info = await b.call("server_info", {});
    secondRole = info?.structuredContent?.process?.role; // helios: attached to the first
  }
  const tagsA = Array.from({ length: 10 }, (_, i) => `two-a-${i}`);
  const tagsB = Array.from({ length: 10 }, (_, i) => `two-b-${i}`);
  const msgsA = tagsA.map((t) => s.write(a, t));
  const msgsB = tagsB.map((t) => s.write(b, t));
  pipeline(a, msgsA);
  pipeline(b, msgsB);
  const [ea, eb] = await Promise.all([a.stop(20000), b.stop(20000)]);
  const ack = [...acked(a, msgsA, tagsA), ...acked(b, msgsB, tagsB)];
  const disk = await s.readBack(store);
  return {
    writes: 20,
    secondRan: bUp,
    secondRole,
    secondExit: eb.code,
    acked: ack.length,
    persisted: [...tagsA, ...tagsB].filter((t) => disk.has(t)).length,
    lost: ack.filter((t) => !disk.has(t)).length,
    exitA: ea.code,
  };
}

async function kill(s) {
  const store = s.newStore();
  const ack = [];
  const sequential = new Set(); // writes each waited for before the next was sent
  let restartsFailed = 0;
  let writes = 0;
  const delays = [0, 5, 20, 50, 100]; // ms from the pipelined writes to the kill
  for (let round = 0; round < KILL_ROUNDS; round++) {
    const rpc = s.start(store);
    try {
      await rpc.initialize();
    } catch (err) {
      restartsFailed++;
      console.log(`  ${s.id}: restart ${round} failed: ${err.message}\n${rpc.stderr.slice(-2000)}`);
      rpc.kill();
      await rpc.exited;
      continue;
    }
    // A stream: one write at a time, each waited for; then five more
    // pipelined, and SIGKILL a few ms later, mid-write.
    const before = 3 + 2 * round;
    const tags = Array.from({ length: before + 5 }, (_, i) => `kill-r${round}-w${String(i).padStart(2, "0")}`);
    const msgs = [];
    for (let i = 0; i < before; i++) {
      sequential.add(tags[i]);
      const m = s.write(rpc, tags[i]);
      msgs.push(m);
      rpc.send(m);
      await withTimeout(rpc.response(m.id), 10000, `${s.id} write ${tags[i]}`);
    }
    const rest = tags.slice(before).map((t) => s.write(rpc, t));
    msgs.push(...rest);
    pipeline(rpc, rest);
    await sleep(delays[round % delays.length]);
    rpc.kill("SIGKILL");
    await rpc.exited;
    writes += tags.length;
    ack.push(...acked(rpc, msgs, tags));
  }
  let disk;
  try {
    disk = await s.readBack(store);
  } catch (err) {
    restartsFailed++;
    console.log(`  ${s.id}: final restart failed: ${err.message}`);
    disk = new Set();
  }
  return {
    rounds: KILL_ROUNDS,
    writes,
    acked: ack.length,
    lost: ack.filter((t) => !disk.has(t)).length,
    lostSequential: ack.filter((t) => !disk.has(t) && sequential.has(t)).length,
    lostTags: ack.filter((t) => !disk.has(t)),
    restartsFailed,
  };
}

async function cold(s) {
  // An existing store: the server has run once before (what a client's
  // respawn sees), then N cold starts to the initialize response.
  const store = s.newStore();
  const first = s.start(store);
  await first.initialize();
  const w = s.write(first, "warm");
  first.send(w);
  if (!ok(await withTimeout(first.response(w.id), 10000, `${s.id} warm-up write`))) throw new Error("warm-up write failed");
  await first.stop();
  const ms = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    const r = s.start(store);
    ms.push(await r.initialize());
    await r.stop();
  }
  // A fresh store each time: first install (helios bootstraps its home).
  const fresh = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    const r = s.start(s.newStore());
    fresh.push(await r.initialize());
    await r.stop();
  }
  return { runs: COLD_RUNS, medianMs: median(ms), minMs: Math.min(...ms), maxMs: Math.max(...ms), freshMedianMs: median(fresh) };
}

// bareCold measures spawn to initialize response of a server with no store.
async function bareCold(cmd) {
  const ms = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    const r = new Rpc(cmd, []);
    ms.push(await r.initialize());
    await r.stop();
  }
  return { runs: COLD_RUNS, medianMs: median(ms), minMs: Math.min(...ms), maxMs: Math.max(...ms) };
}

const c = new Checker("peer");
const results = {};
try {
  for (const s of servers) {
    const r = (results[s.id] = {});
    for (const [name, fn] of [
      ["burst", burst],
      ["two", two],
      ["kill", kill],
      ["cold", cold],
    ]) {
      try {
        r[name] = await fn(s);
      } catch (err) {
        r[name] = { error: String(err?.message ?? err) };
      }
      console.log(`  ${s.id} ${name}: ${JSON.stringify(r[name])}`);
    }
  }
  if (gosdkServer) {
    try {
      results.reference = { gosdkCold: await bareCold(gosdkServer) };
    } catch (err) {
      results.reference = { error: String(err?.message ?? err) };
    }
    console.log(`  go-sdk everything-server (stdio, no store) cold: ${JSON.stringify(results.reference)}`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const h = results.helios;
c.check("helios burst: ran", !h.burst.error, h.burst.error);
c.check("helios burst: 0 acknowledged writes lost", h.burst.lost === 0, `lost ${h.burst.lost}`);
c.check("helios burst: all 20 pipelined writes answered before exit", h.burst.answered === 20, `answered ${h.burst.answered}`);
c.check("helios two: ran", !h.two.error, h.two.error);
c.check("helios two: the second process attached to the first and ran, exit 0",
  h.two.secondRan === true && h.two.secondRole === "attached" && h.two.secondExit === 0, JSON.stringify(h.two));
c.check("helios two: all 20 writes acknowledged", h.two.acked === 20, JSON.stringify(h.two));
c.check("helios two: 0 acknowledged writes lost", h.two.lost === 0, `lost ${h.two.lost}`);
c.check("helios kill: ran", !h.kill.error, h.kill.error);
c.check("helios kill: every restart after SIGKILL came up", h.kill.restartsFailed === 0, JSON.stringify(h.kill));
c.check("helios kill: 0 acknowledged writes lost", h.kill.lost === 0, `lost ${h.kill.lost}`);
c.check("helios cold: ran", !h.cold.error, h.cold.error);
for (const s of servers.filter((s) => !s.ours)) {
  for (const [name, r] of Object.entries(results[s.id])) {
    if (r.error) console.log(`  note  ${s.id} ${name}: did not complete: ${r.error}`);
  }
}

const fmt = (r, f) => (r?.error ? "error" : f(r));
console.log("\n| workload | " + servers.map((s) => s.id).join(" | ") + " |");
console.log("|---|" + servers.map(() => "---").join("|") + "|");
const row = (label, f) => console.log(`| ${label} | ` + servers.map((s) => f(results[s.id])).join(" | ") + " |");
row("burst: 20 pipelined writes → answered / acked / on disk / **lost**", (r) =>
  fmt(r.burst, (x) => `${x.answered} / ${x.acked} / ${x.persisted} / **${x.lost}**`),
);
row("two processes, one store: second process", (r) =>
  fmt(r.two, (x) => (x.secondRan ? (x.secondRole === "attached" ? "ran, attached to the first (one writer)" : "ran") : `refused (exit ${x.secondExit})`)),
);
row("two processes: 20 writes → acked / on disk / **lost**", (r) =>
  fmt(r.two, (x) => `${x.acked} / ${x.persisted} / **${x.lost}**`),
);
row(`SIGKILL mid-stream × ${KILL_ROUNDS}: writes sent / acked / **lost** (of them waited-for) / failed restarts`, (r) =>
  fmt(r.kill, (x) => `${x.writes} / ${x.acked} / **${x.lost}** (${x.lostSequential}) / ${x.restartsFailed}`),
);
row(`cold start to initialize, existing store (median of ${COLD_RUNS}, min–max)`, (r) =>
  fmt(r.cold, (x) => `${x.medianMs.toFixed(1)} ms (${x.minMs.toFixed(1)}–${x.maxMs.toFixed(1)})`),
);
row(`cold start to initialize, fresh store (median of ${COLD_RUNS})`, (r) =>
  fmt(r.cold, (x) => `${x.freshMedianMs.toFixed(1)} ms`),
);
const ref = results.reference?.gosdkCold;
if (ref) {
  console.log(
    `\nreference: a bare go-sdk server (everything-server, stdio, no home): cold start median of ${ref.runs} ` +
      `${ref.medianMs.toFixed(1)} ms (${ref.minMs.toFixed(1)}–${ref.maxMs.toFixed(1)})`,
  );
}
console.log("");
if (resultsPath) writeFileSync(resultsPath, JSON.stringify({ node: process.version, results }, null, 2) + "\n");
c.done();
