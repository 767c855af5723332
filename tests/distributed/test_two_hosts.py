"""Two hosts, simulated: two network namespaces joined by a veth pair, one rank in each, MPICH
over TCP between them (a hostfile, hydra's proxies started in the namespaces).

Each namespace has its own network stack (interfaces, addresses, ports, routes): the only
path between the ranks is the veth link, over TCP (UCX's tcp transport, pinned to the link;
the shared-memory transports are switched off, as between two machines). The link's
addresses are link-local (169.254.x.1 and .2, never routed beyond one link). Loopback-range
addresses (127.x) do route over a veth pair (with route_localnet), but MPICH's UCX netmod
refuses them as loopback between two hosts ("Destination is unreachable"), so the test uses
the link-local range instead.

Needs root (or CAP_NET_ADMIN) and ``ip``; without them the tests say so and skip. Each
test is bounded in time, and the namespaces (and their link) are deleted afterwards, however
the test ends.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

import conftest
from conftest import HERE, check_ok

LINK = "lucid0"  # the veth end's name inside each namespace
UCX = ["-genv", "UCX_TLS", "tcp,self", "-genv", "UCX_NET_DEVICES", LINK]


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def _unavailable():
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    try:
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"`unshare -n true` failed: {e}"
    if probe.returncode != 0:
        return f"network namespaces are not available here (`unshare -n true`: {probe.stderr.strip()})"
    return None


class TwoHosts:
    """Namespaces A and B with unique names, joined by a veth link; rank 0 runs on A (with
    mpiexec), rank 1 on B."""

    def __init__(self):
        tag = uuid.uuid4().hex[:8]
        self.names = [f"lucid-a-{tag}", f"lucid-b-{tag}"]
        subnet = 1 + os.getpid() % 250
        self.addresses = [f"169.254.{subnet}.1", f"169.254.{subnet}.2"]

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _create(self):
        a, b = self.names
        for ns in self.names:
            _ip("netns", "add", ns)
        _ip("link", "add", LINK, "netns", a, "type", "veth", "peer", "name", LINK, "netns", b)
        for ns, address in zip(self.names, self.addresses):
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", LINK)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", LINK, "up")
        deadline = time.monotonic() + 10
        while not all("state UP" in _ip("-n", ns, "-o", "link", "show", LINK).stdout for ns in self.names):
            if time.monotonic() > deadline:
                raise RuntimeError("the veth link between the namespaces did not come up within 10 s")
            time.sleep(0.1)

    def __exit__(self, *exc):
        for ns in self.names:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=20).stdout
            for pid in pids.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)

    def received_bytes(self, host):
        line = _ip("-n", self.names[host], "-s", "-o", "link", "show", LINK).stdout
        return int(line.split("RX:")[1].split("\\")[1].split()[0])

    def run(self, mpiexec, tmp_path, args, timeout, env=None, mpiexec_args=()):
        hostfile = tmp_path / "hosts"
        hostfile.write_text("\n".join(self.addresses) + "\n")
        launcher = str(HERE / "netns_launcher.sh")
        cmd = [
            "ip", "netns", "exec", self.names[0],
            mpiexec, "-localhost", self.addresses[0], "-launcher", "ssh", "-launcher-exec", launcher,
            "-f", str(hostfile), "-n", "2", "-ppn", "1", *UCX, *mpiexec_args,
            sys.executable, *map(str, args),
        ]  # fmt: skip
        hosts = " ".join(f"{addr}={ns}" for addr, ns in zip(self.addresses, self.names))
        return conftest.run_processes(cmd, timeout, env={"LUCID_NETNS_HOSTS": hosts, **(env or {})})


@pytest.fixture(scope="module")
def two_hosts():
    problem = _unavailable()
    if problem is not None:
        pytest.skip(f"two simulated hosts need network namespaces: {problem}")
    try:
        hosts = TwoHosts().__enter__()
    except (subprocess.CalledProcessError, RuntimeError) as e:
        detail = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        pytest.skip(f"two simulated hosts need network namespaces, which could not be made here: {detail}")
    try:
        yield hosts
    finally:
        hosts.__exit__(None, None, None)


def test_amp_training_across_two_hosts_leaves_identical_replicas(mpiexec, two_hosts, tmp_path):
    out = tmp_path / "ranks"
    out.mkdir()
    before = two_hosts.received_bytes(1)
    run = two_hosts.run(mpiexec, tmp_path, [HERE / "worker_overlap.py", out, "amp"], timeout=180)
    check_ok(run)
    assert "rank 0 done" in run.out and "rank 1 done" in run.out
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]
    params = [k for k in ranks[0] if k.startswith("param")]
    assert params
    for k in params:
        np.testing.assert_array_equal(ranks[0][k], ranks[1][k], err_msg=k)
    assert float(ranks[0]["scale"]) == float(ranks[1]["scale"])
    # The same as one process playing both ranks (worker_overlap.py's reference).
    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    check_ok(conftest.run_processes([sys.executable, str(HERE / "worker_overlap.py"), str(ref_dir), "amp"], 120))
    reference = dict(np.load(ref_dir / "rank0.npz"))
    for k in params:
        np.testing.assert_array_equal(ranks[0][k], reference[k], err_msg=k)
    # The gradients went over the link: four steps of every parameter's float32 gradient,
    # at least once into host B.
    grad_bytes = 4 * sum(v.size for k, v in ranks[0].items() if k.startswith("param"))
    assert two_hosts.received_bytes(1) - before > 4 * grad_bytes


@pytest.mark.parametrize("victim", [0, 1])
def test_a_dead_rank_on_either_host_ends_the_job_within_seconds(mpiexec, two_hosts, tmp_path, victim):
    """mpiexec sees the process die and ends the job, naming the host it ran on."""
    run = two_hosts.run(mpiexec, tmp_path, [HERE / "worker_dead_rank.py", victim], timeout=90)
    assert run.returncode != 0, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert f"rank {victim} step 3" in run.out and f"rank {1 - victim} step 3" in run.out, run.out
    assert "finished" not in run.out, run.out
    assert "BAD TERMINATION" in run.out and f"RUNNING AT {two_hosts.addresses[victim]}" in run.out, run.out
    assert "EXIT CODE: 9" in run.out, run.out


@pytest.mark.parametrize("victim", [0, 1])
def test_a_survivor_left_alone_ends_itself_with_a_message(mpiexec, two_hosts, tmp_path, victim):
    """When nothing ends the job for it (mpiexec -disable-auto-cleanup, or a host that
    drops off the network with its proxy), the survivor's wait for the dead rank times out:
    it says what it waited for and aborts."""
    run = two_hosts.run(
        mpiexec,
        tmp_path,
        [HERE / "worker_dead_rank.py", victim],
        timeout=90,
        env={"LUCID_DISTRIBUTED_TIMEOUT": "5"},
        mpiexec_args=["-disable-auto-cleanup"],
    )
    survivor = 1 - victim
    assert run.returncode != 0, run.out
    assert run.seconds < 45, f"took {run.seconds:.1f} s:\n{run.out}"
    assert "finished" not in run.out, run.out
    assert f"rank {survivor} of 2 has waited" in run.out, run.out
    assert "DistributedDataParallel: averaging gradients" in run.out and "Aborting every rank" in run.out, run.out
