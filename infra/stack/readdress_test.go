package stack

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func (e *e2e) doctor(ctx context.Context, inv *inventory.Inventory, b *pki.Bundle) *doctor.Report {
	e.t.Helper()
	key, err := readFile(e.lab.KeyPath())
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := doctor.Run(ctx, doctor.Target{Inventory: inv, Bundle: b, PrivateKey: key, KnownHosts: e.lab.KnownHostsPath(), Dial: e.lab.Dial, MACs: e.macs})
	if err != nil {
		e.t.Fatal(err)
	}
	var out strings.Builder
	rep.Write(&out)
	e.t.Logf("doctor:\n%s", out.String())
	return rep
}

func causesMention(rep *doctor.Report, words ...string) bool {
	for _, c := range rep.Causes {
		all := true
		for _, w := range words {
			all = all && strings.Contains(c, w)
		}
		if all {
			return true
		}
	}
	return false
}

// checkReaddress is issue 6's first scenario, the seed's incident, on the
// healthy seven-node cluster s, built from lab.yaml edited by base: cp-1
// comes back on another address. doctor names the cause; once the
// inventory has the new address one up recovers, with etcd keeping quorum
// and the VIP endpoint unchanged throughout. It runs at the end of
// TestDataplaneSwapInTheLab, on that test's cluster: a build of its own
// cost CI 2 to 4 minutes (issue 33's shared builds).
func (e *e2e) checkReaddress(ctx context.Context, s *Stack, base func(string) string) {
	t := e.t
	t.Helper()
	e.verify(ctx, s)
	if rep := e.doctor(ctx, s.Inv, s.Bundle); !rep.OK() {
		t.Errorf("doctor on a healthy cluster: %v", rep.Failed())
	}
	e.checkUnmountedFlag(ctx, s, "cp-3")
	e.mutating()

	const oldAddr, newAddr = "10.77.0.120", "10.77.0.140"
	start := time.Now()
	if err := e.lab.Readdress(ctx, "cp-1", newAddr); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: readdress %s", time.Since(start).Round(time.Millisecond))
	time.Sleep(5 * time.Second) // let etcd and the apiserver try, and fail

	// Before the inventory knows: doctor finds cp-1 by its MAC.
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	if rep.OK() {
		t.Error("doctor passed a re-addressed cp-1")
	}
	if !causesMention(rep, "cp-1", newAddr, oldAddr) {
		t.Errorf("doctor did not say cp-1 moved from %s to %s: %v", oldAddr, newAddr, rep.Causes)
	}
	if !causesMention(rep, "etcd", "cannot bind") {
		t.Errorf("doctor did not name etcd's bind failure: %v", rep.Causes)
	}
	if !causesMention(rep, "lack", newAddr) {
		t.Errorf("doctor did not name the certificate lacking %s: %v", newAddr, rep.Causes)
	}
	if !causesMention(rep, "peer URL", "stale") {
		t.Errorf("doctor did not name the stale peer URL: %v", rep.Causes)
	}

	moved := e.inventory("moved", func(s string) string {
		return strings.Replace(base(s), "address: "+oldAddr, "address: "+newAddr, 1)
	})
	s2 := e.open(ctx, moved)
	rep = e.doctor(ctx, s2.Inv, s2.Bundle)
	if rep.OK() || !causesMention(rep, "cp-1", "etcd", "cannot bind") {
		t.Errorf("doctor with the new inventory: ok=%v causes %v", rep.OK(), rep.Causes)
	}

	changes, err := s2.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.Op+" "+c.Type+" "+c.Name)
	}
	t.Logf("preview after the re-address:\n  %s", strings.Join(listed, "\n  "))
	for _, want := range []string{"update homelab:index:Host cp-1", "update homelab:index:EtcdMembers etcd",
		"update homelab:index:ControlPlaneAddress cp-1", "update homelab:index:ControlPlaneAddress cp-2"} {
		if !containsString(listed, want) {
			t.Errorf("preview lacks %q", want)
		}
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.HasSuffix(l, " cp-1") {
			t.Errorf("preview shows a hardware change elsewhere: %s", l)
		}
		// Workers and labels have nothing to do with cp-1's address.
		if strings.Contains(l, "gpu-") || strings.Contains(l, ":NodeMeta ") {
			t.Errorf("preview shows an unaffected resource: %s", l)
		}
	}

	e.log.Reset()
	w := e.watch(ctx, s2.Bundle, s2.Inv.EndpointHost(), []string{"https://10.77.0.121:2379", "https://10.77.0.122:2379"})
	start = time.Now()
	e.up(ctx, s2)
	w.end()
	t.Logf("figures: recovering up %s; %s", time.Since(start).Round(time.Millisecond), w)
	for _, l := range strings.Split(e.log.String(), "\n") {
		if strings.Contains(l, "ControlPlaneAddress") || strings.Contains(l, "etcd member") || strings.Contains(l, "restarting") {
			t.Logf("engine: %s", strings.TrimSpace(l))
		}
	}
	if w.etcdFail > 0 {
		t.Errorf("etcd failed %d linearizable reads during the recovery: quorum lost", w.etcdFail)
	}
	e.verify(ctx, s2)
	if rep := e.doctor(ctx, s2.Inv, s2.Bundle); !rep.OK() {
		t.Errorf("doctor after the recovery: %v", rep.Failed())
	}
	if out := e.node(ctx, "cp-2", "grep -c "+newAddr+" /etc/keepalived/keepalived.conf || true"); strings.TrimSpace(out) == "0" {
		t.Errorf("cp-2's keepalived does not peer with %s", newAddr)
	}
	if out := e.node(ctx, "cp-1", "grep -l "+oldAddr+" /etc/kubernetes/*.conf /etc/kubernetes/manifests/*.yaml /var/lib/kubelet/kubeadm-flags.env 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("cp-1 still has its old address in:\n%s", out)
	}
	e.mutating()
	changesAfter := e.up(ctx, s2)
	for op, n := range changesAfter {
		if op != "same" && n > 0 {
			t.Errorf("up after the recovery: %d %s", n, op)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("up after the recovery ran mutating commands: %v", m)
	}

	e.checkHostKeyRefused(ctx, s2)
}

// checkHostKeyRefused replaces gpu-4 (new disk, host key and MAC) behind
// the user's back: known_hosts keeps the old key, as the user's own does.
// Preview refuses, naming the command; after the explicit acceptance it
// runs and shows the new MAC on gpu-4's Host alone.
func (e *e2e) checkHostKeyRefused(ctx context.Context, s *Stack) {
	t := e.t
	if err := e.lab.Replace(ctx, "gpu-4"); err != nil {
		t.Fatal(err)
	}
	e.acceptReplaced(ctx, s, "gpu-4")
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview after accepting gpu-4's key: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.Op+" "+c.Type+" "+c.Name)
	}
	t.Logf("preview after gpu-4 was replaced:\n  %s", strings.Join(listed, "\n  "))
	if !containsString(listed, "update homelab:index:Host gpu-4") {
		t.Errorf("preview does not show gpu-4's new MAC")
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.HasSuffix(l, " gpu-4") {
			t.Errorf("preview shows a hardware change elsewhere: %s", l)
		}
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

// checkUnmountedFlag gives cp-3's apiserver a flag naming a file that is
// on the node but under no volume of its static pod. The real kubelet
// runs the apiserver in a container, which cannot see the file, so it
// exits (the stand-in kubelet ran it as a process of the node, where the
// file was found, and the cluster looked fine). doctor names the flag and
// the fix; the manifest put back, the apiserver serves again.
func (e *e2e) checkUnmountedFlag(ctx context.Context, s *Stack, node string) {
	t := e.t
	const file, manifest, saved = "/etc/kubernetes/tracing.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml", "/root/kube-apiserver.yaml.orig"
	e.node(ctx, node, "printf 'apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n' > "+file+
		" && cp "+manifest+" "+saved+" && sed -i 's|^    - kube-apiserver$|&\\n    - --tracing-config-file="+file+"|' "+manifest+" && grep -c tracing-config-file "+manifest)
	start := time.Now()
	out, err := e.lab.Run(ctx, node, "for i in $(seq 90); do grep -h "+file+" /var/log/pods/kube-system_kube-apiserver-*/kube-apiserver/*.log 2>/dev/null | tail -n 1 | grep . && exit 0; sleep 2; done; exit 1")
	if err != nil {
		t.Errorf("%s's apiserver did not fail on %s outside its mounts: %v %s", node, file, err, out)
	}
	t.Logf("figures: the apiserver's container failed on the unmounted file after %s: %s", time.Since(start).Round(time.Second), strings.TrimSpace(out))
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	found := false
	for _, f := range rep.Findings {
		if f.Check == "manifest" && strings.HasPrefix(f.Where, node+":") && f.Status == doctor.Fail && strings.Contains(f.Detail, "--tracing-config-file") {
			found = true
		}
	}
	if !found || !causesMention(rep, node, "tracing-config-file", "extraVolumes") {
		t.Errorf("doctor does not name %s's unmounted --tracing-config-file: %v", node, rep.Causes)
	}
	e.node(ctx, node, "cp "+saved+" "+manifest+" && rm "+file+" "+saved)
	if out, err := e.lab.Run(ctx, node, "for i in $(seq 120); do curl -sk https://127.0.0.1:6443/livez | grep -qx ok && exit 0; sleep 2; done; exit 1"); err != nil {
		t.Fatalf("%s's apiserver did not come back with its manifest put back: %v %s", node, err, out)
	}
	t.Logf("figures: unmounted flag found, reported and put back in %s", time.Since(start).Round(time.Second))
}
