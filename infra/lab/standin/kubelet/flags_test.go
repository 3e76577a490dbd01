package kubelet

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// What kubeadm 1.34 writes to /var/lib/kubelet/config.yaml.
const kubeadmKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggIdleTimeout: 0s
`

// unitArgv expands the kubeadm .deb unit's ExecStart the way systemd does:
// an unquoted $VAR becomes its whitespace-separated words.
func unitArgv(env map[string]string) []string {
	execStart := "/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"
	var argv []string
	for _, w := range strings.Fields(execStart) {
		if strings.HasPrefix(w, "$") {
			argv = append(argv, strings.Fields(env[w[1:]])...)
		} else {
			argv = append(argv, w)
		}
	}
	return argv[1:]
}

func TestKubeadmCommandLine(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(kubeadmKubeletConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBELET_KUBECONFIG_ARGS": "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf",
		"KUBELET_CONFIG_ARGS":     "--config=" + cfgPath,
		// As in /var/lib/kubelet/kubeadm-flags.env (quotes removed by the env file parser).
		"KUBELET_KUBEADM_ARGS": "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --hostname-override=CP1 " +
			"--node-ip=10.0.0.11 --node-labels=topology.kubernetes.io/zone=rack1,homelab.dev/role=cp " +
			"--pod-infra-container-image=registry.k8s.io/pause:3.10.1 --register-with-taints=dedicated=infra:NoSchedule,node.kubernetes.io/special:PreferNoSchedule",
		// /etc/default/kubelet, mixing the two flag forms and unknown flags.
		"KUBELET_EXTRA_ARGS": "--v 2 --fail-swap-on --max-pods 50 --oom-score-adj -999 -v=4 --node-labels node.kubernetes.io/pool=a --cgroup-driver systemd",
	}
	f, err := parseFlags(unitArgv(env))
	if err != nil {
		t.Fatal(err)
	}
	wantIgnored := []string{
		"--pod-infra-container-image=registry.k8s.io/pause:3.10.1", "--v 2", "--fail-swap-on", "--max-pods 50",
		"--oom-score-adj -999", "-v=4", "--cgroup-driver systemd",
	}
	if !reflect.DeepEqual(f.ignored, wantIgnored) {
		t.Errorf("ignored\n got %q\nwant %q", f.ignored, wantIgnored)
	}
	c, err := configFromFlags(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "cp1" || c.NodeIP != "10.0.0.11" {
		t.Errorf("node %q ip %q", c.NodeName, c.NodeIP)
	}
	if c.KubeconfigPath != "/etc/kubernetes/kubelet.conf" || c.BootstrapKubeconfigPath != "/etc/kubernetes/bootstrap-kubelet.conf" {
		t.Errorf("kubeconfigs %q %q", c.KubeconfigPath, c.BootstrapKubeconfigPath)
	}
	if c.RuntimeEndpoint != "unix:///var/run/containerd/containerd.sock" || c.ManifestDir != "/etc/kubernetes/manifests" ||
		c.HealthzAddress != "127.0.0.1:10248" || !c.RotateCertificates || c.StatusInterval != 0 {
		t.Errorf("config %+v", c)
	}
	wantLabels := map[string]string{"topology.kubernetes.io/zone": "rack1", "homelab.dev/role": "cp", "node.kubernetes.io/pool": "a"}
	if !reflect.DeepEqual(c.NodeLabels, wantLabels) {
		t.Errorf("labels %v", c.NodeLabels)
	}
	wantTaints := []corev1.Taint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/special", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	if !reflect.DeepEqual(c.RegisterWithTaints, wantTaints) {
		t.Errorf("taints %v", c.RegisterWithTaints)
	}
}

func TestFlagForms(t *testing.T) {
	f, err := parseFlags([]string{"--kubeconfig", "/k", "-config=/c", "--node-ip", "10.0.0.2", "--version=raw", "--unknown", "--hostname-override=n"})
	if err != nil {
		t.Fatal(err)
	}
	if f.kubeconfig != "/k" || f.config != "/c" || f.nodeIP != "10.0.0.2" || f.version != "raw" || f.hostnameOverride != "n" {
		t.Errorf("%+v", f)
	}
	if _, err := parseFlags([]string{"--kubeconfig"}); err == nil {
		t.Error("missing value accepted")
	}
	f, _ = parseFlags([]string{"--version"})
	if f.version != "true" {
		t.Errorf("version %q", f.version)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"missing config file":  {"--config=/nonexistent/config.yaml"},
		"restricted label":     {"--node-labels=node-role.kubernetes.io/control-plane="},
		"label without value":  {"--node-labels=foo"},
		"bad taint effect":     {"--register-with-taints=a=b:Sometimes"},
		"node ip not an ip":    {"--node-ip=cp1"},
		"invalid label value":  {"--node-labels=a=b c"},
		"k8s.io label":         {"--node-labels=example.k8s.io/x=y"},
		"taint without effect": {"--register-with-taints=a=b"},
	} {
		f, err := parseFlags(args)
		if err == nil {
			_, err = configFromFlags(f)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Allowed kubernetes.io labels.
	f, _ := parseFlags([]string{"--node-labels=kubelet.kubernetes.io/x=1,node.kubernetes.io/exclude-from-external-load-balancers=true,kubernetes.io/hostname=h"})
	if _, err := configFromFlags(f); err != nil {
		t.Error(err)
	}
}

func TestDefaults(t *testing.T) {
	c := Config{NodeName: "n"}
	c.defaults()
	if c.PKIDir != "/var/lib/kubelet/pki" || c.StateDir != "/var/lib/kubelet/standin/pods" || c.LogDir != "/var/log/pods" ||
		c.ManifestDir != "/etc/kubernetes/manifests" || c.RuntimeEndpoint != "unix:///run/containerd/containerd.sock" {
		t.Errorf("%+v", c)
	}
}
