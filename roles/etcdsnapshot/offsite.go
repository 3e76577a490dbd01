package etcdsnapshot

import (
	"bytes"
	"fmt"
	"net/url"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/file"
)

// The off-site copy's files on a control-plane node
// (cluster.etcd.snapshots.s3): rclone's configuration, the keys in it, and
// the CA the endpoint's certificate chains to, when the inventory gives one.
const (
	RcloneConfigPath = "/etc/homelab/etcd-snapshots-s3.conf"
	CAPath           = "/etc/homelab/etcd-snapshots-s3-ca.crt"
	// Remote is the configuration's one remote.
	Remote = "offsite"
	// RclonePackage is the uploader's apt package.
	RclonePackage = "rclone"
)

// Key is the folder of node's snapshots in the bucket: the prefix, then the
// node's name, so every node keeps its own Keep and a node's copies are
// told apart from its peers' (k3s names them after the node too).
func Key(s3 *inventory.SnapshotsS3, node string) string {
	return s3.Prefix + node
}

// RemotePath is node's folder as rclone names it in RcloneConfigPath's
// configuration (REMOTE:BUCKET/KEY).
func RemotePath(s3 *inventory.SnapshotsS3, node string) string {
	return Remote + ":" + s3.Bucket + "/" + Key(s3, node)
}

// URL is node's folder as an s3:// URL, for people.
func URL(s3 *inventory.SnapshotsS3, node string) string {
	return "s3://" + s3.Bucket + "/" + Key(s3, node) + "/"
}

// OffsiteFiles are the rclone configuration (a secret: it holds the keys)
// and the CA file, for a control-plane node; none without an s3 section.
func OffsiteFiles(sn *inventory.Snapshots, keys inventory.S3Keys, ca []byte) ([]file.File, error) {
	if sn == nil || sn.S3 == nil {
		return nil, nil
	}
	conf, err := rcloneConfig(sn.S3, keys)
	if err != nil {
		return nil, err
	}
	out := []file.File{{Path: RcloneConfigPath, Mode: 0o600, Content: conf, Secret: true}}
	if len(ca) > 0 {
		out = append(out, file.File{Path: CAPath, Mode: 0o644, Content: ca})
	}
	return out, nil
}

// rcloneConfig is an S3 remote for any S3-compatible server: path-style
// requests (what self-hosted servers answer), the keys given (never the
// environment or a cloud's metadata service), and no bucket creation: the
// bucket is the user's, and the keys may not be allowed to make one.
func rcloneConfig(s3 *inventory.SnapshotsS3, k inventory.S3Keys) ([]byte, error) {
	u, err := url.Parse(s3.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd.snapshots.s3.endpoint: %w", err)
	}
	u.Path = ""
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Rendered by homelab up (cluster.etcd.snapshots.s3): the bucket of the off-site snapshots.\n")
	fmt.Fprintf(&b, "[%s]\ntype = s3\nprovider = Other\nenv_auth = false\n", Remote)
	fmt.Fprintf(&b, "access_key_id = %s\nsecret_access_key = %s\n", k.AccessKeyID, k.SecretAccessKey)
	if k.SessionToken != "" {
		fmt.Fprintf(&b, "session_token = %s\n", k.SessionToken)
	}
	fmt.Fprintf(&b, "region = %s\nendpoint = %s\nforce_path_style = true\nno_check_bucket = true\n", s3.Region, u.String())
	return b.Bytes(), nil
}
