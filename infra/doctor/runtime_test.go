package doctor

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
)

// The runtime row, from the lines doctor/node prints: containerd's cgroup
// driver against the kubelet's (systemd until kubeadm wrote its
// configuration).
func TestCheckRuntime(t *testing.T) {
	n := inventory.Node{Name: "gpu-1", Role: inventory.RoleWorker, Address: "10.0.0.21"}
	const version = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
	dump := func(systemd string) string {
		return base64.StdEncoding.EncodeToString([]byte(`version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = ` + systemd + "\n"))
	}
	for _, tc := range []struct {
		name      string
		lines     map[string]string
		want      Status
		wantCause string
	}{
		{"as the kubelet", map[string]string{"containerd.version": version, "containerd.dump": dump("true"), "kubelet.cgroupDriver": "systemd"}, OK, ""},
		{"before kubeadm wrote the kubelet's", map[string]string{"containerd.version": version, "containerd.dump": dump("true")}, OK, ""},
		{"the package's cgroupfs", map[string]string{"containerd.version": version, "containerd.dump": dump("false"), "kubelet.cgroupDriver": "systemd"}, Fail, "SystemdCgroup = true"},
		{"a cgroupfs kubelet on systemd", map[string]string{"containerd.version": version, "containerd.dump": dump("true"), "kubelet.cgroupDriver": "cgroupfs"}, Fail, "SystemdCgroup = false"},
		{"a configuration that does not load", map[string]string{"containerd.version": version, "containerd.dump": ""}, Fail, "containerd config dump"},
		{"no containerd", map[string]string{"kubelet.cgroupDriver": "systemd"}, Warn, ""},
		{"a file changed after containerd started", map[string]string{"containerd.version": version, "containerd.dump": dump("true"), "kubelet.cgroupDriver": "systemd",
			"containerd.stale": "/etc/containerd/config.toml"}, Warn, "systemctl restart containerd"},
		{"stale and wrong: the mismatch first", map[string]string{"containerd.version": version, "containerd.dump": dump("false"), "kubelet.cgroupDriver": "systemd",
			"containerd.stale": "/etc/containerd/config.toml"}, Fail, "SystemdCgroup = true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &nodeFacts{node: n, reached: true}
			for k, v := range tc.lines {
				f.runtime.read(k, v)
			}
			d := &doctor{t: Target{Inventory: &inventory.Inventory{Nodes: []inventory.Node{n}}}, r: &Report{}}
			d.checkRuntime(n, f)
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want {
				t.Fatalf("findings %+v, want one %s", d.r.Findings, tc.want)
			}
			if tc.wantCause != "" && (len(d.r.Causes) != 1 || !strings.Contains(d.r.Causes[0], tc.wantCause)) {
				t.Errorf("causes %v: want one saying %q", d.r.Causes, tc.wantCause)
			}
		})
	}
}

// The mirror row: where the node's pulls go against cluster.registry.
func TestCheckMirror(t *testing.T) {
	n := inventory.Node{Name: "gpu-1", Role: inventory.RoleWorker, Address: "10.0.0.21"}
	const version = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
	dump := func(configPath string) string {
		return base64.StdEncoding.EncodeToString([]byte(`version = 2
[plugins."io.containerd.grpc.v1.cri"]
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + configPath + `"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
`))
	}
	hosts := func(registry, url string) string {
		data, err := containerd.HostsTOML(containerd.Mirror{Registry: registry, URL: url})
		if err != nil {
			t.Fatal(err)
		}
		return registry + " " + base64.StdEncoding.EncodeToString(data)
	}
	const m = "http://10.0.0.2:5000"
	all := []string{hosts("docker.io", m), hosts("nvcr.io", m), hosts("quay.io", m), hosts("registry.k8s.io", m)}
	for _, tc := range []struct {
		name       string
		mirror     string
		configPath string
		hosts      []string
		want       Status
		detail     string
	}{
		{"in effect", m, containerd.CertsD, all, OK, "pulls of docker.io, nvcr.io, quay.io, registry.k8s.io go to " + m},
		{"none declared, none there", "", "", nil, OK, "no mirror"},
		{"a user's own, not declared", "", containerd.CertsD, all[:1], OK, "pulls of docker.io go to " + m},
		{"containerd reads no hosts.toml", m, "", all, Fail, `config_path is ""`},
		{"one registry missing", m, containerd.CertsD, all[1:], Fail, "pulls of docker.io go to docker.io itself"},
		{"another mirror", m, containerd.CertsD, append(all[1:], hosts("docker.io", "http://old.lan:5000")), Fail, "pulls of docker.io go first to http://old.lan:5000"},
		{"a broken file", "", containerd.CertsD, []string{"quay.io " + base64.StdEncoding.EncodeToString([]byte("server = "))}, Warn, "certs.d/quay.io/hosts.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &nodeFacts{node: n, reached: true}
			f.runtime.read("containerd.version", version)
			f.runtime.read("containerd.dump", dump(tc.configPath))
			for _, h := range tc.hosts {
				f.runtime.read("containerd.hosts", h)
			}
			inv := &inventory.Inventory{Nodes: []inventory.Node{n}}
			inv.Cluster.Registry.Mirror = tc.mirror
			d := &doctor{t: Target{Inventory: inv}, r: &Report{}}
			d.checkMirror(n, f)
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want || !strings.Contains(d.r.Findings[0].Detail, tc.detail) {
				t.Fatalf("findings %+v, want one %s saying %q", d.r.Findings, tc.want, tc.detail)
			}
			if tc.want == Fail && len(d.r.Causes) != 1 {
				t.Errorf("causes %v: want one", d.r.Causes)
			}
		})
	}
}

// The runtime version row: containerd's release against the declared
// Kubernetes version, by containerd's matrix.
func TestCheckRuntimeVersion(t *testing.T) {
	n := inventory.Node{Name: "gpu-1", Role: inventory.RoleWorker, Address: "10.0.0.21"}
	for _, tc := range []struct {
		name, version, kube string
		want                Status
		cause               string // "" : none
	}{
		{"tested", "containerd github.com/containerd/containerd v1.7.28 abc", "v1.35.4", OK, ""},
		{"Debian 12's under v1.35", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", "v1.35.4", Warn, "1.7.28"},
		{"1.x under v1.36", "containerd github.com/containerd/containerd v1.7.28 abc", "v1.36.0", Fail, "containerd 2.x"},
		{"a minor the matrix lacks", "containerd github.com/containerd/containerd v2.3.0 abc", "v1.37.0", OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &nodeFacts{node: n, reached: true}
			f.runtime.read("containerd.version", tc.version)
			inv := &inventory.Inventory{Nodes: []inventory.Node{n}}
			inv.Cluster.KubernetesVersion = tc.kube
			d := &doctor{t: Target{Inventory: inv}, r: &Report{}}
			d.checkRuntimeVersion(n, f)
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want || d.r.Findings[0].Check != "runtime version" {
				t.Fatalf("findings %+v, want one runtime version %s", d.r.Findings, tc.want)
			}
			if (tc.cause == "") != (len(d.r.Causes) == 0) || (tc.cause != "" && !strings.Contains(d.r.Causes[0], tc.cause)) {
				t.Errorf("causes %v: want one saying %q", d.r.Causes, tc.cause)
			}
		})
	}
}

// The gpu runtime row, on a node declaring NVIDIA GPUs: containerd must
// have the nvidia handler, and the fix named depends on who writes
// containerd's configuration and which major reads it.
func TestCheckGPURuntime(t *testing.T) {
	gpuNode := inventory.Node{Name: "gpu-1", Role: inventory.RoleWorker, Address: "10.0.0.21", GPUs: &inventory.GPUs{Vendor: "nvidia", Count: 1}}
	dump := func(nvidia string) string {
		s := `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
`
		if nvidia != "" {
			s += `  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "` + nvidia + `"
`
		}
		return base64.StdEncoding.EncodeToString([]byte(s))
	}
	const v1, v2 = "containerd github.com/containerd/containerd 1.7.28 abc", "containerd github.com/containerd/containerd/v2 v2.2.9 abc"
	for _, tc := range []struct {
		name, version, nvidia string
		manage                bool
		node                  inventory.Node
		want                  Status // "": no row
		cause                 string
	}{
		{"managed, in config.toml", v1, "/usr/bin/nvidia-container-runtime", true, gpuNode, OK, ""},
		{"managed, lost", v1, "", true, gpuNode, Fail, "homelab up"},
		{"the user's 1.x without it", v1, "", false, gpuNode, Fail, "nvidia-ctk runtime configure"},
		{"the user's 2.x not importing conf.d", v2, "", false, gpuNode, Fail, "imports"},
		{"another binary", v1, "/opt/nvidia/runtime", false, gpuNode, Warn, ""},
		{"a plain worker", v1, "", true, inventory.Node{Name: "w1", Role: inventory.RoleWorker, Address: "10.0.0.22"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &nodeFacts{node: tc.node, reached: true}
			f.runtime.read("containerd.version", tc.version)
			f.runtime.read("containerd.dump", dump(tc.nvidia))
			inv := &inventory.Inventory{Nodes: []inventory.Node{tc.node}}
			inv.Cluster.ContainerRuntime.Manage = tc.manage
			d := &doctor{t: Target{Inventory: inv}, r: &Report{}}
			d.checkGPURuntime(tc.node, f)
			if tc.want == "" {
				if len(d.r.Findings) != 0 {
					t.Fatalf("findings %+v on a node without GPUs", d.r.Findings)
				}
				return
			}
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want || d.r.Findings[0].Check != "gpu runtime" {
				t.Fatalf("findings %+v, want one gpu runtime %s", d.r.Findings, tc.want)
			}
			if (tc.cause == "") != (len(d.r.Causes) == 0) || (tc.cause != "" && !strings.Contains(d.r.Causes[0], tc.cause)) {
				t.Errorf("causes %v: want one saying %q", d.r.Causes, tc.cause)
			}
		})
	}
}
