"""`zuka node/provider add/edit --source prometheus --url ... --match ...` end to end: the
mistakes people make when pasting a URL or a matcher are refused with what was wrong and
change nothing; `node show` says where readings come from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leases.ledger.store import Ledger
from leases.telemetry.promtarget import inherit
from tests.support.cli import Cli, ok
from tests.support.tokens import token_file


def _node(cli: Cli, name: str = "gpu-07") -> dict[str, object]:
    node: dict[str, object] = json.loads(ok(cli, "node", "show", name, "--json"))["node"]
    return node


def test_a_node_read_from_prometheus_and_back_to_ssh(cli: Cli) -> None:
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@10.0.0.7", "--source", "prometheus",
       "--url", "http://prom:9090", "--match", 'Hostname="gpu-07"')  # fmt: skip
    shown = ok(cli, "node", "show", "gpu-07")
    assert 'readings           Prometheus http://prom:9090 {Hostname="gpu-07"}' in shown
    ok(cli, "node", "edit", "gpu-07", "--source", "ssh")
    assert "readings           SSH (nvidia-smi)" in ok(cli, "node", "show", "gpu-07")
    assert _node(cli)["prom_url"] == "http://prom:9090"  # kept for the next switch
    doc = json.loads(ok(cli, "node", "show", "gpu-07", "--json"))
    assert doc["readings"] == "SSH (nvidia-smi)"


def test_a_provider_sets_it_for_its_nodes_a_nodes_own_wins(cli: Cli) -> None:
    ok(cli, "provider", "add", "k8s", "--kind", "colo", "--source", "prometheus",
       "--url", "https://prom.lab.example/prometheus/", "--match", 'cluster="a"')  # fmt: skip
    ok(cli, "node", "add", "n1", "--ssh", "ssh root@h1", "--provider", "k8s")
    ok(cli, "node", "add", "n2", "--ssh", "ssh root@h2", "--provider", "k8s", "--match",
       'Hostname="h2"')  # fmt: skip
    ok(cli, "node", "add", "n3", "--ssh", "ssh root@h3", "--provider", "k8s", "--source", "ssh")
    url = "https://prom.lab.example/prometheus"
    said = {
        n: json.loads(ok(cli, "node", "show", n, "--json"))["readings"] for n in ("n1", "n2", "n3")
    }
    assert said == {
        "n1": f'Prometheus {url} {{cluster="a", Hostname="n1"}}',
        "n2": f'Prometheus {url} {{Hostname="h2"}}',
        "n3": "SSH (nvidia-smi)",
    }
    ok(cli, "provider", "edit", "k8s", "--source", "ssh")
    assert json.loads(ok(cli, "node", "show", "n1", "--json"))["readings"] == "SSH (nvidia-smi)"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--url", "prom:9090"],
            "prom_url (--url): give the scheme: http://HOST:9090 or https://HOST",
        ),
        (["--url", "prom.lab:9090/api"], "give the scheme"),
        (["--url", "http://admin:hunter2@prom:9090"], "no user or password in the URL"),
        (["--url", "http://prom:9090/api/v1/query?query=up"], "no ?query"),
        (["--url", "http://169.254.169.254"], "link-local or cloud metadata address"),
        (["--url", "http://metadata.google.internal:80"], "cloud metadata service"),
        (["--match", "Hostname=gpu-07"], "a value goes in quotes after the operator"),
        (["--match", 'Hostname="gpu-07"} or vector(1'], "expected a comma"),
        (["--match", 'Hostname="gpu-07'], "closing quote is missing"),
        (["--source", "prom"], "must be ssh or prometheus"),
    ],
)
def test_typos_are_refused_saying_what_and_change_nothing(
    cli: Cli, args: list[str], said: str
) -> None:
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@10.0.0.7", "--source", "prometheus")
    before = _node(cli)
    args = ["--source", "prometheus", *args]  # the last --source given wins
    r = cli("node", "edit", "gpu-07", *args)
    assert r.code != 0 and said in r.err, r.err
    assert "Traceback" not in r.err and "hunter2" not in r.err + r.out
    assert _node(cli) == before
    r = cli("node", "add", "gpu-08", "--ssh", "ssh root@10.0.0.8", *args)
    assert r.code != 0 and said in r.err
    r = cli("provider", "add", "p", "--kind", "colo", *args)
    assert r.code != 0 and said in r.err
    assert json.loads(ok(cli, "provider", "list", "--json")) == []


def test_the_token_is_never_the_ledgers(cli: Cli, tmp_path: Path) -> None:
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@10.0.0.7", "--source", "prometheus")
    r = cli("node", "edit", "gpu-07", "--token-file", "glpat-AbCdEf1234567890XyZw")
    assert r.code != 0 and "glpat-AbCdEf1234567890XyZw" not in r.err
    token = token_file(tmp_path, "s3cr3t\n")
    ok(cli, "node", "edit", "gpu-07", "--token-file", str(token))
    assert _node(cli)["prom_token_file"] == str(token)


def _token_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    shared = token_file(
        tmp_path, "https://alice:ghp_AbCdEf@github.com\n", 0o644, name=".git-credentials"
    )
    link = tmp_path / "link"
    link.symlink_to(shared)
    return {
        "fifo": (fifo, "is not a regular file"),
        "shared": (shared, "is open to its group and others (mode 0644)"),
        "link": (link, "cannot be read: it is a symbolic link"),
        "missing": (tmp_path / "missing", "cannot be read"),
    }


def test_a_token_file_that_is_no_private_file_is_refused_when_given(
    cli: Cli, tmp_path: Path
) -> None:
    ok(cli, "provider", "add", "k8s", "--kind", "colo", "--source", "prometheus")
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@10.0.0.7", "--source", "prometheus")
    before = _node(cli)
    for path, said in _token_files(tmp_path).values():
        for args in (
            ["node", "edit", "gpu-07"],
            ["node", "add", "gpu-08", "--ssh", "ssh root@10.0.0.8", "--source", "prometheus"],
            ["provider", "edit", "k8s"],
            ["provider", "add", "k9", "--kind", "colo", "--source", "prometheus"],
        ):
            r = cli(*args, "--token-file", str(path))
            assert r.code != 0 and f"prom_token_file (--token-file): {said}" in r.err, r.err
            assert "ghp_" not in r.err + r.out and "Traceback" not in r.err
    assert _node(cli) == before
    assert [p["name"] for p in json.loads(ok(cli, "provider", "list", "--json"))] == ["k8s"]


def _private(tmp_path: Path) -> str:
    token = token_file(tmp_path, "s3cr3t\n")
    return str(token)


def test_a_token_goes_over_https_or_to_this_machine_only(
    cli: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    token = _private(tmp_path)
    prom = ["--source", "prometheus", "--token-file", token]
    said = "prom_url (--url): a bearer token is sent over https only"
    r = cli("node", "add", "gpu-07", "--ssh", "ssh root@h", *prom, "--url", "http://prom:9090")
    assert r.code != 0 and said in r.err and "http://prom:9090 would carry it" in r.err, r.err
    r = cli("provider", "add", "k8s", "--kind", "colo", *prom, "--url", "http://10.0.0.9:9090")
    assert r.code != 0 and said in r.err, r.err
    assert json.loads(ok(cli, "provider", "list", "--json")) == []
    for i, url in enumerate(("https://prom:9090", "http://127.0.0.1:9090",
                             "http://localhost:9090", "http://[::1]:9090")):  # fmt: skip
        ok(cli, "provider", "add", f"p{i}", "--kind", "colo", *prom, "--url", url)
    # The provider's token goes only with the provider's URL: a node's own plain URL is
    # read with no token (as the poller reads it), so it is taken; its own token is not.
    ok(cli, "provider", "add", "k8s", "--kind", "colo", *prom, "--url", "https://prom")
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@h", "--provider", "k8s")
    ok(cli, "node", "edit", "gpu-07", "--url", "http://prom:9090")
    with Ledger.open(ledger_path) as led:
        (node,) = inherit(led.nodes(), led.readable_providers()[0])
    assert node.prom_url == "http://prom:9090" and node.prom_token_file == ""
    r = cli("node", "edit", "gpu-07", "--token-file", token)
    assert r.code != 0 and said in r.err, r.err
    r = cli("provider", "edit", "k8s", "--url", "http://prom:9090")
    assert r.code != 0 and said in r.err, r.err


def test_prometheus_options_on_a_node_read_over_ssh_are_refused(cli: Cli, tmp_path: Path) -> None:
    token = _private(tmp_path)
    ok(cli, "node", "add", "gpu-07", "--ssh", "ssh root@10.0.0.7")
    before = _node(cli)
    for args in (["--url", "http://prom:9090"], ["--match", 'Hostname="x"'],
                 ["--token-file", token]):  # fmt: skip
        r = cli("node", "edit", "gpu-07", *args)
        assert r.code != 0 and "node gpu-07 reads its GPUs over SSH" in r.err, r.err
        assert f"{args[0]} are for --source prometheus" in r.err
        r = cli("node", "add", "gpu-08", "--ssh", "ssh root@h", *args)
        assert r.code != 0 and "reads its GPUs over SSH" in r.err, r.err
        r = cli("provider", "add", "p", "--kind", "colo", *args)
        assert r.code != 0 and "provider p's nodes read their GPUs over SSH" in r.err, r.err
    assert _node(cli) == before
    # With the source on the node, its provider, or a node of the provider, they are taken.
    ok(cli, "node", "edit", "gpu-07", "--source", "prometheus", "--url", "http://prom:9090")
    ok(cli, "provider", "add", "k8s", "--kind", "colo")
    ok(cli, "node", "add", "n1", "--ssh", "ssh root@h1", "--provider", "k8s",
       "--source", "prometheus")  # fmt: skip
    ok(cli, "provider", "edit", "k8s", "--url", "http://prom:9090")
    ok(cli, "provider", "add", "k9", "--kind", "colo", "--source", "prometheus")
    ok(cli, "node", "add", "n2", "--ssh", "ssh root@h2", "--provider", "k9", "--match",
       'Hostname="h2"')  # fmt: skip
    r = cli("node", "add", "n3", "--ssh", "ssh root@h3", "--provider", "k9", "--source", "ssh",
            "--url", "http://prom:9090")  # fmt: skip
    assert r.code != 0 and "node n3 reads its GPUs over SSH" in r.err
    assert "on the node or its provider k9" in r.err


def test_single_quoted_matchers_are_taken_and_refusals_read_plainly(cli: Cli) -> None:
    ok(cli, "node", "add", "gpu-09", "--ssh", "ssh root@h", "--source", "prometheus",
       "--url", "http://prom:9090", "--match", "Hostname='gpu-09'")  # fmt: skip
    assert _node(cli, "gpu-09")["prom_match"] == 'Hostname="gpu-09"'
    r = cli("node", "edit", "gpu-09", "--match", "Hostname=gpu-09")
    assert r.code != 0, r.err
    assert r.err.strip().endswith(
        "prom_match (--match): a value goes in quotes after the operator, as in"
        ' Hostname="gpu-09" (at character 10); in: Hostname=gpu-09'
    ), r.err
