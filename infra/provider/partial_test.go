package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// partialBootstrap is a single control-plane cluster's only node, read as
// partial, holding what present lists (nodefacts paths).
func partialBootstrap(t *testing.T, present ...string) (*fakeLab, *fakeNode) {
	lab := newFakeLab(t)
	n := lab.node("cp-1")
	n.onScriptWith("detached/pending", "'"+runsDir+"/"+initRun+"'", "", 1)
	n.onScript("nodefacts/state", nodefacts.StatePartial+"\n", 0)
	var out string
	for _, p := range present {
		out += "present=" + p + "\n"
	}
	n.onScript("nodefacts/presence", out, 0)
	return lab, n
}

// dataDeleted reports the commands that delete etcd's member data in
// place rather than moving it aside: an rm of it, or a kubeadm reset
// (which deletes etcd's data directory) before the data was moved.
// Scripts quote paths: a path reads the same quoted or not.
func dataDeleted(n *fakeNode) []string {
	var out []string
	for _, m := range n.mutations() {
		moved := false
		for _, line := range strings.Split(m, "\n") {
			line = strings.ReplaceAll(line, "'", "")
			words := strings.Fields(line)
			switch {
			case strings.Contains(line, "mv "+nodefacts.EtcdMemberDir+" "):
				moved = true
			case strings.Contains(line, "rm -rf") && (slices.Contains(words, nodefacts.EtcdMemberDir) || slices.Contains(words, nodefacts.EtcdDataDir)),
				strings.HasPrefix(strings.TrimSpace(line), "kubeadm reset") && !moved:
				out = append(out, m)
			}
		}
	}
	return out
}

// A set-up single control-plane node that lost admin.conf (hardening),
// its manifests (kubeadm's etcd-restore step) or had them set aside by
// an interrupted homelab etcd restore is repaired over its etcd data:
// never reset, the cluster kept.
func TestBootstrapRepairsASetUpNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		present []string
	}{
		{"admin.conf deleted", []string{nodefacts.InitMarker, nodefacts.EtcdWALDir}},
		{"manifests moved aside", []string{nodefacts.InitMarker, nodefacts.EtcdWALDir}},
		{"an interrupted restore", []string{nodefacts.InitMarker, nodefacts.EtcdWALDir, nodefacts.RestoreAsideDir}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab, n := partialBootstrap(t, tc.present...)
			n.onScriptFunc("bootstrap/repair", func(string) (ssh.Result, error) {
				n.put(adminConf, "apiVersion: v1\nkind: Config\n", 0o600)
				return ssh.Result{Stdout: []byte("wrote " + adminConf + "\n")}, nil
			})
			n.onScript("cluster/readyz", "", 0)
			n.onScript("cluster/uid", "uid-1", 0)
			n.onScript("kubeadm/reset", "", 0)
			n.onScript("kubeadm/reset-keep-cas", "", 0)
			n.onScript("detached/start", "started\n", 0)
			in := KubeadmInitArgs{Connection: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/init.yaml"}
			st := KubeadmInitState{BootstrappedOn: "cp-1", ClusterUID: "uid-1"}
			if err := bootstrap(lab.ctx(), in, &st); err != nil {
				t.Fatal(err)
			}
			if n.asked("kubeadm reset") || n.asked("kubeadm init --config") {
				t.Errorf("reset or initialised again: %v", n.mutations())
			}
			if d := dataDeleted(n); len(d) > 0 {
				t.Errorf("etcd data deleted: %v", d)
			}
			for _, want := range []string{"kubeadm init phase kubeconfig admin", "kubeadm init phase etcd local", "kubeadm init phase control-plane apiserver"} {
				if !n.asked(want) {
					t.Errorf("the repair lacks %q", want)
				}
			}
			if tc.present[len(tc.present)-1] == nodefacts.RestoreAsideDir && !n.asked("mv \"$f\" "+shell.Quote(nodefacts.ManifestsDir)) {
				t.Error("the restore's set-aside manifests were not put back")
			}
			if st.ClusterUID != "uid-1" || st.AdminKubeconfig == "" || st.BootstrappedOn != "cp-1" {
				t.Errorf("the cluster after the repair: %+v", st)
			}
		})
	}
}

// A bootstrap node holding etcd data without a completion marker (an
// init that never finished, a cluster built by hand) is reset only with
// consent for it, and then its data is moved aside, not deleted.
func TestBootstrapResetOfEtcdDataNeedsConsent(t *testing.T) {
	for _, allow := range []string{"", "cp-1"} {
		t.Run("allow="+allow, func(t *testing.T) {
			lab, n := partialBootstrap(t, nodefacts.EtcdWALDir)
			lab.config().allowDestroy = nodeList(allow)
			n.onScript("kubeadm/reset-keep-cas", asidePrefix+nodefacts.EtcdAsideDir+"/20260101T000000Z/member\n", 0)
			n.onScript("detached/start", "started\n", 0)
			n.onScript("detached/poll", "rc=0\n", 0)
			n.onScript("detached/remove", "", 0)
			n.onScript("token/delete-init", "", 0)
			n.onScript("cluster/uid", "uid-2", 0)
			n.put(adminConf, "apiVersion: v1\n", 0o600)
			in := KubeadmInitArgs{Connection: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/init.yaml"}
			err := bootstrap(lab.ctx(), in, &KubeadmInitState{})
			if allow == "" {
				if err == nil || !strings.Contains(err.Error(), RefusedMarker) || !strings.Contains(err.Error(), "--allow-destroy cp-1") {
					t.Fatalf("without consent: %v", err)
				}
				if m := n.mutations(); len(m) > 0 {
					t.Errorf("refused, yet ran %v", m)
				}
				return
			}
			if d := dataDeleted(n); len(d) > 0 {
				t.Errorf("etcd data deleted: %v", d)
			}
			if n.ran("kubeadm/reset-keep-cas") != 1 || !n.asked("mv "+shell.Quote(nodefacts.EtcdMemberDir)) {
				t.Errorf("the consented reset did not move the data aside: %v", n.mutations())
			}
		})
	}
}

func TestOwnMember(t *testing.T) {
	ms := []memberHealth{{ID: 1, Name: "cp-1", PeerURL: "https://10.0.0.11:2380"}, {ID: 2, Name: "", PeerURL: "https://10.0.0.12:2380"}}
	if m, found, only := ownMember(ms, "cp-2", "10.0.0.12"); !found || only || m.ID != 2 {
		t.Errorf("a learner named by its peer URL: %v %v %v", m, found, only)
	}
	if _, found, _ := ownMember(ms, "cp-3", "10.0.0.13"); found {
		t.Error("a stale node found among the members")
	}
	if _, found, only := ownMember(ms[:1], "cp-1", "10.0.0.11"); !found || !only {
		t.Error("the only member is not the only copy")
	}
}

// The refresh tells preview what the bootstrap would do to a partial node
// holding etcd data: a reset (destructive) or a repair.
func TestInitReadSaysWhatTheBootstrapWouldDo(t *testing.T) {
	for _, tc := range []struct {
		present      []string
		risk, repair bool
	}{
		{[]string{nodefacts.EtcdWALDir}, true, false},
		{[]string{nodefacts.InitMarker, nodefacts.EtcdWALDir}, false, true},
		// An init killed before etcd first ran left an empty member
		// directory: no data, nothing to protect.
		{[]string{nodefacts.EtcdMemberDir}, false, false},
		{[]string{nodefacts.InitMarker}, false, false},
	} {
		lab, _ := partialBootstrap(t, tc.present...)
		in := KubeadmInitArgs{Connection: lab.conn("cp-1")}
		st := refresh(t, lab.ctx(), KubeadmInit{}, in, KubeadmInitState{KubeadmInitArgs: in, Initialized: true})
		if st.Initialized || (st.ResetRisk != "") != tc.risk || (st.PartialRepair != "") != tc.repair {
			t.Errorf("%v: initialized %v, risk %q, repair %q", tc.present, st.Initialized, st.ResetRisk, st.PartialRepair)
		}
	}
}
