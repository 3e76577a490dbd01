package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/inventory"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return command.Run(newRootCommand(), args...)
}

const homelab = "../../inventory/homelab.yaml"

func TestValidate(t *testing.T) {
	// validate checks the files homelab.yaml names (in ~/.ssh) exist.
	homeWithKeys(t)
	if _, stderr, code := run(t, "validate", "-f", homelab); code != 0 {
		t.Errorf("valid inventory: exit %d: %s", code, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data, _ := os.ReadFile(homelab)
	os.WriteFile(bad, []byte(strings.Replace(string(data), "vip: 10.0.0.100", "vip: 10.0.0.999", 1)), 0o644)
	_, stderr, code := run(t, "validate", "-f", bad)
	if code != 1 || !strings.Contains(stderr, "cluster.endpoint.vip") {
		t.Errorf("invalid inventory: exit %d, stderr %q", code, stderr)
	}
}

func TestRenderInTwoLayoutsAndCompare(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "secrets.yaml")
	if _, _, code := run(t, "secrets", "init", "-o", bundle); code != 0 {
		t.Fatal("secrets init failed")
	}
	if fi, _ := os.Stat(bundle); fi.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %o", fi.Mode().Perm())
	}
	if _, stderr, code := run(t, "secrets", "init", "-o", bundle); code == 0 || !strings.Contains(stderr, "--force") {
		t.Error("secrets init overwrote an existing bundle")
	}
	vip, single := filepath.Join(dir, "vip"), filepath.Join(dir, "single")
	if _, stderr, code := run(t, "render", "-f", homelab, "-o", vip, "--secrets", bundle); code != 0 {
		t.Fatal(stderr)
	}
	_, stderr, code := run(t, "render", "-f", homelab, "-o", single, "--secrets", bundle, "--layout", "single-ip")
	if code != 0 {
		t.Fatal(stderr)
	}
	if !strings.Contains(stderr, "warning: cluster.endpoint.layout") {
		t.Errorf("single-ip render did not warn: %q", stderr)
	}
	read := func(root, p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if !strings.Contains(read(vip, "cp-1/etc/kubernetes/kubeadm/init.yaml"), "controlPlaneEndpoint: 10.0.0.100:6443") {
		t.Error("vip render lacks the VIP endpoint")
	}
	if !strings.Contains(read(single, "cp-1/etc/kubernetes/kubeadm/init.yaml"), "controlPlaneEndpoint: 10.0.0.120:6443") {
		t.Error("single-ip render lacks cp-1's endpoint")
	}
	if _, err := os.Stat(filepath.Join(single, "cp-1/etc/keepalived/keepalived.conf")); err == nil {
		t.Error("single-ip render has keepalived")
	}
	if read(vip, "gpu-2/etc/netplan/60-homelab.yaml") != read(single, "gpu-2/etc/netplan/60-homelab.yaml") {
		t.Error("layout changed a worker's network config")
	}
	if fi, _ := os.Stat(filepath.Join(vip, "cp-1/etc/kubernetes/pki/ca.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %o", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(vip, "_cluster/cilium-values.yaml")); err != nil {
		t.Error("no Cilium values for a Cilium homelab")
	}
}

func TestRenderRefusesALayoutTheInventoryCannotExpress(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := run(t, "render", "-f", homelab, "-o", dir, "--layout", "dns")
	if code != 1 || !strings.Contains(stderr, "cluster.endpoint.dnsName") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Error("a refused render wrote files")
	}
}

func TestSANs(t *testing.T) {
	out, _, code := run(t, "sans", "-f", homelab)
	if code != 0 {
		t.Fatal(code)
	}
	ipPart, namePart, ok := strings.Cut(out, "# DNS names")
	if !ok || !strings.Contains(ipPart, "10.0.0.100\n") || !strings.Contains(ipPart, "10.0.0.122\n") || !strings.Contains(namePart, "cp-3\n") || strings.Contains(namePart, "10.0.0.") {
		t.Errorf("got %q", out)
	}
}

// destroy resets every node: without --yes it asks for the cluster's name
// on a terminal, and anywhere else it refuses, naming the flag.
func TestDestroyNeedsConsent(t *testing.T) {
	inv, _, err := inventory.Load(homelab)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe() // not a terminal, as in cron or CI
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Close()
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin }()
	cmd := newRootCommand()
	err = confirmDestroy(cmd, inv, false)
	if err == nil || !strings.Contains(err.Error(), "--yes") || !strings.Contains(err.Error(), inv.Cluster.Name) {
		t.Errorf("destroy without consent off a terminal: %v", err)
	}
	if err := confirmDestroy(cmd, inv, true); err != nil {
		t.Errorf("--yes: %v", err)
	}
}

// --renew-certificates alone means every control-plane node; a name that
// is none is refused, with the names that are.
func TestRenewCertificatesFlag(t *testing.T) {
	inv, _, err := inventory.Load(homelab)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newUpCommand()
	if err := cmd.ParseFlags([]string{"--renew-certificates"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := cmd.Flags().GetStringSlice("renew-certificates"); len(got) != 1 || got[0] != "*" {
		t.Errorf("--renew-certificates alone: %v", got)
	}
	cmd = newPreviewCommand()
	if err := cmd.ParseFlags([]string{"--renew-certificates=cp-2,cp-3"}); err != nil {
		t.Fatal(err)
	}
	got, _ := cmd.Flags().GetStringSlice("renew-certificates")
	if err := checkRenewNodes(inv, got); err != nil || len(got) != 2 {
		t.Errorf("cp-2,cp-3: %v %v", got, err)
	}
	err = checkRenewNodes(inv, []string{"cp-1", "gpu-1", "cp-9"})
	if err == nil || !strings.Contains(err.Error(), "gpu-1, cp-9") || !strings.Contains(err.Error(), "cp-1, cp-2, cp-3") {
		t.Errorf("a worker and a typo: %v", err)
	}
}

// The off-site flags that cannot mean anything are refused before any
// file is read or node reached.
func TestOffsiteFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"etcd", "snapshot", "-f", homelab, "--to", "nfs"}, "the one destination is s3"},
		{[]string{"etcd", "snapshot", "-f", homelab, "--to", "s3", "--fetch"}, "--to s3 or --fetch"},
		{[]string{"etcd", "restore", "-f", homelab, "--latest", "--from", "s3://b/k"}, "--latest or --from"},
	} {
		if _, stderr, code := run(t, c.args...); code == 0 || !strings.Contains(stderr, c.says) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}
