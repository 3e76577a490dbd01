package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

// realContainerd1 is Debian 12's containerd 1.6 from the real lab nodes'
// root filesystem (infra/tools/build-rootfs.sh, cached).
func realContainerd1(t *testing.T) string {
	return builtContainerd(t, "rootfs", "usr/bin/containerd", " 1.")
}

// builtContainerd is the containerd at rel under the directory
// infra/tools/build-NAME.sh (cached) prints, once its --version holds
// each of want (any one of them).
func builtContainerd(t *testing.T, name, rel string, want ...string) string {
	t.Helper()
	bin := filepath.Join(toolstest.Built(t, name), rel)
	v, err := exec.Command(bin, "--version").Output()
	if err != nil || !slices.ContainsFunc(want, func(w string) bool { return strings.Contains(string(v), w) }) {
		toolstest.Missing(t, "containerd from build-"+name+".sh does not run here, or is not "+strings.Join(want, " or ")+": "+string(v))
	}
	return bin
}

// criSection is what a test reads back of the CRI plugin from
// containerd config dump.
type criSection struct {
	SandboxImage string `toml:"sandbox_image"`
	Containerd   struct {
		DefaultRuntimeName string `toml:"default_runtime_name"`
		Runtimes           map[string]struct {
			Options map[string]any `toml:"options"`
		} `toml:"runtimes"`
	} `toml:"containerd"`
	Registry struct {
		ConfigPath string `toml:"config_path"`
	} `toml:"registry"`
}

// dump is the CRI plugin's section as containerd bin reads the config
// data, with ConfD moved to dir/conf.d holding dropIns.
func dump(t *testing.T, bin string, data []byte, dropIns map[string]string) criSection {
	t.Helper()
	dir := t.TempDir()
	confD := filepath.Join(dir, "conf.d")
	os.MkdirAll(confD, 0o755)
	for name, content := range dropIns {
		os.WriteFile(filepath.Join(confD, name), []byte(content), 0o644)
	}
	cfg := filepath.Join(dir, "config.toml")
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(data), ConfD, confD)), 0o644)
	out, err := exec.Command(bin, "--config", cfg, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd refuses the config: %v\n%s\n%s", err, out, data)
	}
	var d struct {
		Plugins map[string]criSection `toml:"plugins"`
	}
	if _, err := toml.Decode(string(out), &d); err != nil {
		t.Fatalf("the dump: %v\n%s", err, out)
	}
	return d.Plugins["io.containerd.grpc.v1.cri"]
}

// The real containerd 1.6 reads the rendered config as the kubelet needs
// it: runc on the systemd cgroup driver (and on cgroupfs when asked),
// kubeadm's pause image as the sandbox, mirrors from certs.d, and the
// NVIDIA runtime beside runc on its binary.
func TestContainerd1ReadsTheConfig(t *testing.T) {
	bin := realContainerd1(t)
	for _, systemd := range []bool{true, false} {
		data, err := Render(Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: systemd,
			Runtimes: map[string]string{"nvidia": "/usr/bin/nvidia-container-runtime"}})
		if err != nil {
			t.Fatal(err)
		}
		cri := dump(t, bin, data, nil)
		if cri.SandboxImage != "registry.k8s.io/pause:3.10.1" || cri.Containerd.DefaultRuntimeName != "runc" || cri.Registry.ConfigPath != CertsD {
			t.Errorf("systemd %v: sandbox %q, default runtime %q, registry %q", systemd, cri.SandboxImage, cri.Containerd.DefaultRuntimeName, cri.Registry.ConfigPath)
		}
		for _, rt := range []string{"runc", "nvidia"} {
			if got := cri.Containerd.Runtimes[rt].Options["SystemdCgroup"]; got != systemd {
				t.Errorf("%s's SystemdCgroup is %v, want %v (the kubelet's cgroup driver)", rt, got, systemd)
			}
		}
		if got := cri.Containerd.Runtimes["nvidia"].Options["BinaryName"]; got != "/usr/bin/nvidia-container-runtime" {
			t.Errorf("nvidia's binary: %v", got)
		}
	}
}

// Why extra runtimes are part of the main file on containerd 1.x: a
// drop-in that only adds a runtime (what nvidia-ctk writes) replaces the
// whole CRI plugin section, and the sandbox image, the cgroup driver and
// the mirrors fall back to containerd's defaults. Should a containerd
// release merge deeper, this fails and the design can use drop-ins.
func TestContainerd1ReplacesTheCRISectionOnImport(t *testing.T) {
	bin := realContainerd1(t)
	data, err := Render(Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	cri := dump(t, bin, data, map[string]string{"99-nvidia.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
`})
	if _, ok := cri.Containerd.Runtimes["nvidia"]; !ok {
		t.Fatal("the drop-in was not imported at all")
	}
	if cri.SandboxImage == "registry.k8s.io/pause:3.10.1" && cri.Containerd.Runtimes["runc"].Options["SystemdCgroup"] == true {
		t.Error("containerd 1.x now merges a drop-in into the CRI section: runtimes could be drop-ins again")
	}
}

// realContainerd2 is containerd 2.x built from its Go module
// (infra/tools/build-containerd.sh, cached).
func realContainerd2(t *testing.T) string {
	return builtContainerd(t, "containerd", "containerd", " v2.", " 2.")
}

// The real containerd 2 reads the rendered config version 3 as the
// kubelet needs it, as 1.x reads version 2: runc (and the NVIDIA runtime
// on its binary) on the kubelet's cgroup driver, kubeadm's pause image
// pinned as the sandbox, mirrors from certs.d, the OOM score restriction,
// and a drop-in from conf.d imported.
func TestContainerd2ReadsTheConfig(t *testing.T) {
	bin := realContainerd2(t)
	for _, systemd := range []bool{true, false} {
		data, err := Render(Config{Major: 2, SandboxImage: "registry.k8s.io/pause:3.10.1", SystemdCgroup: systemd, RestrictOOMScoreAdj: true,
			Runtimes: map[string]string{"nvidia": "/usr/bin/nvidia-container-runtime"}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		confD := filepath.Join(dir, "conf.d")
		os.MkdirAll(confD, 0o755)
		os.WriteFile(filepath.Join(confD, "50-debug.toml"), []byte("version = 3\n[debug]\n  level = 'debug'\n"), 0o644)
		cfg := filepath.Join(dir, "config.toml")
		os.WriteFile(cfg, []byte(strings.ReplaceAll(string(data), ConfD, confD)), 0o644)
		out, err := exec.Command(bin, "--config", cfg, "config", "dump").CombinedOutput()
		if err != nil {
			t.Fatalf("containerd 2 refuses the config: %v\n%s\n%s", err, out, data)
		}
		var e Effective
		if err := ParseDump(out, &e); err != nil {
			t.Fatal(err)
		}
		if e.SystemdCgroup != systemd || e.Runtime != "runc" || e.SandboxImage != "registry.k8s.io/pause:3.10.1" || e.RegistryConfigPath != CertsD {
			t.Errorf("systemd %v: containerd 2 reads %+v", systemd, e)
		}
		var d struct {
			Debug   struct{ Level string } `toml:"debug"`
			Plugins struct {
				Runtime struct {
					RestrictOOMScoreAdj bool `toml:"restrict_oom_score_adj"`
					Containerd          struct {
						Runtimes map[string]struct {
							Options map[string]any `toml:"options"`
						} `toml:"runtimes"`
					} `toml:"containerd"`
				} `toml:"io.containerd.cri.v1.runtime"`
			} `toml:"plugins"`
		}
		if _, err := toml.Decode(string(out), &d); err != nil {
			t.Fatal(err)
		}
		nvidia := d.Plugins.Runtime.Containerd.Runtimes["nvidia"].Options
		if !d.Plugins.Runtime.RestrictOOMScoreAdj || nvidia["BinaryName"] != "/usr/bin/nvidia-container-runtime" || nvidia["SystemdCgroup"] != systemd || d.Debug.Level != "debug" {
			t.Errorf("systemd %v: restrict_oom_score_adj %v, nvidia %v, the drop-in's debug level %q", systemd, d.Plugins.Runtime.RestrictOOMScoreAdj, nvidia, d.Debug.Level)
		}
	}
}

func TestRenderRefusesWhatItCannotWrite(t *testing.T) {
	if _, err := Render(Config{Major: 3, SandboxImage: "registry.k8s.io/pause:3.10.1"}); err == nil || !strings.Contains(err.Error(), "3.x") {
		t.Errorf("containerd 3.x: %v", err)
	}
	if _, err := Render(Config{Major: 1, SandboxImage: "registry.k8s.io/pause:3.10.1", Runtimes: map[string]string{"runc": "/usr/bin/other"}}); err == nil {
		t.Error("a second runc rendered")
	}
	if _, err := Render(Config{Major: 1}); err == nil {
		t.Error("no sandbox image rendered a config")
	}
}
