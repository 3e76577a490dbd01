package etcdbackup

import (
	"strings"
	"testing"
)

const initManifest = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.77.0.120:2379
    - --data-dir=/var/lib/etcd
    - --initial-advertise-peer-urls=https://10.77.0.120:2380
    - --initial-cluster=cp-1=https://10.77.0.120:2380
    - --name=cp-1
    image: registry.k8s.io/etcd:3.6.5-0
    name: etcd
`

func TestJoiningManifest(t *testing.T) {
	flags, err := etcdFlags([]byte(initManifest))
	if err != nil || flags["name"] != "cp-1" || flags["data-dir"] != "/var/lib/etcd" || flags["initial-advertise-peer-urls"] != "https://10.77.0.120:2380" {
		t.Fatalf("%v %v", flags, err)
	}
	cluster := "cp-2=https://10.77.0.121:2380,cp-1=https://10.77.0.120:2380"
	for _, in := range []string{initManifest, strings.Replace(initManifest, "    - --name=cp-1\n", "    - --initial-cluster-state=new\n    - --name=cp-1\n", 1)} {
		out, err := joiningManifest([]byte(in), cluster)
		if err != nil {
			t.Fatal(err)
		}
		got, err := etcdFlags(out)
		if err != nil {
			t.Fatal(err)
		}
		if got["initial-cluster"] != cluster || got["initial-cluster-state"] != "existing" || strings.Count(string(out), "initial-cluster-state") != 1 {
			t.Errorf("joining manifest:\n%s", out)
		}
		if strings.Replace(strings.Replace(string(out), "--initial-cluster="+cluster, "--initial-cluster=cp-1=https://10.77.0.120:2380", 1), "    - --initial-cluster-state=existing\n", "", 1) !=
			strings.Replace(in, "    - --initial-cluster-state=new\n", "", 1) {
			t.Errorf("other lines changed:\n%s", out)
		}
	}
	if _, err := etcdFlags([]byte("kind: Pod\n")); err == nil {
		t.Error("a manifest without etcd's flags was read")
	}
}
