package etcdbackup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Target is the cluster and how to reach its nodes.
type Target struct {
	Inventory  *inventory.Inventory
	Bundle     *pki.Bundle
	PrivateKey []byte
	KnownHosts string
	// Dial opens SSH transport connections; default a plain TCP dial from
	// this process's namespace.
	Dial ssh.DialFunc
	// CommandLog, when set, receives every command run on a node.
	CommandLog string
	// History is the file that lists the etcd cluster IDs this cluster
	// has had (homelab writes it beside the secrets bundle).
	History string
	// Log receives progress, one line per step.
	Log io.Writer
}

func (t Target) logf(format string, args ...any) {
	if t.Log != nil {
		fmt.Fprintf(t.Log, format+"\n", args...)
	}
}

// node is a control-plane node and its SSH connection (nil, with Err,
// when it cannot be reached).
type node struct {
	inventory.Node
	c   *ssh.Client
	err error
}

// connect dials every control-plane node at once; unreachable ones come
// back with their error.
func (t Target) connect(ctx context.Context) []*node {
	inv := t.Inventory
	port, user := inv.SSH.Port, inv.SSH.User
	if port == 0 {
		port = 22
	}
	if user == "" {
		user = "root"
	}
	opts := []ssh.Option{ssh.WithCommandLog(t.CommandLog), ssh.WithRetry(3 * time.Second), ssh.WithTimeout(10 * time.Second)}
	if t.Dial != nil {
		opts = append(opts, ssh.WithDialer(t.Dial))
	}
	var nodes []*node
	var wg sync.WaitGroup
	for _, n := range inv.ControlPlanes() {
		nd := &node{Node: n}
		nodes = append(nodes, nd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd.c, nd.err = ssh.Dial(ctx, ssh.Target{Name: n.Name, Address: n.Address, Port: port, User: user, PrivateKey: t.PrivateKey, KnownHosts: t.KnownHosts}, opts...)
		}()
	}
	wg.Wait()
	return nodes
}

func closeAll(nodes []*node) {
	for _, n := range nodes {
		if n.c != nil {
			n.c.Close()
		}
	}
}

// pins are the bundle's CA pins: what a node's or a snapshot's CAs must be.
type pins struct{ etcd, cluster string }

func (t Target) pins() (pins, error) {
	e, err := pki.CAPin(t.Bundle.Talos.Certs.Etcd.Crt)
	if err != nil {
		return pins{}, err
	}
	c, err := pki.CAPin(t.Bundle.Talos.Certs.K8s.Crt)
	return pins{e, c}, err
}

// sameCAs reads the node's CA certificates: ok when both are the bundle's,
// present false when the node has none (a blank machine).
func sameCAs(ctx context.Context, n *node, want pins) (present bool, err error) {
	for _, f := range []struct{ path, want string }{{etcdclient.NodeCA, want.etcd}, {nodefacts.CACert, want.cluster}} {
		data, err := n.c.Read(ctx, f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return present, fmt.Errorf("%s: reading %s: %w", n.Name, f.path, err)
		}
		present = true
		pin, err := pki.CAPin(data)
		if err != nil {
			return present, fmt.Errorf("%s: %s: %w", n.Name, f.path, err)
		}
		if pin != f.want {
			return present, fmt.Errorf("%s: its %s is not the secrets bundle's CA: the node belongs to another cluster, or the bundle is another cluster's (pass the right --secrets)", n.Name, f.path)
		}
	}
	return present, nil
}

// HistoryFile is the history's name beside the secrets bundle.
const HistoryFile = "etcd-clusters.json"

// History lists the etcd cluster IDs a cluster has had, oldest first.
type History struct {
	Clusters []HistoryEntry `json:"clusters"`
}

type HistoryEntry struct {
	ID    string    `json:"id"`
	Seen  time.Time `json:"seen"`
	Event string    `json:"event"`
}

func readHistory(path string) (*History, error) {
	h := &History{}
	if path == "" {
		return h, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Has reports whether the cluster ever had that etcd cluster ID.
func (h *History) Has(id string) bool {
	return slices.ContainsFunc(h.Clusters, func(e HistoryEntry) bool { return e.ID == id })
}

func (h *History) ids() []string {
	var out []string
	for _, e := range h.Clusters {
		out = append(out, e.ID)
	}
	return out
}

// record adds an ID to the history file (once).
func (t Target) record(id, event string) error {
	if t.History == "" || id == "" {
		return nil
	}
	h, err := readHistory(t.History)
	if err != nil {
		return err
	}
	if h.Has(id) {
		return nil
	}
	h.Clusters = append(h.Clusters, HistoryEntry{ID: id, Seen: time.Now().UTC().Truncate(time.Second), Event: event})
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(t.History, append(data, '\n'), 0o600)
}
