package stack

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/verify"
)

func TestMain(m *testing.M) { labtest.Main(m) }

type e2e struct {
	t        testing.TB
	lab      *labtest.Lab
	stateDir string
	cmdLog   string
	log      *bytes.Buffer
	invPath  string
	work     string
	// macs are the nodes' MACs the last up recorded, which doctor gets
	// as homelab doctor does (real nodes are declared without them).
	macs map[string][]string
	// backend and backendEnv, when set, keep the stacks' state elsewhere
	// than the state dir (useLabS3).
	backend    string
	backendEnv map[string]string
}

// needE2E runs t beside the package's other lab tests, each on its own
// lab, once it has the tools and a lab slot.
func needE2E(t *testing.T) {
	labtest.Parallel(t)
	labtest.Need(t, "pulumi", "kubeadm")
}

// newE2E brings up a lab from inventory/lab.yaml (its SSH paths pointed
// at the test lab's) and a state dir for the stack.
func newE2E(t testing.TB) *e2e { return newE2EWith(t, nil) }

// newE2EWith brings the lab up from inventory/lab.yaml edited by base (nil:
// as it is): what the lab makes depends on it (cluster.packages). The
// nodes named in systemd are real; with none, the nodes are stand-ins
// and the inventory declares their MACs (withMACs).
func newE2EWith(t testing.TB, base func(string) string, systemd ...string) *e2e {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if len(systemd) == 0 {
		edit := base
		base = func(s string) string {
			if edit != nil {
				s = edit(s)
			}
			return withMACs(s)
		}
	}
	e := &e2e{t: t, log: &bytes.Buffer{}}
	e.lab = labtest.UpSystemd(t, ctx, "stack", base, systemd, func() { t.Logf("engine output (tail):\n%s", labtest.EngineTail(e.log.String(), 80)) })
	e.work, e.invPath = e.lab.Work, e.lab.InventoryPath
	e.stateDir, e.cmdLog = filepath.Join(e.work, "state"), filepath.Join(e.work, "commands.log")
	return e
}

// options open a stack of this test's: its own state, log, lab gateway
// and command log, given to the provider rather than set in this
// process's environment, which the tests running beside it share.
func (e *e2e) options(inv string) Options {
	return Options{Inventory: inv, StateDir: e.stateDir, Progress: e.log, Netns: e.lab.Names().GatewayPath(), CommandLog: e.cmdLog,
		Backend: e.backend, Env: e.backendEnv}
}

// env is the environment of a homelab command the test runs: this
// process's, which the tests running beside it share, with this test's
// lab gateway and command log. Without the gateway, homelab would look
// for the default lab, find none, and dial the lab's addresses from the
// machine's own namespace: out of the lab.
func (e *e2e) env() []string {
	return append(os.Environ(), ssh.NetnsEnv+"="+e.lab.Names().GatewayPath(), ssh.CommandLogEnv+"="+e.cmdLog)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// inventory writes a variant of inventory/lab.yaml for this lab.
func (e *e2e) inventory(name string, edit func(string) string) string {
	return e.lab.Inventory(name, edit)
}

func (e *e2e) open(ctx context.Context, inv string) *Stack {
	e.t.Helper()
	s, err := Open(ctx, e.options(inv))
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *e2e) up(ctx context.Context, s *Stack, allowDestroy ...string) map[string]int {
	e.t.Helper()
	start := time.Now()
	res, err := s.Up(ctx, true, allowDestroy...)
	if err != nil {
		e.t.Fatalf("up: %v", err)
	}
	e.t.Logf("figures: up took %s: %v", time.Since(start).Round(time.Millisecond), *res.Summary.ResourceChanges)
	if m := macsOutput(res.Outputs[program.OutputMACs].Value); m != nil {
		e.macs = m
	}
	return *res.Summary.ResourceChanges
}

func (e *e2e) verify(ctx context.Context, s *Stack) *verify.Report {
	e.t.Helper()
	outs, err := s.Outputs(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	var rep *verify.Report
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		rep, err = verify.Run(ctx, verify.Target{Inventory: s.Inv, Bundle: s.Bundle, Kubeconfig: []byte(kc), Dial: e.lab.Dial})
		if err == nil || time.Now().After(deadline) {
			break
		}
		// homelab up verifies once, right after the up: a failure here
		// is one a user would have been shown. Said, so the wait that
		// hides it stays visible (issue 36 item 8 hid behind it).
		e.t.Logf("figures: verify right after the up failed, retrying: %v", err)
		time.Sleep(3 * time.Second)
	}
	if err != nil {
		e.t.Fatalf("verify: %v", err)
	}
	var out strings.Builder
	for _, c := range rep.Checks {
		fmt.Fprintf(&out, "  ok %s: %s\n", c.Name, c.Detail)
	}
	e.t.Logf("verify:\n%s", out.String())
	return rep
}

// mutating lists the mutating commands the provider ran since the last call.
func (e *e2e) mutating() []string { return labtest.Mutating(e.cmdLog) }

func (e *e2e) node(ctx context.Context, name, cmd string) string {
	out, err := e.lab.Run(ctx, name, cmd)
	if err != nil {
		e.t.Fatalf("%s: %s: %v\n%s", name, cmd, err, out)
	}
	return out
}

// TestUpInTheLab is issue 4's end-to-end run, on seven real nodes
// (checkRealNodes): the vip layout built with an interruption after init,
// verified (with the seed's lab, then each of its checks made to fail,
// and doctor naming a selector typo: issue 21), a no-op second up,
// previews of inventory changes, no secret in state or logs, destroy;
// then the single-ip layout with the endpoint on cp-2 (the control-plane
// node listed second), over a half-done kubeadm init left there.
func TestUpInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, nil, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	s := e.open(ctx, e.invPath)

	// Interrupted: cancel the first up as soon as kubeadm init finished.
	interrupted := e.interruptAfterInit(ctx, s)
	t.Logf("first up interrupted after init: %v", interrupted)
	e.up(ctx, s)
	rep := e.verify(ctx, s)
	if !slices.Equal(rep.EtcdMembers, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("etcd members %v after an interrupted up", rep.EtcdMembers)
	}
	e.checkRealNodes(ctx, s)
	e.checkSeedLab(ctx, s)
	e.checkHardening(ctx, s)
	e.mutating()

	// Nothing changed: nothing to do, and nothing done on any node.
	start := time.Now()
	changes := e.up(ctx, s)
	t.Logf("figures: no-op up %s", time.Since(start).Round(time.Millisecond))
	for op, n := range changes {
		if op != "same" && n > 0 {
			t.Errorf("second up: %d %s", n, op)
		}
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("second up ran %d mutating commands: %v", len(m), m)
	}

	e.checkDrift(ctx, s)
	e.checkNoSecretsLeaked(s)
	e.checkPreviews(ctx)
	e.destroy(ctx, s)

	// single-ip with the endpoint on cp-2, the control-plane node listed
	// second (kubeadm init runs there, not on the first), over an init
	// that was killed half-way on it.
	single := e.inventory("single", func(s string) string {
		s = strings.Replace(s, "layout: vip ", "layout: single-ip ", 1)
		return strings.Replace(s, "node: cp-1 ", "node: cp-2 ", 1)
	})
	e.halfInit(ctx, "cp-2")
	s2 := e.open(ctx, single)
	e.up(ctx, s2)
	rep = e.verify(ctx, s2)
	if !slices.Equal(rep.EtcdMembers, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("etcd members %v", rep.EtcdMembers)
	}
	if out := e.node(ctx, "cp-2", "test -f /etc/kubernetes/.homelab-init-complete && echo init"); strings.TrimSpace(out) != "init" {
		t.Error("single-ip: kubeadm init did not run on the endpoint node cp-2")
	}
	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		if out := e.node(ctx, cp, "systemctl is-active keepalived || true"); strings.TrimSpace(out) == "active" {
			t.Errorf("%s runs keepalived in the single-ip layout", cp)
		}
	}
	e.mutating()
	changes = e.up(ctx, s2)
	if changes["same"] == 0 || len(changes) != 1 {
		t.Errorf("second single-ip up: %v", changes)
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("second single-ip up ran mutating commands: %v", m)
	}
	e.destroy(ctx, s2)
}

// interruptAfterInit runs up and kills the engine with SIGKILL once
// kubeadm init is done, as a power cut of the workstation would: no
// cleanup, the backend's lock and in-flight operations left behind.
func (e *e2e) interruptAfterInit(ctx context.Context, s *Stack) error {
	return e.interruptWhen(ctx, s, "cp-1", "test -f /etc/kubernetes/.homelab-init-complete")
}

// interruptWhen runs up and kills the engine with SIGKILL as soon as check
// succeeds on node.
func (e *e2e) interruptWhen(ctx context.Context, s *Stack, node, check string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if out, err := e.lab.Run(ctx, node, check+" && echo yes"); err == nil && strings.TrimSpace(out) == "yes" {
				s.SignalCLI(syscall.SIGKILL)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	_, err := s.Up(ctx, true)
	return err
}

// halfInit leaves node as a killed kubeadm init would: static pod
// manifests written, etcd data begun, no admin.conf.
func (e *e2e) halfInit(ctx context.Context, node string) {
	e.node(ctx, node, "mkdir -p /etc/kubernetes/manifests /var/lib/etcd/member && echo 'apiVersion: v1' > /etc/kubernetes/manifests/etcd.yaml")
}

func (e *e2e) destroy(ctx context.Context, s *Stack) {
	e.t.Helper()
	if _, err := s.Destroy(ctx); err != nil {
		e.t.Fatalf("destroy: %v", err)
	}
	for _, node := range s.Inv.Nodes {
		n := node.Name
		out := e.node(ctx, n, "ls /etc/kubernetes/manifests 2>/dev/null; ls /etc/kubernetes/*.conf /etc/kubernetes/kubeadm 2>/dev/null; ls /var/lib/etcd 2>/dev/null; ls /etc/cni/net.d 2>/dev/null; pgrep -x etcd; pgrep -x kube-apiserver; true")
		if strings.TrimSpace(out) != "" {
			e.t.Errorf("%s not clean after destroy:\n%s", n, out)
		}
	}
}

// checkDrift: changes made on the nodes behind the tool's back show in a
// refreshing preview as exactly the resources they touch, and the next up
// repairs them with commands on those nodes only.
func (e *e2e) checkDrift(ctx context.Context, s *Stack) {
	e.t.Helper()
	e.node(ctx, "gpu-2", "echo '# edited by hand' >> /etc/sysctl.d/90-homelab-kubernetes.conf")
	e.node(ctx, "cp-3", "systemctl stop keepalived")
	e.mutating()
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		e.t.Fatalf("preview: %v", err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Op+" "+c.Type+" "+c.Name)
	}
	want := []string{
		"update homelab:index:File gpu-2:/etc/sysctl.d/90-homelab-kubernetes.conf",
		"update homelab:index:Service cp-3:keepalived",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Errorf("drift preview lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if m := e.mutating(); len(m) > 0 {
		e.t.Errorf("preview ran mutating commands: %v", m)
	}
	e.up(ctx, s)
	for _, m := range e.mutating() {
		if !strings.HasPrefix(m, "gpu-2: ") && !strings.HasPrefix(m, "cp-3: ") {
			e.t.Errorf("repairing drift on gpu-2 and cp-3 ran %s", m)
		}
	}
	if out := e.node(ctx, "cp-3", "systemctl is-active keepalived || true"); strings.TrimSpace(out) != "active" {
		e.t.Errorf("keepalived on cp-3 is %q after up", strings.TrimSpace(out))
	}
	if out := e.node(ctx, "gpu-2", "cat /etc/sysctl.d/90-homelab-kubernetes.conf"); strings.Contains(out, "edited by hand") {
		e.t.Error("the hand edit on gpu-2 survived up")
	}
}

// checkNoSecretsLeaked greps the state, the engine's output and the
// command log for every secret the cluster has.
func (e *e2e) checkNoSecretsLeaked(s *Stack) {
	e.t.Helper()
	key, _ := os.ReadFile(e.lab.KeyPath())
	var names []string
	for _, n := range s.Inv.Nodes {
		names = append(names, n.Name)
	}
	secrets := append(s.Bundle.SecretStrings(names...), keyBody(string(key))...)
	outs, _ := s.Outputs(context.Background())
	if kc, _ := outs["kubeconfig"].Value.(string); kc != "" {
		for _, l := range strings.Split(kc, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "client-key-data: "); ok {
				secrets = append(secrets, v)
			}
		}
	}
	var haystacks []string
	filepath.WalkDir(e.stateDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/pulumi-home/") && filepath.Base(p) != "passphrase" && !strings.HasSuffix(p, "secrets.yaml") {
			data, _ := os.ReadFile(p)
			haystacks = append(haystacks, p+"\x00"+string(data))
		}
		return nil
	})
	cmds, _ := os.ReadFile(e.cmdLog)
	haystacks = append(haystacks, "engine output\x00"+e.log.String(), "command log\x00"+string(cmds))
	if len(haystacks) < 3 {
		e.t.Fatal("no state files found")
	}
	for _, h := range haystacks {
		name, body, _ := strings.Cut(h, "\x00")
		for _, sec := range secrets {
			if i := strings.Index(body, sec); len(sec) >= 8 && i >= 0 {
				e.t.Errorf("%s contains a secret in plain text (%.12s...), in %s", name, sec, leakContext(body, i))
			}
		}
	}
}

// leakContext names what holds body's text at i: the last resource URN
// before it and the property it is in, without the secret.
func leakContext(body string, i int) string {
	urn := ""
	if u := strings.LastIndex(body[:i], "urn:pulumi:"); u >= 0 {
		urn, _, _ = strings.Cut(body[u:], `"`)
	}
	from := max(0, i-160)
	return fmt.Sprintf("%s, after %q", urn, body[from:i])
}

func keyBody(pem string) []string {
	var out []string
	for _, l := range strings.Split(pem, "\n") {
		if len(l) > 40 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

// checkPreviews: after an inventory change, preview lists exactly the
// resources the change affects.
func (e *e2e) checkPreviews(ctx context.Context) {
	cases := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"a label on gpu-1", func(s string) string {
			return strings.Replace(s, "  - name: gpu-1\n", "  - name: gpu-1\n    labels: {tier: fast}\n", 1)
		}, []string{
			"update homelab:index:KubeadmJoin gpu-1",
			"update homelab:index:NodeMeta gpu-1",
		}},
		{"a worker added", func(s string) string {
			return s + "  - {name: gpu-5, role: worker, address: 10.77.0.134, interface: eth0}\n"
		}, nil},
		{"kube-proxy mode", func(s string) string {
			return strings.Replace(s, "mode: iptables", "mode: ipvs", 1)
		}, []string{
			"update homelab:index:File cp-1:/etc/kubernetes/kubeadm/init.yaml",
			"update homelab:index:File cp-2:/etc/kubernetes/kubeadm/init.yaml",
			"update homelab:index:File cp-3:/etc/kubernetes/kubeadm/init.yaml",
		}},
	}
	for _, tc := range cases {
		s := e.open(ctx, e.inventory("preview", tc.edit))
		changes, err := s.PreviewChanges(ctx, false)
		if err != nil {
			e.t.Errorf("%s: preview: %v", tc.name, err)
			continue
		}
		var got []string
		for _, c := range changes {
			got = append(got, c.Op+" "+c.Type+" "+c.Name)
		}
		if tc.want == nil { // the added worker: creates of gpu-5's resources only
			for _, g := range got {
				if !strings.HasPrefix(g, "create ") || !strings.Contains(g, "gpu-5") {
					e.t.Errorf("%s: unexpected change %s", tc.name, g)
				}
			}
			if len(got) < 5 {
				e.t.Errorf("%s: only %v", tc.name, got)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			e.t.Errorf("%s: preview lists\n  %s\nwant\n  %s", tc.name, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
		}
	}
	// Back to the real inventory for what follows.
	e.open(ctx, e.invPath)
}
