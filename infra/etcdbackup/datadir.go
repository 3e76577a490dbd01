package etcdbackup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap"
)

// RevisionBump is how far a restore moves etcd's revision past the
// snapshot's, with the revisions in between marked compacted (etcdutl's
// --bump-revision and --mark-compacted, as the Kubernetes documentation
// restores): every client that watched the lost cluster holds a revision
// below the new ones, gets "compacted" and lists again instead of missing
// changes or seeing the past as new.
const RevisionBump = 1_000_000_000

// Bootstrap is the one member a restored cluster starts with.
type Bootstrap struct {
	// Name and PeerURL are the member's, as its etcd runs (--name,
	// --initial-advertise-peer-urls).
	Name, PeerURL string
	// Token is the new cluster's --initial-cluster-token: with the same
	// member it gives a new cluster ID, so no member of the lost cluster
	// can ever talk to the new one (etcd refuses a peer of another
	// cluster ID).
	Token string
}

// ClusterID is the cluster ID a restore with b gives.
func (b Bootstrap) ClusterID() (uint64, error) {
	urls, err := types.NewURLsMap(b.Name + "=" + b.PeerURL)
	if err != nil {
		return 0, err
	}
	cl, err := membership.NewClusterFromURLsMap(zap.NewNop(), b.Token, urls)
	if err != nil {
		return 0, err
	}
	return uint64(cl.ID()), nil
}

// RestoreDataDir restores a snapshot (or a raw db, skipping the hash
// check) into a new etcd data directory under work (WORK/etcd), as
// `etcdutl snapshot restore` does, and returns the directory.
func RestoreDataDir(snapshotPath string, raw bool, b Bootstrap, work string) (string, error) {
	dir := filepath.Join(work, "etcd")
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                b.Name,
		OutputDataDir:       dir,
		PeerURLs:            []string{b.PeerURL},
		InitialCluster:      b.Name + "=" + b.PeerURL,
		InitialClusterToken: b.Token,
		SkipHashCheck:       raw,
		RevisionBump:        RevisionBump,
		MarkCompacted:       true,
	})
	if err != nil {
		return "", fmt.Errorf("restoring %s: %w", snapshotPath, err)
	}
	return dir, nil
}

// Tarball packs a data directory (its member/ tree) as a gzipped tar for
// `tar xzf - -C DATA_DIR` on the node. The WAL's preallocated zeros
// compress to almost nothing.
func Tarball(dataDir string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(filepath.Join(dataDir, "member"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dataDir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), 0, 0, "root", "root"
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
