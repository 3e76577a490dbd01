package lab

import (
	"context"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLayerOfFollowsTopLevelSymlinks(t *testing.T) {
	for in, want := range map[string]string{
		"/etc/ssh/sshd_config":            "etc:ssh/sshd_config",
		"/usr/lib/systemd/system/a":       "usr:lib/systemd/system/a",
		"/root/.ssh/authorized_keys":      "root:.ssh/authorized_keys",
		"/var/lib/kubelet/config.yaml":    "var:lib/kubelet/config.yaml",
		"/opt/cni/bin/x":                  "opt:cni/bin/x",
		"/etc/../etc/hosts":               "etc:hosts",
		"/lib/systemd/system/ssh.service": "usr:lib/systemd/system/ssh.service",
	} {
		if in == "/lib/systemd/system/ssh.service" {
			if target, err := os.Readlink("/lib"); err != nil || target != "usr/lib" {
				continue // not a merged-/usr machine
			}
		}
		layer, rel, err := layerOf(in)
		if err != nil || layer+":"+rel != want {
			t.Errorf("layerOf(%q) = %q, %q, %v; want %s", in, layer, rel, err, want)
		}
	}
	for _, bad := range []string{"/run/x", "/tmp/x", "relative/x", "/etc", "/srv/x"} {
		if _, _, err := layerOf(bad); err == nil {
			t.Errorf("layerOf(%q) accepted a path outside the node's disk", bad)
		}
	}
}

func TestLabDirMustNotBeOverlaid(t *testing.T) {
	for _, bad := range []string{"/var/lib/homelab-lab", "/etc/lab", "/root/lab", "/tmp/lab", "/usr/local/lab", "relative", "/"} {
		if err := checkDir(bad); err == nil {
			t.Errorf("checkDir(%q) accepted it", bad)
		}
	}
	for _, good := range []string{DefaultDir, "/srv/other-lab", "/home/lab"} {
		if err := checkDir(good); err != nil {
			t.Errorf("checkDir(%q): %v", good, err)
		}
	}
}

func TestLinkNamesFitAndDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"cp-1", "cp-2", "gpu-1", strings.Repeat("very-long-node-name", 3)} {
		k := linkName(n)
		if len(k) > 15 {
			t.Errorf("linkName(%q) = %q: longer than 15", n, k)
		}
		if o, ok := seen[k]; ok {
			t.Errorf("%q and %q share link name %s", n, o, k)
		}
		seen[k] = n
	}
}

func TestProgramOf(t *testing.T) {
	for cmdline, want := range map[string]string{
		"/usr/bin/kube-apiserver\x00--advertise-address=10.77.0.120\x00": "kube-apiserver",
		"kubelet\x00--config=/var/lib/kubelet/config.yaml\x00":           "kubelet",
		"sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups":        "sshd",
		"/usr/sbin/keepalived\x00--dont-fork\x00":                        "keepalived",
		"": "",
	} {
		if got := programOf([]byte(cmdline)); got != want {
			t.Errorf("%q: %q, want %q", cmdline, got, want)
		}
	}
}

func TestRandomMACIsLocalUnicast(t *testing.T) {
	for i := 0; i < 100; i++ {
		m, err := net.ParseMAC(randomMAC())
		if err != nil {
			t.Fatal(err)
		}
		if m[0]&0x02 == 0 || m[0]&0x01 != 0 {
			t.Fatalf("%s is not a locally administered unicast MAC", m)
		}
	}
}

func TestDialerRefusesNamesAndOtherSubnets(t *testing.T) {
	_, subnet, _ := net.ParseCIDR("10.77.0.0/24")
	d := &Dialer{Netns: "hl-none", Subnet: subnet, Names: map[string]string{"cp-1": "10.77.0.120"}}
	for _, addr := range []string{"example.com:443", "192.0.2.1:22", "10.78.0.1:22", "[::1]:22"} {
		if _, err := d.DialContext(context.Background(), "tcp", addr); err == nil || strings.Contains(err.Error(), "hl-none") {
			t.Errorf("dial %s: want a refusal before any namespace is entered, got %v", addr, err)
		}
	}
	// A lab name passes the checks and only fails for want of the namespace.
	if _, err := d.DialContext(context.Background(), "tcp", "cp-1:22"); err == nil || !strings.Contains(err.Error(), "hl-none") {
		t.Errorf("dial cp-1:22: %v", err)
	}
}

func TestBootRefusesOutsideANewPIDNamespace(t *testing.T) {
	if err := Boot("/nonexistent"); err == nil || !strings.Contains(err.Error(), "PID 1") {
		t.Fatalf("Boot outside a node: %v", err)
	}
}

// TestLabUpDown is the lab alone: seven nodes up, isolated from each other
// and from the machine, power-off/on, replace, readdress, and a down that
// leaves nothing.
func TestLabUpDown(t *testing.T) {
	needLab(t)
	l := newTestLab(t)
	start := time.Now()
	s := up(t, l)
	t.Logf("lab up with %d nodes in %s", len(s.Nodes), time.Since(start).Round(time.Millisecond))
	if len(s.Nodes) != 7 {
		t.Fatalf("%d nodes, want 7", len(s.Nodes))
	}
	noLabAddressHere(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(node, cmd string) string {
		t.Helper()
		out, err := l.Run(ctx, node, cmd)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		return strings.TrimSpace(out)
	}

	for _, n := range s.Nodes {
		if got := run(n.Name, "hostname"); got != n.Name {
			t.Errorf("hostname on %s = %q", n.Name, got)
		}
	}
	// Again an up changes nothing.
	if _, already, err := l.Up(ctx, labInventory); err != nil || !already {
		t.Errorf("second up: already=%v err=%v", already, err)
	}

	t.Run("isolation", func(t *testing.T) {
		mark := "lab-test-" + randomHex(4)
		for _, d := range overlaid {
			run("cp-1", "echo cp-1 > /"+d+"/"+mark)
			if _, err := os.Stat("/" + d + "/" + mark); err == nil {
				os.Remove("/" + d + "/" + mark)
				t.Errorf("/%s/%s written on cp-1 shows on the machine", d, mark)
			}
			if out := run("cp-2", "test -e /"+d+"/"+mark+" && echo visible || echo absent"); out != "absent" {
				t.Errorf("/%s/%s written on cp-1 is %s on cp-2", d, mark, out)
			}
		}
		// A stand-in node has it covered by an empty tmpfs; a real node's
		// root is the Debian image, where it does not exist.
		if out := run("cp-2", "ls -A "+l.Dir+" 2>/dev/null | wc -l"); out != "0" {
			t.Errorf("the lab directory (every node's disk) is visible on a node: %s entries", out)
		}
		before, _ := os.ReadFile("/proc/sys/vm/swappiness")
		if _, err := l.Run(ctx, "cp-1", "sysctl -w vm.swappiness=7"); err == nil {
			t.Error("a node changed vm.swappiness, the machine's global sysctl")
		}
		if after, _ := os.ReadFile("/proc/sys/vm/swappiness"); string(after) != string(before) {
			t.Errorf("vm.swappiness changed from %s to %s", before, after)
		}
		if out := run("cp-1", "sysctl -n net.ipv4.ip_forward; sysctl -w net.ipv4.conf.all.rp_filter=1 >/dev/null && echo net-writable"); out != "1\nnet-writable" {
			t.Errorf("net sysctls on a node: %q", out)
		}
		if out := run("gpu-1", "ls /sys/class/net | tr '\\n' ' '"); out != "eth0 lo" {
			t.Errorf("gpu-1 sees links %q, want its own eth0 and lo", out)
		}
		if out := run("gpu-1", "cat /sys/class/net/eth0/address"); out != "52:54:00:4d:00:82" {
			t.Errorf("gpu-1 eth0 MAC %s", out)
		}
		// Its own PID namespace: init is PID 1 and the machine's processes
		// are not there.
		init := "/usr/lib/systemd/systemd"
		if n, _ := s.Node("gpu-1"); n.System == SystemStandIn {
			init = "/usr/local/bin/homelab-node"
		}
		if out := run("gpu-1", "readlink /proc/1/exe; ps -e --no-headers | wc -l"); !strings.HasPrefix(out, init+"\n") {
			t.Errorf("gpu-1's PID 1 and process count: %q", out)
		} else if n := strings.Fields(out)[1]; len(n) > 2 {
			t.Errorf("gpu-1 sees %s processes: the machine's?", n)
		}
		// Nothing off the lab: the gateway routes nothing.
		if _, err := l.Run(ctx, "gpu-1", "ip route get 192.0.2.2 && timeout 2 bash -c 'exec 3<>/dev/tcp/192.0.2.2/22'"); err == nil {
			t.Error("a node reached an address off the lab")
		}
	})

	t.Run("power-off and power-on keep the disk", func(t *testing.T) {
		run("gpu-4", "echo kept > /var/lib/lab-mark")
		cur, _ := l.LoadState()
		n, _ := cur.Node("gpu-4")
		procs := tracked(&State{Nodes: []*NodeState{n}})
		if err := l.PowerOff("gpu-4"); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if p.Alive() {
				t.Errorf("process %d of gpu-4 alive after power-off", p.PID)
			}
		}
		if netnsExists(l.Names().Node("gpu-4")) {
			t.Error("gpu-4's namespace survived power-off")
		}
		if _, err := l.Run(ctx, "gpu-4", "true"); err == nil {
			t.Error("ssh to a powered-off node worked")
		}
		if err := l.PowerOn(ctx, "gpu-4"); err != nil {
			t.Fatal(err)
		}
		if out := run("gpu-4", "cat /var/lib/lab-mark"); out != "kept" {
			t.Errorf("after power-on: %q", out)
		}
	})

	t.Run("cut keeps the node running off the network", func(t *testing.T) {
		run("gpu-4", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started")
		// setsid execs sleep after the shell returned: wait for it, so
		// the cut is what the check below sees, not a process not yet
		// renamed (it was "setsid" on a loaded machine).
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if procs, err := l.Processes(); err == nil && slices.Contains(procs["gpu-4"], "sleep") {
				break
			}
		}
		if err := l.Cut("gpu-4"); err != nil {
			t.Fatal(err)
		}
		procs, err := l.Processes()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(procs["gpu-4"], "sshd") || !slices.Contains(procs["gpu-4"], "sleep") {
			t.Errorf("gpu-4's processes while cut: %v", procs["gpu-4"])
		}
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := l.Run(sctx, "gpu-4", "true"); err == nil {
			t.Error("ssh to a cut-off node worked")
		}
		scancel()
		out, _ := exec.Command("ip", "-n", l.Names().Node("gpu-4"), "-o", "link", "show", "eth0").CombinedOutput()
		if !strings.Contains(string(out), "NO-CARRIER") {
			t.Errorf("a cut-off node's eth0 has its carrier: %s", out)
		}
		if h, err := l.Holders("10.77.0.133"); err != nil || strings.Join(h, " ") != "gpu-4" {
			t.Errorf("holders of gpu-4's address: %v %v", h, err)
		}
		if err := l.Uncut("gpu-4"); err != nil {
			t.Fatal(err)
		}
		if out := run("gpu-4", "pgrep -c sleep"); out != "1" {
			t.Errorf("after uncut: %q sleep processes", out)
		}
		if err := l.Cut("gpu-9"); err == nil {
			t.Error("cut of an unknown node accepted")
		}
	})

	t.Run("a second lab with the same names fails to come up and its down leaves the first alone", func(t *testing.T) {
		dir, err := os.MkdirTemp("/srv", "homelab-other-test-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		other, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		// Names derive from the directory: two labs get the same ones
		// only when two directories' hashes collide, as here.
		same := l.Names()
		other.names = &same
		if _, _, err := other.Up(ctx, s.Inventory); err == nil || !strings.Contains(err.Error(), "already exists") {
			// Down before the directory goes: a lab whose state is
			// removed keeps its nodes running, with nothing to find them.
			other.Down(false)
			t.Fatalf("a second lab with the same names came up: %v", err)
		}
		if err := other.Down(false); err != nil {
			t.Fatal(err)
		}
		for _, n := range s.Netns {
			if !netnsExists(n) {
				t.Errorf("the failed lab's down removed the first lab's namespace %s", n)
			}
		}
		if out := run("cp-1", "hostname"); out != "cp-1" {
			t.Errorf("cp-1 after the other lab's down: %q", out)
		}
	})

	t.Run("replace brings a new disk, host key and MAC", func(t *testing.T) {
		run("gpu-3", "echo old > /etc/lab-mark")
		old, _ := l.LoadState()
		on, _ := old.Node("gpu-3")
		oldKey, oldMAC := on.HostKey, on.MAC
		if err := l.Replace(ctx, "gpu-3"); err != nil {
			t.Fatal(err)
		}
		cur, _ := l.LoadState()
		n, _ := cur.Node("gpu-3")
		if n.HostKey == oldKey || n.MAC == oldMAC {
			t.Errorf("replace kept the host key or MAC: %s %s", n.HostKey, n.MAC)
		}
		if out := run("gpu-3", "cat /sys/class/net/eth0/address; test -e /etc/lab-mark && echo old-disk || echo new-disk; cat /etc/ssh/ssh_host_ed25519_key.pub"); !strings.HasPrefix(out, n.MAC+"\nnew-disk\n") || !strings.Contains(out, strings.Fields(n.HostKey)[1]) {
			t.Errorf("replaced gpu-3: %q (want MAC %s, a new disk, key %s)", out, n.MAC, n.HostKey)
		}
		// The provisioner's known_hosts is a real homelab's: the old key
		// stays until the user accepts the new one; the lab's own record
		// (lab ssh, the checks above) follows the machine.
		kh, _ := os.ReadFile(l.KnownHostsPath())
		if !strings.Contains(string(kh), strings.Fields(oldKey)[1]) || strings.Contains(string(kh), strings.Fields(n.HostKey)[1]) {
			t.Errorf("the provisioner's known_hosts after a replace (want the old key only):\n%s", kh)
		}
		lkh, _ := os.ReadFile(l.LabKnownHostsPath())
		if !strings.Contains(string(lkh), strings.Fields(n.HostKey)[1]) || strings.Contains(string(lkh), strings.Fields(oldKey)[1]) {
			t.Errorf("the lab's known_hosts after a replace (want the new key only):\n%s", lkh)
		}
	})

	t.Run("readdress", func(t *testing.T) {
		if err := l.Readdress(ctx, "gpu-2", "10.77.0.140"); err != nil {
			t.Fatal(err)
		}
		if out := run("gpu-2", "ip -4 -o addr show eth0 | awk '{print $4}'"); out != "10.77.0.140/24" {
			t.Errorf("gpu-2 address %q", out)
		}
		d, _ := l.Dialer()
		if c, err := d.DialContext(ctx, "tcp", "10.77.0.131:22"); err == nil {
			c.Close()
			t.Error("the old address still answers")
		}
		kh, _ := os.ReadFile(l.KnownHostsPath())
		if !strings.Contains(string(kh), "10.77.0.140,gpu-2 ") {
			t.Errorf("known_hosts lacks the new address:\n%s", kh)
		}
		for _, bad := range []string{"10.77.0.121", "10.77.0.1", "10.77.0.100", "10.78.0.5", "10.77.0.255"} {
			if err := l.Readdress(ctx, "gpu-1", bad); err == nil {
				t.Errorf("readdress to %s accepted", bad)
			}
		}
	})

	downLeavesNothing(t, l)
}

func TestStaleNamespaceIsReclaimedOnlyWhenNoLabRecordsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "network namespaces need root")
	}
	const name = "hl-test-reclaim"
	delNetns(name)
	t.Cleanup(func() { delNetns(name) })
	add := func(owner string) {
		t.Helper()
		if err := ip("netns", "add", name); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := recordOwner(name, owner); err != nil {
				t.Fatal(err)
			}
		}
	}

	add("")
	if reclaimStale(name) {
		t.Fatal("a namespace without an owner record was removed")
	}
	delNetns(name)

	live := &Lab{Dir: t.TempDir()}
	add(live.Dir)
	if err := live.saveState(&State{Netns: []string{name}}); err != nil {
		t.Fatal(err)
	}
	if reclaimStale(name) || !netnsExists(name) {
		t.Fatal("a namespace its lab still records was removed")
	}
	delNetns(name)

	add(filepath.Join(t.TempDir(), "gone"))
	if !reclaimStale(name) || netnsExists(name) {
		t.Fatal("a namespace whose lab directory is gone was kept")
	}
	if _, err := os.Stat(ownerPath(name)); !os.IsNotExist(err) {
		t.Errorf("owner record kept after the namespace went: %v", err)
	}
}

func TestAddressMAC(t *testing.T) {
	for addr, want := range map[string]string{
		"10.77.0.120": "52:54:00:4d:00:78",
		"10.77.0.133": "52:54:00:4d:00:85",
		"192.168.1.7": "52:54:00:a8:01:07",
	} {
		if got := AddressMAC(addr); got != want {
			t.Errorf("AddressMAC(%s) = %s, want %s", addr, got, want)
		}
	}
	if a, b := AddressMAC("fd00::1"), AddressMAC("fd00::1"); a == b {
		t.Errorf("an address the lab does not wire up got %s twice: want a random MAC", a)
	}
}
