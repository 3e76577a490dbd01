package provider

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/netplan"
)

const ourNetplan = "network:\n  version: 2\n  ethernets:\n    eth0:\n      addresses: [10.0.0.11/24]\n"

// netplanRead is netplan/read's answer for a node with netplan (or not),
// homelab's file at sha ("" absent) and other files by path.
func netplanReadAnswer(installed bool, sha string, others map[string]string) string {
	out := "netplan no\n"
	if installed {
		out = "netplan yes\n"
	}
	if sha == "" {
		sha = "-"
	}
	out += "ours " + sha + "\n"
	for p, c := range others {
		out += "file " + p + " " + base64.StdEncoding.EncodeToString([]byte(c)) + "\n"
	}
	return out
}

const cloudInitDHCP = "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n"

func netplanIn(l *fakeLab, node string) NetplanArgs {
	return NetplanArgs{Connection: l.conn(node), Content: ourNetplan, Interface: "eth0", Address: l.node(node).addr + "/24"}
}

// The first up on a node whose installer left a DHCP definition of the
// interface: the preview names the file, the up validates and applies
// with it moved aside, and confirms over a connection of its own.
func TestNetplanMovesTheDHCPDefinitionAsideAndConfirms(t *testing.T) {
	l := newFakeLab(t)
	n := l.node("cp-1")
	n.onScript("netplan/read", netplanReadAnswer(true, "", map[string]string{"/etc/netplan/50-cloud-init.yaml": cloudInitDHCP}), 0)
	n.onScript("netplan/apply", "armed\n", 0)
	n.onScript("netplan/applied", "success\n", 0)
	n.onScript("netplan/confirm", "confirmed\n", 0)
	in := netplanIn(l, "cp-1")

	_, err := Netplan{}.Create(l.ctx(), infer.CreateRequest[NetplanArgs]{Inputs: in, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.mutations() != nil {
		t.Errorf("the preview changed the node: %v", n.mutations())
	}
	st, err := readNetplan(l.ctx(), in, NetplanState{NetplanArgs: in})
	if err != nil {
		t.Fatal(err)
	}
	if d := netplanChanges(in, st); !d.has("competing", "content") {
		t.Errorf("changes %v: want content and competing", d)
	}
	if got := st.Competing; len(got) != 1 || got[0] != "/etc/netplan/50-cloud-init.yaml" {
		t.Errorf("competing %v", got)
	}
	n.reset()

	if _, err := (Netplan{}).Create(l.ctx(), infer.CreateRequest[NetplanArgs]{Inputs: in}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range n.events {
		if name, ok := scripts.NameOf(e.cmd); ok {
			order = append(order, name)
		} else {
			order = append(order, e.kind+" "+e.cmd)
		}
	}
	want := []string{"netplan/read", "upload /var/lib/homelab/netplan/staged.yaml", "upload /var/lib/homelab/netplan/backup/rollback.sh", "netplan/apply", "netplan/applied", "netplan/confirm"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("steps on the node:\n got %v\nwant %v", order, want)
	}
	if n.dials < 2 {
		t.Errorf("%d dials: the confirmation must come over a new connection", n.dials)
	}
	for _, e := range n.events {
		if name, _ := scripts.NameOf(e.cmd); name == "netplan/apply" && !strings.Contains(e.cmd, "'/etc/netplan/50-cloud-init.yaml'") {
			t.Errorf("the apply does not move the DHCP definition aside:\n%s", e.cmd)
		}
	}
	scriptstest.Golden(t, nodeprobes.Netplan("eth0"), "")
	scriptstest.Golden(t, scripts.Render("netplan/apply", netplanApplyArgs{
		Staged: netplanDir + "/staged.yaml", Path: netplan.Path, Backup: netplanDir + "/backup", Disable: []string{"/etc/netplan/50-cloud-init.yaml"},
		RollbackAfter: 120, DisabledSuffix: netplan.DisabledSuffix, CloudInitOff: cloudInitOff, Restart: "keepalived",
	}), "")
	scriptstest.Golden(t, scripts.Render("netplan/restart", struct{ Backup string }{netplanDir + "/backup"}), "")
	scriptstest.Golden(t, scripts.Render("netplan/rollback", netplanRollbackArgs{Backup: netplanDir + "/backup", DisabledSuffix: netplan.DisabledSuffix, CloudInitOff: cloudInitOff}), "")
	scriptstest.Golden(t, scripts.Render("netplan/applied", nil), "")
	scriptstest.Golden(t, scripts.Render("netplan/confirm", netplanConfirmArgs{Interface: "eth0", Address: "10.0.0.11/24", Backup: netplanDir + "/backup"}), "")
}

// What the node refuses or cannot confirm is an error naming the node and
// what happened to its configuration; a file that configures the
// interface beside other devices is refused before anything changes.
func TestNetplanFailures(t *testing.T) {
	cases := []struct {
		name      string
		others    map[string]string
		apply     int
		confirm   string
		wantInErr []string
		wantRan   map[string]int
	}{
		{name: "netplan refuses the file", apply: 3, wantInErr: []string{"cp-1", "refused by the node's netplan", "nothing changed", "nodes[].mac"},
			wantRan: map[string]int{"netplan/apply": 1, "netplan/confirm": 0}},
		{name: "the confirmation finds no static address", confirm: "refused: eth0 does not hold 10.0.0.11/24", wantInErr: []string{"cp-1", "rolled back", "does not hold"},
			wantRan: map[string]int{"netplan/apply": 1, "netplan/confirm": 1}},
		{name: "a shared file configures the interface", others: map[string]string{"/etc/netplan/00-installer-config.yaml": "network:\n  ethernets:\n    eth0: {dhcp4: true}\n    eth1: {dhcp4: true}\n"},
			wantInErr: []string{"cp-1", "00-installer-config.yaml", "eth1", "remove eth0 from it"}, wantRan: map[string]int{"netplan/apply": 0, "netplan/confirm": 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newFakeLab(t)
			n := l.node("cp-1")
			n.onScript("netplan/read", netplanReadAnswer(true, "old", c.others), 0)
			n.onScript("netplan/apply", "", c.apply)
			n.onScript("netplan/applied", "success\n", 0)
			n.onScript("netplan/confirm", c.confirm+"\n", 0)
			in := netplanIn(l, "cp-1")
			st, err := readNetplan(l.ctx(), in, NetplanState{NetplanArgs: in})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Netplan{}.Update(l.ctx(), infer.UpdateRequest[NetplanArgs, NetplanState]{Inputs: in, State: st})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.wantInErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for s, want := range c.wantRan {
				if got := n.ran(s); got != want {
					t.Errorf("%s ran %d times, want %d", s, got, want)
				}
			}
			if len(c.others) > 0 {
				if _, err := (Netplan{}).Diff(l.ctx(), infer.DiffRequest[NetplanArgs, NetplanState]{Inputs: in, State: st}); err == nil {
					t.Error("the preview does not refuse it")
				}
			}
		})
	}
}

// A node without netplan gets the file and nothing else; one whose file
// is as declared and has no competing definition is not touched.
func TestNetplanWithoutNetplanOrChange(t *testing.T) {
	l := newFakeLab(t)
	n := l.node("gpu-1")
	n.onScript("netplan/read", netplanReadAnswer(false, "", nil), 0)
	in := netplanIn(l, "gpu-1")
	if _, err := (Netplan{}).Create(l.ctx(), infer.CreateRequest[NetplanArgs]{Inputs: in}); err != nil {
		t.Fatal(err)
	}
	if m := n.mutations(); len(m) != 1 || m[0] != "upload "+netplan.Path {
		t.Errorf("mutations %v: want the file written alone", m)
	}
	n.reset()
	n.onScript("netplan/read", netplanReadAnswer(true, sum(ourNetplan), nil), 0)
	st, err := readNetplan(l.ctx(), in, NetplanState{NetplanArgs: in})
	if err != nil {
		t.Fatal(err)
	}
	if d := netplanChanges(in, st); len(d) != 0 {
		t.Errorf("changes %v on a converged node", d)
	}
}

// On the node holding the VIP, keepalived hands the address over before
// the apply (systemd-networkd drops addresses it did not configure). Once
// the node armed the apply, the node itself starts keepalived again (the
// confirmation or the rollback does): the provisioner's connection may be
// the one the new configuration cut off. Before that, the provisioner
// does.
func TestNetplanHandsTheVIPOver(t *testing.T) {
	defer SetNetplanRollbackAfter(4 * time.Second)()
	cases := []struct {
		name        string
		apply       int
		confirm     func(string) (ssh.Result, error)
		wantErr     string
		wantStarted bool // by the provisioner
	}{
		{name: "confirmed", confirm: answer("confirmed\n", 0)},
		{name: "refused by netplan", apply: 3, wantErr: "refused by the node's netplan", wantStarted: true},
		{name: "cut off", confirm: func(string) (ssh.Result, error) { return ssh.Result{}, errors.New("connection refused") }, wantErr: "by itself"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newFakeLab(t)
			n := l.node("cp-1")
			n.onScript("netplan/read", netplanReadAnswer(true, "old", nil), 0)
			n.onScript("netplan/apply", "armed\n", c.apply)
			n.onScript("netplan/applied", "success\n", 0)
			if c.confirm != nil {
				n.onScriptFunc("netplan/confirm", c.confirm)
			}
			n.onScript("vip/holds", "holds\n", 0)
			n.onScript("systemd/stop", "", 0)
			n.onScript("systemd/start", "", 0)
			in := netplanIn(l, "cp-1")
			in.Endpoint = "10.0.0.100:6443"
			_, err := (Netplan{}).Create(l.ctx(), infer.CreateRequest[NetplanArgs]{Inputs: in})
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want one saying %q", err, c.wantErr)
			}
			var stop, apply, start int
			for _, e := range n.events {
				switch name, _ := scripts.NameOf(e.cmd); name {
				case "systemd/stop":
					stop = e.seq
				case "netplan/apply":
					apply = e.seq
					if !strings.Contains(e.cmd, "echo 'keepalived' >") {
						t.Error("the apply does not record keepalived for the node to start again")
					}
				case "systemd/start":
					start = e.seq
				}
			}
			if !(stop > 0 && stop < apply) {
				t.Errorf("keepalived stopped at %d, the apply at %d: want the VIP handed over first", stop, apply)
			}
			if started := start > apply; started != c.wantStarted {
				t.Errorf("the provisioner started keepalived: %v, want %v", started, c.wantStarted)
			}
		})
	}
}

func answer(stdout string, exit int) func(string) (ssh.Result, error) {
	return func(string) (ssh.Result, error) { return ssh.Result{Stdout: []byte(stdout), ExitCode: exit}, nil }
}
