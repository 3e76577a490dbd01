package etcdbackup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Member is one etcd member as a snapshot's metadata records it.
type Member struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
	Learner bool   `json:"learner,omitempty"`
}

// Metadata is what is written beside a snapshot (FILE.json): where and
// when it was taken, which cluster it is of, and its checksum.
type Metadata struct {
	// Cluster is the inventory's cluster name.
	Cluster string `json:"cluster"`
	// ClusterID is etcd's cluster ID (hex), MemberID the member the
	// snapshot was streamed from, Node the control-plane node it runs on.
	ClusterID string `json:"clusterID"`
	MemberID  string `json:"memberID"`
	Node      string `json:"node"`
	// Revision is the newest revision in the snapshot.
	Revision  int64     `json:"revision"`
	TotalKeys int       `json:"totalKeys"`
	Members   []Member  `json:"members"`
	TakenAt   time.Time `json:"takenAt"`
	// Size and SHA256 are the snapshot file's, as written.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// StorageVersion is etcd's storage version recorded in the database.
	StorageVersion string `json:"storageVersion,omitempty"`
	// EtcdCA and ClusterCA pin the CAs of the cluster the snapshot is of
	// (pki.CAPin of each CA certificate).
	EtcdCA    string `json:"etcdCA"`
	ClusterCA string `json:"clusterCA"`
}

// MetadataPath and SumPath are where a snapshot's metadata and its
// sha256sum(1) line live.
func MetadataPath(snapshotPath string) string { return snapshotPath + ".json" }
func SumPath(snapshotPath string) string      { return snapshotPath + ".sha256" }

// ReadMetadata reads the metadata beside a snapshot; os.ErrNotExist when
// there is none.
func ReadMetadata(snapshotPath string) (*Metadata, error) {
	data, err := os.ReadFile(MetadataPath(snapshotPath))
	if err != nil {
		return nil, err
	}
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", MetadataPath(snapshotPath), err)
	}
	return &m, nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory, synced before the rename, so a reader finds the old file or
// the whole new one.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(mode))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

// writeSidecars writes FILE.json and FILE.sha256.
func writeSidecars(snapshotPath string, m *Metadata) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(MetadataPath(snapshotPath), append(data, '\n'), 0o600); err != nil {
		return err
	}
	line := fmt.Sprintf("%s  %s\n", m.SHA256, filepath.Base(snapshotPath))
	return writeAtomic(SumPath(snapshotPath), []byte(line), 0o600)
}

// Status is what opening a snapshot (or a member's raw db) found.
type Status struct {
	snapshot.Status
	// SHA256 and Size are the whole file's.
	SHA256 string
	Size   int64
	// Checksummed: the file ends in the SHA-256 etcd appends to a
	// snapshot, and it matches.
	Checksummed bool
	// Kubernetes: the data holds Kubernetes objects (keys under
	// /registry/).
	Kubernetes bool
	// ClusterCA is the client CA the cluster's apiserver published
	// (kube-system/extension-apiserver-authentication): whose cluster the
	// data is. Nil when absent or unreadable (EncryptedConfigMaps).
	ClusterCA           []byte
	EncryptedConfigMaps bool
}

// hasChecksum is etcdutl's test for a snapshot's appended SHA-256: a bbolt
// file is a whole number of pages, a snapshot 32 bytes more.
func hasChecksum(n int64) bool { return n%512 == sha256.Size }

// ErrNotSnapshot is wrapped by every problem that makes a file unusable.
var ErrNotSnapshot = errors.New("not a usable etcd snapshot")

func notSnapshot(path, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", path, ErrNotSnapshot, fmt.Sprintf(format, args...))
}

// Check opens a snapshot as `etcdutl snapshot status` does (bbolt's
// consistency check over every page, every key counted) after verifying
// the SHA-256 etcd appended to it. raw is a member's db file copied off a
// node, which has no such checksum (etcdutl's --skip-hash-check).
func Check(path string, raw bool) (*Status, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st := &Status{Size: fi.Size()}
	if fi.Size() == 0 {
		return nil, notSnapshot(path, "the file is empty")
	}
	whole := sha256.New()
	body := sha256.New()
	var trailer []byte
	if hasChecksum(fi.Size()) {
		if _, err := io.CopyN(io.MultiWriter(whole, body), f, fi.Size()-sha256.Size); err != nil {
			return nil, err
		}
		trailer = make([]byte, sha256.Size)
		if _, err := io.ReadFull(f, trailer); err != nil {
			return nil, err
		}
		whole.Write(trailer)
	} else if _, err := io.Copy(whole, f); err != nil {
		return nil, err
	}
	st.SHA256 = hex.EncodeToString(whole.Sum(nil))
	switch {
	case trailer != nil && bytes.Equal(trailer, body.Sum(nil)):
		st.Checksummed = true
	case trailer != nil && !raw:
		return nil, notSnapshot(path, "the SHA-256 etcd appended to it does not match its content: the file is corrupted")
	case !raw:
		return nil, notSnapshot(path, "it lacks the SHA-256 etcd appends to every snapshot (%d bytes is not a database plus its checksum): "+
			"a truncated copy, or not a snapshot at all; a member's raw db file is restored with --from-data NODE", fi.Size())
	}
	if err := inspect(path, st); err != nil {
		return nil, err
	}
	return st, nil
}

// registry keys that say whose cluster the data is.
const authConfigMap = "/registry/configmaps/kube-system/extension-apiserver-authentication"

// inspect runs etcdutl's status and reads the cluster's identity. A
// damaged file can make bbolt fault on its memory map or panic on a bad
// page: both become errors here, never a crash.
func inspect(path string, st *Status) (err error) {
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- notSnapshot(path, "its database is damaged (%v)", r)
			}
		}()
		done <- inspectUnsafe(path, st)
	}()
	return <-done
}

func inspectUnsafe(path string, st *Status) error {
	s, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return notSnapshot(path, "%v", err)
	}
	st.Status = s
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return notSnapshot(path, "%v", err)
	}
	defer db.Close()
	var auth []byte
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range []string{"key", "meta", "members"} {
			if tx.Bucket([]byte(b)) == nil {
				return notSnapshot(path, "it is a bbolt database without etcd's %q bucket: not etcd's data", b)
			}
		}
		return tx.Bucket([]byte("key")).ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			key := string(kv.Key)
			if strings.HasPrefix(key, "/registry/") {
				st.Kubernetes = true
			}
			if key == authConfigMap {
				auth = kv.Value
				if len(k) > 17 && k[17] == 't' { // a tombstone: revision + "_t"
					auth = nil
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	st.ClusterCA, st.EncryptedConfigMaps = clientCA(auth)
	return nil
}

// protoMagic starts every object the apiserver stores as protobuf.
var protoMagic = []byte("k8s\x00")

// clientCA reads client-ca-file from the stored ConfigMap.
func clientCA(value []byte) (ca []byte, encrypted bool) {
	if bytes.HasPrefix(value, []byte("k8s:enc:")) {
		return nil, true
	}
	var cm corev1.ConfigMap
	switch {
	case bytes.HasPrefix(value, protoMagic):
		var u runtime.Unknown
		if u.Unmarshal(value[len(protoMagic):]) != nil || cm.Unmarshal(u.Raw) != nil {
			return nil, false
		}
	case bytes.HasPrefix(value, []byte("{")):
		if json.Unmarshal(value, &cm) != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if s := cm.Data["client-ca-file"]; s != "" {
		return []byte(s), false
	}
	return nil, false
}
