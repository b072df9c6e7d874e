"""vdnn.Profile is `vdnn profile`'s: measured on a backend, saved and read back, and the costs vdnn.plan(),
Plan.simulate() and vdnn.Net() plan with (the plans `vdnn plan --profile FILE` makes); bad files are clear errors."""
import json
import os

import pytest

import vdnn
from conftest import LENET, ROOT, run_cli

BATCH = 8
LINK = dict(link_bandwidth_d2h=8e9, link_bandwidth_h2d=8e9)


@pytest.fixture(scope="module")
def measured(lenet):
    be = vdnn.Backend("cpu", threads=1, memory=LINK)
    return vdnn.Profile.measure(lenet, be, batch=BATCH, iterations=1)


def test_a_measured_profile_reads_back_and_plans_as_the_command(tmp_path, lenet, measured):
    s = measured.summary
    assert s["measured"] and s["device"] == "cpu" and s["op_info"] and s["forward_s"] > 0 and s["backward_s"] > 0
    assert s["d2h_bytes_per_s"] > 0 and s["h2d_bytes_per_s"] > 0 and s["version"] == 2
    path = tmp_path / "lenet.profile.json"
    measured.save(path)
    assert json.loads(path.read_text())["batch"] == BATCH
    back = vdnn.Profile.load(path, lenet, batch=BATCH)
    assert back.summary == s
    plan = vdnn.plan(lenet, batch=BATCH, profile=back, policy="pooch", budget="10MiB", conv_algo="choose")
    cli = run_cli("plan", LENET, "--batch", BATCH, "--profile", path, "--policy", "pooch", "--budget", "10MiB",
                  "--json", check=False)
    assert plan.feasible and plan.json() == cli.stdout
    # Simulating with the profile the plan was made with is the plan's own estimate; the default estimate differs.
    assert plan.simulate(back)["iteration_s"] == pytest.approx(plan.simulated_s)
    assert plan.simulate(vdnn.Profile.estimate(lenet, batch=BATCH))["iteration_s"] < plan.simulated_s / 10


def test_the_estimate_is_what_plans_use_by_default(lenet):
    est = vdnn.Profile.estimate(lenet, batch=BATCH)
    assert not est.summary["measured"]
    assert vdnn.plan(lenet, batch=BATCH, profile=est, policy="auto", budget="10MiB").json() == \
        vdnn.plan(lenet, batch=BATCH, policy="auto", budget="10MiB").json()
    slow = vdnn.Profile.estimate(lenet, batch=BATCH, flops_per_s=1e9, link_bytes_per_s=(1e9, 2e9))
    assert slow.summary["d2h_bytes_per_s"] == 1e9 and slow.summary["h2d_bytes_per_s"] == 2e9
    assert vdnn.plan(lenet, batch=BATCH, profile=slow).simulated_s > \
        100 * vdnn.plan(lenet, batch=BATCH, profile=est).simulated_s


def test_a_net_plans_with_the_profile(lenet, measured):
    be = vdnn.Backend("cpu", threads=1, memory=LINK)
    net = vdnn.Net(lenet, be, batch=BATCH, profile=measured, policy="pooch", budget="10MiB", conv_algo="choose")
    assert net.plan.json() == vdnn.plan(lenet, be, batch=BATCH, profile=measured, policy="pooch", budget="10MiB",
                                        conv_algo="choose").json()
    with pytest.raises(vdnn.InvalidArgError, match="profile: a vdnn.Profile"):
        vdnn.Net(lenet, be, batch=BATCH, profile="lenet.profile.json")
    with pytest.raises(vdnn.InvalidArgError, match="profile: a vdnn.Profile"):
        vdnn.plan(lenet, batch=BATCH, profile={})


def test_bad_profile_files_name_what_is_wrong(tmp_path, lenet, measured):
    path = tmp_path / "p.json"
    measured.save(path)
    with pytest.raises(vdnn.MismatchError, match="batch"):
        vdnn.Profile.load(path, lenet, batch=BATCH * 2)
    text = path.read_text()
    (tmp_path / "cut.json").write_text(text[:len(text) // 2])
    with pytest.raises(vdnn.FormatError, match="cut.json"):
        vdnn.Profile.load(tmp_path / "cut.json", lenet, batch=BATCH)
    with pytest.raises(vdnn.FileError, match="absent.json"):
        vdnn.Profile.load(tmp_path / "absent.json", lenet, batch=BATCH)
    with pytest.raises(vdnn.InvalidArgError, match="iterations"):
        vdnn.Profile.measure(lenet, batch=BATCH, iterations=0)


def test_a_gpu_described_without_the_gpu_plans_as_the_command(tmp_path):
    """Profile.describe_gpu is `vdnn profile --describe-gpu`: the CUDA backend's op rules for that GPU and a roofline
    estimate; builds without the CUDA backend say they cannot."""
    gpt = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    try:
        prof = vdnn.Profile.describe_gpu(gpt, "9.0", batch=4, precision="bf16", name="H100 SXM",
                                         flops_per_s=9.9e14, mem_bytes_per_s=3.35e12, link_bytes_per_s=55e9)
    except vdnn.UnsupportedError as e:
        assert "built without the CUDA backend" in str(e)
        return
    s = prof.summary
    assert s["op_info_source"] == "described" and not s["measured"] and s["device"] == "cuda"
    assert s["device_info"]["compute"] == "9.0" and s["device_info"]["name"].startswith("H100 SXM")
    assert s["d2h_bytes_per_s"] == 55e9
    path = tmp_path / "h100.json"
    prof.save(path)
    plan = vdnn.plan(gpt, batch=4, profile=prof, precision="bf16", policy="auto", budget="8MiB")
    cli_prof = tmp_path / "cli.json"
    run_cli("profile", "gpt-mini", "--batch", 4, "--describe-gpu", "9.0", "--gpu-name", "H100 SXM", "--precision",
            "bf16", "--estimate-flops", "9.9e14", "--estimate-bw", "3.35e12", "--link-bandwidth", "55e9",
            "--out", cli_prof)
    cli = run_cli("plan", "gpt-mini", "--batch", 4, "--profile", cli_prof, "--precision", "bf16", "--policy", "auto",
                  "--budget", "8MiB", "--json", check=False)
    assert plan.json() == cli.stdout
    with pytest.raises(vdnn.UnsupportedError, match="layer 'wte'"):
        vdnn.Profile.describe_gpu(gpt, (7, 0), batch=4, precision="bf16")
    with pytest.raises(vdnn.InvalidArgError, match="compute_capability"):
        vdnn.Profile.describe_gpu(gpt, "9", batch=4)
