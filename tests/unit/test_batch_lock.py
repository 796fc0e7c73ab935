"""The per-key batch lock (batch/lock.py): what is busy comes from the OS lock,
the file's content only words the message, and it holds nothing secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpucloud.batch import lock as batch_lock
from gpucloud.batch.lock import held, lock_path
from gpucloud.errors import BatchBusyError, StateError, exit_code_for

SRC = Path(batch_lock.__file__).resolve().parents[2]
posix_only = pytest.mark.skipif(os.name == "nt", reason="flock is POSIX")

# Holds batch KEY under DIR in another process until its stdin closes.
HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from gpucloud.batch.lock import held
    with held(Path(sys.argv[1]), sys.argv[2]):
        print("held", flush=True)
        sys.stdin.read()
""")


@pytest.fixture
def other_process(tmp_path):
    """Start a process holding a key; yields a function taking the key."""
    started: list[subprocess.Popen[str]] = []

    def hold(key: str) -> subprocess.Popen[str]:
        env = os.environ | {"PYTHONPATH": str(SRC)}
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), key], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        return proc

    yield hold
    for proc in started:
        proc.communicate(timeout=30)  # closes stdin: the holder ends


def test_a_key_held_by_another_process_is_refused_with_its_pid(tmp_path, other_process):
    holder = other_process("sweep")
    with pytest.raises(BatchBusyError) as caught:
        with held(tmp_path, "sweep"):
            pytest.fail("ran while another process held the key")
    err = caught.value
    assert err.message.startswith(
        f"batch 'sweep' is being run by another gpucloud process (pid {holder.pid}, started 20")
    assert "\n" not in err.message and err.message.endswith("Z)")
    assert err.hint == ("wait for it to finish (or stop it); running the same batch='sweep' "
                        "afterwards resumes it")  # the SDK's words: the CLI says --batch sweep
    assert exit_code_for(err) == 2 and err.code == "batch_busy"
    with held(tmp_path, "other-key"):  # another key is not held
        pass


def test_the_lock_file_holds_only_pid_start_and_key_and_is_cleared(tmp_path, other_process):
    holder = other_process("k1")
    path = lock_path(tmp_path, "k1")
    doc = json.loads(path.read_text())
    assert set(doc) == {"pid", "started", "key"}
    assert doc["pid"] == holder.pid and doc["key"] == "k1"
    assert path.parent == tmp_path / "batches" and len(path.stem) == 32
    assert "k1" not in path.name  # any key is a safe file name
    holder.communicate(timeout=30)
    assert path.read_text() == ""  # a finished run leaves no pid behind
    with held(tmp_path, "k1"):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_damaged_content_still_gives_a_sensible_message(tmp_path, other_process):
    other_process("k")
    path = lock_path(tmp_path, "k")
    for junk in (b"\xff\x00{not json", b'{"pid": "1; rm -rf /", "started": "x", "key": "k"}',
                 b'{"pid": 42, "started": "2026-12-01T10:31:00Z", "key": "another key"}', b""):
        path.write_bytes(junk)
        with pytest.raises(BatchBusyError) as caught:
            with held(tmp_path, "k"):
                pytest.fail("damaged content unlocked the key")
        assert caught.value.message == "batch 'k' is being run by another gpucloud process"


def test_stale_content_without_a_lock_does_not_lock_the_key(tmp_path):
    # What a SIGKILLed run leaves: its pid in the file, no lock (the kernel dropped it).
    path = lock_path(tmp_path, "k")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "started": "2026-12-01T10:31:00Z", "key": "k"}))
    with held(tmp_path, "k"):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_the_same_key_twice_in_one_process_is_refused_and_freed_after(tmp_path):
    with held(tmp_path, "k"):
        with pytest.raises(BatchBusyError, match="already being run in this process"):
            with held(tmp_path, "k"):
                pytest.fail("one process ran a key twice")
        with held(tmp_path, "k2"):  # different keys run side by side
            pass
    with pytest.raises(RuntimeError):
        with held(tmp_path, "k"):
            raise RuntimeError("the body failed")
    with held(tmp_path, "k"):  # released by the failure
        pass


@posix_only
def test_flock_conflicts_between_two_descriptors_of_one_process(tmp_path):
    # The in-process set is not the only guard: flock locks belong to the open
    # file description, so a second open() of the file conflicts as well.
    path = lock_path(tmp_path, "k")
    first = batch_lock._open(path)
    second = batch_lock._open(path)
    try:
        assert batch_lock._lock(first, path) is True
        assert batch_lock._lock(second, path) is False
        os.close(first)  # closing the holder's descriptor frees the key
        first = -1
        assert batch_lock._lock(second, path) is True
    finally:
        for fd in (first, second):
            if fd >= 0:
                os.close(fd)


def test_an_unusable_lock_directory_is_a_state_error(tmp_path):
    (tmp_path / "batches").write_text("a file where the directory should be")
    with pytest.raises(StateError) as caught:
        with held(tmp_path, "k"):
            pytest.fail("ran without a lock")
    assert exit_code_for(caught.value) == 3
    assert "batch lock file" in caught.value.message and caught.value.hint


def test_a_launch_pins_the_key_only_while_its_run_holds_it(tmp_path):
    """A keyed run interrupted before a launch began has let go: that launch
    sees it (False) and does not start; while the run holds the key, True."""
    with batch_lock.pinned(tmp_path, "k") as kept:
        assert kept is False
    with held(tmp_path, "k"):
        with batch_lock.pinned(tmp_path, "k") as kept:
            assert kept is True


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_lets_go_of_the_parents_locks(tmp_path):
    with held(tmp_path, "k"):
        [lease] = [v for v in batch_lock._HELD.values() if v is not None]
        pid = os.fork()
        if pid == 0:  # the child: no lease, and the inherited descriptor closed
            ok = not batch_lock._HELD
            try:
                os.fstat(lease.fd)
                ok = False
            except OSError:
                pass
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # The parent still holds it: another run of the key is refused.
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from gpucloud.batch.lock import probe; probe(Path(sys.argv[1]), 'k')",
             str(tmp_path)], capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert probe.returncode != 0 and "BatchBusyError" in probe.stderr
