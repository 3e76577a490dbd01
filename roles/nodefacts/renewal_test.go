package nodefacts

import (
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// Every leaf the expiry probe reads is renewable by a phase, every
// kubeconfig renewable is one the probe reads (KubernetesDir/*.conf), and
// names are unique: the provider keys its state by them.
func TestRenewablesCoverTheExpiryProbe(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Renewables {
		if names[r.Name()] {
			t.Errorf("two renewables named %s", r.Name())
		}
		names[r.Name()] = true
		if got, ok := RenewableNamed(r.Name()); !ok || got != r {
			t.Errorf("RenewableNamed(%s) = %+v", r.Name(), got)
		}
		switch {
		case r.Kubeconfig():
			if path.Dir(r.Path) != KubernetesDir || !strings.HasSuffix(r.Path, ".conf") {
				t.Errorf("%s: a kubeconfig the expiry probe does not read", r.Path)
			}
		case !slices.Contains(LeafCerts, r.Path):
			t.Errorf("%s: renewable, but the expiry probe does not read it", r.Path)
		}
		if r.CA == "" {
			t.Errorf("%s: no CA", r.Path)
		}
	}
	for _, f := range LeafCerts {
		if r, ok := RenewableOf(f); !ok || r.Phase == "" {
			t.Errorf("%s: the probe reads it, nothing renews it", f)
		}
	}
	if _, ok := RenewableOf(KubeletClientCert); ok {
		t.Error("the kubelet's client certificate is the kubelet's to rotate")
	}
	if _, ok := RenewableOf(KubeletConf); ok {
		t.Error("kubelet.conf's credentials are the kubelet's, not kubeadm certs renew's")
	}
	// The serving certificates whose SANs are checked are renewed by the
	// same phases.
	for _, sc := range ServingCerts {
		if r, ok := RenewableNamed(sc.File); !ok || r.Phase != sc.Phase {
			t.Errorf("%s: phase %q here, %q as a serving certificate", sc.File, r.Phase, sc.Phase)
		}
	}
}

// The pattern finds the component by its binary, whatever its path, and
// neither a longer name nor the shell whose command line carries the
// pattern (pkill -f would kill it).
func TestProcessPattern(t *testing.T) {
	pattern := ProcessPattern(KubeControllerManager)
	for cmdline, want := range map[string]bool{
		"kube-controller-manager --kubeconfig=/etc/kubernetes/controller-manager.conf": true,
		"/usr/local/bin/kube-controller-manager --bind-address=127.0.0.1":              true,
		"/usr/local/bin/kube-controller-manager":                                       true,
		"kube-controller-manager-extra --x":                                            false,
		"sh -c pkill -f '^([^ ]*/)?kube-controller-manager( |$)'":                      false,
		"tail -f /var/log/kube-controller-manager":                                     false,
	} {
		// grep -E is the ERE pgrep -f matches with.
		err := exec.Command("sh", "-c", `printf '%s\n' "$1" | grep -Eq "$2"`, "sh", cmdline, pattern).Run()
		if got := err == nil; got != want {
			t.Errorf("%q matched %v, want %v", cmdline, got, want)
		}
	}
}

// What each certificate's expiry takes down decides revival against a
// renewal one node at a time: the apiserver's own certificate and both
// ends of its way to etcd make its node's API fail, the peer certificate
// its etcd member's vote; a kubeconfig, or a client the API serves
// without, takes nothing down.
func TestOutages(t *testing.T) {
	want := map[string]Outage{
		APIServerCert: APIOutage, "apiserver-etcd-client.crt": APIOutage, EtcdServerCert: APIOutage,
		EtcdPeerCert: PeerOutage,
	}
	for _, r := range Renewables {
		if got := r.Outage; got != want[r.Name()] {
			t.Errorf("%s: outage %d, want %d", r.Name(), got, want[r.Name()])
		}
		if r.Kubeconfig() && r.Outage != NoOutage {
			t.Errorf("%s: a kubeconfig takes the API down", r.Name())
		}
	}
}
