package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// A refresh reads every resource at once. Reads that ask one node the
// same kind of question arrive together, and each used to be a command of
// its own: a node's eighteen Files were eighteen sessions, each a shell,
// stat and sha256sum, and seven NodeMetas seven kubectl runs on the same
// control-plane node. Process creation was most of the CPU a no-op up
// spent (docs/benchmarks.md), so those reads are gathered into one
// command per node and kind.

// batcher gathers the reads of one kind that arrive together on one node
// into one command, run.
type batcher[V any] struct {
	// window is how long the first read of a batch waits for others.
	window time.Duration
	max    int
	run    func(ctx context.Context, c ssh.Executor, keys []string) (map[string]V, error)
	mu     sync.Mutex
	open   map[Connection]*batch[V]
}

// batch is one command's worth of reads and, once done, its outcome,
// shared by every read in it: a node that breaks the command breaks them
// all, as it would have broken each. A read that is cancelled breaks only
// itself: the command runs under ctx, cancelled once every read in the
// batch is (the first read's cancellation once failed all the others).
type batch[V any] struct {
	keys    []string
	full    chan struct{} // closed when no more keys fit
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	waiting int // reads not cancelled, of those in the batch
	vals    map[string]V
	err     error
}

func newBatcher[V any](max int, run func(context.Context, ssh.Executor, []string) (map[string]V, error)) *batcher[V] {
	return &batcher[V]{window: 50 * time.Millisecond, max: max, run: run, open: map[Connection]*batch[V]{}}
}

// get returns key's value on conn's node, and whether there is one. The
// first read of a batch runs it on its own connection, c, once the window
// closed or the batch is full; the others wait for it.
func (b *batcher[V]) get(ctx context.Context, conn Connection, c ssh.Executor, key string) (V, bool, error) {
	b.mu.Lock()
	bt, first := b.open[conn], false
	if bt == nil {
		// The command keeps ctx's values (dialer, probes), not its
		// cancellation: that is every read's own.
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		bt, first = &batch[V]{full: make(chan struct{}), done: make(chan struct{}), ctx: bctx, cancel: cancel}, true
		b.open[conn] = bt
	}
	if !slices.Contains(bt.keys, key) {
		bt.keys = append(bt.keys, key)
	}
	if len(bt.keys) >= b.max {
		delete(b.open, conn)
		close(bt.full)
	}
	bt.waiting++
	b.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if bt.waiting--; bt.waiting == 0 {
			bt.cancel()
		}
	})
	defer stop()

	var zero V
	if first {
		// The first read runs the command on its connection even when
		// it is cancelled itself: the others wait for it.
		select {
		case <-time.After(b.window):
		case <-bt.full:
		case <-bt.ctx.Done():
		}
		b.mu.Lock()
		if b.open[conn] == bt {
			delete(b.open, conn)
		}
		keys := slices.Clone(bt.keys)
		b.mu.Unlock()
		bt.vals, bt.err = b.run(bt.ctx, c, keys)
		bt.cancel()
		close(bt.done)
		if err := ctx.Err(); err != nil {
			return zero, false, err
		}
	} else {
		select {
		case <-bt.done:
		case <-ctx.Done():
			return zero, false, ctx.Err()
		}
	}
	if bt.err != nil {
		return zero, false, bt.err
	}
	v, ok := bt.vals[key]
	return v, ok, nil
}

// readBatches are the batchers of one set of nodes.
type readBatches struct {
	files *batcher[nodefacts.FileStat] // by path
	nodes *batcher[*nodeJSON]          // Node objects by name, through the via node
	// servingCSRs are each node's pending kubelet serving requests, by
	// node name, through the via node.
	servingCSRs *batcher[[]certificatesv1.CertificateSigningRequest]
}

func newReadBatches() *readBatches {
	return &readBatches{files: newBatcher(64, statFiles), nodes: newBatcher(256, getNodes), servingCSRs: newBatcher(256, getServingCSRs)}
}

func statFiles(ctx context.Context, c ssh.Executor, paths []string) (map[string]nodefacts.FileStat, error) {
	out, _, err := query(ctx, c, nodeprobes.FileStats(paths))
	if err != nil {
		return nil, err
	}
	return nodefacts.ParseFileStats(paths, out)
}

type nodesArgs struct {
	Kubectl string
	Names   []string
}

// getNodes reads Node objects; one that does not exist is left out.
// kubectl prints one object alone, several as a List.
func getNodes(ctx context.Context, c ssh.Executor, names []string) (map[string]*nodeJSON, error) {
	out, err := queryAPI(ctx, c, scripts.Render("kubectl/nodes-get", nodesArgs{Kubectl: kubectl, Names: names}))
	if err != nil {
		// The API is not there (the via node is being rebuilt, its
		// certificates expired): unknown, not absent.
		return nil, fmt.Errorf("reading Node %s: %w", strings.Join(names, ", "), err)
	}
	found := map[string]*nodeJSON{}
	if strings.TrimSpace(out) == "" {
		return found, nil
	}
	var obj struct {
		nodeJSON
		Kind  string     `json:"kind"`
		Items []nodeJSON `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", strings.Join(names, ", "), err)
	}
	items := obj.Items
	if obj.Kind != "List" {
		items = []nodeJSON{obj.nodeJSON}
	}
	for i := range items {
		found[items[i].Metadata.Name] = &items[i]
	}
	return found, nil
}
