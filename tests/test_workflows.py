"""The GitHub workflows' structure, and the tools they call, checked where they cannot run.

The macOS and release workflows run only on GitHub. What can be checked here is that they
parse, that what they call exists, and that their jobs keep their shape: the hosted macOS job
never asks for a GPU (GitHub's hosted Macs have none Metal compute can use), the GPU job runs
only on a self-hosted Apple-silicon runner and only when asked, and a release builds and
checks both wheels. The tools run here as far as Linux allows: the Metal library builder
with a stand-in `xcrun`, each family's library source compiled as C++ against the Metal
emulation's headers, the macOS wheel fixer's parsers on `otool` output.
"""

import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
KERNELS = ROOT / "Sources" / "LucidEngine" / "Backends" / "Metal" / "Kernels"
GPU_LABELS = ["self-hosted", "macOS", "ARM64"]

sys.path.insert(0, str(ROOT / "tools"))
import build_metallibs  # noqa: E402
import macos_wheel  # noqa: E402


def load(name):
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(workflow):
    # YAML 1.1 reads the key `on` as True.
    return workflow.get("on", workflow.get(True))


def runs(job):
    """Each step's shell text with its environment spelled out in front, one string per step."""
    out = []
    for step in job["steps"]:
        env = " ".join(f"{k}={v}" for k, v in {**job.get("env", {}), **step.get("env", {})}.items())
        out.append(f"{env} {step.get('run', '')} {step.get('uses', '')}".strip())
    return out


def make_targets(text):
    """The targets of each `make` command in a step: its words up to the first variable."""
    for line in text.splitlines():
        for m in re.finditer(r"\bmake((?: +[^ ;&|]+)*)", line):
            for word in m.group(1).split():
                if not re.fullmatch(r"[\w-]+", word):
                    break
                yield word


def test_every_workflow_parses_and_has_jobs():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"macos.yml", "release.yml"}
    for f in files:
        workflow = load(f.name)
        assert workflow["name"] and triggers(workflow), f.name
        for name, job in workflow["jobs"].items():
            assert job["runs-on"] and job["steps"], (f.name, name)


def test_what_the_workflows_call_exists():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    for f in sorted(WORKFLOWS.glob("*.yml")):
        for job in load(f.name)["jobs"].values():
            for text in runs(job):
                for path in re.findall(r"\b(tools/[\w./-]+\.(?:py|sh)|lucid/[\w./-]+\.py)", text):
                    assert (ROOT / path).is_file(), f"{f.name} calls {path}, which does not exist"
                for word in make_targets(text):
                    assert word in targets, f"{f.name} runs `make {word}`, which the Makefile lacks"


def test_every_step_is_valid_shell():
    bash = shutil.which("bash")
    for f in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in load(f.name)["jobs"].items():
            for step in job["steps"]:
                if "run" in step:
                    script = re.sub(r"\$\{\{.*?\}\}", "x", step["run"])
                    r = subprocess.run([bash, "-n"], input=script, capture_output=True, text=True)
                    assert r.returncode == 0, f"{f.name} {name}: {step.get('name')}: {r.stderr}"


def test_the_hosted_mac_job_never_asks_for_a_gpu():
    job = load("macos.yml")["jobs"]["hosted"]
    assert isinstance(job["runs-on"], str) and re.fullmatch(r"macos-(1[4-9]|[2-9]\d)", job["runs-on"]), job["runs-on"]
    assert "if" not in job
    texts = runs(job)
    everything = "\n".join(texts)
    for needs_gpu in ("LUCID_REQUIRE_METAL", "self_test", "make bench", "bench/", "metal-emulated", "check-metal"):
        assert needs_gpu not in everything, f"the hosted job does {needs_gpu!r}, which needs a GPU"
    # Whatever runs the test suites does so with the engine built without Metal.
    for text in texts:
        if re.search(r"make (test|swift-test|py-test)\b|pytest", text):
            assert "LUCID_NO_METAL=1" in text, f"the hosted job runs tests with Metal built in: {text}"
    # What it does check: every family through Apple's compiler, the wheel built with them,
    # installed and smoke-tested, and uploaded.
    assert "tools/build_metallibs.py --out build/metallib" in everything
    assert "LUCID_METALLIB_DIR=build/metallib bash tools/build-wheel.sh" in everything
    assert re.search(r"LUCID_EXPECT_METALLIBS=1 bash tools/check-wheel.sh dist/\S+macosx_14_0_arm64\.whl", everything)
    assert any(re.search(r"make test\b", t) for t in texts)
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and "dist/lucid-*.whl" in upload[0]["with"]["path"]


def test_the_wheel_smoke_test_never_touches_metal():
    # Its code (its docstring aside) names no "metal" device, no lucid.metal and no device= argument.
    tree = ast.parse((ROOT / "tools" / "wheel_smoke.py").read_text())
    for node in ast.walk(tree):
        assert not (isinstance(node, ast.Constant) and node.value == "metal"), node.lineno
        assert not (isinstance(node, ast.Attribute) and node.attr == "metal"), node.lineno
        assert not (isinstance(node, ast.keyword) and node.arg == "device"), node.lineno


def test_the_gpu_job_runs_on_a_self_hosted_mac_and_only_when_asked():
    workflow = load("macos.yml")
    job = workflow["jobs"]["gpu"]
    assert job["runs-on"] == GPU_LABELS
    guard = job["if"]
    assert "vars.LUCID_MAC_GPU_RUNNER" in guard and "workflow_dispatch" in guard and "'mac-gpu'" in guard
    assert "labeled" in triggers(workflow)["pull_request"]["types"]
    assert triggers(workflow)["workflow_dispatch"]["inputs"]["gpu"]["type"] == "boolean"
    assert "needs" not in job  # it waits for nothing, and nothing waits for it
    assert not any("needs" in j for j in workflow["jobs"].values())
    everything = "\n".join(runs(job))
    assert "make build" in everything
    assert "lucid.metal.self_test()" in everything
    assert "LUCID_REQUIRE_METAL=1 .venv/bin/python -m pytest" in everything
    assert "make bench" in everything
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["with"]["path"] == "bench/RESULTS-macos.md"


def test_the_release_builds_and_checks_both_wheels():
    workflow = load("release.yml")
    on = triggers(workflow)
    assert on["push"]["tags"] and "workflow_dispatch" in on
    jobs = workflow["jobs"]
    built = {}
    for name, job in jobs.items():
        texts = runs(job)
        if any("tools/build-wheel.sh" in t for t in texts):
            runner = job["runs-on"]
            assert isinstance(runner, str) and "self-hosted" not in runner
            platform = "linux" if runner.startswith("ubuntu") else "macos" if runner.startswith("macos") else runner
            upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
            assert upload, f"{name} uploads no wheel"
            built[platform] = (name, upload[0]["with"]["name"])
    assert set(built) == {"linux", "macos"}, built
    for platform, (build_job, artifact) in built.items():
        checks = [
            job
            for job in jobs.values()
            if job.get("needs") == build_job
            and any(re.search(r"bash tools/check-wheel.sh dist/\S+\.whl", t) for t in runs(job))
        ]
        assert checks, f"nothing checks the {platform} wheel in a clean venv"
        for job in checks:
            assert not job.get("container"), "the wheel is checked outside the build's container"
            downloads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact")]
            assert downloads and downloads[0]["with"]["name"] == artifact
            if platform == "macos":
                assert any("LUCID_EXPECT_METALLIBS=1" in t for t in runs(job))


# ---- the Metal libraries ------------------------------------------------------------------------


def kernel_families_in_the_engine():
    text = (ROOT / "Sources" / "LucidEngine" / "Backends" / "KernelFamilies.swift").read_text()
    body = re.search(r"enum KernelFamily\b[^{]*\{(.*?)\}", text, re.DOTALL).group(1)
    return set(re.findall(r"\w+", body.replace("case", "")))


def test_one_library_per_kernel_file_named_as_the_engine_names_the_family():
    families = build_metallibs.families()
    files = {p.stem for p in KERNELS.glob("*.metal")} - {"Common"}
    assert sorted(families) == sorted(f.lower() for f in files)
    assert set(families) <= kernel_families_in_the_engine()
    for name, sources in families.items():
        assert [p.name for p in sources][0] == "Common.metal" and sources[1].stem.lower() == name


def test_the_library_builder_with_a_stand_in_xcrun(tmp_path):
    # A stand-in for Apple's tools: records its arguments and writes what -o names.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "xcrun.log"
    fake = bin_dir / "xcrun"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {shlex.quote(str(log))}\n'
        'while [ $# -gt 1 ]; do if [ "$1" = -o ]; then echo lib > "$2"; fi; shift; done\n'
    )
    fake.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_metallibs.py"), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    families = build_metallibs.families()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["std"] == "metal3.1" and set(manifest["families"]) == set(families)
    for name, sources in families.items():
        entry = manifest["families"][name]
        assert (out / entry["metallib"]).is_file() and entry["metallib"] == f"{name}.metallib"
        joined = b"".join(p.read_bytes() for p in sources)
        assert entry["sha256"] == hashlib.sha256(joined).hexdigest()
        assert (out / "src" / f"{name}.metal").read_bytes() == joined
    calls = log.read_text().splitlines()
    compiles = [c for c in calls if " metal " in f" {c} "]
    assert len(compiles) == len(families)
    assert all("-sdk macosx metal -std=metal3.1 -Werror -fno-fast-math -c" in c for c in compiles)
    assert sum(" metallib " in f" {c} " for c in calls) == len(families)


def test_the_library_builders_emulated_stand_ins(tmp_path):
    # --emulated: no xcrun; the same manifest, and for each family the emulation's stand-in,
    # which names the family, the hash by which the check build's kernel table knows its
    # joined source (tests/metal/gen_kernels.py) and the real build's flags.
    sys.path.insert(0, str(ROOT / "tests" / "metal"))
    from gen_kernels import fnv1a as emulation_hash

    env = {**os.environ, "PATH": str(tmp_path)}  # no xcrun on it
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_metallibs.py"), "--emulated", "--out", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for name, sources in build_metallibs.families().items():
        joined = b"".join(p.read_bytes() for p in sources)
        assert manifest["families"][name]["sha256"] == hashlib.sha256(joined).hexdigest()
        assert (tmp_path / "out" / f"{name}.metallib").read_text().splitlines() == [
            "lucid-emulated-metallib 1",
            f"family {name}",
            f"source-fnv1a64 {emulation_hash(joined):016x}",
            "compile -std=metal3.1 -Werror -fno-fast-math",
        ]


def test_the_library_builder_says_what_it_needs_without_xcrun(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_metallibs.py"), "--out", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "xcrun metal" in r.stderr


def _clang():
    swift = shutil.which("swift")
    clang = swift and Path(swift).resolve().parent / "clang"
    return clang if clang and clang.is_file() else shutil.which("clang++")


@pytest.mark.skipif(_clang() is None, reason="needs the Swift toolchain's clang")
def test_each_family_library_compiles_from_common_and_its_own_file():
    # The hosted macOS job compiles each family's library with Apple's compiler; here its source
    # compiles as C++ against the Metal emulation's headers (as `make metal-emulated` compiles the
    # joined library), which catches a family that needs another family's declarations.
    failed = {}
    for name, sources in build_metallibs.families().items():
        r = subprocess.run(
            [
                str(_clang()),
                "-fsyntax-only",
                "-x",
                "c++",
                "-std=c++17",
                f"-I{ROOT / 'tests' / 'metal' / 'include'}",
                f"-I{ROOT / 'tests' / 'metal' / 'MSLKernels' / 'include'}",
                "-include",
                str(sources[0]),
                str(sources[1]),
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            failed[name] = r.stderr.splitlines()[0] if r.stderr else "failed"
    assert not failed, f"these families do not compile from Common.metal and their own file: {failed}"


# ---- the macOS wheel's parsers ------------------------------------------------------------------

OTOOL_L = """\
/tmp/w/lucid/_lib/liblucid.dylib:
\t@rpath/liblucid.dylib (compatibility version 0.0.0, current version 0.0.0)
\t/System/Library/Frameworks/Metal.framework/Versions/A/Metal (compatibility version 1.0.0, current version 368.12.0)
\t/usr/lib/libSystem.B.dylib (compatibility version 1.0.0, current version 1351.0.0)
\t@rpath/libswiftCore.dylib (compatibility version 1.0.0, current version 6.0.0)
\t@rpath/libswiftCompatibilitySpan.dylib (compatibility version 1.0.0, current version 62.0.0)
"""

OTOOL_l = """\
Load command 21
          cmd LC_RPATH
      cmdsize 32
         path /usr/lib/swift (offset 12)
Load command 22
          cmd LC_RPATH
      cmdsize 128
         path /Library/Developer/CommandLineTools/usr/lib/swift-5.5/macosx (offset 12)
Load command 23
          cmd LC_RPATH
      cmdsize 32
         path @loader_path (offset 12)
Load command 24
      cmd LC_CODE_SIGNATURE
  cmdsize 16
"""


def test_the_macos_wheel_parsers():
    assert macos_wheel.dependencies(OTOOL_L) == [
        "@rpath/liblucid.dylib",
        "/System/Library/Frameworks/Metal.framework/Versions/A/Metal",
        "/usr/lib/libSystem.B.dylib",
        "@rpath/libswiftCore.dylib",
        "@rpath/libswiftCompatibilitySpan.dylib",
    ]
    assert macos_wheel.rpaths(OTOOL_l) == [
        "/usr/lib/swift",
        "/Library/Developer/CommandLineTools/usr/lib/swift-5.5/macosx",
        "@loader_path",
    ]
    assert macos_wheel.install_id("/tmp/liblucid.dylib:\n@rpath/liblucid.dylib\n") == "@rpath/liblucid.dylib"
    assert macos_wheel.install_id("/tmp/a.out:\n") is None
