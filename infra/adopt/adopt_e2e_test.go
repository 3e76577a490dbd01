package adopt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sigs.k8s.io/yaml"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/verify"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/base"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestAdoptHandBuiltCluster is issue 6's acceptance for adopt: a cluster
// built by hand with plain kubeadm (kubeadm generating its own CA; gpu-4
// left out) is adopted, and one up converges it without a kubeadm init,
// reset or join on any node but gpu-4: the same CA, the same etcd cluster,
// the same Nodes, plus gpu-4.
func TestAdoptHandBuiltCluster(t *testing.T) {
	labtest.Need(t, "pulumi", "kubeadm")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	engine := &lab.SyncBuffer{}
	start := time.Now()
	l := labtest.Up(t, ctx, "adopt", func() { t.Logf("engine output (tail):\n%s", labtest.EngineTail(engine.String(), 80)) })
	work, invPath := l.Work, l.InventoryPath
	stateDir, cmdLog := filepath.Join(work, "state"), filepath.Join(work, "commands.log")
	inv, _, err := inventory.Load(invPath)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(l.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: lab up %s", time.Since(start).Round(time.Millisecond))

	mark := time.Now()
	h := buildByHand(t, ctx, l.Dial, inv, key, l.KnownHostsPath(), "gpu-4")
	t.Logf("figures: cluster built by hand (kubeadm's own CA, gpu-4 left out) in %s", time.Since(mark).Round(time.Millisecond))

	// Adopt: everything from here on is in the command log.
	t.Setenv(ssh.CommandLogEnv, cmdLog)
	mark = time.Now()
	target := Target{Inventory: inv, PrivateKey: key, KnownHosts: l.KnownHostsPath(), Dial: l.Dial, CommandLog: cmdLog}
	a, err := Prepare(ctx, target)
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	var table bytes.Buffer
	WriteTable(&table, a.Checks)
	t.Logf("comparison (prepared in %s):\n%s", time.Since(mark).Round(time.Millisecond), table.String())
	if got := mutating(t, cmdLog); len(got) != 0 {
		t.Errorf("reading the cluster ran mutating commands: %v", got)
	}

	// The bundle is the cluster's PKI; the cluster had no encryption key
	// to keep (unit tests cover keeping one).
	if !bytes.Equal(a.Bundle.Talos.Certs.K8s.Crt, h.ca) {
		t.Error("the bundle's Kubernetes CA is not the cluster's")
	}
	if a.KeyFrom != "" || a.Bundle.EncryptionSecret() == "" {
		t.Errorf("encryption key kept from %q on a cluster without encryption", a.KeyFrom)
	}
	// The rows: everything as declared but gpu-4, which is not there yet,
	// and the encryption at rest the cluster was built without.
	wantNotOK := []row{{CheckNode, "gpu-4", Missing}, {CheckKubeadm, "gpu-4", Missing}, {CheckEncryption, "cp-1:kube-apiserver", Missing}}
	for _, c := range a.Checks {
		r := row{c.Check, c.Where, c.Status}
		if c.Status != OK && !slices.Contains(wantNotOK, r) {
			t.Errorf("unexpected row %v: %s", r, c.Detail)
		}
	}
	got := rowsOf(a.Checks)
	for _, w := range append(wantNotOK,
		row{CheckEndpoint, "kubeadm-config", OK},
		row{CheckAPISANs, "served at " + inv.Endpoint(), OK}, row{CheckEtcd, "cp-3", OK}, row{CheckNode, "gpu-3", OK}) {
		if !got[w] {
			t.Errorf("no row %v", w)
		}
	}

	a.Close()

	// The command: without --yes (and no terminal) it writes nothing.
	bundlePath := stack.BundlePath(stateDir, inv.Cluster.Name)
	homelab := buildCLI(t, work)
	out, code := cli(t, homelab, "adopt", "-f", invPath, "--state-dir", stateDir)
	if code == 0 || !strings.Contains(out, "--yes") {
		t.Errorf("adopt without --yes: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(bundlePath); err == nil {
		t.Error("adopt without --yes wrote the bundle")
	}
	if got := mutating(t, cmdLog); len(got) != 0 {
		t.Errorf("adopt without --yes ran mutating commands: %v", got)
	}

	// With --yes: the bundle where up looks for it, the markers, the plan.
	mark = time.Now()
	out, code = cli(t, homelab, "adopt", "-f", invPath, "--state-dir", stateDir, "--yes")
	t.Logf("homelab adopt --yes: exit %d in %s:\n%s", code, time.Since(mark).Round(time.Millisecond), out)
	if code != 0 {
		t.Fatal("adopt failed")
	}
	for _, w := range []string{"marked cp-1: " + nodefacts.InitMarker, "marked gpu-3: " + nodefacts.JoinMarker,
		"0 to replace, 0 to delete; kubeadm joins gpu-4", "wrote " + bundlePath} {
		if !strings.Contains(out, w) {
			t.Errorf("adopt's output lacks %q", w)
		}
	}
	if fi, err := os.Stat(bundlePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bundle %s: %v %v", bundlePath, fi, err)
	}
	stored, err := os.ReadFile(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	storedBundle, err := pki.Parse(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(storedBundle.Talos.Certs.K8s.Crt, h.ca) || storedBundle.EncryptionSecret() == "" {
		t.Error("the stored bundle lacks the cluster's CA or an encryption key")
	}
	wrote := mutating(t, cmdLog)
	if len(wrote) != len(inv.Nodes)-1 {
		t.Errorf("adopt ran %d mutating commands, want one marker on each of %d nodes: %v", len(wrote), len(inv.Nodes)-1, wrote)
	}
	for _, w := range wrote {
		if !strings.Contains(w, scripts.HeaderPrefix+"adopt/mark\n") || !strings.Contains(w, "touch '/etc/kubernetes/.homelab-") {
			t.Errorf("adopt ran more than markers: %s", w)
		}
	}
	// The cluster lock it held while writing is given back.
	for _, n := range inv.ControlPlanes() {
		if held := nodeRun(t, ctx, l.Lab, n.Name, "ls -d "+clusterlock.Dir+" 2>/dev/null; true"); strings.TrimSpace(held) != "" {
			t.Errorf("%s: the cluster lock stays after adopt: %s", n.Name, held)
		}
	}

	// Again: the bundle is this cluster's already, nothing to mark.
	out, code = cli(t, homelab, "adopt", "-f", invPath, "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "already holds this cluster's bundle") || strings.Contains(out, "marked ") {
		t.Errorf("second adopt: exit %d:\n%s", code, out)
	}
	if again, _ := os.ReadFile(bundlePath); !bytes.Equal(again, stored) {
		t.Error("the second adopt rewrote the bundle")
	}
	// Another cluster's bundle is never overwritten without --force.
	other, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	otherPath := filepath.Join(work, "other.yaml")
	if _, err := stack.WriteBundle(otherPath, other); err != nil {
		t.Fatal(err)
	}
	out, code = cli(t, homelab, "adopt", "-f", invPath, "--state-dir", stateDir, "--secrets", otherPath, "--yes")
	if code == 0 || !strings.Contains(out, "--force") {
		t.Errorf("adopt over another cluster's bundle: exit %d:\n%s", code, out)
	}
	if got := mutating(t, cmdLog); len(got) != 0 {
		t.Errorf("the second and refused adopts ran mutating commands: %v", got)
	}

	for _, n := range inv.Nodes {
		want := nodefacts.JoinMarker
		if n.Name == "cp-1" {
			want = nodefacts.InitMarker
		}
		has := nodeRun(t, ctx, l.Lab, n.Name, "ls /etc/kubernetes/.homelab-*-complete 2>/dev/null; true")
		switch {
		case n.Name == "gpu-4" && strings.TrimSpace(has) != "":
			t.Errorf("gpu-4 (not set up) was marked: %s", has)
		case n.Name != "gpu-4" && strings.TrimSpace(has) != want:
			t.Errorf("%s has markers %q, want %s", n.Name, strings.TrimSpace(has), want)
		}
	}

	// The first preview, typed: nothing replaced or deleted.
	mark = time.Now()
	st, err := stack.Open(ctx, stack.Options{Inventory: invPath, StateDir: stateDir, Progress: engine})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.Bundle.Talos.Certs.K8s.Crt, h.ca) {
		t.Fatal("the stack did not load the adopted bundle")
	}
	changes, err := st.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	summary := PlanSummary(changes, a.Plan)
	t.Logf("figures: preview %s, %d changes; %s", time.Since(mark).Round(time.Millisecond), len(changes), summary)
	inits := 0
	for _, c := range changes {
		if c.Op != "create" && c.Op != "update" {
			t.Errorf("the first preview would %s: %s", c.Op, c)
		}
		if strings.HasSuffix(c.Type, ":KubeadmInit") {
			inits++
		}
	}
	if inits != 1 || !strings.Contains(summary, "joins gpu-4") || strings.Contains(summary, "resets") {
		t.Errorf("plan: %d KubeadmInit steps; %s", inits, summary)
	}
	if got := mutating(t, cmdLog); len(got) != 0 {
		t.Errorf("preview ran mutating commands: %v", got)
	}

	// One up: no kubeadm init or reset anywhere, a join on gpu-4 only.
	mark = time.Now()
	res, err := st.Up(ctx, true)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Logf("figures: up after adopt %s: %v", time.Since(mark).Round(time.Millisecond), *res.Summary.ResourceChanges)
	for _, c := range mutating(t, cmdLog) {
		node, _, _ := strings.Cut(c, ": ")
		switch {
		case strings.Contains(c, "kubeadm init --config") || strings.Contains(c, "kubeadm reset"):
			t.Errorf("up re-ran kubeadm on an adopted cluster: %s", c)
		case strings.Contains(c, "kubeadm join") && node != "gpu-4":
			t.Errorf("up joined an adopted node again: %s", c)
		case strings.Contains(c, "delete node"):
			t.Errorf("up deleted a Node: %s", c)
		}
	}

	// Every apiserver now runs with the encryption config, its manifest
	// regenerated by kubeadm from the uploaded cluster config.
	for _, n := range inv.ControlPlanes() {
		out := nodeRun(t, ctx, l.Lab, n.Name, "grep -c -- --encryption-provider-config= /etc/kubernetes/manifests/kube-apiserver.yaml || true")
		if strings.TrimSpace(out) != "1" {
			t.Errorf("%s's apiserver after up: encryption flag count %q", n.Name, out)
		}
	}

	// The same cluster: same CA, same etcd cluster, every Node, gpu-4 too.
	after, err := Prepare(ctx, target)
	if err != nil {
		t.Fatalf("reading the cluster after up: %v", err)
	}
	defer after.Close()
	if !bytes.Equal(after.Bundle.Talos.Certs.K8s.Crt, h.ca) {
		t.Error("the cluster's CA changed")
	}
	if after.Live.EtcdClusterID != a.Live.EtcdClusterID {
		t.Errorf("etcd cluster ID %x, was %x: a new etcd cluster", after.Live.EtcdClusterID, a.Live.EtcdClusterID)
	}
	for _, m := range a.Live.Members {
		if m2, ok := after.Live.Member(m.Name); !ok || m2.ID != m.ID {
			t.Errorf("etcd member %s (%x) is gone or was replaced", m.Name, m.ID)
		}
	}
	for _, n := range inv.Nodes {
		if _, ok := after.Live.APINode(n.Name); !ok {
			t.Errorf("Node %s is missing after up", n.Name)
		}
	}
	for _, p := range after.Plan {
		if !p.Verified || !p.Marked {
			t.Errorf("%s after up: verified %t, marked %t (lacks %v)", p.Node, p.Verified, p.Marked, p.Lacks)
		}
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	var rep *verify.Report
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(3 * time.Second) {
		rep, err = verify.Run(ctx, verify.Target{Inventory: inv, Bundle: st.Bundle, Kubeconfig: []byte(kc), Dial: l.Dial})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("verify after up: %v", err)
	}
	t.Logf("figures: whole test %s; nodes %v; etcd members %v", time.Since(start).Round(time.Second), rep.Nodes, rep.EtcdMembers)
}

// handBuilt is what the hand-built cluster was made with.
type handBuilt struct {
	ca        []byte      // the CA kubeadm generated
	throwaway *pki.Bundle // the bundle the non-PKI files were rendered from
}

// buildByHand builds the cluster as an operator would without homelab:
// our rendered files but no CA (kubeadm init generates its own), the CAs
// copied by hand to the other control-plane nodes, kubeadm join configs
// pinned to the CA kubeadm made; skip is left out.
func buildByHand(t *testing.T, ctx context.Context, dial ssh.DialFunc, inv *inventory.Inventory, key []byte, knownHosts, skip string) handBuilt {
	t.Helper()
	throwaway, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	r, err := roles.Render(inv, throwaway)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*ssh.Client{}
	for _, n := range inv.Nodes {
		c, err := ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: n.Address, Port: inv.SSH.Port, User: inv.SSH.User, PrivateKey: key, KnownHosts: knownHosts}, ssh.WithDialer(dial))
		if err != nil {
			t.Fatal(err)
		}
		clients[n.Name] = c
		defer c.Close()
	}
	run := func(node, cmd string) (string, error) {
		res, err := clients[node].Run(ctx, cmd)
		if err != nil {
			return "", err
		}
		if res.ExitCode != 0 {
			return "", fmt.Errorf("%s: %s: exit %d:\n%s%s", node, cmd, res.ExitCode, res.Stdout, res.Stderr)
		}
		return string(res.Stdout), nil
	}
	parallel := func(nodes []inventory.Node, fn func(n inventory.Node) error) {
		var wg sync.WaitGroup
		errs := make([]error, len(nodes))
		for i, n := range nodes {
			if n.Name == skip {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = fn(n) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	parallel(inv.Nodes, func(n inventory.Node) error {
		for _, nf := range r.Nodes {
			if nf.Node.Name != n.Name {
				continue
			}
			for _, f := range nf.Files {
				if strings.HasPrefix(f.Path, pki.CertificatesDir+"/") {
					continue
				}
				if err := clients[n.Name].Upload(ctx, f.Path, f.Content, f.Mode); err != nil {
					return err
				}
			}
		}
		if _, err := run(n.Name, "sysctl -e -p "+base.SysctlPath+" >/dev/null"); err != nil {
			return err
		}
		if n.IsControlPlane() {
			_, err := run(n.Name, "systemctl enable keepalived && systemctl restart keepalived")
			return err
		}
		return nil
	})
	cps := inv.ControlPlanes()
	// Built without encryption at rest, as most hand-built clusters are:
	// the first up must bring the flag to every apiserver.
	if _, err := run(cps[0].Name, "sed -i '/- name: encryption-provider-config/{N;d}' "+kubeadm.InitConfigPath+
		" && ! grep -q encryption-provider-config "+kubeadm.InitConfigPath); err != nil {
		t.Fatal(err)
	}
	if _, err := run(cps[0].Name, "kubeadm init --config "+kubeadm.InitConfigPath+" --skip-token-print --skip-certificate-key-print"); err != nil {
		t.Fatal(err)
	}
	ca, err := clients[cps[0].Name].Read(ctx, pki.CertificatesDir+"/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := nodefacts.ParseCertPEM(ca)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	// By hand, as kubeadm's docs do it: a token made on the first node,
	// bootstrap-token discovery pinned by the CA's hash.
	token := throwaway.BootstrapToken()
	if _, err := run(cps[0].Name, "kubeadm token create "+token+" --ttl 1h"); err != nil {
		t.Fatal(err)
	}
	join := func(n inventory.Node) error {
		rendered, err := kubeadm.Join(inv, n, token)
		if err != nil {
			return err
		}
		var jc kubeadm.JoinConfiguration
		if err := yaml.Unmarshal(rendered, &jc); err != nil {
			return err
		}
		jc.Discovery = kubeadm.Discovery{
			BootstrapToken: &kubeadm.BootstrapTokenDiscovery{
				Token: token, APIServerEndpoint: inv.Endpoint(), CACertHashes: []string{"sha256:" + hex.EncodeToString(sum[:])},
			},
			TLSBootstrapToken: token,
		}
		cfg, err := yaml.Marshal(jc)
		if err != nil {
			return err
		}
		if err := clients[n.Name].Upload(ctx, kubeadm.JoinConfigPath, cfg, 0o600); err != nil {
			return err
		}
		_, err = run(n.Name, "kubeadm join --config "+kubeadm.JoinConfigPath)
		return err
	}
	for _, n := range cps[1:] {
		// The shared CAs, copied by hand as kubeadm's HA guide says.
		for _, f := range nodefacts.IdentityFiles {
			p := pki.CertificatesDir + "/" + f
			data, err := clients[cps[0].Name].Read(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := clients[n.Name].Upload(ctx, p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := join(n); err != nil {
			t.Fatal(err)
		}
	}
	parallel(inv.Workers(), join)
	want := len(inv.Nodes) - 1
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := run(cps[0].Name, "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o name")
		if err == nil && len(strings.Fields(out)) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %d Nodes a minute after the joins: %s %v", want, out, err)
		}
		time.Sleep(time.Second)
	}
	return handBuilt{ca: ca, throwaway: throwaway}
}

// buildCLI builds the homelab command (which is also the provider plugin).
func buildCLI(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "homelab")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/homelab")
	cmd.Dir = tools.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/homelab: %v\n%s", err, out)
	}
	return bin
}

// cli runs the command with stdin not a terminal; it returns its standard
// output and exit code (the engine's progress, on stderr, is logged only
// when the command failed).
func cli(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		t.Logf("homelab %s: exit %d; stderr (tail):\n%s", strings.Join(args, " "), code, tailLines(stderr.String(), 5))
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String() + stderr.String()[max(0, stderr.Len()-600):], code
}

// mutating returns the mutating commands logged since the last call.
func mutating(t *testing.T, log string) []string {
	t.Helper()
	return labtest.Mutating(log)
}

func nodeRun(t *testing.T, ctx context.Context, l *lab.Lab, node, cmd string) string {
	t.Helper()
	out, err := l.Run(ctx, node, cmd)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", node, cmd, err, out)
	}
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
