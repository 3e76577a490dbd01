package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/file"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
)

// phase is one timed part of the sequential script.
type phase struct {
	Name string
	Took time.Duration
}

// sequential builds the same cluster as `homelab up` the way a plain
// kubeadm-over-SSH script would, one node after another: every node's
// rendered files (then sysctl, then keepalived on control-plane nodes),
// kubeadm init on the first control-plane node, kubeadm join on the other
// control-plane nodes, then on each worker in turn, then labels, taints
// and the RuntimeClass with kubectl. It keeps one SSH connection per node
// (a script opening one per command would be slower) and skips what the
// provider adds (host facts, token checks, etcd membership reads), so it
// is the stronger baseline.
func sequential(ctx context.Context, invPath, kubeadmLog string) (time.Duration, []phase, error) {
	inv, _, err := inventory.Load(invPath)
	if err != nil {
		return 0, nil, err
	}
	key, err := inv.SSH.ReadPrivateKey()
	if err != nil {
		return 0, nil, err
	}
	bundle, err := pki.New()
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	var phases []phase
	mark := time.Now()
	done := func(name string) {
		now := time.Now()
		phases = append(phases, phase{name, now.Sub(mark)})
		logf("  sequential: %-34s %6.1f s", name, now.Sub(mark).Seconds())
		mark = now
	}

	r, err := roles.Render(inv, bundle)
	if err != nil {
		return 0, nil, err
	}
	clients := map[string]*ssh.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	client := func(n inventory.Node) (*ssh.Client, error) {
		if c, ok := clients[n.Name]; ok {
			return c, nil
		}
		port, user := inv.SSH.Port, inv.SSH.User
		if port == 0 {
			port = 22
		}
		if user == "" {
			user = "root"
		}
		c, err := ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: n.Address, Port: port, User: user, PrivateKey: key, KnownHosts: inv.SSH.KnownHosts}, ssh.OptionsFromEnv()...)
		if err != nil {
			return nil, err
		}
		clients[n.Name] = c
		return c, nil
	}
	run := func(n inventory.Node, what, cmd string) (string, error) {
		c, err := client(n)
		if err != nil {
			return "", err
		}
		res, err := c.Run(ctx, cmd)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", n.Name, what, err)
		}
		if res.ExitCode != 0 {
			return "", fmt.Errorf("%s: %s failed (exit %d):\n%s%s", n.Name, what, res.ExitCode, res.Stdout, res.Stderr)
		}
		return string(res.Stdout), nil
	}

	// 1. Files, sysctl, keepalived: node by node.
	vip := inv.Cluster.Endpoint.Layout == inventory.LayoutVIP
	for _, nf := range r.Nodes {
		n := nf.Node
		c, err := client(n)
		if err != nil {
			return 0, nil, err
		}
		for _, f := range nf.Files {
			if err := c.Upload(ctx, f.Path, f.Content, f.Mode); err != nil {
				return 0, nil, fmt.Errorf("%s: writing %s: %w", n.Name, f.Path, err)
			}
		}
		for _, f := range nf.Files {
			if f.OnChange == "" {
				continue
			}
			cmd, err := onChangeCommand(f)
			if err != nil {
				return 0, nil, fmt.Errorf("%s: %w", n.Name, err)
			}
			if _, err := run(n, f.OnChange, cmd); err != nil {
				return 0, nil, err
			}
		}
		what := fmt.Sprintf("%d files + sysctl", len(nf.Files))
		if vip && n.IsControlPlane() {
			if _, err := run(n, "keepalived", "systemctl enable keepalived && systemctl restart keepalived"); err != nil {
				return 0, nil, err
			}
			what += " + keepalived"
		}
		done(n.Name + ": " + what)
	}

	// 2. kubeadm init, then every join, one at a time.
	verbosity := ""
	if kubeadmLog != "" {
		verbosity = " --v=5 2>&1"
		if err := os.MkdirAll(kubeadmLog, 0o755); err != nil {
			return 0, nil, err
		}
	}
	keep := func(n inventory.Node, what, out string) {
		if kubeadmLog != "" {
			os.WriteFile(filepath.Join(kubeadmLog, n.Name+"-"+what+".log"), []byte(out), 0o644)
		}
	}
	cps := inv.ControlPlanes()
	first := cps[0]
	out, err := run(first, "kubeadm init", "kubeadm init --config "+kubeadm.InitConfigPath+" --skip-token-print --skip-certificate-key-print"+verbosity)
	if err != nil {
		return 0, nil, err
	}
	keep(first, "init", out)
	done(first.Name + ": kubeadm init")
	for _, n := range slices.Concat(cps[1:], inv.Workers()) {
		// Each node joins with its own token (the rendered join config
		// names it), created through the first node just before, as up
		// creates it.
		secret, err := provider.JoinTokenSecret(bundle.JoinToken(n.Name), n.Name)
		if err != nil {
			return 0, nil, err
		}
		c, err := client(first)
		if err != nil {
			return 0, nil, err
		}
		res, err := c.RunInput(ctx, "kubectl --kubeconfig /etc/kubernetes/admin.conf create -f - >/dev/null", secret)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: creating %s's join token: %w", first.Name, n.Name, err)
		}
		if res.ExitCode != 0 {
			return 0, nil, fmt.Errorf("%s: creating %s's join token failed: %s", first.Name, n.Name, res.Stderr)
		}
		out, err := run(n, "kubeadm join", "kubeadm join --config "+kubeadm.JoinConfigPath+verbosity)
		if err != nil {
			return 0, nil, err
		}
		keep(n, "join", out)
		done(n.Name + ": kubeadm join")
	}

	// 3. Labels and taints (once each Node registered), the RuntimeClass.
	const kubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
	for _, n := range inv.Nodes {
		name := shell.Quote(n.Name)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			c, err := client(first)
			if err != nil {
				return 0, nil, err
			}
			res, err := c.Query(ctx, kubectl+" get node "+name+" >/dev/null")
			if err != nil {
				return 0, nil, err
			}
			if res.ExitCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				return 0, nil, fmt.Errorf("Node %s did not register within 2 minutes", n.Name)
			}
			time.Sleep(time.Second)
		}
		var cmds []string
		labels := kubeadm.Labels(n)
		if len(labels) > 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(labels)) {
				kv = append(kv, shell.Quote(k+"="+labels[k]))
			}
			cmds = append(cmds, kubectl+" label node "+name+" --overwrite "+strings.Join(kv, " "))
		}
		for _, t := range kubeadm.Taints(n) {
			spec := t.Key
			if t.Value != "" {
				spec += "=" + t.Value
			}
			cmds = append(cmds, kubectl+" taint node "+name+" --overwrite "+shell.Quote(spec+":"+t.Effect))
		}
		if len(cmds) > 0 {
			if _, err := run(first, "labelling "+n.Name, strings.Join(cmds, " && ")); err != nil {
				return 0, nil, err
			}
		}
	}
	for _, f := range r.Cluster {
		if f.Path != gpu.RuntimeClassPath {
			continue
		}
		c, err := client(first)
		if err != nil {
			return 0, nil, err
		}
		res, err := c.RunInput(ctx, kubectl+" apply -f -", f.Content)
		if err != nil {
			return 0, nil, err
		}
		if res.ExitCode != 0 {
			return 0, nil, fmt.Errorf("applying the RuntimeClass: %s", res.Stderr)
		}
	}
	done("labels, taints, RuntimeClass")
	return time.Since(start), phases, nil
}

// onChangeCommand is what the node runs after writing f: the script its
// OnChange names (infra/scripts/onchange), as the provider's File runs it.
func onChangeCommand(f file.File) (string, error) {
	name := "onchange/" + f.OnChange
	if !slices.Contains(scripts.Names(), name) {
		return "", fmt.Errorf("%s: onChange %q names no script under infra/scripts/onchange", f.Path, f.OnChange)
	}
	return scripts.Render(name, struct{ Path string }{f.Path}).String(), nil
}
