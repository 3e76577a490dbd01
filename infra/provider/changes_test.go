package provider

import (
	"maps"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
)

// kinds is a changeSet as the tables write it.
func kinds(d changeSet) map[string]p.DiffKind {
	out := map[string]p.DiffKind{}
	for k, v := range d {
		out[k] = v.Kind
	}
	return out
}

const (
	upd = p.Update
	rep = p.UpdateReplace
)

func checkChanges(t *testing.T, name string, got changeSet, want map[string]p.DiffKind) {
	t.Helper()
	if want == nil {
		want = map[string]p.DiffKind{}
	}
	if g := kinds(got); !maps.Equal(g, want) {
		t.Errorf("%s: changes %v, want %v", name, g, want)
	}
}

var (
	conn1   = Connection{Node: "cp-1", Host: "10.0.0.11", User: "root", PrivateKey: "key-1", KnownHosts: "/k"}
	rekeyed = Connection{Node: "cp-1", Host: "10.0.0.11", User: "root", PrivateKey: "key-2", KnownHosts: "/k"}
	conn2   = Connection{Node: "cp-2", Host: "10.0.0.12", User: "root", PrivateKey: "key-1", KnownHosts: "/k"}
)

func TestFileChanges(t *testing.T) {
	in := FileArgs{Connection: conn1, Path: "/etc/a", Content: "a", Mode: 0o644}
	live := FileState{FileArgs: in, Sha256: sum("a"), LiveMode: 0o644}
	with := func(f func(*FileArgs)) FileArgs { a := in; f(&a); return a }
	for _, tc := range []struct {
		name string
		in   FileArgs
		st   FileState
		want map[string]p.DiffKind
	}{
		{"converged", in, live, nil},
		{"edited on the node", in, FileState{FileArgs: in, Sha256: sum("b"), LiveMode: 0o644}, map[string]p.DiffKind{"content": upd}},
		{"gone from the node", in, FileState{FileArgs: in}, map[string]p.DiffKind{"content": upd, "mode": upd}},
		{"new content declared", with(func(a *FileArgs) { a.Content = "b" }), live, map[string]p.DiffKind{"content": upd}},
		{"chmod on the node", in, FileState{FileArgs: in, Sha256: sum("a"), LiveMode: 0o666}, map[string]p.DiffKind{"mode": upd}},
		{"a new key", with(func(a *FileArgs) { a.Connection = rekeyed }), live, map[string]p.DiffKind{"connection": upd}},
		{"another path", with(func(a *FileArgs) { a.Path = "/etc/b" }), live, map[string]p.DiffKind{"path": rep}},
		{"another node: replaced, the connection with it", with(func(a *FileArgs) { a.Connection = conn2 }), live, map[string]p.DiffKind{"path": rep}},
		// The declared command is not a property of the file on the node.
		{"another onChange", with(func(a *FileArgs) { a.OnChange = "true" }), live, nil},
	} {
		checkChanges(t, tc.name, fileChanges(tc.in, tc.st), tc.want)
	}
}

func TestServiceChanges(t *testing.T) {
	in := ServiceArgs{Connection: conn1, Name: "kubelet", Trigger: "t1"}
	running := ServiceState{ServiceArgs: in, Enabled: true, Active: true}
	with := func(f func(*ServiceArgs)) ServiceArgs { a := in; f(&a); return a }
	for _, tc := range []struct {
		name string
		in   ServiceArgs
		st   ServiceState
		want map[string]p.DiffKind
	}{
		{"running", in, running, nil},
		{"stopped by hand", in, ServiceState{ServiceArgs: in, Enabled: true}, map[string]p.DiffKind{"active": upd}},
		{"disabled and stopped", in, ServiceState{ServiceArgs: in}, map[string]p.DiffKind{"active": upd, "enabled": upd}},
		{"its config changed", with(func(a *ServiceArgs) { a.Trigger = "t2" }), running, map[string]p.DiffKind{"trigger": upd}},
		{"a new key", with(func(a *ServiceArgs) { a.Connection = rekeyed }), running, map[string]p.DiffKind{"connection": upd}},
		{"another unit", with(func(a *ServiceArgs) { a.Name = "containerd" }), running, map[string]p.DiffKind{"name": rep}},
		{"another node", with(func(a *ServiceArgs) { a.Connection = conn2 }), running, map[string]p.DiffKind{"name": rep}},
	} {
		checkChanges(t, tc.name, serviceChanges(tc.in, tc.st), tc.want)
	}
}

func TestNodeMetaChanges(t *testing.T) {
	gpu := map[string]string{"nvidia.com/gpu.present": "true"}
	noSchedule := []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}
	in := NodeMetaArgs{Via: conn1, Node: "gpu-1", Labels: gpu, Taints: noSchedule, Machine: "SHA256:a"}
	live := NodeMetaState{NodeMetaArgs: in, LiveLabels: gpu, LiveTaints: noSchedule}
	with := func(f func(*NodeMetaArgs)) NodeMetaArgs { a := in; f(&a); return a }
	for _, tc := range []struct {
		name string
		in   NodeMetaArgs
		st   NodeMetaState
		want map[string]p.DiffKind
	}{
		{"as declared", in, live, nil},
		{"label removed by hand", in, NodeMetaState{NodeMetaArgs: in, LiveLabels: map[string]string{}, LiveTaints: noSchedule}, map[string]p.DiffKind{"labels": upd}},
		{"label dropped from the inventory, still on the Node", with(func(a *NodeMetaArgs) { a.Labels = nil }), NodeMetaState{NodeMetaArgs: in, LiveLabels: gpu, LiveTaints: noSchedule},
			map[string]p.DiffKind{"labels": upd}},
		{"taint removed by hand", in, NodeMetaState{NodeMetaArgs: in, LiveLabels: gpu}, map[string]p.DiffKind{"taints": upd}},
		{"taints in another order", with(func(a *NodeMetaArgs) { a.Taints = []Taint{noSchedule[0], {Key: "b", Effect: "NoExecute"}} }),
			NodeMetaState{NodeMetaArgs: with(func(a *NodeMetaArgs) { a.Taints = []Taint{{Key: "b", Effect: "NoExecute"}, noSchedule[0]} }), LiveLabels: gpu,
				LiveTaints: []Taint{{Key: "b", Effect: "NoExecute"}, noSchedule[0]}}, nil},
		{"a new machine: a new Node", with(func(a *NodeMetaArgs) { a.Machine = "SHA256:b" }), live, map[string]p.DiffKind{"machine": upd}},
		{"another Node", with(func(a *NodeMetaArgs) { a.Node = "gpu-2" }), live, map[string]p.DiffKind{"node": rep}},
		{"reached through another node", with(func(a *NodeMetaArgs) { a.Via = conn2 }), live, nil},
	} {
		checkChanges(t, tc.name, nodeMetaChanges(tc.in, tc.st), tc.want)
	}
}

func TestManifestChanges(t *testing.T) {
	in := ManifestArgs{Via: conn1, Kind: "RuntimeClass", Name: "nvidia", Content: "kind: RuntimeClass"}
	there := ManifestState{ManifestArgs: in, Exists: true}
	with := func(f func(*ManifestArgs)) ManifestArgs { a := in; f(&a); return a }
	for _, tc := range []struct {
		name string
		in   ManifestArgs
		st   ManifestState
		want map[string]p.DiffKind
	}{
		{"there", in, there, nil},
		{"deleted by hand", in, ManifestState{ManifestArgs: in}, map[string]p.DiffKind{"content": upd}},
		{"new content", with(func(a *ManifestArgs) { a.Content = "kind: RuntimeClass\nhandler: nvidia" }), there, map[string]p.DiffKind{"content": upd}},
		{"another name", with(func(a *ManifestArgs) { a.Name = "nvidia-2" }), there, map[string]p.DiffKind{"name": rep}},
		{"another namespace", with(func(a *ManifestArgs) { a.Namespace = "kube-system" }), there, map[string]p.DiffKind{"name": rep}},
		{"reached through another node", with(func(a *ManifestArgs) { a.Via = conn2 }), there, nil},
	} {
		checkChanges(t, tc.name, manifestChanges(tc.in, tc.st), tc.want)
	}
}

func TestEtcdMembersChanges(t *testing.T) {
	m := func(name, ip string) EtcdMember { return EtcdMember{Name: name, PeerURL: "https://" + ip + ":2380"} }
	three := []EtcdMember{m("cp-1", "10.0.0.11"), m("cp-2", "10.0.0.12"), m("cp-3", "10.0.0.13")}
	moved := []EtcdMember{m("cp-1", "10.0.0.21"), m("cp-2", "10.0.0.12"), m("cp-3", "10.0.0.13")}
	in := EtcdMembersArgs{Via: []Connection{conn1}, Members: three}
	for _, tc := range []struct {
		name      string
		in        EtcdMembersArgs
		st        EtcdMembersState
		want      map[string]p.DiffKind
		liveDrift bool // Update changes etcd
	}{
		{"as declared", in, EtcdMembersState{EtcdMembersArgs: in, Live: three}, nil, false},
		{"listed in another order", in, EtcdMembersState{EtcdMembersArgs: in, Live: []EtcdMember{three[2], three[0], three[1]}}, nil, false},
		{"a stale member", in, EtcdMembersState{EtcdMembersArgs: in, Live: append(append([]EtcdMember{}, three...), m("cp-4", "10.0.0.14"))}, map[string]p.DiffKind{"members": upd}, true},
		{"a node re-addressed", EtcdMembersArgs{Via: in.Via, Members: moved}, EtcdMembersState{EtcdMembersArgs: in, Live: three}, map[string]p.DiffKind{"members": upd}, true},
		{"its peer URL already moved", EtcdMembersArgs{Via: in.Via, Members: moved}, EtcdMembersState{EtcdMembersArgs: in, Live: moved}, map[string]p.DiffKind{"members": upd}, false},
		{"reached through other nodes", EtcdMembersArgs{Via: []Connection{conn2}, Members: three}, EtcdMembersState{EtcdMembersArgs: in, Live: three}, nil, false},
	} {
		checkChanges(t, tc.name, etcdMembersChanges(tc.in, tc.st), tc.want)
		if got := membersDiffer(tc.in, tc.st.Live); got != tc.liveDrift {
			t.Errorf("%s: etcd changed by the update: %v", tc.name, got)
		}
	}
}

func TestInitChanges(t *testing.T) {
	in := KubeadmInitArgs{Connection: conn1, ConfigPath: "/etc/kubernetes/kubeadm/init.yaml", ConfigSha: "a", Peers: []Connection{conn2}}
	up := KubeadmInitState{KubeadmInitArgs: in, Initialized: true}
	for _, tc := range []struct {
		name string
		in   KubeadmInitArgs
		st   KubeadmInitState
		want map[string]p.DiffKind
	}{
		{"running", in, up, nil},
		{"another bootstrap node (a reordered inventory)", KubeadmInitArgs{Connection: conn2, ConfigPath: in.ConfigPath, ConfigSha: "a", Peers: []Connection{conn1}}, up, nil},
		{"a new cluster config: uploaded, never a second init", KubeadmInitArgs{Connection: conn1, ConfigPath: in.ConfigPath, ConfigSha: "b"}, up, map[string]p.DiffKind{"configSha": upd}},
		{"no cluster found", in, KubeadmInitState{KubeadmInitArgs: in}, map[string]p.DiffKind{"initialized": upd}},
		{"its admin kubeconfig valid", in, withAdmin(up, adminKubeconfig(t, time.Now().Add(time.Hour))), nil},
		// The revival renews it first; the bootstrap reads it again.
		{"its admin kubeconfig expired", in, withAdmin(up, adminKubeconfig(t, time.Now().Add(-time.Minute))), map[string]p.DiffKind{"adminKubeconfig": upd}},
	} {
		checkChanges(t, tc.name, initChanges(tc.in, tc.st, time.Now()), tc.want)
	}
}

func TestJoinChanges(t *testing.T) {
	in := KubeadmJoinArgs{Connection: conn2, ConfigPath: "/etc/kubernetes/kubeadm/join.yaml", ConfigSha: "a", ControlPlane: true, Via: conn1, Peers: []Connection{conn1}}
	joined := KubeadmJoinState{KubeadmJoinArgs: in, Joined: true}
	with := func(f func(*KubeadmJoinArgs)) KubeadmJoinArgs { a := in; f(&a); return a }
	for _, tc := range []struct {
		name string
		in   KubeadmJoinArgs
		st   KubeadmJoinState
		want map[string]p.DiffKind
	}{
		{"joined", in, joined, nil},
		{"not joined (blank, or half-done)", in, KubeadmJoinState{KubeadmJoinArgs: in}, map[string]p.DiffKind{"joined": upd}},
		{"a new join config", with(func(a *KubeadmJoinArgs) { a.ConfigSha = "b" }), joined, map[string]p.DiffKind{"configSha": upd}},
		{"a worker now", with(func(a *KubeadmJoinArgs) { a.ControlPlane = false }), joined, map[string]p.DiffKind{"controlPlane": rep}},
		{"a new key", with(func(a *KubeadmJoinArgs) { a.Connection.PrivateKey = "key-2" }), joined, map[string]p.DiffKind{"connection": upd}},
		{"reached through another node", with(func(a *KubeadmJoinArgs) { a.Via = conn2; a.Peers = nil }), joined, nil},
		{"a new token", with(func(a *KubeadmJoinArgs) { a.BootstrapToken = "abcdef.0123456789abcdef" }), joined, nil},
	} {
		checkChanges(t, tc.name, joinChanges(tc.in, tc.st), tc.want)
	}
}

// withRuntime is in expecting containerd on driver under Kubernetes version.
func withRuntime(in HostArgs, driver, version string) HostArgs {
	in.Runtime = &RuntimeExpect{Manage: true, CgroupDriver: driver, SandboxImage: "registry.k8s.io/pause:3.10.1", KubernetesVersion: version}
	return in
}

func TestHostChanges(t *testing.T) {
	in := HostArgs{Connection: conn1, Address: "10.0.0.11", MAC: "52:54:00:00:00:11", Requires: []string{"kubeadm"}}
	live := HostState{HostArgs: in, Addresses: []string{"10.0.0.11"}, MACs: []string{"52:54:00:00:00:11"}, HostKey: "SHA256:a", ConvergedHostKey: "SHA256:a"}
	with := func(f func(*HostState)) HostState { s := live; f(&s); return s }
	for _, tc := range []struct {
		name string
		in   HostArgs
		st   HostState
		want map[string]p.DiffKind
	}{
		{"as declared", in, live, nil},
		{"MAC written another way", HostArgs{Connection: conn1, Address: in.Address, MAC: "52-54-00-00-00-11", Requires: in.Requires},
			with(func(s *HostState) { s.MAC = "52-54-00-00-00-11" }), nil},
		{"moved by DHCP", in, with(func(s *HostState) { s.Addresses = []string{"10.0.0.20"} }), map[string]p.DiffKind{"address": upd}},
		{"a new NIC", in, with(func(s *HostState) { s.MACs = []string{"52:54:00:00:00:99"} }), map[string]p.DiffKind{"mac": upd}},
		{"a replaced machine's key accepted", in, with(func(s *HostState) { s.HostKey = "SHA256:b" }), map[string]p.DiffKind{"hostKey": upd}},
		{"kubeadm missing", in, with(func(s *HostState) { s.Missing = []string{"kubeadm"} }), map[string]p.DiffKind{"requires": upd}},
		{"a new key", HostArgs{Connection: rekeyed, Address: in.Address, MAC: in.MAC, Requires: in.Requires}, live, map[string]p.DiffKind{"connection": upd}},
		// A version bump alone re-reads no node: the upgrade handles the
		// nodes it cannot reach (--upgrade-without), a Host update would
		// fail on them first.
		{"another Kubernetes version", withRuntime(in, "systemd", "v1.35.4"), with(func(s *HostState) { s.Runtime = withRuntime(in, "systemd", "v1.34.4").Runtime }), nil},
		{"another cgroup driver", withRuntime(in, "cgroupfs", "v1.34.4"), with(func(s *HostState) { s.Runtime = withRuntime(in, "systemd", "v1.34.4").Runtime }), map[string]p.DiffKind{"runtime": upd}},
	} {
		d, err := hostChanges(tc.in, tc.st)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkChanges(t, tc.name, d, tc.want)
	}
	// Another cluster's machine is no change to make: it stops the preview.
	other := with(func(s *HostState) { s.CA = "sha256:other" })
	pinned := in
	pinned.ClusterCA = "sha256:ours"
	if _, err := hostChanges(pinned, other); err == nil {
		t.Error("a machine of another cluster passed")
	}
}

func TestAddressChanges(t *testing.T) {
	in := ControlPlaneAddressArgs{Connection: conn1, Address: "10.0.0.11", APIServerSANs: []string{"10.0.0.11", "cp-1"}, EtcdSANs: []string{"10.0.0.11", "cp-1"}, Port: 6443}
	live := ControlPlaneAddressState{ControlPlaneAddressArgs: in, LiveAdvertise: "10.0.0.11", LiveEtcdPeer: "10.0.0.11", LiveNodeIP: "10.0.0.11",
		LiveSANs: map[string]string{"apiserver.crt": "10.0.0.11,cp-1", "etcd/server.crt": "10.0.0.11,::1,cp-1", "etcd/peer.crt": "10.0.0.11,::1,cp-1"}}
	for _, tc := range []struct {
		name string
		in   ControlPlaneAddressArgs
		st   ControlPlaneAddressState
		want map[string]p.DiffKind
	}{
		{"as declared", in, live, nil},
		{"moved: manifests and certificates", ControlPlaneAddressArgs{Connection: conn1, Address: "10.0.0.21", APIServerSANs: []string{"10.0.0.21", "cp-1"}, EtcdSANs: []string{"10.0.0.21", "cp-1"}, Port: 6443},
			live, map[string]p.DiffKind{"address": upd, "sans": upd}},
		{"a certificate lacks a SAN", in, func() ControlPlaneAddressState {
			s := live
			s.LiveSANs = map[string]string{"apiserver.crt": "10.0.0.11", "etcd/server.crt": "10.0.0.11,::1,cp-1", "etcd/peer.crt": "10.0.0.11,::1,cp-1"}
			return s
		}(), map[string]p.DiffKind{"sans": upd}},
		{"a new key", ControlPlaneAddressArgs{Connection: rekeyed, Address: in.Address, APIServerSANs: in.APIServerSANs, EtcdSANs: in.EtcdSANs, Port: 6443}, live, map[string]p.DiffKind{"connection": upd}},
	} {
		checkChanges(t, tc.name, addressChanges(tc.in, tc.st, nil), tc.want)
	}
}
