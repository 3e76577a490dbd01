package kubelet

import (
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckCgroupV1(t *testing.T) {
	yes, no := true, false
	const unsupported = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"
	const maintenance = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode"
	for _, tc := range []struct {
		version string
		fail    *bool
		v1      bool
		want    string
	}{
		{"v1.35.4", nil, true, unsupported},
		{"v1.35.0", &yes, true, unsupported},
		{"v1.36.1", nil, true, unsupported},
		{"v1.35.4", &no, true, ""},
		{"v1.35.4", nil, false, ""},
		{"v1.35.4", &yes, false, ""},
		// v1.34 only warns, unless told to fail.
		{"v1.34.4", nil, true, ""},
		{"v1.34.4", &no, true, ""},
		{"v1.34.4", &yes, true, maintenance},
	} {
		err := checkCgroupV1(tc.version, tc.fail, tc.v1)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s failCgroupV1=%v cgroupV1=%v: %q, want %q", tc.version, tc.fail, tc.v1, got, tc.want)
		}
	}
}

func TestFailCgroupV1FromFileAndFlag(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(kubeadmKubeletConfig+"failCgroupV1: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", cfg}, "false"},
		{[]string{"--config", cfg, "--fail-cgroupv1"}, "true"},
		{[]string{"--fail-cgroupv1=false"}, "false"},
		{nil, "unset"},
	} {
		f, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		c, err := configFromFlags(f)
		if err != nil {
			t.Fatal(err)
		}
		got := "unset"
		if c.FailCgroupV1 != nil {
			got = map[bool]string{true: "true", false: "false"}[*c.FailCgroupV1]
		}
		if got != tc.want {
			t.Errorf("%q: failCgroupV1 %s, want %s", tc.args, got, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--fail-cgroupv1=maybe"}); err == nil {
		t.Error("--fail-cgroupv1=maybe accepted")
	}
}

// A v1.35 kubelet on a cgroup v1 host with kubeadm's configuration (no
// failCgroupV1) ends at once with the kubelet's error, before it serves
// anything; the lab's hosts are cgroup v1.
func TestMainRefusesCgroupV1FromV135(t *testing.T) {
	defer func(v string, h func() bool) { Version, hostCgroupV1 = v, h }(Version, hostCgroupV1)
	Version = "v1.35.4"
	hostCgroupV1 = func() bool { return true }
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	conf := strings.NewReplacer("staticPodPath: /etc/kubernetes/manifests", "staticPodPath: "+dir, "healthzPort: 10248", "healthzPort: 0").Replace(kubeadmKubeletConfig)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	stderr := os.Stderr
	os.Stderr = w
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"--config", cfg, "--hostname-override", "n", "--standin-state-dir", filepath.Join(dir, "state"), "--standin-log-dir", dir})
	}()
	var code int
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		os.Stderr = stderr
		t.Fatal("the kubelet started on cgroup v1")
	}
	os.Stderr = stderr
	w.Close()
	out, _ := io.ReadAll(r)
	want := `"failed to validate kubelet configuration, error: kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release, path: ` + cfg + `"`
	if code != 1 || !strings.Contains(string(out), want) {
		t.Fatalf("exit %d, stderr %q; want 1 and %s", code, out, want)
	}
}

// The host's hierarchy as the kubelet sees it: what stat -f calls
// cgroup2fs is v2, anything else (tmpfs of v1 controllers) v1.
func TestHostCgroupV1(t *testing.T) {
	out, err := exec.Command("stat", "-fc", "%T", "/sys/fs/cgroup").Output()
	if err != nil {
		toolstest.Missing(t, err.Error())
	}
	fs := strings.TrimSpace(string(out))
	if got, want := hostCgroupV1(), fs != "cgroup2fs"; got != want {
		t.Errorf("/sys/fs/cgroup is %s: hostCgroupV1() = %v, want %v", fs, got, want)
	}
}
