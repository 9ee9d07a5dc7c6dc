"""Docker/kubernetes.yaml: valid against the Kubernetes schemas (kubernetes-validate, schemas
bundled, no network), its larder.yaml accepted by the real binary with the environment the pod
would have, and its probes, ports and scrape annotations matching what that configuration
serves."""

import http.client
import os
import shutil
import subprocess

import pytest
import yaml

from helpers import larder_bin
from test_container import DOCKER, dockerfile_final_stage, image_env

MANIFEST = DOCKER / "kubernetes.yaml"
# The newest Kubernetes release kubernetes-validate knows, and one a year older.
VERSIONS = ("1.37", "1.34")


def documents():
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def pod_env(docs):
    """The container's variables as the pod sets them, the Secret's value filled in."""
    container = docs["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]
    out = {}
    for var in container["env"]:
        if "value" in var:
            out[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            secret = docs["Secret"]
            assert secret["metadata"]["name"] == ref["name"]
            out[var["name"]] = secret["stringData"][ref["key"]]
    return out


def effective_env(docs, config_path=None):
    """Image variables, then the pod's, then what the entry point adds (it is run to tell);
    `config_path` stands in for the ConfigMap's mount."""
    env = {"PATH": os.environ["PATH"], **image_env(dockerfile_final_stage()), **pod_env(docs)}
    if config_path:
        env["LARDER_CONFIG"] = str(config_path)
    r = subprocess.run([str(DOCKER / "entrypoint.sh")], env={**env, "LARDER_BIN": "/usr/bin/env"},
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("version", VERSIONS)
def test_manifest_passes_kubernetes_validate_strictly(version):
    tool = shutil.which("kubernetes-validate")
    assert tool, "kubernetes-validate is needed (PyPI; scripts/install-deps.sh installs it)"
    r = subprocess.run([tool, "--strict", "-k", version, str(MANIFEST)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for kind in ("secret", "configmap", "service", "statefulset"):
        assert f"passed for resource {kind}/" in r.stdout + r.stderr


def test_embedded_configuration_passes_check_config_with_the_pods_environment(tmp_path):
    docs = documents()
    config = tmp_path / "larder.yaml"
    config.write_text(docs["ConfigMap"]["data"]["larder.yaml"])
    env = effective_env(docs, config)
    r = subprocess.run([larder_bin(), "check-config", "--config", str(config)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "OK" in r.stdout + r.stderr, r.stdout + r.stderr


def test_probes_ports_volume_and_annotations_match_the_configuration():
    docs = documents()
    text = docs["ConfigMap"]["data"]["larder.yaml"]
    config = yaml.safe_load(text)
    env = effective_env(docs)
    admin_port = int(env["LARDER_ADMIN_LISTEN"].rsplit(":", 1)[1])
    proxy_port = int(env["LARDER_LISTEN"].rsplit(":", 1)[1])
    # What the file says is what the image's variables say, so neither surprises a reader.
    assert config["admin_listen"] == env["LARDER_ADMIN_LISTEN"]
    assert config["listen"] == [env["LARDER_LISTEN"]]
    assert config["cache_dir"] == env["LARDER_CACHE_DIR"]
    assert config["tls"]["intercept_ca_dir"] == env["LARDER_TLS_INTERCEPT_CA_DIR"]
    assert ",".join(config["allow_clients"]) == env["LARDER_ALLOW_CLIENTS"]

    pod = docs["StatefulSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"proxy": proxy_port, "admin": admin_port}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and ports[get["port"]] == admin_port and "httpHeaders" not in get
    notes = pod["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
    assert int(notes["prometheus.io/port"]) == admin_port

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["cache"] == env["LARDER_CACHE_DIR"]
    assert os.path.join(mounts["config"], "larder.yaml") == env["LARDER_CONFIG"]
    # The interception CA on a volume of its own: not the cache's, and writable (the root file system is not).
    ca_dir = env["LARDER_TLS_INTERCEPT_CA_DIR"]
    assert os.path.dirname(ca_dir) == mounts["state"] and not ca_dir.startswith(mounts["cache"] + "/")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    claims = docs["StatefulSet"]["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["cache", "state"]
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001 == pod["spec"]["securityContext"]["fsGroup"]
    # Draining ends before the kubelet's SIGKILL.
    grace = int(config["shutdown_grace"].rstrip("s"))
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace

    for service in yaml.safe_load_all(MANIFEST.read_text()):
        if service and service["kind"] == "Service":
            for p in service["spec"]["ports"]:
                assert p["targetPort"] in ports


def test_the_kubelets_probes_succeed_without_the_token(larder_factory):
    """The kubelet sends Host: <pod IP>:<port> and no Authorization; here the pod IP is 127.0.0.1."""
    docs = documents()
    config = yaml.safe_load(docs["ConfigMap"]["data"]["larder.yaml"])
    token = "k8s-test-token"
    config.update({"admin_listen": "127.0.0.1:0", "admin_token": token, "workers": 1})
    config.pop("listen")
    config.pop("cache_dir")
    config.pop("tls")  # the CA directory: the test's own (interception is off anyway)
    lr = larder_factory(config=config)

    def get(path, headers):
        conn = http.client.HTTPConnection("127.0.0.1", lr.admin_port, timeout=10)
        try:
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{lr.admin_port}", "User-Agent": "kube-probe/1.37",
                                               **headers})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    assert get("/healthz", {}) == (200, b"ok\n")
    assert get("/readyz", {}) == (200, b"ready\n")
    # Everything else still needs the token (Prometheus sends it from a file).
    assert get("/metrics", {})[0] == 401
    status, body = get("/metrics", {"Authorization": f"Bearer {token}"})
    assert status == 200 and b"larder_uptime_seconds" in body
    # /readyz is exempt from the token, not from the Host check.
    assert get("/readyz", {"Host": "evil.example"})[0] == 421
