package stack

import (
	"context"
	"fmt"
	"strings"
)

// managePackages turns on cluster.packages.manage in inventory/lab.yaml.
func managePackages(inv string) string {
	out := strings.Replace(inv, "    manage: false\n", "    manage: true\n", 1)
	if out == inv {
		panic("inventory/lab.yaml has no cluster.packages.manage: false to turn on")
	}
	return out
}

// freshMachines checks that no node has kubeadm, kubelet or one of the
// three packages before the first up (this machine's own kubectl, of
// another package, may show through /usr, as another kubectl can on a
// real machine).
func (e *e2e) freshMachines(ctx context.Context) {
	e.t.Helper()
	for _, n := range labNodes {
		out := e.node(ctx, n, "command -v kubeadm kubelet; dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' kubeadm kubelet kubectl 2>/dev/null; true")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 1 && strings.HasPrefix(f[0], "/") || len(f) == 2 && strings.HasSuffix(f[1], "i") {
				e.t.Fatalf("%s has Kubernetes packages before the first up:\n%s", n, out)
			}
		}
	}
}

// packagesHeld checks every node holds the three packages at version,
// installed, and runs the package's kubelet.
func (e *e2e) packagesHeld(ctx context.Context, kubernetesVersion string) {
	e.t.Helper()
	version := strings.TrimPrefix(kubernetesVersion, "v")
	for _, n := range labNodes {
		out := e.node(ctx, n, `dpkg-query -W -f '${Package} ${db:Status-Abbrev}${Version}\n' kubeadm kubelet kubectl; kubelet --version; apt-mark showhold`)
		for _, pkg := range []string{"kubeadm", "kubelet", "kubectl"} {
			// "hi ": held and installed, as apt-mark hold leaves it.
			if want := fmt.Sprintf("%s hi %s-", pkg, version); !strings.Contains(out, want) {
				e.t.Errorf("%s: %s is not held and installed at %s:\n%s", n, pkg, version, out)
			}
		}
		if !strings.Contains(out, "Kubernetes v"+version) {
			e.t.Errorf("%s: the kubelet is not the package's v%s:\n%s", n, version, out)
		}
	}
}
