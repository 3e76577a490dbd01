package cri

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const ciliumConflist = `{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni"}]}`

func (f *fixture) network(t *testing.T) (*runtimeapi.RuntimeCondition, string) {
	t.Helper()
	st, err := f.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var last string
	_ = json.Unmarshal([]byte(st.Info["lastCNILoadStatus"]), &last)
	for _, c := range st.Status.Conditions {
		if c.Type == runtimeapi.NetworkReady {
			return c, last
		}
	}
	t.Fatal("no NetworkReady condition")
	return nil, ""
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// NetworkReady follows /etc/cni/net.d as containerd's does: false with
// NetworkPluginNotReady while no valid config is first, true once one is,
// false again when it goes or a broken one sorts before it.
func TestNetworkReadyFollowsTheCNIDirectory(t *testing.T) {
	f := start(t, "version = 3\n")
	c, last := f.network(t)
	if c.Status || c.Reason != "NetworkPluginNotReady" || c.Message != "Network plugin returns error: cni plugin not initialized" ||
		!strings.Contains(last, "no network config found") {
		t.Errorf("without a config: %+v, last load %q", c, last)
	}
	write(t, filepath.Join(f.cniDir, "05-cilium.conflist"), ciliumConflist, 0o644)
	if c, last := f.network(t); !c.Status || c.Reason != "" || last != "OK" {
		t.Errorf("with Cilium's config: %+v, last load %q", c, last)
	}
	write(t, filepath.Join(f.cniDir, "00-broken.conf"), `{"name":"x"}`, 0o644)
	if c, last := f.network(t); c.Status || !strings.Contains(last, "00-broken.conf") {
		t.Errorf("with a broken config first: %+v, last load %q", c, last)
	}
	os.Remove(filepath.Join(f.cniDir, "00-broken.conf"))
	os.Remove(filepath.Join(f.cniDir, "05-cilium.conflist"))
	if c, _ := f.network(t); c.Status {
		t.Errorf("config removed: still %+v", c)
	}
}

func sandboxRequest(name string, hostNetwork bool, handler string) *runtimeapi.RunPodSandboxRequest {
	mode := runtimeapi.NamespaceMode_POD
	if hostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.RunPodSandboxRequest{RuntimeHandler: handler, Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "kube-system", Uid: "uid-" + name},
		Labels:   map[string]string{"io.kubernetes.pod.uid": "uid-" + name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode}}},
	}}
}

// A sandbox starts where containerd's would, and fails with its error
// everywhere else.
func TestPodSandboxes(t *testing.T) {
	f := start(t, `version = 3
imports = ["%s/conf.d/*.toml"]
`)
	ctx := context.Background()
	run := func(name string, hostNetwork bool, handler string) (string, string) {
		resp, err := f.rt.RunPodSandbox(ctx, sandboxRequest(name, hostNetwork, handler))
		if err != nil {
			return "", status.Convert(err).Message()
		}
		return resp.PodSandboxId, ""
	}
	if id, msg := run("kube-proxy", true, ""); id == "" {
		t.Fatalf("a host-network pod without a pod network: %s", msg)
	}
	for _, step := range []struct {
		setup func()
		want  string
	}{
		{func() {}, "cni plugin not initialized"},
		{func() { write(t, filepath.Join(f.cniDir, "05-cilium.conflist"), ciliumConflist, 0o644) }, `failed to find plugin "cilium-cni" in path`},
		{func() { write(t, filepath.Join(f.binDir, "cilium-cni"), "#!/bin/sh\n", 0o755) }, "no pod CIDR is assigned"},
	} {
		step.setup()
		if id, msg := run("coredns", false, ""); id != "" || !strings.Contains(msg, step.want) {
			t.Errorf("pod network sandbox: %q %q, want an error saying %q", id, msg, step.want)
		}
	}
	if _, err := f.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.3.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	a, msg := run("coredns-a", false, "")
	b, _ := run("coredns-b", false, "")
	if a == "" || b == "" {
		t.Fatalf("pod network sandboxes: %s", msg)
	}
	ip := func(id string) string {
		st, err := f.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		if err != nil {
			t.Fatal(err)
		}
		return st.Status.GetNetwork().GetIp()
	}
	if ip(a) != "10.244.3.2" || ip(b) != "10.244.3.3" {
		t.Errorf("addresses %s %s", ip(a), ip(b))
	}
	l, err := f.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-coredns-b"}}})
	if err != nil || len(l.Items) != 1 || l.Items[0].Id != b {
		t.Fatalf("sandboxes of uid-coredns-b: %+v %v", l, err)
	}
	// Stopping frees the address; removing forgets the sandbox.
	if _, err := f.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a}); err != nil {
		t.Fatal(err)
	}
	if c, _ := run("coredns-c", false, ""); ip(c) != "10.244.3.2" {
		t.Errorf("the stopped sandbox's address was not reused: %s", ip(c))
	}
	for _, id := range []string{a, b} {
		if _, err := f.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := f.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	var names []string
	for _, it := range all.Items {
		names = append(names, it.Metadata.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"coredns-c", "kube-proxy"}) {
		t.Errorf("sandboxes left: %v", names)
	}

	// RuntimeClass handlers: only configured ones, and only with their binary.
	if _, msg := run("gpu", true, "nvidia"); !strings.Contains(msg, `no runtime for "nvidia" is configured`) {
		t.Errorf("unknown handler: %q", msg)
	}
}

func TestRuntimeHandlerFromADropIn(t *testing.T) {
	d := t.TempDir()
	write(t, filepath.Join(d, "conf.d", "99-nvidia.toml"), `version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "`+d+`/nvidia-container-runtime"
`, 0o644)
	write(t, filepath.Join(d, "config.toml"), "version = 3\nimports = [\""+d+"/conf.d/*.toml\"]\n", 0o644)
	rc, err := LoadRuntimeConfig(filepath.Join(d, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rc.handlers(), []string{"nvidia", "runc"}) {
		t.Errorf("handlers %v", rc.handlers())
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if err := rc.sandboxRuntime("nvidia", exists); err == nil || !strings.Contains(err.Error(), "nvidia-container-runtime: no such file") {
		t.Errorf("nvidia without its binary: %v", err)
	}
	write(t, filepath.Join(d, "nvidia-container-runtime"), "", 0o755)
	if err := rc.sandboxRuntime("nvidia", exists); err != nil {
		t.Errorf("nvidia with its binary: %v", err)
	}
	if err := rc.sandboxRuntime("", exists); err != nil {
		t.Errorf("the default handler: %v", err)
	}
}

func TestLoadRuntimeConfig(t *testing.T) {
	cases := []struct {
		name, toml       string
		sandbox, confDir string
		binDirs          []string
	}{
		{"containerd 1.x", `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/cni/custom"
`, "registry.k8s.io/pause:3.9", "/etc/cni/custom", []string{"/usr/lib/cni"}},
		{"containerd 2.x", `version = 3
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10.1'
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/opt/cni/bin', '/usr/libexec/cni']
`, "registry.k8s.io/pause:3.10.1", "/etc/cni/net.d", []string{"/opt/cni/bin", "/usr/libexec/cni"}},
		{"defaults", "version = 3\n", DefaultSandboxImage, "/etc/cni/net.d", []string{"/opt/cni/bin"}},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "config.toml")
		write(t, p, tc.toml, 0o644)
		rc, err := LoadRuntimeConfig(p)
		if err != nil || rc.SandboxImage != tc.sandbox || rc.CNIConfDir != tc.confDir || !slices.Equal(rc.CNIBinDirs, tc.binDirs) {
			t.Errorf("%s: %+v %v", tc.name, rc, err)
		}
	}
	p := filepath.Join(t.TempDir(), "config.toml")
	write(t, p, "version = [", 0o644)
	if _, err := LoadRuntimeConfig(p); err == nil {
		t.Error("a broken config.toml loaded")
	}
}

func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		used []string
		want string
	}{
		{"10.244.1.0/24", nil, "10.244.1.2"},
		{"10.244.1.0/24", []string{"10.244.1.2", "10.244.1.3"}, "10.244.1.4"},
		{"10.244.1.0/30", []string{"10.244.1.2"}, ""}, // .3 is the broadcast address
		{"", nil, ""},
	} {
		got, err := allocate(tc.cidr, tc.used)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("allocate(%q, %v) = %q, %v", tc.cidr, tc.used, got, err)
		}
	}
}
