package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// manifestProbe is pod's static pod manifest with these flags, as
// nodefacts/live prints a file.
func manifestProbe(pod string, flags ...string) string {
	lines := []string{"apiVersion: v1", "kind: Pod", "metadata:", "  name: " + pod, "spec:", "  containers:", "  - command:", "    - " + pod}
	for _, f := range flags {
		lines = append(lines, "    - --"+f)
	}
	lines = append(lines, "    name: "+pod)
	path := nodefacts.Manifest(pod)
	out := "file=" + path + " \n"
	for _, l := range lines {
		out += fmt.Sprintf("line %s=%s\n", path, l)
	}
	return out
}

// A declared flag that regenerates the apiserver's manifest, on the node
// holding the VIP: keepalived stops first, so another node serves the
// endpoint while the apiserver restarts, and starts again after it is
// healthy. Where the node does not hold the VIP, or only the scheduler's
// flags differ, keepalived is left alone.
func TestAPIServerRestartHandsTheVIPOver(t *testing.T) {
	cases := []struct {
		name          string
		holds         bool
		pod           string
		wantHandOver  bool
		wantRegenPods []string
	}{
		{"VIP holder, apiserver flag", true, nodefacts.KubeAPIServer, true, []string{nodefacts.KubeAPIServer}},
		{"another node holds the VIP", false, nodefacts.KubeAPIServer, false, []string{nodefacts.KubeAPIServer}},
		{"VIP holder, scheduler flag only", true, nodefacts.KubeScheduler, false, []string{nodefacts.KubeScheduler}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newRenewalLab(t, nil)
			l.in.ComponentArgs = map[string][]string{c.pod: {"profiling=false"}}
			regenerated := false
			live := func(string) (ssh.Result, error) {
				apiserver, scheduler := []string{"advertise-address=" + l.n.addr}, []string{"leader-elect=true"}
				if regenerated {
					apiserver, scheduler = append(apiserver, "profiling=false"), append(scheduler, "profiling=false")
				}
				out := l.pki.probe() + manifestProbe(nodefacts.KubeAPIServer, apiserver...) + manifestProbe(nodefacts.KubeScheduler, scheduler...)
				return ssh.Result{Stdout: []byte(out)}, nil
			}
			l.n.onScriptFunc("nodefacts/live", live)
			l.n.onScriptFunc("pods/regenerate", func(string) (ssh.Result, error) { regenerated = true; return ssh.Result{}, nil })
			holds := ""
			if c.holds {
				holds = "holds\n"
			}
			l.n.onScript("vip/holds", holds, 0)
			l.n.onScript("systemd/stop", "", 0)
			l.n.onScript("systemd/start", "", 0)
			st := l.refreshed(t)
			if _, err := l.update(st); err != nil {
				t.Fatal(err)
			}
			var stopped, regen, started int
			for _, e := range l.n.events {
				name, _ := scripts.NameOf(e.cmd)
				switch {
				case name == "systemd/stop" && strings.Contains(e.cmd, "'keepalived'"):
					stopped = e.seq
				case name == "pods/regenerate":
					regen = e.seq
				case name == "systemd/start" && strings.Contains(e.cmd, "'keepalived'"):
					started = e.seq
				}
			}
			if regen == 0 {
				t.Fatal("the manifest was not regenerated")
			}
			if !c.wantHandOver {
				if stopped != 0 || started != 0 {
					t.Errorf("keepalived stopped (%d) or started (%d) with no apiserver restart on a VIP holder", stopped, started)
				}
				return
			}
			if stopped == 0 || stopped > regen || started < regen {
				t.Errorf("keepalived stopped at %d, manifest regenerated at %d, keepalived started at %d: want stop, regenerate, start", stopped, regen, started)
			}
			if pr := l.n.probed(); !slices.Contains(pr, "readyz 10.0.0.11:6443") {
				t.Errorf("started keepalived again without waiting for the apiserver: probed %v", pr)
			}
		})
	}
}
