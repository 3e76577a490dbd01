package nodefacts

import "testing"

func TestParseVersions(t *testing.T) {
	for _, tc := range []struct {
		name, out    string
		controlPlane string
		kubelet      string
		containerd   string
		joined       bool
	}{
		{name: "a control-plane node", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:v1.34.4\nimage=kube-controller-manager registry.k8s.io/kube-controller-manager:v1.34.4\nimage=kube-scheduler registry.k8s.io/kube-scheduler:v1.34.4\nversion.kubelet=v1.34.4\njoined=yes\n",
			controlPlane: "v1.34.4", kubelet: "v1.34.4", joined: true},
		{name: "an apply cut off after the apiserver", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:v1.35.4\nimage=kube-controller-manager registry.k8s.io/kube-controller-manager:v1.34.4\nimage=kube-scheduler my.registry:5000/kube-scheduler:v1.34.4\nversion.kubelet=v1.34.4\njoined=yes",
			controlPlane: "v1.34.4", kubelet: "v1.34.4", joined: true},
		{name: "a worker", out: "stamp.kubelet=/usr/bin/kubelet 1 2 3 4\nversion.kubelet=v1.35.4\nstamp.containerd=/usr/bin/containerd 5 6 7 8\nversion.containerd=1.7.28\njoined=yes\ncgroupfs=cgroup2fs", kubelet: "v1.35.4", containerd: "1.7.28", joined: true},
		{name: "a fresh machine", out: "Welcome to Ubuntu\n"},
		{name: "a tag that is no version", out: "image=kube-apiserver registry.k8s.io/kube-apiserver:latest\nversion.kubelet=v1.34.4", kubelet: "v1.34.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ParseVersions(tc.out)
			if got := v.ControlPlane(); got != tc.controlPlane {
				t.Errorf("control plane %q, want %q", got, tc.controlPlane)
			}
			if v.Kubelet != tc.kubelet || v.Containerd != tc.containerd || v.Joined != tc.joined {
				t.Errorf("kubelet %q containerd %q joined %v, want %q %q %v", v.Kubelet, v.Containerd, v.Joined, tc.kubelet, tc.containerd, tc.joined)
			}
		})
	}
}

func TestClusterConfigVersion(t *testing.T) {
	cc := "apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.35.4\nnetworking:\n  podSubnet: 10.244.0.0/16\n"
	if got := ClusterConfigVersion(cc); got != "v1.35.4" {
		t.Errorf("got %q", got)
	}
	if got := ClusterConfigVersion("kind: ClusterConfiguration\n"); got != "" {
		t.Errorf("got %q from a config without a version", got)
	}
}

func TestParseVersionsCgroups(t *testing.T) {
	v := ParseVersions("version.kubelet=v1.34.4\njoined=yes\ncgroupfs=tmpfs\nfailcgroupv1=false\n")
	if !v.CgroupV1 || !v.KubeletAllowsCgroupV1 {
		t.Errorf("%+v", v)
	}
	if v := ParseVersions("cgroupfs=cgroup2fs\n"); v.CgroupV1 || v.KubeletAllowsCgroupV1 {
		t.Errorf("%+v", v)
	}
}
