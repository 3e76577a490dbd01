package nodefacts

import (
	"maps"
	"testing"
)

func TestManifestFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		want     map[string]string
	}{
		{"kubeadm's: binary and flags in command", `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --advertise-address=10.0.0.140
    - --etcd-servers=https://127.0.0.1:2379
`, map[string]string{"advertise-address": "10.0.0.140", "etcd-servers": "https://127.0.0.1:2379"}},
		{"args only: the image's entrypoint is the binary", `apiVersion: v1
kind: Pod
metadata: {name: etcd}
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5-0
    args: ["--name=cp-1", "--listen-peer-urls=https://10.0.0.11:2380"]
`, map[string]string{"name": "cp-1", "listen-peer-urls": "https://10.0.0.11:2380"}},
		{"command and args: one argv, the later value wins", `spec:
  containers:
  - name: kube-scheduler
    command: [kube-scheduler, --bind-address=127.0.0.1, --leader-elect=true]
    args: [--bind-address=0.0.0.0]
`, map[string]string{"bind-address": "0.0.0.0", "leader-elect": "true"}},
		{"--flag value form", `spec:
  containers:
  - name: kube-apiserver
    command: [kube-apiserver, --advertise-address, 10.0.0.140, --secure-port, "6443"]
`, map[string]string{"advertise-address": "10.0.0.140", "secure-port": "6443"}},
		{"a bare flag followed by a flag is true; -- ends the flags", `spec:
  containers:
  - name: kube-apiserver
    args: [--allow-privileged, --v=2, "-x=1", --, --after=1]
`, map[string]string{"allow-privileged": "true", "v": "2"}},
		{"an empty value stays empty", `spec:
  containers:
  - name: etcd
    command: [etcd, --initial-cluster-token=]
`, map[string]string{"initial-cluster-token": ""}},
		{"sidecars' flags are not the component's", `spec:
  containers:
  - name: kube-apiserver
    command: [kube-apiserver, --advertise-address=10.0.0.140]
  - name: proxy
    command: [proxy, --advertise-address=127.0.0.1]
`, map[string]string{"advertise-address": "10.0.0.140"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ManifestFlags([]byte(tc.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestManifestFlagsRefusesNonPods(t *testing.T) {
	for name, m := range map[string]string{
		"not YAML":      "spec: [",
		"no containers": "apiVersion: v1\nkind: Pod\nspec: {}\n",
	} {
		if f, err := ManifestFlags([]byte(m)); err == nil {
			t.Errorf("%s: no error, flags %v", name, f)
		}
	}
}

func TestKubeletFlags(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		want      map[string]string
	}{
		{"kubeadm's", `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=10.0.0.11 --pod-infra-container-image=registry.k8s.io/pause:3.10"` + "\n",
			map[string]string{"container-runtime-endpoint": "unix:///run/containerd/containerd.sock", "node-ip": "10.0.0.11", "pod-infra-container-image": "registry.k8s.io/pause:3.10"}},
		{"single quotes, a --flag value pair, other variables", "# comment\nOTHER=\"--node-ip=1.2.3.4\"\nKUBELET_KUBEADM_ARGS='--node-ip 10.0.0.12'\n",
			map[string]string{"node-ip": "10.0.0.12"}},
		{"absent", "", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KubeletFlags([]byte(tc.env)); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
