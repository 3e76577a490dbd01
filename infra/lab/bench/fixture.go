package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/tools"
)

// fixture is one fresh emulated homelab in its own directory under /srv
// (not /tmp: the nodes hide /tmp), with a work directory for the inventory
// pointed at the lab's SSH key, the stack's state and the command log.
type fixture struct {
	lab     *lab.Lab
	dir     string
	work    string
	invPath string
	cmdLog  string
	labUp   time.Duration
}

// newFixture brings a lab up from inventory/lab.yaml with workers
// workers. On error the caller still calls close.
func newFixture(ctx context.Context, name string, workers int) (*fixture, error) {
	dir, err := os.MkdirTemp("/srv", "homelab-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	fx := &fixture{dir: dir}
	if fx.work, err = os.MkdirTemp("", "homelab-bench-"+name+"-"); err != nil {
		return fx, err
	}
	if fx.lab, err = lab.Open(dir); err != nil {
		return fx, err
	}
	fx.lab.Log = prefixed("  ")
	// The provider (a child of the engine) and this process dial the nodes
	// from the lab's gateway namespace: no traffic leaves the lab.
	os.Setenv(ssh.NetnsEnv, fx.lab.Names().GatewayPath())
	fx.cmdLog = filepath.Join(fx.work, "commands.log")
	data, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "inventory", "lab.yaml"))
	if err != nil {
		return fx, err
	}
	inv, err := withWorkers(string(data), workers)
	if err != nil {
		return fx, err
	}
	// The lab's files (SSH key, known_hosts, the Cilium stand-in chart,
	// the apt keyring) are under this lab's directory.
	inv = strings.ReplaceAll(inv, lab.DefaultDir+"/", dir+"/")
	fx.invPath = filepath.Join(fx.work, "lab.yaml")
	if err := os.WriteFile(fx.invPath, []byte(inv), 0o644); err != nil {
		return fx, err
	}
	logf("lab %s: up in %s", name, dir)
	start := time.Now()
	if _, _, err := fx.lab.Up(ctx, fx.invPath); err != nil {
		return fx, fmt.Errorf("lab up: %w", err)
	}
	fx.labUp = time.Since(start)
	return fx, nil
}

// close brings the lab down (whatever state it reached) and removes both
// directories.
func (fx *fixture) close() error {
	if fx == nil {
		return nil
	}
	var err error
	if fx.lab != nil {
		if _, serr := fx.lab.LoadState(); serr == nil {
			start := time.Now()
			if err = fx.lab.Down(false); err != nil {
				err = fmt.Errorf("lab down %s: %w (finish with: HOMELAB_LAB_DIR=%s homelab-lab down)", fx.dir, err, fx.dir)
			} else {
				logf("lab down in %s", time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err == nil && fx.dir != "" {
		os.RemoveAll(fx.dir)
	}
	if fx.work != "" {
		os.RemoveAll(fx.work)
	}
	return err
}

// preflight fails early, naming the fix, when something the run needs is
// missing: the lab would otherwise start an 11-minute build of kubeadm.
func preflight() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the benchmark builds emulated homelabs (network namespaces, mounts): run it as root")
	}
	var missing []string
	for _, p := range []string{"ip", "nsenter", "unshare", "/usr/sbin/sshd", "/usr/sbin/keepalived"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p+" (run infra/tools/setup.sh)")
		}
	}
	if os.Getenv(lab.EnvKubeDir) == "" {
		for _, b := range []string{"kubeadm", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
			if _, err := tools.Path(b); err != nil {
				missing = append(missing, err.Error())
			}
		}
	}
	if os.Getenv(lab.EnvEtcdDir) == "" {
		for _, b := range []string{"etcd", "etcdctl"} {
			if _, err := tools.Path(b); err != nil {
				missing = append(missing, err.Error())
			}
		}
	}
	if _, err := exec.LookPath("pulumi"); err != nil {
		if _, err := tools.Path("pulumi"); err != nil {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing tools (nothing was started):\n  %s", strings.Join(missing, "\n  "))
	}
	return nil
}

// labWorkers are inventory/lab.yaml's workers: its four GPU workers.
const labWorkers = 4

// withWorkers is inventory/lab.yaml with n workers: its own four, then
// plain workers worker-05, worker-06, ... on the next addresses and MACs
// (the lab's /24 has room for 120 more). A homelab grows by such nodes.
func withWorkers(inv string, n int) (string, error) {
	switch {
	case n < labWorkers:
		return "", fmt.Errorf("-workers %d: the lab has at least its own %d GPU workers", n, labWorkers)
	case n > labWorkers+100:
		return "", fmt.Errorf("-workers %d: at most %d fit the lab's addresses", n, labWorkers+100)
	}
	const last = "    gpus: {vendor: nvidia, count: 1, model: \"RTX 4090\"}\n"
	if !strings.HasSuffix(inv, last) || !strings.Contains(inv, "address: 10.77.0.133\n") {
		return "", fmt.Errorf("inventory/lab.yaml no longer ends with gpu-4 at 10.77.0.133: teach withWorkers its new shape")
	}
	var b strings.Builder
	b.WriteString(inv)
	for i := labWorkers; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: worker-%02d, role: worker, address: 10.77.0.%d, mac: \"52:54:00:4d:00:%02x\", interface: eth0}\n", i+1, 130+i, 0x82+i)
	}
	return b.String(), nil
}
