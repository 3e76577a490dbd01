package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Health is one member's answer to a status request at its own endpoint.
type Health struct {
	MemberID  uint64
	ClusterID uint64
	Leader    uint64
	Revision  int64
	// AppliedIndex orders members by how up to date their data is.
	AppliedIndex uint64
	Errors       []string
	Version      string
}

// Healthy: the member has a leader and reports no errors (alarms, a
// corrupt db).
func (h Health) Healthy() bool { return h.Leader != 0 && len(h.Errors) == 0 }

// MemberHealth asks the member cli is connected to (one endpoint) for its
// status. It answers without quorum: a member that lost its peers still
// says so (no leader).
func MemberHealth(ctx context.Context, cli *clientv3.Client) (Health, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	eps := cli.Endpoints()
	if len(eps) != 1 {
		return Health{}, fmt.Errorf("a member's health is asked at its own endpoint, not %v", eps)
	}
	s, err := cli.Status(ctx, eps[0])
	if err != nil {
		return Health{}, err
	}
	return Health{MemberID: s.Header.MemberId, ClusterID: s.Header.ClusterId, Leader: s.Leader, Revision: s.Header.Revision,
		AppliedIndex: s.RaftAppliedIndex, Errors: s.Errors, Version: s.Version}, nil
}

// Members lists the cluster's members as the member cli talks to knows
// them (a serializable read: it answers without quorum too).
func Members(ctx context.Context, cli *clientv3.Client) (clusterID uint64, members []Member, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return 0, nil, err
	}
	for _, m := range resp.Members {
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		members = append(members, Member{ID: fmt.Sprintf("%x", m.ID), Name: m.Name, PeerURL: peer, Learner: m.IsLearner})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	return resp.Header.ClusterId, members, nil
}

// Save streams a snapshot from the member cli talks to into path: written
// to a temporary file beside it, synced, opened and checked (Check), and
// only then renamed into place with FILE.json and FILE.sha256 written
// beside it. meta's identity fields (cluster, node, CAs) are the caller's;
// Save fills in the rest. A member without a leader is refused: its data
// may be behind the cluster's.
func Save(ctx context.Context, cli *clientv3.Client, path string, meta Metadata) (*Metadata, error) {
	h, err := MemberHealth(ctx, cli)
	if err != nil {
		return nil, fmt.Errorf("asking the member for its status: %w", err)
	}
	if !h.Healthy() {
		return nil, fmt.Errorf("the member %x is not healthy (leader %x, errors %v): its data may be behind; take the snapshot through a healthy member", h.MemberID, h.Leader, h.Errors)
	}
	clusterID, members, err := Members(ctx, cli)
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	start := time.Now()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := cli.Snapshot(sctx)
	if err != nil {
		tmp.Close()
		return nil, fmt.Errorf("starting the snapshot: %w", err)
	}
	n, err := io.Copy(tmp, rc)
	rc.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("receiving the snapshot: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return nil, err
	}
	st, err := Check(tmp.Name(), false)
	if err != nil {
		return nil, fmt.Errorf("the snapshot received (%d bytes) does not open: %w", n, err)
	}
	if !st.Checksummed {
		return nil, errors.New("the snapshot received has no checksum")
	}
	meta.ClusterID = fmt.Sprintf("%x", clusterID)
	meta.MemberID = fmt.Sprintf("%x", h.MemberID)
	meta.Members = members
	meta.Revision = st.Revision
	meta.TotalKeys = st.TotalKey
	meta.StorageVersion = st.Version
	meta.Size, meta.SHA256 = st.Size, st.SHA256
	meta.TakenAt = start.UTC().Truncate(time.Second)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	if err := writeSidecars(path, &meta); err != nil {
		return nil, fmt.Errorf("the snapshot is at %s, but its metadata could not be written: %w", path, err)
	}
	return &meta, nil
}
