package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/upgradeplan"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// upgradeLab is three control-plane nodes and a worker, every one
// answering the versions read with the same version.
func upgradeLab(t *testing.T, running string) (*fakeLab, KubernetesUpgradeArgs) {
	l := newFakeLab(t)
	in := KubernetesUpgradeArgs{Port: 6443, Endpoint: "10.0.0.100:6443", DrainTimeout: "5m", MaxUnavailable: 1,
		Repository: &AptRepository{Keyring: "/etc/apt/keyrings/k.gpg", SourcesPath: "/etc/apt/sources.list.d/kubernetes.list", Sources: "deb x /\n", Key: "a2V5"}}
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1"} {
		out := "version.kubelet=" + running + "\njoined=yes\n"
		if strings.HasPrefix(n, "cp-") {
			for _, c := range nodefacts.VersionedComponents {
				out += "image=" + c + " registry.k8s.io/" + c + ":" + running + "\n"
			}
			in.ControlPlanes = append(in.ControlPlanes, l.conn(n))
		} else {
			in.Workers = append(in.Workers, l.conn(n))
		}
		l.node(n).onScript("nodefacts/versions", out, 0)
		l.node(n).onScript("upgrade/cluster-config", "kind: ClusterConfiguration\nkubernetesVersion: "+running+"\n", 0)
		l.node(n).onScript("detached/pending", "", 1) // nothing left running by an earlier up
	}
	return l, in
}

func TestUpgradeChanges(t *testing.T) {
	in := KubernetesUpgradeArgs{Target: "v1.35.4", ControlPlanes: []Connection{{Node: "cp-1"}}, Workers: []Connection{{Node: "gpu-1"}}}
	at := func(cp, kubelet string) map[string]NodeVersions {
		return map[string]NodeVersions{"cp-1": {ControlPlane: cp, Kubelet: cp, Joined: true}, "gpu-1": {Kubelet: kubelet, Joined: true}}
	}
	for _, tc := range []struct {
		name string
		st   KubernetesUpgradeState
		want bool
	}{
		{"a new version declared", KubernetesUpgradeState{Reached: "v1.34.4", Live: at("v1.34.4", "v1.34.4"), ClusterVersion: "v1.34.4"}, true},
		{"reached, every node there", KubernetesUpgradeState{Reached: "v1.35.4", Live: at("v1.35.4", "v1.35.4"), ClusterVersion: "v1.35.4"}, false},
		{"reached, a node left out is back behind", KubernetesUpgradeState{Reached: "v1.35.4", Live: at("v1.35.4", "v1.34.4"), ClusterVersion: "v1.35.4"}, true},
		{"no cluster yet", KubernetesUpgradeState{Reached: "v1.35.4"}, false},
	} {
		st := tc.st
		st.KubernetesUpgradeArgs = in
		if got := upgradeChanges(in, st, nil).has("kubernetesVersion"); got != tc.want {
			t.Errorf("%s: change %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestUpgradeReadOfNoNode: a refresh that reads no node (all off, or all
// refusing the state's key) keeps what the state knew, so the next Diff
// plans nothing for a cluster at its target.
func TestUpgradeReadOfNoNode(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target = "v1.34.4"
	for _, n := range l.nodes {
		n.dialErr = unreachableErr(n.name)
	}
	at := map[string]NodeVersions{}
	for _, c := range in.conns() {
		at[c.Node] = NodeVersions{Kubelet: "v1.34.4", Joined: true}
		if strings.HasPrefix(c.Node, "cp-") {
			at[c.Node] = NodeVersions{ControlPlane: "v1.34.4", Kubelet: "v1.34.4", Joined: true}
		}
	}
	st := KubernetesUpgradeState{KubernetesUpgradeArgs: in, Reached: "v1.34.4", Live: at, ClusterVersion: "v1.34.4"}
	res, err := KubernetesUpgrade{}.Read(l.ctx(), infer.ReadRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]{ID: "kubernetes", Inputs: in, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if res.State.ClusterVersion != "v1.34.4" {
		t.Errorf("kubeadm-config's version after reading no node: %q, want the state's v1.34.4", res.State.ClusterVersion)
	}
	if upgradeChanges(in, res.State, nil).has("kubernetesVersion") {
		t.Error("a cluster at its target, no node read, plans an upgrade")
	}
}

// A refresh hands each node the kubelet's and containerd's stamps it last
// read, so a tool still that file is not run again; an up reads afresh.
func TestUpgradeReadKnowsTheKubelets(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target = "v1.34.4"
	stamp := "/usr/bin/kubelet 42 100 2026-12-03 06:24:15.780814324 +0000 2026-12-03 02:02:44.798896346 +0000"
	cstamp := "/usr/bin/containerd 43 200 2026-12-03 06:24:15.780814324 +0000 2026-12-03 02:02:44.798896346 +0000"
	at := map[string]NodeVersions{}
	for _, c := range in.conns() {
		at[c.Node] = NodeVersions{Kubelet: "v1.34.4", KubeletStamp: stamp, Containerd: "1.7.28", ContainerdStamp: cstamp, Joined: true}
	}
	st := KubernetesUpgradeState{KubernetesUpgradeArgs: in, Reached: "v1.34.4", Live: at, ClusterVersion: "v1.34.4"}
	if _, err := (KubernetesUpgrade{}).Read(l.ctx(), infer.ReadRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]{ID: "kubernetes", Inputs: in, State: st}); err != nil {
		t.Fatal(err)
	}
	for _, c := range in.conns() {
		if !l.node(c.Node).asked(`'kubelet `+stamp+`'`) || !l.node(c.Node).asked(`'containerd `+cstamp+`'`) {
			t.Errorf("%s's read does not know its kubelet's and containerd's stamps", c.Node)
		}
		l.node(c.Node).reset()
	}
	if _, _, _, err := survey(l.ctx(), in, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range in.conns() {
		if l.node(c.Node).asked(stamp) {
			t.Errorf("%s: a survey with nothing known used a stamp", c.Node)
		}
	}
}

// TestUpgradeRefusesBeforeChangingAnything: every refusal comes from
// reads alone, and names what to do.
func TestUpgradeRefusesBeforeChangingAnything(t *testing.T) {
	for _, tc := range []struct {
		name, running, target string
		edit                  func(*fakeLab, *KubernetesUpgradeArgs)
		says                  []string
	}{
		{name: "a worker's containerd 1.x under v1.36", running: "v1.35.4", target: "v1.36.1", edit: func(l *fakeLab, _ *KubernetesUpgradeArgs) {
			l.node("gpu-1").onScript("nodefacts/versions", "version.kubelet=v1.35.4\nversion.containerd=1.7.28\njoined=yes\n", 0)
		}, says: []string{"gpu-1 (", "containerd 1.7.28", "cluster.containerRuntime.packages"}},
		{name: "a skipped minor", target: "v1.36.1", says: []string{"v1.34 -> v1.35 -> v1.36"}},
		{name: "a downgrade", target: "v1.34.1", says: []string{"does not downgrade"}},
		{name: "a control-plane node off", target: "v1.35.4", edit: func(l *fakeLab, _ *KubernetesUpgradeArgs) { l.node("cp-2").dialErr = unreachableErr("cp-2") },
			says: []string{"cp-2", "--upgrade-without cp-2"}},
		{name: "packages the user installs", target: "v1.35.4", edit: func(_ *fakeLab, in *KubernetesUpgradeArgs) { in.Repository = nil },
			says: []string{"cluster.packages.manage: true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running := tc.running
			if running == "" {
				running = "v1.34.4"
			}
			l, in := upgradeLab(t, running)
			in.Target = tc.target
			if tc.edit != nil {
				tc.edit(l, &in)
			}
			_, err := runUpgrade(l.ctx(), in)
			if err == nil {
				t.Fatal("the upgrade went ahead")
			}
			for _, s := range append(tc.says, "nothing was changed") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the refusal does not say %q:\n%v", s, err)
				}
			}
			for _, n := range l.nodes {
				if m := n.mutations(); len(m) > 0 {
					t.Errorf("%s was changed: %v", n.name, m)
				}
			}
		})
	}
}

// TestUpgradeLeftOutNode: a node left out explicitly is planned around,
// and the plan says so.
func TestUpgradeLeftOutNode(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target = "v1.35.4"
	l.node("cp-3").dialErr = unreachableErr("cp-3")
	l.config().upgradeWithout = []string{"cp-3"}
	live, unread, cv, err := survey(l.ctx(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planOf(l.ctx(), in, live, unread, cv)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Excluded) != 1 || plan.Excluded[0] != "cp-3" || plan.Steps[0].Action != upgradeplan.Apply || plan.Steps[0].Nodes[0] != "cp-1" {
		t.Errorf("plan %+v", plan)
	}
	for _, s := range plan.Steps {
		if s.Nodes[0] == "cp-3" {
			t.Errorf("cp-3 is in step %+v", s)
		}
	}
	u := &upgrader{in: in, plan: plan}
	if !strings.Contains(strings.Join(u.ignore(), ","), "ControlPlaneNodesReady") {
		t.Errorf("kubeadm would refuse the NotReady node left out: ignoring only %v", u.ignore())
	}
}

// TestDrainTimeoutNamesThePods: a drain that a PodDisruptionBudget holds
// stops the step, names the pod, leaves the node cordoned and nothing
// installed on it.
func TestDrainTimeoutNamesThePods(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target, in.DrainTimeout = "v1.35.4", "30s"
	api := l.node("cp-1")
	api.onScriptWithFunc("upgrade/drain", "'gpu-1'", func(string) (ssh.Result, error) {
		return ssh.Result{Stderr: []byte(`evicting pod default/web-0
error when evicting pods/"web-0" -n "default" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.
There are pending pods in node "gpu-1" when an error occurred: error when waiting for pod "web-0" in namespace "default" to terminate: global timeout reached: 30s`), ExitCode: 1}, nil
	})
	api.onScriptWith("upgrade/pods-left", "'gpu-1'", "default/web-0 kube-system/coredns-1 ", 0)
	u := &upgrader{in: in}
	c, err := dial(l.ctx(), in.ControlPlanes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = u.drain(l.ctx(), c, "cp-1", "gpu-1")
	if err == nil {
		t.Fatal("the drain passed")
	}
	for _, s := range []string{"default/web-0", "kube-system/coredns-1", "30s", "stays cordoned", "disruption budget"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q:\n%v", s, err)
		}
	}
	if api.asked("uncordon") || l.node("gpu-1").asked("apt-get") {
		t.Errorf("after a failed drain: %v", api.mutations())
	}
}

// TestUpgradeWaitsForAnEarlierRun: a `kubeadm upgrade apply` an earlier up
// left running (the up killed) is waited for before the nodes are read.
func TestUpgradeWaitsForAnEarlierRun(t *testing.T) {
	l, in := upgradeLab(t, "v1.35.4")
	in.Target = "v1.35.4"
	cp1 := l.node("cp-1")
	cp1.onScriptWith("detached/pending", "'"+runsDir+"/"+upgradeRun+"'", "pending\n", 0)
	cp1.onScriptWith("detached/poll", "'"+runsDir+"/"+upgradeRun+"'", "rc=0\n[upgrade] SUCCESS!\n", 0)
	cp1.onScriptWith("detached/remove", "'"+runsDir+"/"+upgradeRun+"'", "", 0)
	st, err := runUpgrade(l.ctx(), in)
	if err != nil || st.Reached != "v1.35.4" {
		t.Fatalf("%+v %v", st, err)
	}
	var waited, read int
	for _, e := range cp1.events {
		switch {
		case strings.Contains(e.cmd, `if [ -f "$d/rc" ]`) && waited == 0:
			waited = e.seq
		case strings.Contains(e.cmd, "kubelet --version") && read == 0:
			read = e.seq
		}
	}
	if waited == 0 || read == 0 || waited > read {
		t.Errorf("the earlier run was not waited for before the read (waited at %d, read at %d)", waited, read)
	}
}

// TestUpgradePlanText: what Diff logs and the preview's change carries,
// from the versions the refreshed state read.
func TestUpgradePlanText(t *testing.T) {
	conn := func(n string) Connection { return Connection{Node: n, Host: "10.0.0.1"} }
	in := KubernetesUpgradeArgs{Target: "v1.35.4", ControlPlanes: []Connection{conn("cp-1"), conn("cp-2")}, Workers: []Connection{conn("gpu-1")},
		MaxUnavailable: 1, DrainTimeout: "5m", Port: 6443, Endpoint: "10.0.0.100:6443"}
	at := func(v string) NodeVersions { return NodeVersions{ControlPlane: v, Kubelet: v, Joined: true} }
	live := map[string]NodeVersions{"cp-1": at("v1.34.4"), "cp-2": at("v1.34.4"), "gpu-1": {Kubelet: "v1.34.4", Joined: true}}
	got := planText(in, live, nil, "v1.34.4", nil)
	for _, want := range []string{UpgradeSays + " v1.34.4 -> v1.35.4", "1. cp-1: kubeadm v1.35.4, then kubeadm upgrade apply v1.35.4", "2. cp-2:", "5. gpu-1: drain"} {
		if !strings.Contains(got, want) {
			t.Errorf("the plan does not say %q: %s", want, got)
		}
	}
	if got := planText(in, live, nil, "v1.34.4", []string{"cp-2"}); !strings.Contains(got, "cp-2: excluded") {
		t.Errorf("with cp-2 left out: %s", got)
	}
	in.Target = "v1.34.2"
	if got := planText(in, live, nil, "v1.34.4", nil); !strings.HasPrefix(got, RefusalSays) || !strings.Contains(got, "does not downgrade") {
		t.Errorf("a downgrade: %s", got)
	}
	// Nothing joined yet (the state of a first build): no plan to show.
	if got := planText(in, map[string]NodeVersions{}, nil, "", nil); !strings.HasPrefix(got, UpgradeSays) || strings.Contains(got, "in this order") {
		t.Errorf("nothing read yet: %q", got)
	}
}

// Pre-upgrade snapshots are kept, the newest keptUpgradeSnapshots of
// them, and nothing else in the directory is touched: the script runs in
// a real sh over real files.
func TestUpgradeSnapshotsAreRotated(t *testing.T) {
	dir := t.TempDir()
	names := []string{"before-upgrade-v1.33.1-20260101T000000Z.db", "before-upgrade-v1.34.4-20260301T000000Z.db",
		"before-upgrade-v1.35.0-20260501T000000Z.db", "before-upgrade-v1.35.4-20260701T000000Z.db", "before-upgrade-v1.36.0-20260901T000000Z.db"}
	base := time.Now().Add(-time.Hour)
	for i, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("db"), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	for _, other := range []string{"snapshot-20260901T000000Z.db", "snapshot-20260901T000000Z.db.sha256"} {
		if err := os.WriteFile(filepath.Join(dir, other), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("sh", "-c", pruneUpgradeSnapshots(dir, keptUpgradeSnapshots).String()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{names[1], names[0]}) {
		t.Errorf("removed %v, want the two oldest", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 5 {
		t.Errorf("left %v: want 3 pre-upgrade and the 2 scheduled files", left)
	}
	if out, err := exec.Command("sh", "-c", pruneUpgradeSnapshots(filepath.Join(dir, "absent"), 3).String()).CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("no snapshot directory: %v %q", err, out)
	}
}

// A drain and an uncordon through the endpoint outlive its API server
// restarting (a kubelet of the next minor restarts its static pods, the
// VIP holder's among them): refused once each, they are run again rather
// than stopping the upgrade with the node cordoned.
func TestDrainAndUncordonOutliveARestartingEndpoint(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target, in.DrainTimeout = "v1.35.4", "30s"
	api := l.node("cp-1")
	api.onScriptWithFunc("upgrade/drain", "'gpu-1'", refusedOnce(""))
	api.onScriptWithFunc("upgrade/uncordon", "'gpu-1'", refusedOnce(""))
	c, err := dial(l.ctx(), in.ControlPlanes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u := &upgrader{in: in}
	if err := u.drain(l.ctx(), c, "cp-1", "gpu-1"); err != nil {
		t.Errorf("drain: %v", err)
	}
	if err := uncordon(l.ctx(), c, "cp-1", "gpu-1"); err != nil {
		t.Errorf("uncordon: %v", err)
	}
}

// Each upgrade/ script as the upgrade renders it, checked by its golden
// (and, through it, by sh -n and shellcheck).
func TestUpgradeScripts(t *testing.T) {
	u := &upgrader{in: KubernetesUpgradeArgs{Target: "v1.35.4", IgnorePreflight: []string{"SystemVerification"}}}
	scriptstest.Golden(t, u.script("upgrade/plan", true), "")
	scriptstest.Golden(t, u.script("upgrade/apply", true), "")
	scriptstest.Golden(t, u.script("upgrade/node", true), "control-plane")
	scriptstest.Golden(t, u.script("upgrade/node", false), "worker")
	if s := u.script("upgrade/node", false).String(); strings.Contains(s, "certificate-renewal") {
		t.Errorf("a worker's kubeadm upgrade node is given a control plane's flag:\n%s", s)
	}
	u.plan.Excluded = []string{"cp-3"}
	if s := u.script("upgrade/apply", true).String(); !strings.Contains(s, "--ignore-preflight-errors='SystemVerification,ControlPlaneNodesReady'") {
		t.Errorf("an upgrade that leaves a node out does not skip kubeadm's readiness check:\n%s", s)
	}
	scriptstest.Golden(t, pruneUpgradeSnapshots(etcdsnapshot.Dir, keptUpgradeSnapshots), "")
	scriptstest.Golden(t, scripts.Render("upgrade/snapshot-dir", struct{ Dir string }{etcdsnapshot.Dir}), "")
	scriptstest.Golden(t, scripts.Render("upgrade/cluster-config", clusterArgs{Kubectl: kubectl}), "")
	scriptstest.Golden(t, scripts.Render("vip/holds", struct{ VIP string }{"10.0.0.100"}), "")
	scriptstest.Golden(t, scripts.Render("upgrade/version-at", struct{ Kubectl, Server string }{kubectl, "https://10.0.0.111:6443"}), "")
	scriptstest.Golden(t, scripts.Render("upgrade/restart-kubelet", nil), "")
	scriptstest.Golden(t, scripts.Render("upgrade/drain", struct{ Kubectl, Node, Timeout string }{kubectl, "gpu-4", "5m"}), "")
	for _, name := range []string{"upgrade/uncordon", "upgrade/pods-left", "upgrade/node-ready"} {
		scriptstest.Golden(t, scripts.Render(name, clusterArgs{Kubectl: kubectl, Node: "gpu-4"}), "")
	}
	scriptstest.Golden(t, unitScript("stop", "keepalived"), "")
}
