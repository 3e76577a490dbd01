package inventory

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// SnapshotsS3 is the S3-compatible bucket (a NAS's MinIO or Garage, AWS,
// Backblaze) every scheduled snapshot is copied to from its node, under
// PREFIX/NODE/. The keys are read from a shared credentials file on the
// machine running homelab and reach the nodes only as a Pulumi secret.
type SnapshotsS3 struct {
	// Endpoint is the server's URL: http(s)://HOST[:PORT], no path.
	Endpoint string `json:"endpoint" yaml:"endpoint"`
	Bucket   string `json:"bucket" yaml:"bucket"`
	// Prefix is where in the bucket the cluster's snapshots go
	// (default: the cluster's name and /etcd/).
	Prefix string `json:"prefix,omitempty" yaml:"prefix"`
	// Region signs the requests (AWS Signature V4); most self-hosted
	// servers take us-east-1, the default.
	Region      string        `json:"region,omitempty" yaml:"region"`
	Credentials S3Credentials `json:"credentials" yaml:"credentials"`
	// CAFile is a PEM CA bundle on this machine the endpoint's
	// certificate chains to, when it is not one the nodes trust already.
	CAFile string `json:"caFile,omitempty" yaml:"caFile"`
	// Rclone is the apt version of rclone, the uploader up installs on
	// the control-plane nodes from their own apt sources and holds: an
	// upstream version (any Debian revision) or a full one.
	Rclone string `json:"rclone,omitempty" yaml:"rclone"`
}

// S3Credentials names the keys as the AWS CLI keeps them.
type S3Credentials struct {
	// File is an AWS shared credentials file (INI: aws_access_key_id,
	// aws_secret_access_key under [PROFILE]).
	File    string `json:"file" yaml:"file"`
	Profile string `json:"profile,omitempty" yaml:"profile"`
}

// S3Keys are the keys a credentials file holds for its profile.
type S3Keys struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Defaults of an s3 section. DefaultRclone is Debian 12's and Ubuntu
// 24.04's rclone (upstream version; Ubuntu 22.04 has 1.53.3).
const (
	DefaultS3Region  = "us-east-1"
	DefaultS3Profile = "default"
	DefaultRclone    = "1.60.1+dfsg"
)

// S3CredentialsField is the field naming the credentials file.
const S3CredentialsField = "cluster.etcd.snapshots.s3.credentials.file"

// defaultS3Prefix keeps two clusters sharing a bucket apart.
func defaultS3Prefix(cluster string) string { return cluster + "/etcd/" }

// s3Bucket is S3's bucket naming rule (3-63 lowercase letters, digits,
// dots and hyphens), which every S3-compatible server keeps.
var s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// s3Prefix: the prefix becomes part of a key and of a word in the node's
// snapshot script; letters, digits and ._- are safe in both.
var s3Prefix = regexp.MustCompile(`^[A-Za-z0-9._/-]*$`)

func checkSnapshotsS3(ps *problems, s *SnapshotsS3) {
	const path = "cluster.etcd.snapshots.s3"
	u, err := url.Parse(s.Endpoint)
	switch {
	case s.Endpoint == "":
		ps.errorf(path+".endpoint", "is required: the S3 server's URL, e.g. https://nas.lan:9000 (AWS: https://s3.REGION.amazonaws.com)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		ps.errorf(path+".endpoint", "%q is not an S3 endpoint; use http(s)://HOST[:PORT], e.g. https://nas.lan:9000", s.Endpoint)
	case u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/"):
		ps.errorf(path+".endpoint", "%q carries credentials, a path or a query; give http(s)://HOST[:PORT] only, the bucket in bucket: and keys in credentials:", s.Endpoint)
	}
	if !s3Bucket.MatchString(s.Bucket) || strings.Contains(s.Bucket, "..") {
		ps.errorf(path+".bucket", "%q is not an S3 bucket name: 3-63 lowercase letters, digits, dots and hyphens, e.g. homelab-backups", s.Bucket)
	}
	p := s.Prefix
	if !s3Prefix.MatchString(p) || strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains("/"+p+"/", "/../") || strings.Contains("/"+p+"/", "/./") {
		ps.errorf(path+".prefix", "%q is not a key prefix: letters, digits and ._-, folders separated by single slashes, no leading slash, no . or .. folder; e.g. homelab/etcd/", p)
	}
	if strings.ContainsAny(s.Region, " \t\n/") {
		ps.errorf(path+".region", "%q is not a region; e.g. %s", s.Region, DefaultS3Region)
	}
	if s.Credentials.File == "" {
		ps.errorf(path+".credentials.file", "is required: an AWS shared credentials file with the bucket's keys (aws_access_key_id, aws_secret_access_key under [%s]); up puts them on the nodes as a Pulumi secret", DefaultS3Profile)
	}
	if !debVersion.MatchString(s.Rclone) {
		ps.errorf(path+".rclone", "%q is not an apt version; e.g. %s (apt-cache policy rclone shows a node's)", s.Rclone, DefaultRclone)
	}
	if u != nil && u.Scheme == "http" {
		ps.warnf(path+".endpoint", "%s is plain http: the keys sign every request and are not sent, but the snapshots (the whole cluster's data, Secrets included) cross the network unencrypted", s.Endpoint)
	}
}

// ReadS3Credentials reads the keys of the credentials file's profile,
// naming the field and the fix when they are missing.
func (s SnapshotsS3) ReadS3Credentials() (S3Keys, error) {
	v, err := credentials.NewFileAWSCredentials(s.Credentials.File, s.Credentials.Profile).Get()
	switch {
	case err != nil:
		return S3Keys{}, fmt.Errorf("%s: %s: %w", S3CredentialsField, s.Credentials.File, err)
	case v.AccessKeyID == "" || v.SecretAccessKey == "":
		return S3Keys{}, fmt.Errorf("%s: %s has no aws_access_key_id and aws_secret_access_key under [%s]; add them, or name the profile that has them in cluster.etcd.snapshots.s3.credentials.profile", S3CredentialsField, s.Credentials.File, s.Credentials.Profile)
	case !oneLine(v.AccessKeyID) || !oneLine(v.SecretAccessKey) || !oneLine(v.SessionToken):
		// Each becomes a line of the nodes' rclone configuration.
		return S3Keys{}, fmt.Errorf("%s: a key under [%s] of %s has a control character, a leading or trailing space, or starts with # or ;: copy the keys again as the server shows them", S3CredentialsField, s.Credentials.Profile, s.Credentials.File)
	}
	return S3Keys{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken}, nil
}

// SnapshotsS3 is the off-site bucket of the scheduled snapshots; nil when
// there is none.
func (e Etcd) SnapshotsS3() *SnapshotsS3 {
	if e.Snapshots == nil {
		return nil
	}
	return e.Snapshots.S3
}

// ReadS3CA reads caFile, which must hold at least one PEM certificate.
func (s SnapshotsS3) ReadS3CA() ([]byte, error) {
	const field = "cluster.etcd.snapshots.s3.caFile"
	if s.CAFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate; give the CA's certificate (-----BEGIN CERTIFICATE-----)", field, s.CAFile)
	}
	return data, nil
}

// oneLine: a value rclone's configuration reads back as written.
func oneLine(v string) bool {
	if v != strings.TrimSpace(v) || strings.HasPrefix(v, "#") || strings.HasPrefix(v, ";") {
		return false
	}
	return !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
