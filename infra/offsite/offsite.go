// Package offsite is the machine running homelab's side of the off-site
// etcd snapshots (cluster.etcd.snapshots.s3): it lists the copies the
// control-plane nodes uploaded to the bucket and downloads one, for
// `homelab etcd restore --from s3://...` or `--latest` when the nodes (and
// their own copies) are gone. The nodes upload with rclone
// (roles/etcdsnapshot); this reads the same keys, folders and names.
package offsite

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// Bucket is the inventory's off-site bucket, opened.
type Bucket struct {
	s3 *inventory.SnapshotsS3
	c  *minio.Client
}

// Copy is one snapshot in the bucket.
type Copy struct {
	// Key is the .db object's; its .sha256 and .etcd.json are beside it.
	Key  string
	Node string
	Name string
	// TakenAt is the time in its name (its node's clock, UTC).
	TakenAt time.Time
	Size    int64
}

// URL is the copy as s3://BUCKET/KEY.
func (c Copy) URL(bucket string) string { return "s3://" + bucket + "/" + c.Key }

// Open reaches the bucket with keys (and the CA, when the inventory has
// one); dial, when set, is how connections are made (the lab's tests reach
// its server through its namespace).
func Open(s3 *inventory.SnapshotsS3, keys inventory.S3Keys, ca []byte, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Bucket, error) {
	u, err := url.Parse(s3.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd.snapshots.s3.endpoint: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if dial != nil {
		tr.DialContext = dial
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		tr.TLSClientConfig.RootCAs = pool
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(keys.AccessKeyID, keys.SecretAccessKey, keys.SessionToken),
		Secure: u.Scheme == "https", Region: s3.Region, Transport: tr, BucketLookup: minio.BucketLookupPath, MaxRetries: 2})
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd.snapshots.s3: %w", err)
	}
	return &Bucket{s3: s3, c: c}, nil
}

var nameRE = regexp.MustCompile(etcdsnapshot.NamePattern)

// List is every node's copies under the inventory's prefix, newest first
// (by the time in the name). Objects the nodes never write are left out;
// a refused key or a missing bucket is an error naming the fix.
func (b *Bucket) List(ctx context.Context) ([]Copy, error) {
	var out []Copy
	for o := range b.c.ListObjects(ctx, b.s3.Bucket, minio.ListObjectsOptions{Prefix: b.s3.Prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, b.explain(o.Err)
		}
		c, ok := b.parse(o.Key)
		if !ok {
			continue
		}
		c.Size = o.Size
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].TakenAt.Equal(out[j].TakenAt) {
			return out[i].TakenAt.After(out[j].TakenAt)
		}
		return out[i].Node < out[j].Node
	})
	return out, nil
}

// parse reads PREFIX/NODE/snapshot-TIME.db.
func (b *Bucket) parse(key string) (Copy, bool) {
	rest, ok := strings.CutPrefix(key, b.s3.Prefix)
	node, name, _ := strings.Cut(rest, "/")
	if !ok || node == "" || !nameRE.MatchString(name) {
		return Copy{}, false
	}
	at, err := time.Parse(etcdsnapshot.TimeFormat, strings.TrimSuffix(strings.TrimPrefix(name, etcdsnapshot.Prefix), ".db"))
	if err != nil {
		return Copy{}, false
	}
	return Copy{Key: key, Node: node, Name: name, TakenAt: at}, true
}

// ParseURL reads s3://BUCKET/KEY as a copy of this bucket's: another
// bucket, or a key the nodes never write, is refused.
func (b *Bucket) ParseURL(raw string) (Copy, error) {
	rest, ok := strings.CutPrefix(raw, "s3://")
	bucket, key, _ := strings.Cut(rest, "/")
	if !ok || bucket != b.s3.Bucket {
		return Copy{}, fmt.Errorf("%s is not in the inventory's bucket: give s3://%s/%sNODE/snapshot-YYYYMMDDTHHMMSSZ.db (or --latest)", raw, b.s3.Bucket, b.s3.Prefix)
	}
	c, ok := b.parse(key)
	if !ok {
		return Copy{}, fmt.Errorf("%s is not a snapshot the nodes copied: give s3://%s/%sNODE/snapshot-YYYYMMDDTHHMMSSZ.db (or --latest)", raw, b.s3.Bucket, b.s3.Prefix)
	}
	return c, nil
}

// Downloaded is a copy on this machine: the .db and the files the node
// wrote beside it (nil when missing in the bucket).
type Downloaded struct {
	Path           string
	Sum, EtcdState []byte
}

// Download copies c's .db into dir (its node's and its own name), with
// its .sha256 and .etcd.json read alongside. A missing .db is an error;
// the .db must be the size the listing gave.
func (b *Bucket) Download(ctx context.Context, c Copy, dir string) (*Downloaded, error) {
	out := filepath.Join(dir, c.Node+"-"+path.Base(c.Key))
	if err := b.c.FGetObject(ctx, b.s3.Bucket, c.Key, out, minio.GetObjectOptions{}); err != nil {
		return nil, fmt.Errorf("downloading %s: %w", c.URL(b.s3.Bucket), b.explain(err))
	}
	d := &Downloaded{Path: out}
	if fi, err := os.Stat(out); err != nil || (c.Size > 0 && fi.Size() != c.Size) {
		return nil, fmt.Errorf("downloading %s: the file is not the %d bytes the bucket lists", c.URL(b.s3.Bucket), c.Size)
	}
	var err error
	if d.Sum, err = b.read(ctx, c.Key+".sha256"); err != nil {
		return nil, err
	}
	if d.EtcdState, err = b.read(ctx, strings.TrimSuffix(c.Key, ".db")+etcdsnapshot.EtcdStatusSuffix); err != nil {
		return nil, err
	}
	return d, nil
}

// read is a small object's content; nil when it does not exist.
func (b *Bucket) read(ctx context.Context, key string) ([]byte, error) {
	o, err := b.c.GetObject(ctx, b.s3.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.explain(err)
	}
	defer o.Close()
	data, err := io.ReadAll(io.LimitReader(o, 1<<20))
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading s3://%s/%s: %w", b.s3.Bucket, key, b.explain(err))
	}
	return data, nil
}

// explain names the fix of the failures a user meets.
func (b *Bucket) explain(err error) error {
	resp := minio.ToErrorResponse(err)
	var op *net.OpError
	switch {
	case resp.Code == "NoSuchBucket":
		return fmt.Errorf("bucket %q does not exist at %s (cluster.etcd.snapshots.s3.bucket): %w", b.s3.Bucket, b.s3.Endpoint, err)
	case resp.StatusCode == http.StatusForbidden || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" || resp.Code == "XAdminUserNotFound":
		return fmt.Errorf("%s refused the keys of %s [%s] (cluster.etcd.snapshots.s3.credentials): %s", b.s3.Endpoint, b.s3.Credentials.File, b.s3.Credentials.Profile, resp.Code)
	case errors.As(err, &op):
		return fmt.Errorf("cannot reach %s (cluster.etcd.snapshots.s3.endpoint) from this machine: %w", b.s3.Endpoint, err)
	}
	return err
}
