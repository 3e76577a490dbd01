package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// The kubeadm steps' scripts as nodes receive them: the bootstrap, a
// node's join and removal, and the API reads around them.
func TestKubeadmScriptsGolden(t *testing.T) {
	boot := KubeadmInitArgs{ConfigPath: "/etc/kubernetes/kubeadm/init.yaml"}
	scriptstest.Golden(t, initScript(boot), "")
	boot.IgnorePreflight = []string{"NumCPU", "Mem"}
	scriptstest.Golden(t, initScript(boot), "ignore-preflight")
	join := KubeadmJoinArgs{ConfigPath: "/etc/kubernetes/kubeadm/join.yaml"}
	scriptstest.Golden(t, joinScript(join), "")
	join.IgnorePreflight = []string{"NumCPU"}
	scriptstest.Golden(t, joinScript(join), "ignore-preflight")
	scriptstest.Golden(t, imagesPull("/etc/kubernetes/kubeadm/init.yaml"), "")
	scriptstest.Golden(t, scripts.Render("kubeadm/upload-config", uploadConfigArgs{Config: "/etc/kubernetes/kubeadm/init.yaml"}), "")
	scriptstest.Golden(t, scripts.Render("kubeadm/etcd-aside", etcdAside), "")
	scriptstest.Golden(t, resetKeepingCAs(), "")
	scriptstest.Golden(t, resetNode(), "")

	scriptstest.Golden(t, scripts.Render("cluster/uid", clusterArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, scripts.Render("cluster/readyz", clusterArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, peerCheck(), "")
	node := clusterArgs{Kubectl: kubectl, Node: "gpu-1"}
	scriptstest.Golden(t, scripts.Render("cluster/node-ready", node), "")
	scriptstest.Golden(t, scripts.Render("leave/drain", node), "")
	scriptstest.Golden(t, scripts.Render("leave/stop-kubelet", nil), "")
	scriptstest.Golden(t, scripts.Render("kubectl/delete-node", node), "")
	scriptstest.Golden(t, scripts.Render("detached/pending", pendingArgs{Dir: runsDir + "/" + joinRun}), "")
}
