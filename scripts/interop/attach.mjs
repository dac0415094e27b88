// attach checks issue 13 end to end with two SDKs: three go-sdk clients
// (internal/testclient/burst, mcp.CommandTransport) and the official
// TypeScript SDK client (StdioClientTransport) each launch helios on one
// new home at the same moment, as MCP hosts do. One helios becomes the
// writer, the others attach to it. Every client must initialize; each
// makes 50 update_preference calls with distinct keys, all in flight at
// once: 200 answers, 200 commits, every value on disk. Once every client
// has gone, no helios, socket or state file may be left.
//
//	node attach.mjs HELIOS_BINARY BURST_BINARY

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { Checker, sleep, spawnTracked, withTimeout } from "./lib.mjs";

const [helios, burst] = process.argv.slice(2);
if (!helios || !burst) {
  console.error("usage: node attach.mjs HELIOS_BINARY BURST_BINARY");
  process.exit(2);
}
const N = 50;
const c = new Checker("attach");
const tmp = mkdtempSync(join(tmpdir(), "interop-attach-"));
const home = join(tmp, "home");
const heliosArgs = ["--home", home, "--registry", ""];

// runGo runs one go-sdk client and resolves to its report line.
function runGo(name, at) {
  return new Promise((resolve) => {
    const child = spawnTracked(burst, ["-name", name, "-n", String(N), "-at", String(at), "--", helios, ...heliosArgs], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => {
      try {
        resolve({ code, ...JSON.parse(out.trim().split("\n").pop()) });
      } catch {
        resolve({ code, client: name, initialized: false, calls: [], stderr: err });
      }
    });
  });
}

// runNode is the TypeScript SDK client, launched at the same moment.
async function runNode(name, at) {
  await sleep(Math.max(0, at - Date.now()));
  const transport = new StdioClientTransport({ command: helios, args: heliosArgs, stderr: "pipe" });
  const client = new Client({ name: "mcpkeep-interop-attach", version: "0" });
  const r = { client: name, initialized: false, calls: [] };
  try {
    await withTimeout(client.connect(transport), 30000, "connect");
    r.initialized = true;
    const info = await client.callTool({ name: "server_info", arguments: {} });
    r.role = info.structuredContent?.process?.role;
    r.calls = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const call = { key: `${name}${String(i).padStart(2, "0")}`, value: `v${String(i).padStart(2, "0")}` };
        try {
          const res = await client.callTool(
            { name: "update_preference", arguments: { key: call.key, value: call.value } },
            undefined,
            { timeout: 60000 },
          );
          if (res.isError) call.error = JSON.stringify(res.content);
          else call.commit = res.structuredContent?.commit;
        } catch (e) {
          call.error = String(e);
        }
        return call;
      }),
    );
  } catch (e) {
    r.error = String(e);
  } finally {
    await client.close();
  }
  return r;
}

// readBack reads the default persona's preferences through a helios of
// its own, once every client has gone.
async function readBack() {
  const transport = new StdioClientTransport({ command: helios, args: heliosArgs, stderr: "pipe" });
  const client = new Client({ name: "mcpkeep-interop-attach-check", version: "0" });
  await withTimeout(client.connect(transport), 30000, "connect");
  try {
    const res = await client.callTool({ name: "get_persona", arguments: {} });
    return res.structuredContent?.preferences ?? {};
  } finally {
    await client.close();
  }
}

// gone waits until no process runs helios on this home.
async function gone() {
  for (let i = 0; i < 200; i++) {
    const ps = execFileSync("ps", ["-eo", "args"], { encoding: "utf8" });
    if (!ps.split("\n").some((l) => l.includes(helios) && l.includes(home))) return true;
    await sleep(50);
  }
  return false;
}

try {
  const at = Date.now() + 1000;
  const reports = await Promise.all([runGo("go0", at), runGo("go1", at), runGo("go2", at), runNode("node", at)]);
  for (const r of reports) {
    c.check(`${r.client}: initialized`, r.initialized, r.error ?? r.stderr ?? "");
  }
  const node = reports.find((r) => r.client === "node");
  c.check("node: server_info says writer or attached", node.role === "writer" || node.role === "attached", String(node.role));
  const calls = reports.flatMap((r) => r.calls);
  const answered = calls.filter((x) => x.commit);
  c.check(`200 update_preference calls answered with a commit`, answered.length === 4 * N,
    `${answered.length}; errors: ${JSON.stringify(calls.filter((x) => x.error).slice(0, 3))}`);
  c.check("every helios exited once its client went", await gone(), "a helios still runs on " + home);
  c.check("no socket left", !existsSync(join(home, "mcp.sock")), join(home, "mcp.sock"));
  c.check("no state file left", !existsSync(join(home, "state.json")), join(home, "state.json"));
  const log = execFileSync("git", ["-C", join(home, "config"), "log", "--format=%s"], { encoding: "utf8" });
  const commits = log.split("\n").filter((s) => s.startsWith("update_preference ")).length;
  c.check("200 commits", commits === 4 * N, `${commits} update_preference commits`);
  const prefs = await readBack();
  const missing = answered.filter((x) => prefs[x.key] !== x.value);
  c.check("every acknowledged value on disk", missing.length === 0, JSON.stringify(missing.slice(0, 3)));
  console.log(`attach: ${reports.length} clients (go-sdk x3, TypeScript SDK), ${answered.length} answers, ${commits} commits`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
c.done();
