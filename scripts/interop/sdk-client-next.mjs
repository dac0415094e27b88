// sdk-client-next drives helios with the TypeScript SDK's newest client
// line (@modelcontextprotocol/client 2.x), over stdio and over Streamable
// HTTP with the bearer token, once for each of its version negotiation
// modes: { pin: "2026-07-28" } (the current protocol: server/discover,
// no initialize, no session), "auto" (probe server/discover, fall back to
// initialize) and "legacy" (initialize). Each run lists the tools, updates
// a preference, reads it back, and checks that server_info names the
// version the client negotiated.
//
//	node sdk-client-next.mjs HELIOS_BINARY

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

import { Checker, Rpc, sleep, withTimeout } from "./lib.mjs";

const helios = process.argv[2];
if (!helios) {
  console.error("usage: node sdk-client-next.mjs HELIOS_BINARY");
  process.exit(2);
}

const c = new Checker("sdk-client-next");
const tmp = mkdtempSync(join(tmpdir(), "interop-sdk-next-"));
const modes = [
  ["pin 2026-07-28", { pin: "2026-07-28" }, "2026-07-28"],
  ["auto", "auto", "2026-07-28"],
  ["legacy", "legacy", "2025-11-25"],
];

// drive connects a client in mode over transport and runs the checks.
async function drive(label, mode, want, transport) {
  const client = new Client({ name: "mcpkeep-interop-sdk-next", version: "0" }, { versionNegotiation: { mode } });
  try {
    await withTimeout(client.connect(transport), 15000, `${label}: connect`);
    const got = client.getNegotiatedProtocolVersion();
    c.check(`${label}: negotiates ${want}`, got === want, `negotiated ${got}`);
    const { tools } = await client.listTools();
    c.check(`${label}: tools/list lists the nine tools`, tools.length === 9, tools.map((t) => t.name).join(","));
    const value = `from-${mode.pin ?? mode}`.replace(/[^A-Za-z0-9_.-]/g, "-");
    const up = await client.callTool({ name: "update_preference", arguments: { key: "interop_next", value } });
    c.check(`${label}: update_preference commits`, /^[0-9a-f]{40}$/.test(up.structuredContent?.commit ?? ""), JSON.stringify(up.structuredContent));
    const gp = await client.callTool({ name: "get_persona", arguments: {} });
    c.check(`${label}: get_persona reads the preference back`, gp.structuredContent?.preferences?.interop_next === value, JSON.stringify(gp.structuredContent));
    const si = await client.callTool({ name: "server_info", arguments: {} });
    c.check(`${label}: server_info names the negotiated version`, si.structuredContent?.protocol === got, JSON.stringify(si.structuredContent?.protocol));
  } catch (err) {
    c.check(`${label}: run completed`, false, String(err?.stack ?? err));
  } finally {
    await client.close().catch(() => {});
  }
}

let server;
try {
  for (const [name, mode, want] of modes) {
    const transport = new StdioClientTransport({
      command: helios,
      args: ["--home", join(tmp, "stdio-home"), "--registry", ""],
      stderr: "ignore",
    });
    await drive(`stdio ${name}`, mode, want, transport);
  }

  const home = join(tmp, "http-home");
  server = new Rpc(helios, ["--home", home, "--registry", "", "--http", "127.0.0.1:0"]);
  let st;
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    try {
      st = JSON.parse(readFileSync(join(home, "state.json"), "utf8"));
      if (st.status === "ready") break;
    } catch {}
    await sleep(20);
  }
  c.check("http: helios is ready", st?.status === "ready", JSON.stringify(st));
  for (const [name, mode, want] of modes) {
    const transport = new StreamableHTTPClientTransport(new URL(st.http.url), {
      requestInit: { headers: { Authorization: `Bearer ${st.token}` } },
    });
    await drive(`http ${name}`, mode, want, transport);
  }
  const e = await server.stop(5000);
  c.check("http: helios stopped cleanly on stdin EOF", e.code === 0 && !e.forced, JSON.stringify(e));
} catch (err) {
  c.check("sdk-client-next run completed", false, String(err?.stack ?? err));
} finally {
  server?.kill();
  rmSync(tmp, { recursive: true, force: true });
}
c.done();
