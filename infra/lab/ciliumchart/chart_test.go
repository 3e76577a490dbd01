package ciliumchart

import (
	"bytes"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/cilium"
)

func render(t *testing.T, values map[string]any) (map[string]string, error) {
	t.Helper()
	data, err := Archive()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Name != "cilium" || ch.Metadata.Version != Version {
		t.Fatalf("chart %s %s", ch.Metadata.Name, ch.Metadata.Version)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: cilium.Release, Namespace: cilium.Namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Render(ch, vals)
}

func valuesFor(t *testing.T, replacement string) map[string]any {
	t.Helper()
	inv, _, err := inventory.Load("../../../inventory/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inv.Cluster.KubeProxy.Replacement = replacement
	b, err := cilium.Render(inv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := helmrelease.ParseValues(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The chart renders from our values what homelab reads and waits for,
// where Cilium's chart puts it.
func TestRendersWhatHomelabReads(t *testing.T) {
	for _, mode := range []string{"none", "cilium"} {
		out, err := render(t, valuesFor(t, mode))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(out["cilium/templates/cilium-configmap.yaml"]), &cm); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"kube-proxy-replacement": map[string]string{"none": "false", "cilium": "true"}[mode],
			"k8s-service-host": "10.77.0.100", "k8s-service-port": "6443", "cluster-name": "homelab", "ipam": "kubernetes",
			"write-cni-conf-when-ready": "/host/etc/cni/net.d/05-cilium.conflist"}
		for k, v := range want {
			if cm.Name != "cilium-config" || cm.Data[k] != v {
				t.Errorf("%s: cilium-config %s=%q, want %q", mode, k, cm.Data[k], v)
			}
		}
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(out["cilium/templates/cilium-agent-daemonset.yaml"]), &ds); err != nil {
			t.Fatal(err)
		}
		spec := ds.Spec.Template.Spec
		if ds.Name != "cilium" || ds.Namespace != "kube-system" || ds.Spec.Template.Labels["k8s-app"] != "cilium" || !spec.HostNetwork ||
			len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
			t.Errorf("%s: agent DaemonSet %s/%s labels %v hostNetwork %v tolerations %v", mode, ds.Namespace, ds.Name, ds.Spec.Template.Labels, spec.HostNetwork, spec.Tolerations)
		}
		// Our values roll the agents when their configuration changes.
		if ds.Spec.Template.Annotations["cilium.io/cilium-configmap-checksum"] == "" {
			t.Errorf("%s: agents do not roll with cilium-config", mode)
		}
		var dep appsv1.Deployment
		if err := yaml.Unmarshal([]byte(out["cilium/templates/cilium-operator-deployment.yaml"]), &dep); err != nil {
			t.Fatal(err)
		}
		if dep.Name != "cilium-operator" || *dep.Spec.Replicas < 1 {
			t.Errorf("%s: operator %s replicas %v", mode, dep.Name, dep.Spec.Replicas)
		}
	}
}

func TestRefusesTheReplacementWithoutAnAPIAddress(t *testing.T) {
	_, err := render(t, map[string]any{"kubeProxyReplacement": true})
	if err == nil || !strings.Contains(err.Error(), "k8sServiceHost") {
		t.Errorf("replacement without k8sServiceHost: %v", err)
	}
	_, err = render(t, map[string]any{"kubeProxyReplacement": "partial"})
	if err == nil || !strings.Contains(err.Error(), "true or false") {
		t.Errorf("kubeProxyReplacement partial: %v", err)
	}
}

func TestArchiveIsReproducible(t *testing.T) {
	a, _ := Archive()
	b, _ := Archive()
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same source differ")
	}
	dir := t.TempDir()
	p, err := Write(dir)
	if err != nil || !strings.HasSuffix(p, "/cilium-"+Version+".tgz") {
		t.Fatalf("Write: %s %v", p, err)
	}
}
