package provider

import (
	"context"
	"fmt"
	"net"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// forgetOldMachine removes what the machine a node had before left in the
// cluster, before the node's new machine joins under the same name: its
// Node object (kubeadm refuses to join over a Ready Node of that name) and,
// for a control-plane node, its etcd member (kubeadm #2095: a member whose
// data is gone cannot come back, and the new one cannot be added while the
// stale one holds the peer URL). Only a node found without a completed
// kubeadm run gets here, so the member removed is never a live one.
func forgetOldMachine(ctx context.Context, node, address string, controlPlane bool, via Connection, peers []Connection) error {
	c, err := dial(ctx, via)
	if err != nil {
		return err
	}
	defer c.Close()
	name := quote(node)
	out, code, err := query(ctx, c, kubectl+" get node "+name+" -o name --ignore-not-found")
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s: reading Node %s through the API failed (exit %d)", via.Node, node, code)
	}
	if strings.TrimSpace(out) != "" {
		p.GetLogger(ctx).Warningf("%s: deleting the Node object its previous machine left", node)
		if _, err := must(ctx, c, via.Node, "deleting Node "+node, kubectl+" delete node "+name+" --ignore-not-found --wait=false"); err != nil {
			return err
		}
	}
	if !controlPlane || len(peers) == 0 {
		return nil
	}
	peerURL := "https://" + net.JoinHostPort(address, "2380")
	return withEtcd(ctx, peers, func(cli *clientv3.Client) error {
		ms, err := listMembers(ctx, cli)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Name != node && m.PeerURL != peerURL {
				continue
			}
			p.GetLogger(ctx).Warningf("%s: removing its stale etcd member %x (%s %s) before it re-joins", node, m.id, m.Name, m.PeerURL)
			if _, err := cli.MemberRemove(ctx, m.id); err != nil {
				return fmt.Errorf("removing %s's stale etcd member: %w", node, err)
			}
		}
		return nil
	})
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
		out, _, err := query(ctx, c, "if test -f "+adminConf+" && "+kubectl+" get --raw=/readyz >/dev/null 2>&1; then echo live; "+
			"elif test -d /var/lib/etcd/member; then echo data; else echo none; fi")
		c.Close()
		if err != nil {
			unsure = append(unsure, fmt.Sprintf("%s: %v", peer.Node, err))
			continue
		}
		switch strings.TrimSpace(out) {
		case "live":
			return &peers[i], nil
		case "data":
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
