// launcher.js runs one of this package's Go binaries, the one built for
// this platform, which npm installed from the optional dependency that
// lib/platforms.json names (scripts/release writes that file). It stands
// between the binary and whoever launched it (npx, an MCP client) as
// thinly as Node allows:
//
//   - argv is passed on as it is;
//   - stdout and stderr are the launcher's own, inherited: the binary
//     writes to them directly, nothing is copied;
//   - stdin is copied through a pipe that only this process holds, so when
//     the launcher dies, even by SIGKILL, the binary reads end-of-file and
//     stops (an MCP server on stdio stops at EOF). That needs no
//     prctl(PR_SET_PDEATHSIG), which exists on Linux only, so it works on
//     macOS too;
//   - SIGINT, SIGTERM and SIGHUP are passed to the binary, and the launcher
//     waits for it to exit;
//   - when the launcher's parent dies while stdin is still open, the binary
//     gets SIGTERM: `npx` runs the launcher under `sh -c`, and a SIGTERM to
//     npx alone reaches that shell, which dies without passing it on, so
//     without this the binary would run until the client closed stdin;
//   - the binary's exit status is the launcher's; if a signal killed it,
//     the launcher dies of the same signal.
//
// No install script, no download: the binary is already on disk.
"use strict";

const childProcess = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"];

// How often the launcher checks that its parent is alive, in milliseconds.
const PARENT_CHECK_MS = 500;

function fail(message) {
  process.stderr.write(message + "\n");
  process.exit(1);
}

// binaryPath returns the path of the binary called name in the package
// built for this platform.
function binaryPath(name) {
  const platforms = require("./platforms.json");
  // The package's own name, for the messages only: read when one is due.
  const main = () => require("../package.json").name;
  const key = process.platform + "-" + process.arch;
  const pkg = platforms[key];
  if (!pkg) {
    fail(`${main()}: no ${name} binary for ${key}; this release has ${Object.keys(platforms).join(", ")}`);
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(pkg + "/package.json"));
  } catch (err) {
    fail(`${main()}: the package ${pkg}, which holds the ${key} binaries, is not installed. ` +
      `npm installs it as an optional dependency of ${main()}; it was left out ` +
      `(--omit=optional, --no-optional, or a lock file made on another platform). ` +
      `Install ${main()} again without that.`);
  }
  const bin = path.join(dir, "bin", name);
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch (err) {
    // A package manager that dropped the executable bit: put it back.
    try {
      fs.chmodSync(bin, 0o755);
    } catch (_) {
      // spawn reports what is wrong.
    }
  }
  return bin;
}

// launch runs the binary called name with this process's arguments, and
// exits as it exits.
function launch(name) {
  const bin = binaryPath(name);

  // The signal handlers and the parent's PID are taken before the child
  // starts: a signal that came, or a parent that died, between the spawn
  // and these lines would otherwise kill the launcher without a word to
  // the child, or never be noticed. The handlers run from the event loop,
  // after child is set.
  const forward = {};
  let child;
  for (const sig of FORWARDED) {
    forward[sig] = () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(sig);
      }
    };
    process.on(sig, forward[sig]);
  }
  const parent = process.ppid;

  child = childProcess.spawn(bin, process.argv.slice(2), { stdio: ["pipe", "inherit", "inherit"] });

  // stdin: copied as it comes; its end is the child's end. Writing after
  // the child exited fails with EPIPE, which is of no interest: the exit
  // handler below decides.
  child.stdin.on("error", () => {});
  process.stdin.on("error", () => child.stdin.end());
  process.stdin.pipe(child.stdin);

  // The parent's death: the process is re-parented and ppid changes. Once
  // stdin has ended (a server run with stdin at /dev/null under nohup,
  // say) the parent no longer matters.
  const watch = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(watch);
      forward.SIGTERM();
    }
  }, PARENT_CHECK_MS);
  watch.unref();
  process.stdin.on("end", () => clearInterval(watch));

  child.on("error", (err) => fail(`${name}: cannot run ${bin}: ${err.message}`));
  child.on("exit", (code, signal) => {
    for (const sig of FORWARDED) {
      process.removeListener(sig, forward[sig]);
    }
    if (signal) {
      // Die of the same signal, so the parent sees what the child did;
      // the status 128+n is a shell's way of saying the same, in case the
      // signal does not end this process.
      process.kill(process.pid, signal);
      process.exit(128 + (os.constants.signals[signal] || 0));
    }
    process.exit(code);
  });
}

module.exports = { launch };
