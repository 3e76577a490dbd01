package stack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// managePackages turns on cluster.packages.manage in inventory/lab.yaml.
func managePackages(inv string) string {
	out := strings.Replace(inv, "    manage: false\n", "    manage: true\n", 1)
	if out == inv {
		panic("inventory/lab.yaml has no cluster.packages.manage: false to turn on")
	}
	return out
}

// TestPackagesInTheLab is issue 13's first step end to end: nodes that
// start without kubeadm, kubelet or kubectl get them from the lab's signed
// apt repository through the real apt and dpkg, at the declared patch and
// held; the cluster builds and verifies on them (the kubelet is the
// package's, reporting its version); the next up changes nothing and runs
// no mutating command.
func TestPackagesInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, managePackages)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// A fresh machine: no kubeadm or kubelet, none of the three packages
	// installed (this machine's own kubectl, of another package, may show
	// through /usr, as another kubectl can on a real machine).
	for _, n := range labNodes {
		out := e.node(ctx, n, "command -v kubeadm kubelet; dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' kubeadm kubelet kubectl 2>/dev/null; true")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 1 && strings.HasPrefix(f[0], "/") || len(f) == 2 && strings.HasSuffix(f[1], "i") {
				t.Fatalf("%s has Kubernetes packages before the first up:\n%s", n, out)
			}
		}
	}
	s := e.open(ctx, e.invPath)
	if !s.Inv.Cluster.Packages.Manage {
		t.Fatal("the inventory does not manage packages")
	}
	e.up(ctx, s)
	e.verify(ctx, s)

	version := strings.TrimPrefix(s.Inv.Cluster.KubernetesVersion, "v")
	for _, n := range labNodes {
		out := e.node(ctx, n, `dpkg-query -W -f '${Package} ${db:Status-Abbrev}${Version}\n' kubeadm kubelet kubectl; kubelet --version; apt-mark showhold`)
		for _, pkg := range []string{"kubeadm", "kubelet", "kubectl"} {
			// "hi ": held and installed, as apt-mark hold leaves it.
			if want := fmt.Sprintf("%s hi %s-", pkg, version); !strings.Contains(out, want) {
				t.Errorf("%s: %s is not held and installed at %s:\n%s", n, pkg, version, out)
			}
		}
		if !strings.Contains(out, "Kubernetes v"+version) {
			t.Errorf("%s: the kubelet is not the package's v%s:\n%s", n, version, out)
		}
	}

	e.mutating()
	e.noChanges(ctx, s, "the up after the packaged build")
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("the second up ran mutating commands: %v", m)
	}
}
