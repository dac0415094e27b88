// sdk-client drives helios with the official TypeScript SDK client
// (StdioClientTransport): it calls every tool, checks each structured
// result, closes, and checks that helios exited by itself, with status 0,
// within 1 s of stdin EOF.
//
//	node sdk-client.mjs HELIOS_BINARY

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { PassThrough } from "node:stream";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { Checker, withTimeout } from "./lib.mjs";

const helios = process.argv[2];
if (!helios) {
  console.error("usage: node sdk-client.mjs HELIOS_BINARY");
  process.exit(2);
}

const c = new Checker("sdk-client");
const home = mkdtempSync(join(tmpdir(), "interop-sdk-"));
const stderr = new PassThrough();
let logs = "";
stderr.on("data", (d) => (logs += d));

const transport = new StdioClientTransport({
  command: helios,
  args: ["--home", join(home, "h"), "--registry", ""],
  stderr: "pipe",
});
const client = new Client({ name: "mcpkeep-interop-sdk", version: "0" });

async function call(name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  c.check(`${name} answers without error`, r.isError !== true, JSON.stringify(r.content));
  return r.structuredContent ?? {};
}

try {
  await withTimeout(client.connect(transport), 10000, "connect");
  transport.stderr?.pipe(stderr);
  const info = client.getServerVersion();
  c.check("initialize names the server helios", info?.name === "helios", JSON.stringify(info));

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  const want = [
    "commit_changes",
    "get_config",
    "get_persona",
    "history",
    "list_personas",
    "rollback",
    "server_info",
    "set_active_persona",
    "update_preference",
  ];
  c.check("tools/list lists the nine tools", JSON.stringify(names) === JSON.stringify(want), names.join(","));

  const cfg = await call("get_config");
  c.check("get_config has base.active_persona", typeof cfg.base?.active_persona === "string", JSON.stringify(cfg));

  const lp = await call("list_personas");
  c.check(
    "list_personas lists the active persona",
    Array.isArray(lp.personas) && lp.personas.includes(lp.active),
    JSON.stringify(lp),
  );
  const other = (lp.personas ?? []).find((p) => p !== lp.active);
  c.check("list_personas has a second persona", other !== undefined, JSON.stringify(lp));

  const gp = await call("get_persona", { name: lp.active });
  c.check("get_persona returns the named persona", gp.name === lp.active, JSON.stringify(gp));

  const sa = await call("set_active_persona", { name: other });
  c.check("set_active_persona commits", /^[0-9a-f]{40}$/.test(sa.commit ?? ""), JSON.stringify(sa));
  const cfg2 = await call("get_config");
  c.check("get_config shows the new active persona", cfg2.base?.active_persona === other, JSON.stringify(cfg2.base));

  const up = await call("update_preference", { key: "interop_key", value: "from-sdk" });
  c.check("update_preference commits", /^[0-9a-f]{40}$/.test(up.commit ?? ""), JSON.stringify(up));
  const gp2 = await call("get_persona", {});
  c.check(
    "get_persona shows the preference on the active persona",
    gp2.name === other && gp2.preferences?.interop_key === "from-sdk",
    JSON.stringify(gp2),
  );

  const cc = await call("commit_changes", { message: "nothing by hand" });
  c.check("commit_changes finds nothing to commit", cc.commit === undefined || cc.commit === "", JSON.stringify(cc));

  const h = await call("history", { limit: 10 });
  const commits = h.commits ?? [];
  c.check(
    "history lists the two tool commits newest first",
    commits.length >= 3 && commits[0].hash === up.commit && commits[1].hash === sa.commit,
    JSON.stringify(commits.map((x) => x.message)),
  );

  const rb = await call("rollback", { rev: commits[2]?.hash ?? "HEAD~2" });
  c.check("rollback commits", /^[0-9a-f]{40}$/.test(rb.commit ?? ""), JSON.stringify(rb));
  const cfg3 = await call("get_config");
  c.check(
    "rollback restores the first active persona",
    cfg3.base?.active_persona === lp.active && cfg3.active?.preferences?.interop_key === undefined,
    JSON.stringify(cfg3),
  );

  const si = await call("server_info");
  c.check(
    "server_info reports this pid, stdio and no token",
    si.state?.pid === transport.pid && si.state?.stdio === true && !si.state?.token,
    JSON.stringify(si.state),
  );

  // Close: the SDK ends stdin, waits 2 s, then sends SIGTERM. helios must be
  // gone on its own, with status 0, well before that.
  const proc = transport._process; // the SDK keeps the child private
  if (!c.check("the SDK exposes the child process", proc !== undefined)) throw new Error("no child");
  const exited = new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal, at: performance.now() })));
  const t0 = performance.now();
  await client.close();
  const e = await exited;
  const ms = e.at - t0;
  c.check(`helios exited on stdin EOF within 1 s (${ms.toFixed(0)} ms)`, ms < 1000, `took ${ms.toFixed(0)} ms`);
  c.check("helios exited with status 0, not by signal", e.code === 0 && e.signal === null, JSON.stringify(e));
} catch (err) {
  c.check("client run completed", false, String(err?.stack ?? err));
  try {
    transport._process?.kill("SIGKILL");
  } catch {}
} finally {
  if (c.failed > 0) console.log("--- helios stderr ---\n" + logs);
  rmSync(home, { recursive: true, force: true });
}
c.done();
