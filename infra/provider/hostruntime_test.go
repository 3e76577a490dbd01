package provider

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/roles/containerd"
)

// Host's runtime check, from the facts line to the refusal: a managed
// containerd must be 1.x; one the user configures must run runc on the
// kubelet's driver and load its configuration. Each refusal names the
// file or the field that fixes it.
func TestHostRuntimeProblems(t *testing.T) {
	dump := func(systemd bool) string {
		conf, err := containerd.Render(containerd.Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: systemd})
		if err != nil {
			t.Fatal(err)
		}
		return "runtime.dump=" + base64.StdEncoding.EncodeToString(conf) + "\n"
	}
	user := &RuntimeExpect{CgroupDriver: "systemd", SandboxImage: "registry.k8s.io/pause:3.10.1", KubernetesVersion: "v1.35.4"}
	managed := &RuntimeExpect{Manage: true, CgroupDriver: "systemd", SandboxImage: "registry.k8s.io/pause:3.10.1", KubernetesVersion: "v1.35.4"}
	v136 := func(r *RuntimeExpect) *RuntimeExpect {
		c := *r
		c.KubernetesVersion = "v1.36.0"
		return &c
	}
	for _, tc := range []struct {
		name    string
		want    *RuntimeExpect
		version string
		facts   string
		refused []string // words the refusal holds; nil: none
	}{
		{name: "managed 1.6", want: managed, version: "1.6.20~ds1"},
		{name: "managed 1.7", want: managed, version: "1.7.28"},
		{name: "managed 2.x", want: managed, version: "v2.1.4", refused: []string{"2.1.4", "1.x", "cluster.containerRuntime.manage: false"}},
		{name: "user's on systemd", want: user, version: "1.7.28", facts: dump(true)},
		{name: "user's on cgroupfs", want: user, version: "1.7.28", facts: dump(false), refused: []string{"cgroupfs", "SystemdCgroup = true", containerd.ConfigPath, "manage: true"}},
		{name: "user's unloadable", want: user, version: "1.7.28", facts: "runtime.error=containerd: failed to load TOML: near line 3\n", refused: []string{"failed to load TOML", "config dump"}},
		{name: "not checked", version: "1.7.28", facts: dump(false)},
		{name: "user's not answering", want: user, version: "1.7.28", facts: dump(true) + "runtime.down=ctr: failed to dial \"/run/containerd/containerd.sock\": connection refused\n",
			refused: []string{"does not answer", "connection refused", "systemctl enable --now containerd", "manage: true"}},
		{name: "managed 1.x under v1.36", want: v136(managed), version: "1.7.28", refused: []string{"1.7.28", "v1.36.0", "containerd 2.x"}},
		{name: "user's 1.x under v1.36", want: v136(user), version: "1.7.28", facts: dump(true), refused: []string{"cluster.kubernetesVersion", "containerd 2.x"}},
		{name: "too old for CRI v1", want: managed, version: "1.5.9", refused: []string{"1.5.9", "CRI v1"}},
	} {
		st := HostState{HostArgs: HostArgs{Runtime: tc.want}, Versions: map[string]string{"containerd": tc.version}}
		st.parseRuntime(tc.facts)
		got := strings.Join(st.runtimeProblems(), "; ")
		if (got != "") != (tc.refused != nil) {
			t.Errorf("%s: refusal %q", tc.name, got)
		}
		for _, w := range tc.refused {
			if !strings.Contains(got, w) {
				t.Errorf("%s: refusal %q does not say %q", tc.name, got, w)
			}
		}
	}
	// Another sandbox image works (kubeadm only warns), so it is a
	// warning here too; so is a containerd the declared minor runs on
	// but containerd does not test it with.
	st := HostState{HostArgs: HostArgs{Connection: Connection{Node: "w1"}, Runtime: user}, Versions: map[string]string{"containerd": "1.7.28"}}
	st.parseRuntime(dump(true))
	if w := st.runtimeWarnings(); len(w) != 0 {
		t.Errorf("kubeadm's own sandbox image on a tested containerd warned: %q", w)
	}
	st.RuntimeSandboxImage = "registry.k8s.io/pause:3.6"
	if w := strings.Join(st.runtimeWarnings(), "; "); !strings.Contains(w, "pause:3.6") || !strings.Contains(w, "pause:3.10.1") {
		t.Errorf("another sandbox image: %q", w)
	}
	st.RuntimeSandboxImage, st.Versions["containerd"] = "", "1.6.20~ds1"
	if w := strings.Join(st.runtimeWarnings(), "; "); !strings.Contains(w, "w1") || !strings.Contains(w, "1.7.28") || !strings.Contains(w, "1.6.20") {
		t.Errorf("Debian 12's containerd under v1.35: %q", w)
	}
	if p := st.runtimeProblems(); len(p) != 0 {
		t.Errorf("Debian 12's containerd under v1.35 refused: %q", p)
	}
}

// A node without the containerd up would configure is refused with the
// two ways to get one; another tool missing keeps its own message.
func TestHostLacksContainerd(t *testing.T) {
	st := HostState{HostArgs: HostArgs{Connection: Connection{Node: "w1"}, Address: "10.0.0.5"}, Addresses: []string{"10.0.0.5"}, Missing: []string{"kubeadm", "containerd"}}
	err := st.check()
	if err == nil {
		t.Fatal("a node without containerd passed")
	}
	for _, want := range []string{"lacks kubeadm:", "lacks containerd", "cluster.containerRuntime.packages", "apt-get install containerd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "lacks kubeadm, containerd") {
		t.Errorf("containerd is named with the Kubernetes tools: %v", err)
	}
}
