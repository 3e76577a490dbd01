package systemctl

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
)

func runCLI(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestWithoutInit(t *testing.T) {
	t.Setenv(initd.SocketEnv, "")
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n",
	})
	_, errs, code := runCLI("--root="+root, "is-active", "kubelet")
	if code != 1 || !strings.Contains(errs, "cannot talk to homelab init") {
		t.Fatalf("is-active without init: exit %d, stderr %q", code, errs)
	}
	if out, _, code := runCLI("--root", root, "is-enabled", "kubelet"); code != 1 || out != "disabled\n" {
		t.Fatalf("is-enabled: exit %d, %q", code, out)
	}
	_, errs, code = runCLI("--root", root, "enable", "kubelet", "--no-pager")
	if code != 0 || !strings.Contains(errs, "Created symlink /etc/systemd/system/multi-user.target.wants/kubelet.service → /usr/lib/systemd/system/kubelet.service.") {
		t.Fatalf("enable: exit %d, stderr %q", code, errs)
	}
	if out, _, code := runCLI("--root", root, "-q", "is-enabled", "kubelet"); code != 0 || out != "" {
		t.Fatalf("quiet is-enabled: exit %d, %q", code, out)
	}
	if _, errs, code := runCLI("--root", root, "is-enabled", "firewalld"); code != 1 || !strings.Contains(errs, "Failed to get unit file state for firewalld.service") {
		t.Fatalf("is-enabled of a missing unit: exit %d, %q", code, errs)
	}
	if _, _, code := runCLI("--root", root, "enable", "--now", "kubelet"); code != 1 {
		t.Fatalf("enable --now without init must fail, got %d", code)
	}
	if _, _, code := runCLI("--root", root, "disable", "kubelet"); code != 0 {
		t.Fatalf("disable: exit %d", code)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parse([]string{"--no-pager", "show", "-p", "MainPID,ActiveState", "--property=NRestarts", "--value", "kubelet", "-l", "--lines", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.command != "show" || !reflect.DeepEqual(o.units, []string{"kubelet"}) || !o.value || o.lines != 3 ||
		!reflect.DeepEqual(o.props, []string{"MainPID", "ActiveState", "NRestarts"}) {
		t.Fatalf("%+v", o)
	}
}

func TestStatusFormat(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var b bytes.Buffer
	writeStatus(&b, initd.UnitStatus{
		Name: "kubelet.service", LoadState: "loaded", Description: "kubelet: The Kubernetes Node Agent",
		FragmentPath: "/usr/lib/systemd/system/kubelet.service", UnitFileState: "enabled",
		DropIns:     []string{"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"},
		ActiveState: "active", SubState: "running", Since: now.Add(-90 * time.Second).Format(time.RFC3339Nano),
		MainPID: 42, ExecMain: "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml",
		Documentation: []string{"https://kubernetes.io/docs/"},
	}, now, 0)
	want := `● kubelet.service - kubelet: The Kubernetes Node Agent
     Loaded: loaded (/usr/lib/systemd/system/kubelet.service; enabled; preset: enabled)
    Drop-In: /usr/lib/systemd/system/kubelet.service.d
             └─10-kubeadm.conf
     Active: active (running) since Thu 2025-01-02 03:02:35 UTC; 1min 30s ago
       Docs: https://kubernetes.io/docs/
   Main PID: 42 (kubelet)
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	writeStatus(&b, initd.UnitStatus{
		Name: "x.service", LoadState: "loaded", FragmentPath: "/etc/systemd/system/x.service", UnitFileState: "static",
		ActiveState: "failed", SubState: "failed", Result: "exit-code",
		ExecMainPID: 7, ExecMainCode: "exited", ExecMainStat: 1,
	}, now, 0)
	for _, s := range []string{"× x.service\n", "Active: failed (Result: exit-code)\n", "Main PID: 7 (code=exited, status=1/FAILURE)"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("failed status lacks %q:\n%s", s, b.String())
		}
	}
}

func TestTimerStatusFormat(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var b bytes.Buffer
	writeStatus(&b, initd.UnitStatus{
		Name: "snap.timer", LoadState: "loaded", FragmentPath: "/etc/systemd/system/snap.timer", UnitFileState: "enabled",
		ActiveState: "active", SubState: "waiting", Triggers: "snap.service",
		NextElapse: now.Add(5 * time.Minute).Format(time.RFC3339Nano),
	}, now, 0)
	for _, s := range []string{"Active: active (waiting)\n", "    Trigger: Thu 2025-01-02 03:09:05 UTC; 5min 0s left\n", "   Triggers: ● snap.service\n"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("timer status lacks %q:\n%s", s, b.String())
		}
	}
}
