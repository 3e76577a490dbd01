package provider_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/netplan"
)

// soloCP keeps cp-1 alone in the lab's inventory, without its MAC: a lab
// NIC is a veth, which has no permanent MAC, and netplan matches
// macaddress against the permanent one (docs/lab.md).
func soloCP(s string) string {
	head, _, _ := strings.Cut(s, "\nnodes:\n")
	return head + "\nnodes:\n  - {name: cp-1, role: control-plane, address: 10.77.0.120, interface: eth0}\n"
}

// On a real node (systemd-networkd, netplan, real systemd timers): the
// installer's DHCP definition is moved aside and the static address
// applied and confirmed; a file netplan refuses changes nothing; a match
// that finds no NIC is rolled back at once; and a change that cuts the
// node off is undone by the node itself, with the provisioner saying so.
func TestNetplanOnARealNode(t *testing.T) {
	labtest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := labtest.UpSystemd(t, ctx, "netplan", soloCP, []string{"cp-1"}, nil)
	inv, _, err := inventory.Load(l.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	node := inv.Nodes[0]
	key, err := os.ReadFile(inv.SSH.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	pctx, err := provider.Configured(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := l.Run(ctx, "cp-1", cmd)
		if err != nil {
			t.Fatalf("cp-1: %s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(out)
	}
	// What networkd configures eth0 from, and its addresses.
	networkFile := func() string {
		return run(`networkctl status eth0 --no-pager 2>/dev/null | awk -F': ' '/Network File:/ { print $2 }'`)
	}
	content, err := netplan.Render(inv, node)
	if err != nil {
		t.Fatal(err)
	}
	in := provider.NetplanArgs{
		Connection: provider.Connection{Node: "cp-1", Host: node.Address, User: "root", PrivateKey: string(key), KnownHosts: inv.SSH.KnownHosts},
		Content:    string(content), Interface: "eth0", Address: node.Address + "/24",
	}
	apply := func(in provider.NetplanArgs) error {
		t.Helper()
		_, err := provider.Netplan{}.Create(pctx, infer.CreateRequest[provider.NetplanArgs]{Inputs: in})
		return err
	}

	// As an installer leaves a machine: DHCP on the NIC (cloud-init's
	// file, which the lab's disk comes with), networkd holding a lease
	// from the lab's DHCP server for the declared address.
	leases := func() string { return run("ls /run/systemd/netif/leases 2>/dev/null || true") }
	if got := run("ip -o addr show dev eth0"); !strings.Contains(got, " "+node.Address+"/24 ") || !strings.Contains(got, "dynamic") {
		t.Fatalf("before the up, eth0 holds no lease for %s: %s", node.Address, got)
	}
	if leases() == "" {
		t.Fatal("before the up, networkd holds no DHCP lease")
	}
	if got := networkFile(); got != "/run/systemd/network/10-netplan-eth0.network" {
		t.Fatalf("the installer's DHCP definition is not in effect (network file %q)", got)
	}
	run("mkdir -p /etc/cloud/cloud.cfg.d")

	if err := apply(in); err != nil {
		t.Fatal(err)
	}
	if got := run("ls /etc/netplan"); !strings.Contains(got, "50-cloud-init.yaml"+netplan.DisabledSuffix) || strings.Contains(got, "50-cloud-init.yaml\n") {
		t.Errorf("/etc/netplan after the up: %q, want the DHCP definition moved aside", got)
	}
	if got := run("cat /etc/cloud/cloud.cfg.d/*.cfg"); got != "network: {config: disabled}" {
		t.Errorf("cloud-init is not told to leave the network alone: %q", got)
	}
	if got := run("cat /run/systemd/network/10-netplan-eth0.network"); strings.Contains(got, "DHCP") || !strings.Contains(got, "Address="+node.Address+"/24") {
		t.Errorf("eth0's network file is not the static one:\n%s", got)
	}
	if got := run("ip -o addr show dev eth0"); !strings.Contains(got, " "+node.Address+"/24 ") || strings.Contains(got, "dynamic") {
		t.Errorf("eth0: %s", got)
	}
	if got := run("systemctl is-active homelab-netplan-rollback.timer || true"); got == "active" {
		t.Error("the rollback is still armed after the confirmation")
	}
	if got := leases(); got != "" {
		t.Errorf("networkd still holds a DHCP lease after the up: %s", got)
	}
	sum := func() string { return run("sha256sum " + netplan.Path) }
	good := sum()

	// A file netplan refuses (a MAC in a form it cannot take) changes
	// nothing on the node.
	bad := in
	bad.Content = strings.Replace(in.Content, "addresses:", "match: {macaddress: 52-54-00-4d-00-78}\n      addresses:", 1)
	err = apply(bad)
	if err == nil || !strings.Contains(err.Error(), "refused by the node's netplan") {
		t.Fatalf("a file netplan refuses: %v", err)
	}
	if sum() != good || networkFile() != "/run/systemd/network/10-netplan-eth0.network" {
		t.Error("the refused file changed the node")
	}

	// What cuts the provisioner off is undone by the node itself, and the
	// provisioner says so: a match that finds no NIC (here the lab's
	// veth, which has no permanent MAC; on a machine, a mistyped
	// nodes[].mac: networkd lets the NIC go, and its address with it),
	// and a file that moves the declared address.
	defer provider.SetNetplanRollbackAfter(30 * time.Second)()
	withMAC := node
	withMAC.MAC = "52:54:00:4d:00:78"
	wrongMAC, err := netplan.Render(inv, withMAC)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, content string }{
		{"a match that finds no NIC", string(wrongMAC)},
		{"a moved address", strings.ReplaceAll(in.Content, node.Address+"/24", "10.77.0.150/24")},
	} {
		next := in
		next.Content = c.content
		start := time.Now()
		err := apply(next)
		if err == nil || !strings.Contains(err.Error(), "not reachable at "+node.Address) || !strings.Contains(err.Error(), "by itself") {
			t.Fatalf("%s: %v", c.name, err)
		}
		waitFor(t, ctx, c.name+": the node's own rollback", func() bool {
			out, err := l.Run(ctx, "cp-1", "sha256sum "+netplan.Path)
			return err == nil && strings.TrimSpace(out) == good
		})
		t.Logf("%s: reachable again %s after the apply", c.name, time.Since(start).Round(time.Second))
		if got := run("ip -o addr show dev eth0"); !strings.Contains(got, " "+node.Address+"/24 ") || strings.Contains(got, "10.77.0.150") {
			t.Errorf("%s: eth0 after the rollback: %s", c.name, got)
		}
		if got := networkFile(); got != "/run/systemd/network/10-netplan-eth0.network" {
			t.Errorf("%s: eth0's network file after the rollback: %q", c.name, got)
		}
	}

	// After a power cycle, networkd configures eth0 from homelab's file.
	if err := l.PowerOff("cp-1"); err != nil {
		t.Fatal(err)
	}
	if err := l.PowerOn(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "networkd after the boot", func() bool {
		out, err := l.Run(ctx, "cp-1", `networkctl status eth0 --no-pager 2>/dev/null | awk -F': ' '/Network File:/ { print $2 }'`)
		return err == nil && strings.TrimSpace(out) == "/run/systemd/network/10-netplan-eth0.network"
	})
	if got := run("cat /run/systemd/network/10-netplan-eth0.network"); strings.Contains(got, "DHCP") {
		t.Errorf("after the boot, eth0's network file:\n%s", got)
	}
	if got := run("ip -o addr show dev eth0"); !strings.Contains(got, " "+node.Address+"/24 ") || strings.Contains(got, "dynamic") {
		t.Errorf("after the boot, eth0: %s", got)
	}
	if got := leases(); got != "" {
		t.Errorf("after the boot, networkd holds a DHCP lease: %s", got)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 2 minutes", what)
		case <-time.After(time.Second):
		}
	}
}
