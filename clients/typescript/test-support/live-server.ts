/**
 * A real `cogsub run --port 0 --embedder hash` for the tests, on a fresh data directory.
 *
 * The bound port is published by the server itself in DATA_DIR/api.json ({url, pid}); the
 * process is stopped by its PID (SIGTERM, then SIGKILL) and its directory removed.
 * COGSUB_BIN names the command (default: the repository's .venv/bin/cogsub).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = resolve(fileURLToPath(import.meta.url), "../../..");
export const REPO_DIR = resolve(PACKAGE_DIR, "../..");
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

export interface LiveServer {
  url: string;
  pid: number;
  dataDir: string;
  stop(): Promise<void>;
}

function cogsubBin(): string {
  return process.env.COGSUB_BIN ?? join(REPO_DIR, ".venv/bin/cogsub");
}

function readApiFile(dataDir: string): { url: string; pid: number } | undefined {
  try {
    const found = JSON.parse(readFileSync(join(dataDir, "api.json"), "utf8")) as {
      url?: unknown;
      pid?: unknown;
    };
    return typeof found.url === "string" && typeof found.pid === "number"
      ? { url: found.url, pid: found.pid }
      : undefined;
  } catch {
    return undefined;
  }
}

const pause = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

function exited(child: ChildProcess, withinMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((done) => {
    const timer = setTimeout(() => done(false), withinMs);
    child.once("exit", () => {
      clearTimeout(timer);
      done(true);
    });
  });
}

async function stopByPid(child: ChildProcess): Promise<void> {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  process.kill(pid, "SIGTERM");
  if (await exited(child, STOP_TIMEOUT_MS)) return;
  process.kill(pid, "SIGKILL");
  await exited(child, STOP_TIMEOUT_MS);
}

async function waitForApi(child: ChildProcess, dataDir: string, logPath: string): Promise<string> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const found = readApiFile(dataDir);
    if (found !== undefined && found.pid === child.pid) {
      const ready = await fetch(`${found.url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return found.url;
    }
    await pause(100);
  }
  const log = readFileSync(logPath, "utf8");
  throw new Error(
    `cogsub run did not serve within ${START_TIMEOUT_MS} ms (exit ${child.exitCode}):\n${log}`,
  );
}

/** Start the server; `env` adds settings (API keys...). */
export async function startServer(env: Record<string, string> = {}): Promise<LiveServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "cogsub-ts-"));
  const logPath = join(dataDir, "run.log");
  const log = openSync(logPath, "w");
  const args = ["--data-dir", dataDir, "--embedder", "hash", "run", "--no-samples", "--port", "0"];
  const child = spawn(cogsubBin(), args, {
    env: { ...process.env, COGSUB_LOG_FORMAT: "json", ...env },
    stdio: ["ignore", log, log],
  });
  closeSync(log);
  try {
    const url = await waitForApi(child, dataDir, logPath);
    return {
      url,
      pid: child.pid as number,
      dataDir,
      stop: async () => {
        await stopByPid(child);
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await stopByPid(child);
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}
