package staticpod

import (
	"slices"
	"testing"
)

const etcdManifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.11:2379
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.11:2379
    - --data-dir=/var/lib/etcd
    - --name=$(NODE)
    env:
    - name: NODE
      value: cp1
    - name: GOMAXPROCS
      value: "2"
    - name: FROM_API
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    image: registry.k8s.io/etcd:3.6.5-0
    imagePullPolicy: IfNotPresent
    name: etcd
    args: ["--log-level=$(LEVEL)", "--cost=$$(NODE)"]
  hostNetwork: true
  priorityClassName: system-node-critical
status: {}
`

func TestParseManifest(t *testing.T) {
	s, err := ParseManifest("/etc/kubernetes/manifests/etcd.yaml", []byte(etcdManifest))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "etcd" {
		t.Errorf("name %q", s.Name)
	}
	want := []string{"etcd", "--advertise-client-urls=https://10.0.0.11:2379", "--data-dir=/var/lib/etcd",
		"--name=cp1", "--log-level=$(LEVEL)", "--cost=$(NODE)"}
	if !slices.Equal(s.Argv, want) {
		t.Errorf("argv\n got %q\nwant %q", s.Argv, want)
	}
	if !slices.Equal(s.Env, []string{"NODE=cp1", "GOMAXPROCS=2"}) {
		t.Errorf("env %q", s.Env)
	}
	if len(s.Hash) != 64 {
		t.Errorf("hash %q", s.Hash)
	}
}

func TestParseManifestWithoutCommand(t *testing.T) {
	m := `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","image":"registry.k8s.io/kube-scheduler:v1.34.4","args":["--v=2"]}]}}`
	s, err := ParseManifest("/m/kube-scheduler.json", []byte(m))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "kube-scheduler" || !slices.Equal(s.Argv, []string{"kube-scheduler", "--v=2"}) {
		t.Errorf("got %q %q", s.Name, s.Argv)
	}
}

func TestParseManifestRejects(t *testing.T) {
	for name, m := range map[string]string{
		"not yaml":      "\t: [",
		"no containers": "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n",
		"not a pod":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	} {
		if _, err := ParseManifest("/m/x.yaml", []byte(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
