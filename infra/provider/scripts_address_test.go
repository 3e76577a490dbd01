package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestAddressScriptsGolden(t *testing.T) {
	const config = "/etc/kubernetes/kubeadm/init.yaml"
	scriptstest.Golden(t, moveScript(config, "10.0.0.120", "10.0.0.11"), "moved")
	scriptstest.Golden(t, moveScript(config, "", "10.0.0.11"), "manifests")
	scriptstest.Golden(t, regenerateCerts(config, []string{"apiserver.crt"}), "one")
	scriptstest.Golden(t, regenerateCerts(config, []string{"apiserver.crt", "etcd/server.crt", "etcd/peer.crt", "front-proxy-client.crt"}), "cas")
}
