package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		out, version string
		major        int
	}{
		{"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", "1.6.20~ds1", 1},
		{"containerd containerd.io 1.7.25 bcc810d6b9066471b0b6fa75f557a15a1cbf31bb\n", "1.7.25", 1},
		{"containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7\n", "v2.1.4", 2},
	} {
		v, m, err := ParseVersion(tc.out)
		if err != nil || v != tc.version || m != tc.major {
			t.Errorf("%q: %q %d %v, want %q %d", tc.out, v, m, err, tc.version, tc.major)
		}
	}
	for _, bad := range []string{"", "crio version 1.30", "containerd x y.z"} {
		if _, _, err := ParseVersion(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// What the real containerd 1.6 dumps, for the rendered config on each
// cgroup driver and for a package left at its defaults (no config.toml),
// reads back as it was meant.
func TestParseDumpOfTheRealContainerd1(t *testing.T) {
	bin := realContainerd1(t)
	dumpOf := func(data []byte) []byte {
		cfg := filepath.Join(t.TempDir(), "config.toml")
		os.WriteFile(cfg, data, 0o644)
		out, err := exec.Command(bin, "--config", cfg, "config", "dump").Output()
		if err != nil {
			t.Fatalf("config dump: %v", err)
		}
		return out
	}
	for _, systemd := range []bool{true, false} {
		data, err := Render(Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: systemd})
		if err != nil {
			t.Fatal(err)
		}
		var e Effective
		if err := ParseDump(dumpOf(data), &e); err != nil {
			t.Fatal(err)
		}
		if e.Runtime != "runc" || e.SystemdCgroup != systemd || e.SandboxImage != "registry.k8s.io/pause:3.10.1" || e.RegistryConfigPath != CertsD {
			t.Errorf("rendered with SystemdCgroup %v: read %+v", systemd, e)
		}
	}
	var e Effective
	if err := ParseDump(dumpOf(nil), &e); err != nil {
		t.Fatal(err)
	}
	if e.Runtime != "runc" || e.CgroupDriver() != "cgroupfs" || e.SandboxImage == "" || e.RegistryConfigPath != "" {
		t.Errorf("the package's defaults read as %+v, want runc on cgroupfs, no mirrors read", e)
	}
}

// containerd 2.x's config version 3, as its documentation shows it.
func TestParseDumpVersion3(t *testing.T) {
	const v3 = `version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '/etc/containerd/certs.d'
  [plugins.'io.containerd.cri.v1.runtime']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            SystemdCgroup = true
`
	var e Effective
	if err := ParseDump([]byte(v3), &e); err != nil {
		t.Fatal(err)
	}
	if e.Runtime != "runc" || !e.SystemdCgroup || e.SandboxImage != "registry.k8s.io/pause:3.10" || e.RegistryConfigPath != CertsD {
		t.Errorf("read %+v", e)
	}
	for name, bad := range map[string]string{
		"no version":         "[plugins]\n",
		"no default runtime": "version = 2\n",
		"not toml":           "version = \n",
	} {
		if err := ParseDump([]byte(bad), &e); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// Major reads every way builders number containerd, and refuses what is
// no version.
func TestMajor(t *testing.T) {
	for in, want := range map[string]int{"1.6.20~ds1": 1, "v2.1.4": 2, "2.2.9+unknown": 2, "1.7.28": 1} {
		if got, err := Major(in); err != nil || got != want {
			t.Errorf("Major(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "latest", "v"} {
		if _, err := Major(bad); err == nil {
			t.Errorf("Major(%q): no error", bad)
		}
	}
}
