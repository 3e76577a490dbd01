package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/cilium"
)

func TestDataplaneScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, ciliumCNIRemove(), "")
	for _, name := range []string{"kube-proxy-objects", "kube-proxy-delete", "kube-proxy-status"} {
		scriptstest.Golden(t, kubeProxyScript(name), "")
	}
	scriptstest.Golden(t, kubeProxyRestore("/etc/kubernetes/kubeadm/init.yaml"), "")
	scriptstest.Golden(t, kubeRules("kube-rules-check"), "")
	scriptstest.Golden(t, kubeRules("kube-rules-clean"), "")
}

func TestNetworkScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, joinedNodeReady("gpu-1"), "")
	scriptstest.Golden(t, scripts.Render("dataplane/agents", agentsArgs{Kubectl: kubectl, Namespace: cilium.Namespace, DaemonSet: cilium.AgentDaemonSet}), "")
}
