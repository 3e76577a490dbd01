package unitfile

import (
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"os/exec"
	"strings"
	"testing"
)

// TestAgreesWithSystemd cross-checks enablement against the real systemctl,
// which works on a --root tree without a running systemd.
func TestAgreesWithSystemd(t *testing.T) {
	out, err := exec.Command("systemctl", "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "systemd ") {
		toolstest.Missing(t, "needs systemd's own systemctl to compare with: apt-get install systemd")
	}
	root := t.TempDir()
	write(t, root, map[string]string{
		"/usr/lib/systemd/system/a.service": "[Service]\nExecStart=/bin/a\n[Install]\nWantedBy=multi-user.target\nAlias=a2.service\n",
		"/usr/lib/systemd/system/b.service": "[Service]\nExecStart=/bin/b\n[Install]\nWantedBy=multi-user.target\n",
	})
	p := Paths{Root: root}
	systemd := func(args ...string) string {
		out, _ := exec.Command("systemctl", append([]string{"--root=" + root}, args...)...).Output()
		return strings.TrimSpace(string(out))
	}
	if _, err := Enable(p, "a"); err != nil {
		t.Fatal(err)
	}
	if got := systemd("is-enabled", "a", "a2", "b"); got != "enabled\nalias\ndisabled" {
		t.Fatalf("systemd sees our enable as %q", got)
	}
	systemd("enable", "b")
	systemd("disable", "a")
	for name, want := range map[string]string{"a": "disabled", "b": "enabled"} {
		if got, err := IsEnabled(p, name); err != nil || got != want {
			t.Errorf("after systemd's enable/disable, %s is %q (%v), want %q", name, got, err, want)
		}
	}
}
