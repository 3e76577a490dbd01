package nodefacts

import (
	"slices"
	"testing"
)

func TestUnmountedPaths(t *testing.T) {
	const base = `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver}
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --service-account-issuer=https://kubernetes.default.svc.cluster.local
    - --etcd-servers=https://127.0.0.1:2379
    - --encryption-provider-config=/etc/kubernetes/enc/config.yaml
`
	const mounts = `    volumeMounts:
    - {name: k8s-certs, mountPath: /etc/kubernetes/pki, readOnly: true}
    - {name: enc, mountPath: /etc/kubernetes/enc/}
`
	for _, tc := range []struct {
		name, manifest string
		want           []Unmounted
	}{
		{"kubeadm's and extraVolumes'", base + mounts, nil},
		{"a flag added without its volume", base + "    - --tracing-config-file=/etc/kubernetes/tracing.yaml\n" + mounts,
			[]Unmounted{{"tracing-config-file", "/etc/kubernetes/tracing.yaml"}}},
		{"no mounts at all", base,
			[]Unmounted{{"client-ca-file", "/etc/kubernetes/pki/ca.crt"}, {"encryption-provider-config", "/etc/kubernetes/enc/config.yaml"}}},
		// A mount of /etc/kubernetes/pki does not cover /etc/kubernetes/pki2.
		{"a sibling with the mount's name as prefix", base + "    - --audit-policy-file=/etc/kubernetes/pki2/audit.yaml\n" + mounts,
			[]Unmounted{{"audit-policy-file", "/etc/kubernetes/pki2/audit.yaml"}}},
		// Lists name paths one by one.
		{"a list", base + "    - --tls-cert-file=/etc/kubernetes/pki/a.crt,/var/lib/b.crt\n" + mounts,
			[]Unmounted{{"tls-cert-file", "/var/lib/b.crt"}}},
	} {
		pod, err := ParsePod([]byte(tc.manifest))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := UnmountedPaths(pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
