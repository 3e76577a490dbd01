package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A node that joined a cluster whose pod network runs is waited for until
// its Node is Ready: the up's verify failed a rebuilt control-plane node
// with NetworkPluginNotReady seconds before its Cilium agent was up. A
// cluster without our agents (a fresh build, before Dataplane; cni: none)
// is not waited on, and a node that never gets its network fails the
// step naming the node and its condition.
func TestAJoinedNodeIsWaitedForUntilItsNetworkIsUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		agents   bool
		readyAt  int // the poll from which the Node is Ready; 0 never
		wantErr  []string
		minPolls int
	}{
		{name: "network up after a few polls", agents: true, readyAt: 4, minPolls: 4},
		{name: "no pod network of ours", agents: false, readyAt: 0, minPolls: 0},
		{name: "never Ready", agents: true, readyAt: 0,
			wantErr: []string{"bravo joined", "not Ready", "NetworkPluginNotReady", "k8s-app=cilium"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			cp := lab.node("cp-1")
			ds := ""
			if tc.agents {
				ds = "daemonset.apps/cilium\n"
			}
			cp.onScript("dataplane/agents", ds, 0)
			polls := 0
			cp.onScriptFunc("dataplane/node-ready", readyOf(t, "bravo", func() (ssh.Result, error) {
				polls++
				switch {
				case polls == 1:
					return ssh.Result{}, nil
				case tc.readyAt > 0 && polls >= tc.readyAt:
					return ssh.Result{Stdout: []byte("True KubeletReady: kubelet is posting ready status")}, nil
				}
				return ssh.Result{Stdout: []byte("False KubeletNotReady: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")}, nil
			}))
			ctx := withProbes(lab.ctx(), probes{poll: time.Millisecond, network: 200 * time.Millisecond})
			c, err := lab.dial(ctx, lab.conn("cp-1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = awaitJoinedNetwork(ctx, c, "cp-1", "bravo")
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("wait: %v", err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("a node never Ready passed after %d polls", polls)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if tc.wantErr == nil && polls < tc.minPolls || !tc.agents && polls != 0 {
				t.Errorf("polled the Node %d times, want at least %d (agents: %v)", polls, tc.minPolls, tc.agents)
			}
			if got := cp.mutations(); len(got) != 0 {
				t.Errorf("waiting changed the cluster: %v", got)
			}
		})
	}
}

// refusedOnce answers a command first as kubectl does while the
// apiserver behind the endpoint restarts, then with stdout.
func refusedOnce(stdout string) func(string) (ssh.Result, error) {
	calls := 0
	return func(string) (ssh.Result, error) {
		if calls++; calls == 1 {
			return ssh.Result{Stderr: []byte("The connection to the server 10.77.0.100:6443 was refused - did you specify the right host or port?\n"), ExitCode: 1}, nil
		}
		return ssh.Result{Stdout: []byte(stdout)}, nil
	}
}

// The join step itself waits: a blank worker joining a cluster whose
// Cilium agents run ends only once its Node is Ready, after kubeadm join.
// The endpoint refusing for a moment (an apiserver restarting behind the
// VIP in the same up) is outlived, not a failed join: once, that failed a
// whole up in CI.
func TestJoinEndsWhenTheNodesNetworkIsUp(t *testing.T) {
	lab := newFakeLab(t)
	cp, w := lab.node("cp-1"), lab.node("gpu-1")
	in := KubeadmJoinArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/join.yaml",
		Config: "kind: JoinConfiguration\n", BootstrapToken: "abcdef.0123456789abcdef"}
	w.onScript("nodefacts/state", nodefacts.StateNone+"\n", 0)
	w.onScriptWith("detached/pending", "'"+runsDir+"/"+joinRun+"'", "", 1)
	w.onScript("detached/start", "started\n", 0)
	joined := false
	w.onScriptFunc("detached/poll", func(string) (ssh.Result, error) {
		joined = true
		return ssh.Result{Stdout: []byte("rc=0\nThis node has joined the cluster\n")}, nil
	})
	w.onScript("detached/remove", "", 0)
	cp.onScriptFunc("cluster/readyz", refusedOnce(""))
	cp.onScript("rejoin/node", "", 0)
	cp.onScriptFunc("token/create", refusedOnce(""))
	cp.onScript("token/delete", "", 0)
	cp.onScriptFunc("dataplane/agents", refusedOnce("daemonset.apps/cilium\n"))
	polls := 0
	cp.onScriptFunc("dataplane/node-ready", readyOf(t, "gpu-1", func() (ssh.Result, error) {
		if !joined {
			t.Error("the Node was waited for before kubeadm join ended")
		}
		if polls++; polls < 3 {
			return ssh.Result{Stdout: []byte("False KubeletNotReady: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady")}, nil
		}
		return ssh.Result{Stdout: []byte("True KubeletReady: kubelet is posting ready status")}, nil
	}))
	ctx := withProbes(lab.ctx(), probes{poll: time.Millisecond, timeout: time.Second, network: time.Second})
	if err := runJoin(ctx, in); err != nil {
		t.Fatalf("join: %v", err)
	}
	if polls != 3 {
		t.Errorf("the join ended after %d reads of the Node's Ready condition, want 3 (Ready on the third)", polls)
	}
}

// A join an interrupted up left running that ended well meanwhile makes
// the node a member before this up looks: the join step still waits for
// its Node Ready. Measured with the real kubelet: without the wait the
// up's verify found the node NotReady (its CSINode not yet initialized)
// a moment after the up ended.
func TestASettledJoinIsWaitedForUntilItsNetworkIsUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending bool
		polls   int
	}{
		{"an earlier up's join ended here", true, 2},
		{"a member joined long ago", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			cp, w := lab.node("cp-1"), lab.node("gpu-1")
			in := KubeadmJoinArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1"), ConfigPath: "/etc/kubernetes/kubeadm/join.yaml",
				Config: "kind: JoinConfiguration\n", BootstrapToken: "abcdef.0123456789abcdef"}
			w.onScript("nodefacts/state", nodefacts.StateSetUp+"\n", 0)
			if tc.pending {
				w.onScriptWith("detached/pending", "'"+runsDir+"/"+joinRun+"'", "pending\n", 0)
			} else {
				w.onScriptWith("detached/pending", "'"+runsDir+"/"+joinRun+"'", "", 1)
			}
			w.onScript("detached/poll", "rc=0\nThis node has joined the cluster\n", 0)
			w.onScriptWith("detached/remove", "'"+runsDir+"/"+joinRun+"'", "", 0)
			cp.onScript("cluster/readyz", "", 0)
			cp.onScript("dataplane/agents", "daemonset.apps/cilium\n", 0)
			polls := 0
			cp.onScriptFunc("dataplane/node-ready", readyOf(t, "gpu-1", func() (ssh.Result, error) {
				if polls++; polls < 2 {
					return ssh.Result{Stdout: []byte("False KubeletNotReady: failed to initialize CSINode")}, nil
				}
				return ssh.Result{Stdout: []byte("True KubeletReady: kubelet is posting ready status")}, nil
			}))
			ctx := withProbes(lab.ctx(), probes{poll: time.Millisecond, timeout: time.Second, network: time.Second})
			if err := runJoin(ctx, in); err != nil {
				t.Fatalf("join: %v", err)
			}
			if polls != tc.polls {
				t.Errorf("the join ended after %d reads of the Node's Ready condition, want %d", polls, tc.polls)
			}
			if w.asked("kubeadm join") {
				t.Errorf("a member was joined again: %v", w.mutations())
			}
		})
	}
}

// A refusal that is no blip (the credentials refused) fails the step at
// once, naming it.
func TestARefusedEndpointIsNoBlip(t *testing.T) {
	lab := newFakeLab(t)
	cp := lab.node("cp-1")
	cp.onScriptFunc("dataplane/agents", func(string) (ssh.Result, error) {
		return ssh.Result{Stderr: []byte("error: You must be logged in to the server (Unauthorized)\n"), ExitCode: 1}, nil
	})
	ctx := withProbes(lab.ctx(), probes{poll: time.Millisecond, network: time.Minute})
	c, err := lab.dial(ctx, lab.conn("cp-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	err = awaitJoinedNetwork(ctx, c, "cp-1", "bravo")
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") || time.Since(start) > 10*time.Second {
		t.Errorf("an Unauthorized endpoint after %s: %v", time.Since(start), err)
	}
}

// readyOf answers the reads of node's Ready condition with f, and fails
// the test for a read of another Node's.
func readyOf(t *testing.T, node string, f func() (ssh.Result, error)) func(string) (ssh.Result, error) {
	return func(cmd string) (ssh.Result, error) {
		if !strings.Contains(cmd, " get node "+shell.Quote(node)+" ") {
			t.Errorf("read the Ready condition of another Node than %s: %q", node, cmd)
			return ssh.Result{ExitCode: 1}, nil
		}
		return f()
	}
}
