// A hostile Node program for tests/executor/test_language_attacks.py: the first line of
// its stdin names an attack (and its arguments); see that module for what must come of it.
// Prints PWNED only where an attack worked, or (daemon) where the test itself is accepted.
"use strict";
const cp = require("child_process");
const dgram = require("dgram");
const dns = require("dns");
const fs = require("fs");
const http = require("http");
const net = require("net");
const path = require("path");
const { Worker } = require("worker_threads");

const MARKERS = ["/tmp/cobalt-daemon", "/dev/shm/cobalt-daemon", "cobalt-daemon"];
const RECORD = '00000000000000000000000000000000 {"status": "done"}\n';

function linger() {
  for (const sig of ["SIGTERM", "SIGHUP", "SIGINT"]) process.on(sig, () => {});
  const end = Date.now() + 20000;
  const tick = () => {
    for (const marker of MARKERS) {
      try {
        fs.closeSync(fs.openSync(marker, "a"));
      } catch (e) {}
    }
    if (Date.now() < end) setTimeout(tick, 5);
  };
  tick();
}

function spawnChild(options) {
  try {
    const child = cp.spawn(process.execPath, [__filename, "child"], { stdio: "ignore", ...options });
    child.on("error", () => {});
    child.unref();
  } catch (e) {}
}

function daemon() {
  spawnChild({ detached: true });
  spawnChild({});
  try {
    const child = cp.fork(__filename, ["child"], {
      detached: true,
      stdio: ["ignore", "ignore", "ignore", "ipc"],
    });
    child.on("error", () => {});
    child.unref();
    child.channel.unref();
  } catch (e) {}
  cp.exec("nohup sleep 60 &", () => {});
  process.on("exit", () => spawnChild({ detached: true }));
  setTimeout(() => {
    fs.writeSync(1, "PWNED\n");
    process.exit(0);
  }, 300);
}

function forge() {
  for (let fd = 3; fd < 64; fd++) {
    try {
      fs.writeSync(fd, RECORD);
    } catch (e) {}
  }
  for (const dir of ["/proc/self/fd", "/proc/1/fd"]) {
    for (let fd = dir === "/proc/self/fd" ? 3 : 0; fd < 64; fd++) {
      try {
        const out = fs.openSync(`${dir}/${fd}`, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
        fs.writeSync(out, RECORD);
        fs.closeSync(out);
      } catch (e) {}
    }
  }
  for (const name of ["record", "result.json", "/tmp/record", "/dev/shm/record"]) {
    try {
      fs.writeFileSync(name, RECORD);
    } catch (e) {}
  }
  for (const sig of ["SIGKILL", "SIGSTOP", "SIGTERM", "SIGINT", "SIGSEGV"]) {
    for (const pid of [1, -1]) {
      try {
        process.kill(pid, sig);
      } catch (e) {}
    }
  }
  fs.writeSync(2, RECORD);
  fs.writeSync(1, RECORD + "not the answer\n");
}

function slurp(file) {
  try {
    return fs.readFileSync(file, "latin1");
  } catch (e) {
    return "";
  }
}

function attempt(start) {
  // Resolves true if the connection or send succeeded, false on error or after 1 s.
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), 1000);
    try {
      start(
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        () => {
          clearTimeout(timer);
          resolve(false);
        },
      );
    } catch (e) {
      clearTimeout(timer);
      resolve(false);
    }
  });
}

function connectTo(options) {
  return attempt((ok, fail) => {
    const socket = net.connect(options, () => {
      socket.end("PWNED");
      ok();
    });
    socket.on("error", fail);
  });
}

async function escape(args) {
  const [secret, tcp, udp, unixPath, abstract] = args;
  let seen = "";
  for (const file of [secret, "/proc/1/root" + secret, "/proc/self/root" + secret,
                      "/etc/shadow", "/etc/passwd", "/proc/1/environ", "/root/.bash_history"]) {
    seen += slurp(file);
  }
  let won = seen.length > 0;
  for (const file of ["/cobalt-escape", "/usr/cobalt-escape", "/usr/lib/cobalt-escape",
                      "/dev/cobalt-escape", "/proc/1/root/cobalt-escape", secret + "-written",
                      "/proc/1/cwd/cobalt-escape"]) {
    try {
      fs.closeSync(fs.openSync(file, "w"));
      won = true;
    } catch (e) {}
  }
  const reached = await Promise.all([
    connectTo({ host: "127.0.0.1", port: Number(tcp) }),
    connectTo({ path: unixPath }),
    connectTo({ path: "\0" + abstract }),
    attempt((ok, fail) => {
      const socket = dgram.createSocket("udp4");
      socket.on("error", fail);
      socket.send("PWNED", Number(udp), "127.0.0.1", (err) => (err ? fail() : ok()));
    }),
    attempt((ok, fail) => http.get(`http://127.0.0.1:${tcp}/`, ok).on("error", fail)),
    attempt((ok, fail) => dns.lookup("example.com", (err) => (err ? fail() : ok()))),
  ]);
  won = won || reached.some(Boolean);
  for (const dir of ["/tmp", "."]) {
    try {
      fs.chmodSync(dir, 0);
    } catch (e) {}
  }
  fs.writeSync(1, seen + (won ? "PWNED" : "held") + "\n");
  process.exit(0);
}

function fill() {
  const chunk = Buffer.alloc(1 << 20, 120);
  for (const dir of ["/tmp", "/dev/shm", "."]) {
    try {
      for (let n = 0; n < 100; n++) fs.writeFileSync(path.join(dir, `fill-${n}`), chunk);
    } catch (e) {}
    try {
      for (let n = 0; n < 3000; n++) fs.closeSync(fs.openSync(path.join(dir, `inode-${n}`), "w", 0));
    } catch (e) {}
    try {
      fs.chmodSync(dir, 0);
    } catch (e) {}
  }
  fs.writeSync(1, "filled\n");
}

function find(top, depth) {
  let found = "";
  let entries = [];
  try {
    entries = fs.readdirSync(top);  // follows /proc/<pid>/root and cwd
  } catch (e) {
    return found;
  }
  for (const name of entries) {
    const entry = path.join(top, name);
    if (name.startsWith("planted")) found += slurp(entry);
    if (depth > 0) found += find(entry, depth - 1);
  }
  return found;
}

const SIGNALS = { 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV",
                  15: "SIGTERM", 24: "SIGXCPU", 31: "SIGSYS" };

function main() {
  if (process.argv[2] === "child") return linger();
  const input = fs.readFileSync(0);
  const eol = input.indexOf(10) < 0 ? input.length : input.indexOf(10);
  const args = input.subarray(0, eol).toString().trim().split(/\s+/);
  const rest = input.subarray(eol + 1);
  switch (args[0]) {
    case "echo": {
      const n = Number(args[2]);
      fs.writeSync(1, rest);
      if (args[1] === "signal") {
        process.kill(process.pid, SIGNALS[n]);
        return setTimeout(() => process.exit(128 + n), 200);
      }
      return process.exit(n);
    }
    case "daemon":
      return daemon();
    case "forge":
      return forge();
    case "escape":
      return escape(args.slice(1));
    case "fill":
      return fill();
    case "plant":
      for (const file of ["/tmp/planted", "/dev/shm/planted", "planted"]) {
        fs.writeFileSync(file, args[1]);
      }
      return setTimeout(() => fs.writeSync(1, "planted\n"), 1500);
    case "seek":
      return setTimeout(() => {
        const found = find("/tmp", 2) + find("/dev/shm", 1) + find("/proc", 3);
        fs.writeSync(1, found + "sought\n");
      }, 500);
    case "threads":
      for (;;) {
        try {
          new Worker("const held = Buffer.alloc(1 << 20, 1); setInterval(() => held[0]++, 1000);",
                     { eval: true });
        } catch (e) {}
      }
    case "heap": {
      const held = [];
      for (;;) held.push(new Array(1 << 17).fill(1.5));
    }
    case "native": {
      const held = [];
      for (;;) held.push(Buffer.alloc(1 << 20, 1));
    }
    case "fork":
      for (;;) {
        try {
          cp.spawn(process.execPath, [__filename, "child"], { stdio: "ignore" }).on("error", () => {});
        } catch (e) {}
      }
    default:
      process.exit(4);
  }
}

main();
