"""Processes for the fault-injection suite: servers, `cogsub` workers and API, a tmpfs.

Servers come from the test fixtures (``tests/fixtures``), so the suite starts them
exactly as the connected tests do: loopback only, free ports, own directories,
stopped by PID. Every `cogsub` process here is a subprocess with its own log file
(stdout and stderr together, unbuffered) that the suite reads to see progress.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.kafka import KafkaServerProcess, free_port, noida_server, tansu_server
from tests.fixtures.opensearch import OsmemProcess, osmem_process
from tests.fixtures.s3 import SeaweedFS

GROUP = "ingestion"
BUCKET = "cogsub-faults"
TANSU_BUCKET = "tansu-log"
INDEX = "experience_faults"
READY_LINE = "ingesting. Ctrl-C to stop."
CONSOLIDATOR_READY = "cogsub: consolidating ("
INDEXED_MARK = " indexed "
STOP_TIMEOUT_S = 20.0
# Variables a child needs to find its interpreter, home and locale; nothing else leaks in.
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")


class ManagedProcess:
    """One subprocess with a log file; started, signalled and stopped by its PID."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.expected_exit = False  # set when we stop or kill it on purpose

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Start the process, appending its output to the log file."""
        assert self.process is None, f"{self.name} already started"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def exit_code(self) -> int | None:
        """The exit code once the process has ended, else ``None``."""
        return self.process.poll() if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def died_unexpectedly(self) -> bool:
        """Whether it ended without us stopping or killing it."""
        return self.process is not None and not self.expected_exit and not self.alive()

    def kill(self) -> None:
        """SIGKILL by PID (a crash: nothing is flushed) and reap it."""
        self.expected_exit = True
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM by PID (the worker finishes and commits the batches in hand), then SIGKILL."""
        self.expected_exit = True
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_for(self, text: str, timeout_s: float) -> None:
        """Return once ``text`` is in the log; raise if the process ends or time runs out."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log_text():
            if not self.alive() or time.monotonic() > deadline:
                state = f"exited with {self.exit_code()}" if not self.alive() else "timed out"
                raise RuntimeError(f"{self.name} {state} before {text!r}:\n{self.log_tail()}")
            time.sleep(0.1)  # a child process's log has no readiness event to await


def cogsub_argv(*args: str) -> list[str]:
    """The command line of `cogsub ARGS` in this interpreter."""
    return [sys.executable, "-m", "cogsub.cli.main", *args]


def base_env(*, batch_size: int) -> dict[str, str]:
    """What every `cogsub` child gets: a clean environment, hash embedder, small batches."""
    env = {name: os.environ[name] for name in _INHERITED if name in os.environ}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",  # progress lines reach the log as they happen
            "COGSUB_LOG_FORMAT": "json",
            "COGSUB_EMBEDDER__KIND": "hash",
            "COGSUB_INGESTION__BATCH_SIZE": str(batch_size),
            "COGSUB_INGESTION__GROUP": GROUP,
        }
    )
    return env


@dataclass
class DistributedServers:
    """A broker, SeaweedFS and osmem-server on loopback, each restartable or freezable."""

    broker: KafkaServerProcess
    seaweed: SeaweedFS
    search: OsmemProcess
    idempotent: bool

    def env(self, *, batch_size: int, session_timeout_ms: int = 6000) -> dict[str, str]:
        """Settings for a distributed `cogsub` process against these servers."""
        endpoint = self.seaweed.endpoint
        env = base_env(batch_size=batch_size)
        env.update(
            {
                "COGSUB_BACKEND": "distributed",
                "COGSUB_KAFKA__BOOTSTRAP_SERVERS": self.broker.bootstrap,
                "COGSUB_KAFKA__ENABLE_IDEMPOTENCE": str(self.idempotent).lower(),
                # A SIGKILLed member is noticed within seconds (Tansu evicts it then).
                "COGSUB_KAFKA__SESSION_TIMEOUT_MS": str(session_timeout_ms),
                "COGSUB_KAFKA__HEARTBEAT_INTERVAL_MS": "1000",
                "COGSUB_S3__ENDPOINT_URL": endpoint.endpoint_url,
                "COGSUB_S3__ACCESS_KEY_ID": endpoint.access_key_id,
                "COGSUB_S3__SECRET_ACCESS_KEY": endpoint.secret_access_key,
                "COGSUB_S3__REGION": endpoint.region,
                "COGSUB_S3__BUCKET": BUCKET,
                "COGSUB_OPENSEARCH__URL": self.search.url,
                "COGSUB_OPENSEARCH__INDEX": INDEX,
            }
        )
        return env


def tansu_on_s3(workdir: Path, seaweed: SeaweedFS) -> KafkaServerProcess:
    """A Tansu broker (not started) keeping its data in a bucket of ``seaweed``.

    Unlike the in-memory fixture it survives a restart. Its S3 credentials go to a
    private env file that a shell reads before it execs the broker, so they never
    appear on a command line.
    """
    endpoint = seaweed.endpoint
    client = endpoint.client()
    try:
        client.create_bucket(Bucket=TANSU_BUCKET)
    finally:
        client.close()
    env_file = workdir / "tansu.env"
    env_file.touch(mode=0o600)
    env_file.write_text(
        f"AWS_ACCESS_KEY_ID={endpoint.access_key_id}\n"
        f"AWS_SECRET_ACCESS_KEY={endpoint.secret_access_key}\n"
        f"AWS_DEFAULT_REGION={endpoint.region}\n"
        f"AWS_ENDPOINT={endpoint.endpoint_url}\n"
        "AWS_ALLOW_HTTP=true\n"
    )
    memory = tansu_server(workdir)  # the fixture's command line, with another storage engine
    argv = [a if not a.startswith("memory://") else f"s3://{TANSU_BUCKET}/" for a in memory.argv]
    wrapped = ["/bin/sh", "-c", 'set -a; . "$0"; exec "$@"', str(env_file), *argv]
    return KafkaServerProcess("tansu", wrapped, port=memory.port, workdir=workdir)


@contextlib.contextmanager
def distributed_servers(workdir: Path, *, broker: str) -> Iterator[DistributedServers]:
    """Start the three servers and stop them all after.

    ``broker``: ``noida`` (noida-db, data on disk), ``tansu`` (Tansu in memory) or
    ``tansu-s3`` (Tansu with its data in SeaweedFS, so that it survives a restart).
    """
    for name in ("broker", "seaweedfs"):
        (workdir / name).mkdir(parents=True, exist_ok=True)
    seaweed = SeaweedFS(workdir / "seaweedfs")
    seaweed.start()
    try:
        if broker == "noida":
            kafka = noida_server(workdir / "broker")
        elif broker == "tansu":
            kafka = tansu_server(workdir / "broker")
        else:
            kafka = tansu_on_s3(workdir / "broker", seaweed)
        kafka.start()
        try:
            with osmem_process() as search:
                servers = DistributedServers(kafka, seaweed, search, idempotent=broker == "noida")
                try:
                    yield servers
                finally:
                    # A frozen process would ignore SIGTERM until it is continued.
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(search.pid, signal.SIGCONT)
        finally:
            kafka.stop()
    finally:
        seaweed.stop()


class Fleet:
    """The `cogsub` processes of one scenario: ingestion workers, consolidators, an API replica."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        logs.mkdir(parents=True, exist_ok=True)
        self.workers: list[ManagedProcess] = []
        self.consolidators: list[ManagedProcess] = []
        self.retired: list[ManagedProcess] = []  # killed or stopped on purpose
        self.casualties: list[ManagedProcess] = []  # had died on their own before that
        self.api: ManagedProcess | None = None
        self.api_url: str | None = None

    def start_worker(self, *, wait_s: float = 60.0) -> ManagedProcess:
        """Start one `cogsub ingest` and return once it consumes."""
        number = len(self.workers) + len(self.retired)
        worker = ManagedProcess(
            f"worker-{number}", cogsub_argv("ingest"), self.env, self.logs / f"worker-{number}.log"
        )
        self.workers.append(worker)
        worker.start()
        if wait_s > 0:
            worker.wait_for(READY_LINE, wait_s)
        return worker

    def start_consolidator(self, *, wait_s: float = 60.0) -> ManagedProcess:
        """Start one `cogsub consolidator` and return once it consumes."""
        started = [*self.retired, *self.consolidators]
        number = sum(1 for p in started if p.argv[-1] == "consolidator")
        name = f"consolidator-{number}"
        process = ManagedProcess(
            name, cogsub_argv("consolidator"), self.env, self.logs / f"{name}.log"
        )
        self.consolidators.append(process)
        process.start()
        if wait_s > 0:
            process.wait_for(CONSOLIDATOR_READY, wait_s)
        return process

    def replace(self, worker: ManagedProcess) -> ManagedProcess:
        """SIGKILL ``worker`` (or a consolidator) and start a fresh one in its place.

        The fresh one is not waited for.
        """
        if worker.died_unexpectedly():
            self.casualties.append(worker)  # a crash of its own must not pass for our kill
        worker.kill()
        self.retired.append(worker)
        if worker in self.consolidators:
            self.consolidators.remove(worker)
            return self.start_consolidator(wait_s=0)
        self.workers.remove(worker)
        return self.start_worker(wait_s=0)

    def start_api(self, *, wait_s: float = 60.0) -> str:
        """Start `cogsub serve` on a free loopback port; return its URL once it answers."""
        port = free_port()
        env = {**self.env, "COGSUB_API__HOST": "127.0.0.1", "COGSUB_API__PORT": str(port)}
        self.api = ManagedProcess("api", cogsub_argv("serve"), env, self.logs / "api.log")
        self.api.start()
        self.api.wait_for("API on http://", wait_s)
        self.api_url = f"http://127.0.0.1:{port}"
        return self.api_url

    def all_processes(self) -> list[ManagedProcess]:
        api = [self.api] if self.api else []
        return [*self.retired, *self.workers, *self.consolidators, *api]

    def dead_workers(self) -> list[ManagedProcess]:
        """Workers that ended without being stopped or killed by the suite."""
        return [w for w in self.workers if w.died_unexpectedly()]

    def dead_consolidators(self) -> list[ManagedProcess]:
        """Consolidators that ended without being stopped or killed by the suite."""
        return [c for c in self.consolidators if c.died_unexpectedly()]

    def stop_all(self) -> None:
        """SIGTERM every live process by PID (SIGKILL after the timeout)."""
        for process in self.all_processes():
            if process.alive():
                assert process.process is not None
                process.expected_exit = True
                process.process.send_signal(signal.SIGTERM)
        for process in self.all_processes():
            process.stop()


class MountRefused(RuntimeError):
    """The tmpfs could not be mounted here (not root, or no permission in this container)."""


@contextlib.contextmanager
def tmpfs(path: Path, *, size_mb: int) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` MiB mounted at ``path``, unmounted on the way out."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_mb}m,mode=0755"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MountRefused(f"cannot run mount: {exc}") from exc
    if done.returncode != 0:
        raise MountRefused(f"mount -t tmpfs refused: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        unmounted = subprocess.run(
            ["umount", str(path)], capture_output=True, timeout=30, check=False
        )
        if unmounted.returncode != 0:  # something still holds a file: detach it anyway
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill_disk(path: Path) -> int:
    """Write ``path`` until the filesystem refuses more (ENOSPC); return the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as filler:
        for chunk in (1 << 20, 1 << 12):  # whole MiBs, then the last pages
            block = b"\0" * chunk
            while True:
                try:
                    written += filler.write(block) or 0
                except OSError:  # ENOSPC: full at this chunk size
                    break
    return written
