// inspector drives helios with the official MCP Inspector CLI (v2,
// `inspector --cli`) over stdio and over Streamable HTTP with the bearer
// token from <home>/state.json, and checks the JSON it prints. Each
// transport is driven twice: with the initialize-era protocol
// (`--protocol-era legacy`) and with the newest it offers, 2026-07-28
// (`--protocol-era modern`); server_info must name the version spoken.
//
//	node inspector.mjs HELIOS_BINARY INSPECTOR_BIN

import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Checker, Rpc, sleep, withTimeout } from "./lib.mjs";

const [helios, inspector] = process.argv.slice(2);
if (!helios || !inspector) {
  console.error("usage: node inspector.mjs HELIOS_BINARY INSPECTOR_BIN");
  process.exit(2);
}

const c = new Checker("inspector");
const tmp = mkdtempSync(join(tmpdir(), "interop-inspector-"));
// The inspector keeps a catalog and storage under $HOME: point both into tmp.
const env = { ...process.env, HOME: tmp, MCP_CATALOG_PATH: join(tmp, "catalog.json"), CI: "true" };

// run runs the inspector CLI and returns its exit code, stdout and stderr.
function run(args) {
  return new Promise((resolve) => {
    execFile(inspector, ["--cli", ...args], { env, timeout: 60000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

function parse(out) {
  try {
    return JSON.parse(out.stdout);
  } catch {
    return undefined;
  }
}

// eras are the inspector's --protocol-era values run, with the protocol
// version helios must then report.
const eras = [
  ["legacy", "2025-11-25"],
  ["modern", "2026-07-28"],
];

// checkSuite runs tools/list, update_preference, get_config and
// server_info against target with --protocol-era era.
async function checkSuite(label, target, value, era, version) {
  label = `${label} (${era})`;
  target = [...target, "--protocol-era", era];
  const list = await run([...target, "--method", "tools/list"]);
  const tl = parse(list);
  const names = (tl?.tools ?? []).map((t) => t.name);
  c.check(`${label}: tools/list exits 0`, list.code === 0, `exit ${list.code}: ${list.stderr.slice(-500)}`);
  c.check(
    `${label}: tools/list prints the nine tools as JSON`,
    names.length === 9 && names.includes("update_preference") && names.includes("get_config"),
    list.stdout.slice(0, 300),
  );
  const up = await run([
    ...target,
    "--method",
    "tools/call",
    "--tool-name",
    "update_preference",
    "--tool-arg",
    "key=tone",
    `value=${value}`,
  ]);
  const u = parse(up);
  c.check(`${label}: update_preference exits 0`, up.code === 0, `exit ${up.code}: ${up.stderr.slice(-500)}`);
  c.check(
    `${label}: update_preference prints a commit`,
    u?.isError !== true && /^[0-9a-f]{40}$/.test(u?.structuredContent?.commit ?? ""),
    up.stdout.slice(0, 300),
  );
  const gc = await run([...target, "--method", "tools/call", "--tool-name", "get_config"]);
  const g = parse(gc);
  c.check(`${label}: get_config exits 0`, gc.code === 0, `exit ${gc.code}: ${gc.stderr.slice(-500)}`);
  c.check(
    `${label}: get_config prints the new preference`,
    g?.structuredContent?.active?.preferences?.tone === value,
    gc.stdout.slice(0, 400),
  );
  // The text content mirrors the structured content.
  let text;
  try {
    text = JSON.parse(g?.content?.[0]?.text ?? "");
  } catch {}
  c.check(
    `${label}: get_config text content equals the structured content`,
    JSON.stringify(text) === JSON.stringify(g?.structuredContent),
    gc.stdout.slice(0, 400),
  );
  const si = await run([...target, "--method", "tools/call", "--tool-name", "server_info"]);
  const protocol = parse(si)?.structuredContent?.protocol;
  c.check(`${label}: server_info names protocol ${version}`, protocol === version, `got ${protocol}: ${si.stderr.slice(-300)}`);
}

let server;
try {
  // stdio: the inspector spawns helios itself, once per call.
  const stdioHome = join(tmp, "stdio-home");
  for (const [era, version] of eras) {
    await checkSuite("stdio", [helios, "--home", stdioHome, "--registry", ""], `terse-stdio-${era}`, era, version);
  }
  c.check("stdio: helios removed its state file after each run", !existsSync(join(stdioHome, "state.json")));

  // HTTP: we start helios (its stdin stays open) and the inspector connects.
  const httpHome = join(tmp, "http-home");
  server = new Rpc(helios, ["--home", httpHome, "--registry", "", "--http", "127.0.0.1:0"]);
  let st;
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    try {
      st = JSON.parse(readFileSync(join(httpHome, "state.json"), "utf8"));
      if (st.status === "ready") break;
    } catch {}
    await sleep(20);
  }
  const url = st?.http?.url;
  c.check("http: state.json names a loopback URL and a token", /^http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(url ?? "") && /^[0-9a-f]{64}$/.test(st?.token ?? ""), JSON.stringify(st));
  const auth = ["--transport", "http", "--header", `Authorization: Bearer ${st?.token}`];
  for (const [era, version] of eras) {
    await checkSuite("http", [url, ...auth], `terse-http-${era}`, era, version);
  }

  const noTok = await run([url, "--transport", "http", "--method", "tools/list"]);
  c.check("http: without the token the inspector is refused (non-zero exit, no tools)", noTok.code !== 0 && parse(noTok)?.tools === undefined, `exit ${noTok.code}: ${noTok.stdout.slice(0, 200)}`);
  const badTok = await run([url, "--transport", "http", "--header", "Authorization: Bearer 00", "--method", "tools/list"]);
  c.check("http: with a wrong token the inspector is refused", badTok.code !== 0 && parse(badTok)?.tools === undefined, `exit ${badTok.code}: ${badTok.stdout.slice(0, 200)}`);

  const e = await server.stop(5000);
  c.check("http: helios stopped cleanly on stdin EOF", e.code === 0 && !e.forced, JSON.stringify(e));
  c.check("http: helios removed its state file", !existsSync(join(httpHome, "state.json")));
} catch (err) {
  c.check("inspector run completed", false, String(err?.stack ?? err));
} finally {
  server?.kill();
  if (c.failed > 0 && server) console.log("--- helios (http) stderr ---\n" + server.stderr);
  rmSync(tmp, { recursive: true, force: true });
}
c.done();
