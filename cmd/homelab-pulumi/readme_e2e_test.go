package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/verify"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// cli runs commands as a user at a shell would, in a fresh copy of the
// repository, with the real Pulumi CLI and Go language host: nothing of
// this test's process reaches them but the environment.
type cli struct {
	t       *testing.T
	repo    string
	env     []string
	cmdLog  string
	outputs bytes.Buffer // everything printed, for the secrets grep
	lab     *labtest.Lab
}

func (c *cli) run(ctx context.Context, line string) (string, error) {
	c.t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir, cmd.Env = c.repo, c.env
	out, err := cmd.CombinedOutput()
	c.t.Logf("$ %s (%s)", line, time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(line, "--show-secrets") {
		c.outputs.Write(out)
	}
	return string(out), err
}

func (c *cli) must(ctx context.Context, line string) string {
	c.t.Helper()
	out, err := c.run(ctx, line)
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", line, err, tail(out, 60))
	}
	return out
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// readmeSteps are the commands of the README's "With the Pulumi CLI"
// section: the test runs exactly what a newcomer is told to type.
func readmeSteps(t *testing.T, readme string) []string {
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## With the Pulumi CLI\n")
	if !ok {
		t.Fatal("README.md has no \"## With the Pulumi CLI\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []string
	for _, l := range strings.Split(section, "\n") {
		if cmd, ok := strings.CutPrefix(l, "    "); ok && strings.TrimSpace(cmd) != "" {
			steps = append(steps, strings.TrimSpace(cmd))
		}
	}
	return steps
}

// TestREADMEPulumiPath is issue 11's end to end: from a copy of the
// checkout, the README's Pulumi CLI commands build the emulated homelab's
// cluster, which verifies; the second up changes nothing and runs nothing
// on a node; destroy leaves the nodes clean; bad config is refused before
// any node is touched; a stack whose inventory lives outside the project
// plans the same cluster; no secret reaches the state or any output.
func TestREADMEPulumiPath(t *testing.T) {
	labtest.Need(t, "pulumi", "pulumi-language-go", "kubeadm")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	c := &cli{t: t}
	// Real nodes, as the README's homelab-lab up boots them.
	l := labtest.UpSystemd(t, ctx, "pulumicli", nil, []string{"*"}, func() { t.Logf("output (tail):\n%s", labtest.EngineTail(c.outputs.String(), 80)) })
	c.lab = l
	work := t.TempDir()
	c.repo = filepath.Join(work, "homelab")
	copyCheckout(t, tools.RepoRoot(), c.repo)
	// The lab's inventory as this lab needs it (its SSH key and
	// known_hosts live in the test's lab directory), where the README
	// says it is.
	labInv, err := os.ReadFile(l.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.repo, "inventory", "lab.yaml"), labInv, 0o644); err != nil {
		t.Fatal(err)
	}
	c.cmdLog = filepath.Join(work, "commands.jsonl")
	c.env = userEnv(t, work, l.Dir, c.cmdLog)
	// The README's install step, from the copy.
	c.must(ctx, "go build -o "+filepath.Join(work, "bin")+"/ ./cmd/homelab ./cmd/homelab-lab")

	c.badConfigIsRefused(ctx)

	inv, _, err := inventory.Load(l.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]func(out string){
		"pulumi preview": func(out string) {
			if !regexp.MustCompile(`\+ \d+ to create`).MatchString(out) {
				t.Errorf("the first preview plans no creates:\n%s", tail(out, 20))
			}
			c.noMutations("preview")
		},
		"pulumi up --yes": func(string) {
			// A command log that records nothing would pass the no-op
			// check below: the build must show in it.
			if len(c.mutations()) == 0 {
				t.Error("the first up logged no mutating command: the command log is not written")
			}
			c.verify(ctx, inv)
		},
		"pulumi up --yes --refresh": func(out string) {
			if !regexp.MustCompile(`\d+ unchanged`).MatchString(out) || regexp.MustCompile(`\d+ (to )?(create|update|replace|delete)`).MatchString(out) {
				t.Errorf("the second up was not a no-op:\n%s", tail(out, 20))
			}
			c.noMutations("the second up")
		},
		"pulumi stack output endpoint": func(out string) {
			if strings.TrimSpace(out) != inv.Endpoint() {
				t.Errorf("stack output endpoint %q, want %s", strings.TrimSpace(out), inv.Endpoint())
			}
		},
		"pulumi stack output kubeconfig --show-secrets > kubeconfig": func(string) {
			kc, err := os.ReadFile(filepath.Join(c.repo, "kubeconfig"))
			if err != nil || !bytes.Contains(kc, []byte("client-key-data")) {
				t.Errorf("kubeconfig output: %v\n%s", err, kc)
			}
		},
		"pulumi destroy --yes": func(string) { nodesClean(ctx, t, l) },
	}
	ran := map[string]bool{}
	for _, step := range readmeSteps(t, filepath.Join(c.repo, "README.md")) {
		c.mutations() // each check sees what its step ran
		out := c.must(ctx, step)
		for suffix, check := range checks {
			if strings.HasSuffix(step, suffix) {
				ran[suffix] = true
				check(out)
			}
		}
	}
	for suffix := range checks {
		if !ran[suffix] {
			t.Errorf("the README's Pulumi steps no longer run %q", suffix)
		}
	}

	// An inventory outside the project, by its absolute path.
	c.must(ctx, "pulumi stack init outside")
	c.must(ctx, "pulumi config set inventory "+l.InventoryPath)
	c.must(ctx, "pulumi config set --secret secrets < secrets.yaml")
	// Its preview plans the whole cluster from that file, touching no
	// node: the path is all this stack adds to what was built above, and
	// a second build of the same inventory cost CI three minutes.
	c.mutations()
	if out := c.must(ctx, "homelab-lab exec -- pulumi preview"); !regexp.MustCompile(`\+ \d+ to create`).MatchString(out) {
		t.Errorf("the outside inventory's preview plans no creates:\n%s", tail(out, 20))
	}
	c.noMutations("the outside inventory's preview")

	c.noSecretsLeaked(l, work)
	// The lab's namespaces have no way out: a command that reached for
	// the network (the language host's module listing, before setup.sh
	// downloaded every module) printed a failure per module it missed.
	if out := c.outputs.String(); strings.Contains(out, "network is unreachable") {
		t.Errorf("a command reached for the network from the lab:\n%s", grepLines(out, "network is unreachable", 5))
	}
}

// grepLines is up to n lines of s holding sub.
func grepLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// badConfigIsRefused: each config mistake a newcomer makes is named, with
// its key or field, before the program touches any node.
func (c *cli) badConfigIsRefused(ctx context.Context) {
	t := c.t
	c.must(ctx, "pulumi login --local && pulumi stack init bad")
	c.must(ctx, "homelab secrets init -o bad-secrets.yaml")
	expect := func(what string, want ...string) {
		t.Helper()
		out, err := c.run(ctx, "homelab-lab exec -- pulumi preview")
		if err == nil {
			t.Errorf("%s: preview succeeded", what)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the error does not name %q:\n%s", what, w, tail(out, 15))
			}
		}
	}
	expect("no config", "'inventory'", "'secrets'")
	c.must(ctx, "pulumi config set inventory inventory/lab.yaml && pulumi config set secrets < bad-secrets.yaml")
	expect("secrets in plain text", "'secrets'", "encrypted")
	c.must(ctx, "pulumi config set --secret secrets < bad-secrets.yaml")
	bad := strings.Replace(readFile(t, filepath.Join(c.repo, "inventory", "lab.yaml")), "address: 10.77.0.121", "address: 10.77.0.999", 1)
	bad = strings.Replace(bad, "role: worker", "role: wroker", 1)
	if err := os.WriteFile(filepath.Join(c.repo, "bad.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must(ctx, "pulumi config set inventory bad.yaml")
	expect("an inventory with errors", "nodes[1].address", "nodes[3].role")
	c.noMutations("a refused preview")
	c.must(ctx, "pulumi stack rm --yes --force bad && rm bad.yaml bad-secrets.yaml")
}

func (c *cli) mutations() []string { return labtest.Mutating(c.cmdLog) }

func (c *cli) noMutations(what string) {
	c.t.Helper()
	if m := c.mutations(); len(m) > 0 {
		c.t.Errorf("%s ran %d mutating commands on nodes: %v", what, len(m), m)
	}
}

// verify checks the cluster `pulumi up` built, with its own kubeconfig
// output and the bundle the README made.
func (c *cli) verify(ctx context.Context, inv *inventory.Inventory) {
	c.t.Helper()
	kc, err := c.run(ctx, "pulumi stack output kubeconfig --show-secrets")
	if err != nil {
		c.t.Fatalf("stack output kubeconfig: %v\n%s", err, kc)
	}
	b, err := pki.Parse([]byte(readFile(c.t, filepath.Join(c.repo, "secrets.yaml"))))
	if err != nil {
		c.t.Fatal(err)
	}
	var rep *verify.Report
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(3 * time.Second) {
		rep, err = verify.Run(ctx, verify.Target{Inventory: inv, Bundle: b, Kubeconfig: []byte(kc), Dial: c.lab.Dial})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		c.t.Fatalf("verify: %v", err)
	}
	if !slices.Equal(rep.EtcdMembers, []string{"cp-1", "cp-2", "cp-3"}) || len(rep.Nodes) != len(inv.Nodes) {
		c.t.Errorf("verify: etcd members %v, nodes %v", rep.EtcdMembers, rep.Nodes)
	}
}

// noSecretsLeaked greps the backend, the stack's config files and every
// output but the one that asked for them (--show-secrets) for the
// cluster's secrets and the SSH key.
func (c *cli) noSecretsLeaked(l *labtest.Lab, work string) {
	t := c.t
	b, err := pki.Parse([]byte(readFile(t, filepath.Join(c.repo, "secrets.yaml"))))
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := inventory.Load(filepath.Join(c.repo, "inventory", "lab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range inv.Nodes {
		names = append(names, n.Name)
	}
	secrets := b.SecretStrings(names...)
	for _, line := range strings.Split(readFile(t, l.KeyPath()), "\n") {
		if len(line) > 40 && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, line)
		}
	}
	haystacks := map[string]string{"command output": c.outputs.String(), "command log": readFile(t, c.cmdLog)}
	for _, dir := range []string{filepath.Join(work, "state"), c.repo} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasPrefix(filepath.Base(p), "Pulumi.") || strings.Contains(p, "/.pulumi/stacks/") || strings.Contains(p, "/.pulumi/history/")) {
				haystacks[p] = readFile(t, p)
			}
			return nil
		})
	}
	stacks := 0
	for name := range haystacks {
		if strings.Contains(name, "/.pulumi/stacks/") {
			stacks++
		}
	}
	if stacks < 2 {
		t.Fatalf("found no state to grep: %v", slices.Collect(maps.Keys(haystacks)))
	}
	for name, body := range haystacks {
		for _, s := range secrets {
			if len(s) >= 8 && strings.Contains(body, s) {
				t.Errorf("%s holds a secret in plain text (%.12s...)", name, s)
			}
		}
	}
}

// nodesClean: after destroy, no node keeps kubeadm's files, etcd's data or
// a control-plane process.
func nodesClean(ctx context.Context, t *testing.T, l *labtest.Lab) {
	t.Helper()
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1"} {
		out, err := l.Run(ctx, n, "ls /etc/kubernetes/manifests 2>/dev/null; ls /etc/kubernetes/*.conf /etc/kubernetes/kubeadm 2>/dev/null; ls /var/lib/etcd 2>/dev/null; pgrep -x etcd; pgrep -x kube-apiserver; true")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s not clean after destroy: %v\n%s", n, err, out)
		}
	}
}

// userEnv is a newcomer's shell: the Pulumi CLI and Go on PATH, the Go
// caches of this machine (nothing is downloaded from the lab's namespace),
// a passphrase for the stack's secrets, and the test's lab and command
// log. The CLI's home and state are the test's own: `pulumi login --local`
// would share the machine user's ~/.pulumi (root's, whatever HOME says)
// with every other run, and PULUMI_BACKEND_URL takes precedence over it.
// Nothing of the test's own lab plumbing (HOMELAB_NETNS) leaks in.
func userEnv(t *testing.T, work, labDir, cmdLog string) []string {
	home, state := filepath.Join(work, "home"), filepath.Join(work, "state")
	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + home,
		"PATH=" + strings.Join([]string{filepath.Join(work, "bin"), tools.Dir("pulumi"), filepath.Dir(goBin), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ":"),
		"PULUMI_CONFIG_PASSPHRASE=correct horse battery staple",
		"PULUMI_HOME=" + filepath.Join(home, ".pulumi"),
		"PULUMI_BACKEND_URL=file://" + state,
		"HOMELAB_LAB_DIR=" + labDir,
		ssh.CommandLogEnv + "=" + cmdLog,
	}
	for _, v := range []string{"GOPATH", "GOMODCACHE", "GOCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		out, err := exec.Command(goBin, "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return env
}

// copyCheckout copies what a fresh clone would hold: the tracked files
// (as they are in the work tree) and new ones not ignored.
func copyCheckout(t *testing.T, from, to string) {
	out, err := exec.Command("git", "-C", from, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src, dst := filepath.Join(from, f), filepath.Join(to, f)
		st, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the work tree
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(to, "Pulumi.yaml")); err != nil {
		t.Fatal(fmt.Errorf("the copy has no Pulumi.yaml: %w", err))
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}
