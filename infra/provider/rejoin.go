package provider

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rejoinArgs are the values of the rejoin/ scripts.
type rejoinArgs struct {
	// Kubectl is the kubectl command line of a control-plane node.
	Kubectl string
	// Node is the name of the node a new machine joins as.
	Node string
}

// forgetOldMachine removes what the machine a node had before left in the
// cluster, before the node's new machine joins under the same name: its
// Node object (kubeadm refuses to join over a Ready Node of that name) and,
// for a control-plane node, its etcd member (kubeadm #2095: a member whose
// data is gone cannot come back, and the new one cannot be added while the
// stale one holds the peer URL). Only a node found without kubeadm's state
// gets here, so its old member's data is gone with its old disk; a Ready
// Node or a healthy member under its name means another machine runs as
// this node, and nothing is removed without consent.
func forgetOldMachine(ctx context.Context, cl ssh.Executor, clNode string, in KubeadmJoinArgs) error {
	node := in.Connection.Node
	args := rejoinArgs{Kubectl: kubectl, Node: node}
	r, err := outliveBlips(ctx, func() (ssh.Result, error) {
		return cl.Query(ctx, scripts.Render("rejoin/node", args).String())
	})
	if err != nil {
		return err
	}
	out, code := string(r.Stdout), r.ExitCode
	if code != 0 {
		return fmt.Errorf("%s: reading Node %s through the API failed (exit %d)", clNode, node, code)
	}
	if found, ready, _ := strings.Cut(strings.TrimSpace(out), " "); found != "" {
		if ready == "True" && !consented(ctx, node) {
			// A Node stays Ready for the node-monitor grace period after its
			// machine went; whether a kubelet still runs under the name is
			// told by its Lease, renewed every quarter of its duration.
			alive, err := leaseRenewed(ctx, cl, clNode, node)
			if err != nil {
				return err
			}
			if alive {
				return refused(node, "deleting Node "+node, "delete a Ready Node whose kubelet still renews its lease while this machine is blank: another machine runs as "+node+"? Its pods would lose their node")
			}
			p.GetLogger(ctx).Infof("%s: its Node is still Ready but its lease was not renewed: the previous machine is gone", node)
		}
		p.GetLogger(ctx).Warningf("%s: deleting the Node object its previous machine left", node)
		if _, err := mustAPI(ctx, cl, clNode, "deleting Node "+node, scripts.Render("kubectl/delete-node", args)); err != nil {
			return err
		}
	}
	if !in.ControlPlane || len(in.Peers) == 0 {
		return nil
	}
	peerURL := "https://" + net.JoinHostPort(in.Connection.Host, "2380")
	return withEtcd(ctx, in.Peers, func(cli *clientv3.Client, tunnel ssh.Executor) error {
		ms, err := readMembers(ctx, cli, false)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Name != node && m.PeerURL != peerURL {
				continue
			}
			p.GetLogger(ctx).Warningf("%s: removing its stale etcd member %x (%s %s) before it re-joins", node, m.ID, m.Name, m.PeerURL)
			return removeMember(ctx, cli, tunnel, m, true)
		}
		return nil
	})
}

// leaseRenewed watches the node's Lease in kube-node-lease for a little
// longer than its renew interval (a quarter of its duration, as the kubelet
// renews it) and reports whether its renewTime moved.
func leaseRenewed(ctx context.Context, cl ssh.Executor, clNode, node string) (bool, error) {
	first, duration, err := readLease(ctx, cl, clNode, node)
	if err != nil || first == "" {
		return false, err
	}
	if duration <= 0 {
		duration = 40
	}
	deadline := time.Now().Add(time.Duration(duration)*time.Second/4 + 5*time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Second):
		}
		now, _, err := readLease(ctx, cl, clNode, node)
		if err != nil {
			return false, err
		}
		if now != first {
			return true, nil
		}
	}
	return false, nil
}

// readLease is when the node's kubelet last renewed its Lease and the
// Lease's duration in seconds, as the API has them ("" when there is none).
func readLease(ctx context.Context, cl ssh.Executor, clNode, node string) (renew string, duration int, err error) {
	out, code, err := query(ctx, cl, scripts.Render("rejoin/lease", rejoinArgs{Kubectl: kubectl, Node: node}))
	if err != nil {
		return "", 0, err
	}
	if code != 0 {
		return "", 0, fmt.Errorf("%s: reading the Lease of %s through the API failed (exit %d)", clNode, node, code)
	}
	renew, secs, _ := strings.Cut(strings.TrimSpace(out), " ")
	fmt.Sscan(secs, &duration)
	return renew, duration, nil
}

// livePeer is the first peer whose control plane answers: the cluster
// already exists there. An unreachable peer, or one holding etcd data
// whose API does not answer, leaves the question open, and an init then
// could start a second cluster: that is an error naming the peer.
func livePeer(ctx context.Context, peers []Connection) (*Connection, error) {
	var unsure []string
	for i, peer := range peers {
		c, err := dial(ctx, peer)
		if err != nil {
			unsure = append(unsure, fmt.Sprintf("%s is unreachable (%v)", peer.Node, err))
			continue
		}
		out, _, err := query(ctx, c, peerCheck())
		c.Close()
		if err != nil {
			unsure = append(unsure, fmt.Sprintf("%s: %v", peer.Node, err))
			continue
		}
		switch strings.TrimSpace(out) {
		case nodefacts.StateSetUp:
			return &peers[i], nil
		case peerData:
			unsure = append(unsure, peer.Node+" holds etcd data but its API does not answer")
		}
	}
	if len(unsure) > 0 {
		return nil, fmt.Errorf("cannot tell whether the cluster already runs on another control-plane node: %s. "+
			"A kubeadm init now could start a second cluster; bring those nodes back (homelab doctor shows what is wrong) or remove them from the inventory",
			strings.Join(unsure, "; "))
	}
	return nil, nil
}
