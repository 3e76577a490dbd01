package stack

import (
	"context"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/hostkeys"
)

const adminKubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf "

// TestReplaceInTheLab is issue 6's scenarios 2 to 4 on one lab: a homelab
// built without cp-3 and gpu-4; "long after init" (kubeadm's uploaded
// certificates and every bootstrap token gone) cp-3 and gpu-4 are added,
// gpu-3 removed and gpu-1's machine replaced, in one up; then cp-1, the
// node kubeadm init ran on, gets a new machine (disk, host key, MAC) and
// re-joins the cluster that outlived it, with etcd keeping quorum.
func TestReplaceInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	small := e.inventory("small", func(s string) string {
		s = regexp.MustCompile(`(?m)^  - \{name: cp-3.*\n`).ReplaceAllString(s, "")
		return regexp.MustCompile(`(?m)^  - name: gpu-4\n(    .*\n)*`).ReplaceAllString(s, "")
	})
	s := e.open(ctx, small)
	if len(s.Inv.ControlPlanes()) != 2 || len(s.Inv.Workers()) != 3 {
		t.Fatalf("small inventory: %d control-plane nodes, %d workers", len(s.Inv.ControlPlanes()), len(s.Inv.Workers()))
	}
	e.up(ctx, s)
	e.verify(ctx, s)

	// Long after init: kubeadm's uploaded certificates (2 h) and its
	// bootstrap tokens (24 h) have expired.
	e.node(ctx, "cp-1", adminKubectl+"-n kube-system delete secret kubeadm-certs --ignore-not-found && "+
		adminKubectl+"-n kube-system delete secret --field-selector type=bootstrap.kubernetes.io/token")

	// gpu-1 gets a new machine; the user writes its new MAC into the
	// inventory, is refused its new host key and accepts it.
	replaced := time.Now()
	if err := e.lab.Replace(ctx, "gpu-1"); err != nil {
		t.Fatal(err)
	}
	gpu1MAC := e.labMAC("gpu-1")
	grown := e.inventory("grown", func(s string) string {
		s = regexp.MustCompile(`(?m)^  - name: gpu-3\n(    .*\n)*`).ReplaceAllString(s, "")
		return strings.Replace(s, `mac: "52:54:00:4d:00:82"`, `mac: "`+gpu1MAC+`"`, 1)
	})
	s2 := e.open(ctx, grown)
	e.acceptReplaced(ctx, s2, "gpu-1")
	listed := e.previewWithKeys(ctx, s2)
	for _, want := range [][]string{
		{"create homelab:index:KubeadmJoin cp-3"}, {"create homelab:index:KubeadmJoin gpu-4"},
		{"delete homelab:index:KubeadmJoin gpu-3"}, {"delete homelab:index:Host gpu-3"},
		{"update homelab:index:Host gpu-1", "hostKey", "mac"}, {"update homelab:index:KubeadmJoin gpu-1"},
		{"update homelab:index:NodeMeta gpu-1", "machine"},
	} {
		if !hasChange(listed, want[0], want[1:]...) {
			t.Errorf("preview lacks %v", want)
		}
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.Contains(l, "gpu-") && !strings.Contains(l, "cp-3") {
			t.Errorf("preview shows a hardware change on an unchanged node: %s", l)
		}
		// cp-3's address joins the SANs: the stored cluster config is
		// updated (configSha), the control plane is never initialised again.
		if strings.HasPrefix(l, "replace ") || (strings.Contains(l, "KubeadmInit") && strings.Contains(l, "initialized")) {
			t.Errorf("preview replaces or re-inits: %s", l)
		}
	}

	// Removing gpu-3 resets a working node: refused until allowed, while
	// the rest of the plan goes ahead.
	if _, err := s2.Up(ctx, true); err == nil || len(Refusals(err)) == 0 || !strings.Contains(strings.Join(Refusals(err), "\n"), "gpu-3") {
		t.Fatalf("removing gpu-3 without consent: %v (refusals %q)", err, Refusals(err))
	}
	if out := e.node(ctx, "gpu-3", "ls /etc/kubernetes/kubelet.conf 2>/dev/null || true"); strings.TrimSpace(out) == "" {
		t.Error("gpu-3 was reset without consent")
	}
	e.up(ctx, s2, "gpu-3")
	rep := e.verify(ctx, s2)
	if slices.Contains(rep.Nodes, "gpu-3") {
		t.Errorf("gpu-3 is still a Node after its removal: %v", rep.Nodes)
	}
	if len(rep.EtcdMembers) != 3 {
		t.Errorf("etcd members after adding cp-3: %v", rep.EtcdMembers)
	}
	if out := e.node(ctx, "gpu-3", "ls /etc/kubernetes/kubelet.conf /var/lib/kubelet/pki 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("removed gpu-3 was not reset: %s", out)
	}
	if created := e.nodeCreated(ctx, "gpu-1"); created.Before(replaced.Add(-time.Second)) {
		t.Errorf("gpu-1's Node dates from %s, before its machine was replaced at %s", created, replaced)
	}
	if out := e.node(ctx, "cp-1", adminKubectl+"-n kube-system get secret kubeadm-certs --ignore-not-found -o name"); strings.TrimSpace(out) != "" {
		t.Errorf("cp-3's join used kubeadm's uploaded certificates: %s", out)
	}

	newInv := e.replaceFirstControlPlane(ctx, grown)
	e.rebuildEveryMachine(ctx, newInv)
}

// rebuildEveryMachine: the whole homelab reinstalled (every disk, host key
// and the lab's client key new) under the same state. Reads with the old
// key are refused, so nothing stale is trusted: one up builds the cluster
// again, and the next changes nothing.
func (e *e2e) rebuildEveryMachine(ctx context.Context, inv string) {
	t := e.t
	if err := e.lab.Down(false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.lab.Up(ctx, inv); err != nil {
		t.Fatal(err)
	}
	s := e.open(ctx, inv)
	e.log.Reset()
	start := time.Now()
	e.up(ctx, s)
	t.Logf("figures: up rebuilding every machine under the old state %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(e.log.String(), "refused the SSH key this state was made with") {
		t.Error("the up did not say the old key was refused")
	}
	rep := e.verify(ctx, s)
	if len(rep.EtcdMembers) != 3 || len(rep.Nodes) != 6 {
		t.Errorf("after the rebuild: etcd %v, Nodes %v", rep.EtcdMembers, rep.Nodes)
	}
	e.noChanges(ctx, s, "up after the rebuild")
}

// replaceFirstControlPlane is scenario 2 on the hardest node: cp-1, where
// kubeadm init ran. A blank cp-1 must re-join, never init a second cluster.
func (e *e2e) replaceFirstControlPlane(ctx context.Context, inv string) string {
	t := e.t
	replaced := time.Now()
	if err := e.lab.Replace(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	cp1MAC := e.labMAC("cp-1")
	data, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	newInv := e.inventory("cp-1-replaced", func(string) string {
		return strings.Replace(string(data), `mac: "52:54:00:4d:00:78"`, `mac: "`+cp1MAC+`"`, 1)
	})
	s := e.open(ctx, newInv)
	e.acceptReplaced(ctx, s, "cp-1")

	listed := e.previewWithKeys(ctx, s)
	for _, want := range [][]string{{"update homelab:index:Host cp-1", "hostKey", "mac"}, {"update homelab:index:KubeadmJoin cp-1", "joined"}, {"update homelab:index:NodeMeta cp-1", "machine"}} {
		if !hasChange(listed, want[0], want[1:]...) {
			t.Errorf("preview lacks %v", want)
		}
	}
	for _, l := range listed {
		if strings.Contains(l, ":Host ") && !strings.Contains(l, " cp-1") {
			t.Errorf("preview shows a hardware change elsewhere: %s", l)
		}
		if strings.Contains(l, "gpu-") || strings.HasPrefix(l, "replace ") || strings.HasPrefix(l, "delete ") {
			t.Errorf("preview shows a change unrelated to cp-1's new machine: %s", l)
		}
	}

	e.log.Reset()
	w := e.watch(ctx, s.Bundle, s.Inv.EndpointHost(), []string{"https://10.77.0.121:2379", "https://10.77.0.122:2379"})
	start := time.Now()
	e.up(ctx, s)
	w.end()
	t.Logf("figures: up re-joining a replaced cp-1 %s; %s", time.Since(start).Round(time.Millisecond), w)
	if w.etcdFail > 0 {
		t.Errorf("etcd failed %d linearizable reads while cp-1 re-joined: quorum lost", w.etcdFail)
	}
	if !strings.Contains(e.log.String(), "removing its stale etcd member") {
		t.Errorf("the up did not report removing cp-1's stale etcd member")
	}
	rep := e.verify(ctx, s)
	if len(rep.EtcdMembers) != 3 {
		t.Errorf("etcd members after cp-1 re-joined: %v", rep.EtcdMembers)
	}
	if created := e.nodeCreated(ctx, "cp-1"); created.Before(replaced.Add(-time.Second)) {
		t.Errorf("cp-1's Node dates from %s, before its machine was replaced at %s", created, replaced)
	}
	// One cluster: cp-2's CA is the bundle's, and cp-1 serves the same.
	ca1 := e.node(ctx, "cp-1", "sha256sum /etc/kubernetes/pki/ca.crt | cut -d' ' -f1")
	ca2 := e.node(ctx, "cp-2", "sha256sum /etc/kubernetes/pki/ca.crt | cut -d' ' -f1")
	if ca1 != ca2 {
		t.Errorf("cp-1's CA differs from cp-2's after the re-join")
	}
	e.mutating()
	for op, n := range e.up(ctx, s) {
		if op != "same" && n > 0 {
			t.Errorf("up after the re-join: %d %s", n, op)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("up after the re-join ran mutating commands: %v", m)
	}
	return newInv
}

// acceptReplaced is what the user goes through after swapping a machine:
// the provisioner's known_hosts still has the old host key, so a refreshing
// preview refuses, naming the command; the user reads the new key's
// fingerprint on the machine's console (here through the lab's own
// record) and accepts exactly that key, as `homelab hosts accept NODE
// --fingerprint SHA256:...` does. A fingerprint that is not the node's is
// refused.
func (e *e2e) acceptReplaced(ctx context.Context, s *Stack, node string) {
	t := e.t
	t.Helper()
	_, err := s.PreviewChanges(ctx, true)
	if err == nil || !strings.Contains(err.Error(), "HOST KEY CHANGED") || !strings.Contains(err.Error(), "homelab hosts accept "+node) {
		t.Fatalf("preview with %s's machine replaced: %v", node, err)
	}
	console := strings.Fields(e.node(ctx, node, "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"))
	if len(console) < 2 || !strings.HasPrefix(console[1], "SHA256:") {
		t.Fatalf("%s's console shows %v", node, console)
	}
	n, _ := s.Inv.Node(node)
	dial := hostkeys.DialFunc(e.lab.Dial)
	addr, hosts := net.JoinHostPort(n.Address, "22"), hostkeys.Hosts(n.Name, n.Address, 22)
	if _, err := hostkeys.Accept(ctx, dial, e.lab.KnownHostsPath(), hosts, addr, hostkeys.MatchFingerprint("SHA256:not-the-machine")); err == nil {
		t.Fatalf("%s: a fingerprint that is not the machine's was accepted", node)
	}
	if _, err := hostkeys.Accept(ctx, dial, e.lab.KnownHostsPath(), hosts, addr, hostkeys.MatchFingerprint(console[1])); err != nil {
		t.Fatalf("accepting %s's key: %v", node, err)
	}
}

// hasChange reports whether a listed change starts with prefix (operation,
// type, name) and names every key among its changed properties.
func hasChange(listed []string, prefix string, keys ...string) bool {
	for _, l := range listed {
		if l != prefix && !strings.HasPrefix(l, prefix+" (") && !strings.HasPrefix(l, prefix+": ") {
			continue
		}
		ok := true
		for _, k := range keys {
			ok = ok && slices.Contains(strings.Split(strings.Trim(strings.TrimPrefix(l, prefix), " ()"), ", "), k)
		}
		if ok {
			return true
		}
	}
	return false
}

func (e *e2e) labMAC(node string) string {
	st, err := e.lab.LoadState()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Name == node {
			return n.MAC
		}
	}
	e.t.Fatalf("lab has no node %s", node)
	return ""
}

func (e *e2e) previewWithKeys(ctx context.Context, s *Stack) []string {
	e.t.Helper()
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		e.t.Fatalf("preview: %v", err)
	}
	var listed []string
	for _, c := range changes {
		listed = append(listed, c.String())
	}
	e.t.Logf("preview:\n  %s", strings.Join(listed, "\n  "))
	return listed
}

// nodeCreated is when the API's Node object of name was created, read on
// cp-2 (cp-1 is the one being replaced).
func (e *e2e) nodeCreated(ctx context.Context, name string) time.Time {
	out := strings.TrimSpace(e.node(ctx, "cp-2", adminKubectl+"get node "+name+" -o jsonpath={.metadata.creationTimestamp}"))
	ts, err := time.Parse(time.RFC3339, out)
	if err != nil {
		e.t.Fatalf("Node %s creationTimestamp %q: %v", name, out, err)
	}
	return ts
}
