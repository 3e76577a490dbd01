package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestKubectlScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, scripts.Render("kubectl/nodes-get", nodesArgs{Kubectl: kubectl, Names: []string{"gpu-1", "gpu-2"}}), "")
	old := NodeMetaArgs{Node: "gpu-1", Labels: map[string]string{"homelab.dev/role": "gpu", "nvidia.com/gpu.present": "true"},
		Taints: []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, {Key: "dedicated", Effect: "NoExecute"}}}
	in := NodeMetaArgs{Node: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"},
		Taints: []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}}
	scriptstest.Golden(t, scripts.Render("kubectl/node-meta", metaChanges(in, old)), "dropped")
	scriptstest.Golden(t, scripts.Render("kubectl/node-meta", metaChanges(NodeMetaArgs{Node: "gpu-1", Labels: in.Labels}, NodeMetaArgs{})), "labels")
}

func TestManifestScriptsGolden(t *testing.T) {
	cluster := ManifestArgs{Kind: "RuntimeClass", Name: "nvidia"}
	namespaced := ManifestArgs{Kind: "ConfigMap", Name: "homelab-info", Namespace: "kube-public"}
	scriptstest.Golden(t, cluster.script("apply"), "")
	for _, name := range []string{"get", "delete"} {
		scriptstest.Golden(t, cluster.script(name), "cluster")
		scriptstest.Golden(t, namespaced.script(name), "namespaced")
	}
}
