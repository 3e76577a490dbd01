// Package statebackend checks a Pulumi state backend on S3-compatible
// storage (MinIO, Garage, SeaweedFS, Ceph's RGW, AWS) before a run trusts
// it, and reads the stack's locks there: a bucket that cannot be reached or
// refuses the credentials is an error that names the URL's part to fix,
// given before any node is touched, where Pulumi would report it half-way
// through opening the stack in the AWS SDK's words.
//
// The URL is the one `pulumi login` takes (gocloud.dev's s3blob):
// s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=R&s3ForcePathStyle=true.
// Credentials are found as the Pulumi CLI finds them for such a server:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, else the shared credentials
// file's profile (?profile=, else AWS_PROFILE, else default). Nothing asks
// a cloud's metadata service: a homelab's S3 has static keys.
package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"gopkg.in/ini.v1"
)

// S3 is a parsed s3:// backend URL.
type S3 struct {
	URL    string // as given, for messages
	Bucket string
	// Prefix is the folder in the bucket the backend keeps its .pulumi in.
	Prefix   string
	Endpoint string // host:port; empty means AWS itself
	Secure   bool
	Region   string // the URL's region=, if any
	// Profile is the URL's profile=, which wins over AWS_PROFILE.
	Profile string
}

// IsS3 tells an S3 backend URL from the others (file://, Pulumi Cloud).
func IsS3(backendURL string) bool { return strings.HasPrefix(backendURL, "s3://") }

// ParseS3 reads an s3:// backend URL, naming every part that is wrong.
func ParseS3(raw string) (*S3, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("state backend %q: %w", raw, err)
	}
	if u.Scheme != "s3" {
		return nil, fmt.Errorf("state backend %q is not an s3:// URL", raw)
	}
	b := &S3{URL: redact(u), Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Secure: true}
	var problems []string
	if b.Bucket == "" {
		problems = append(problems, "it names no bucket: s3://BUCKET[/PREFIX]?endpoint=...")
	}
	q := u.Query()
	if e := q.Get("endpoint"); e != "" {
		eu, err := url.Parse(e)
		_, _, hostPortErr := net.SplitHostPort(e)
		switch {
		case !strings.Contains(e, "://") && hostPortErr == nil:
			b.Endpoint = e // host:port, as the AWS SDK v1 took it
		case err == nil && (eu.Scheme == "http" || eu.Scheme == "https") && eu.Host != "":
			b.Endpoint, b.Secure = eu.Host, eu.Scheme == "https"
		default:
			problems = append(problems, fmt.Sprintf("endpoint=%s is not a server's URL: give endpoint=http://HOST:PORT (or https://)", e))
		}
	}
	if r := q.Get("region"); r != "" {
		b.Region = r
	}
	b.Profile = q.Get("profile")
	for _, key := range []string{"disableSSL", "disable_https"} {
		if v := q.Get(key); v != "" {
			off, err := strconv.ParseBool(v)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s=%s is not true or false", key, v))
			}
			if off {
				b.Secure = false
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("state backend %s: %s", b.URL, strings.Join(problems, "; "))
	}
	return b, nil
}

// redact drops a password from a URL shown to the user.
func redact(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("****")
	}
	return c.String()
}

// Env looks up the environment the Pulumi CLI will run with; the caller
// reads it at its edge.
type Env func(string) string

// credentialsFrom finds the keys as the AWS SDK does for a static-key
// server, and says where they came from.
func (b *S3) credentialsFrom(env Env) (*credentials.Credentials, string, error) {
	if id, secret := env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"); id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, "", errors.New("only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set: set both, or neither to use a profile")
		}
		return credentials.NewStaticV4(id, secret, env("AWS_SESSION_TOKEN")), "AWS_ACCESS_KEY_ID", nil
	}
	file := env("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home, _ := os.UserHomeDir()
		file = filepath.Join(home, ".aws", "credentials")
	}
	profile := b.Profile
	if profile == "" {
		profile = env("AWS_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	where := fmt.Sprintf("profile %s of %s", profile, file)
	c := credentials.NewFileAWSCredentials(file, profile)
	if _, err := c.GetWithContext(nil); err != nil {
		return nil, "", fmt.Errorf("no credentials: AWS_ACCESS_KEY_ID is not set and %s gives none (%v): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write the profile", where, err)
	}
	return c, where, nil
}

// configRegion is the profile's region in the AWS config file, which the
// CLI's SDK reads when neither the URL nor AWS_REGION gives one.
func configRegion(env Env, profile string) string {
	file := env("AWS_CONFIG_FILE")
	if file == "" {
		home, _ := os.UserHomeDir()
		file = filepath.Join(home, ".aws", "config")
	}
	if profile == "" {
		profile = env("AWS_PROFILE")
	}
	section := "default"
	if profile != "" && profile != "default" {
		section = "profile " + profile
	}
	cfg, err := ini.Load(file)
	if err != nil {
		return ""
	}
	return cfg.Section(section).Key("region").String()
}

// region is the region the CLI's AWS SDK signs with: the URL's, else
// AWS_REGION, AWS_DEFAULT_REGION, the profile's config; "" if none.
func (b *S3) region(env Env) string {
	for _, r := range []string{b.Region, env("AWS_REGION"), env("AWS_DEFAULT_REGION")} {
		if r != "" {
			return r
		}
	}
	return configRegion(env, b.Profile)
}

// Client opens the bucket's server with the CLI's credentials. dial, when
// set, is how connections are made (the lab's tests reach its server
// through its namespace).
func (b *S3) Client(env Env, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*minio.Client, string, error) {
	creds, where, err := b.credentialsFrom(env)
	if err != nil {
		return nil, "", fmt.Errorf("state backend %s: %w", b.URL, err)
	}
	region := b.region(env)
	endpoint := b.Endpoint
	if endpoint == "" {
		endpoint = "s3." + region + ".amazonaws.com"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if dial != nil {
		tr.DialContext = dial
	}
	// The AWS SDK the CLI uses sends path-style requests to a custom
	// endpoint only when told; a homelab's server has no wildcard DNS
	// for virtual hosts, so path style is what works there.
	lookup := minio.BucketLookupPath
	if b.Endpoint == "" {
		lookup = minio.BucketLookupAuto
	}
	c, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: b.Secure, Region: region, Transport: tr, BucketLookup: lookup, MaxRetries: 1})
	if err != nil {
		return nil, "", fmt.Errorf("state backend %s: %w", b.URL, err)
	}
	return c, where, nil
}

// Check reaches the bucket with the credentials the CLI will use, and
// returns the client it reached it with: an unreachable server, refused
// keys and a missing bucket are each named with their fix.
func (b *S3) Check(ctx context.Context, env Env, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*minio.Client, error) {
	if b.region(env) == "" {
		// The CLI's AWS SDK has no default region, and signs nothing
		// without one: every request would be refused.
		return nil, fmt.Errorf("state backend %s: no region: add region=us-east-1 to the URL (or the region your server expects), or set AWS_REGION", b.URL)
	}
	c, where, err := b.Client(env, dial)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// A listing, not a HEAD: a HEAD's answer has no body to say why it
	// failed, and some servers answer an unknown key's HEAD with 404.
	for obj := range c.ListObjects(ctx, b.Bucket, minio.ListObjectsOptions{MaxKeys: 1, Prefix: b.key(".pulumi/")}) {
		err = obj.Err
		break
	}
	if err == nil {
		return c, nil
	}
	resp := minio.ToErrorResponse(err)
	host := c.EndpointURL().Host
	switch {
	case resp.Code == "NoSuchBucket":
		return nil, fmt.Errorf("state backend %s: bucket %q does not exist on %s: create it (e.g. mc mb, or the server's console), or fix the bucket's name in the URL", b.URL, b.Bucket, host)
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized ||
		slices.Contains(refusals, resp.Code):
		return nil, fmt.Errorf("state backend %s: %s refused the credentials from %s (%s): fix them, or the profile the URL or AWS_PROFILE names", b.URL, host, where, firstNonEmpty(resp.Code, resp.Message, strconv.Itoa(resp.StatusCode)))
	case resp.StatusCode != 0:
		return nil, fmt.Errorf("state backend %s: %s answered %d %s: %s", b.URL, host, resp.StatusCode, resp.Code, resp.Message)
	}
	return nil, fmt.Errorf("state backend %s: cannot reach %s: %v: check endpoint= in the URL and that the server runs", b.URL, c.EndpointURL(), err)
}

// refusals are the codes servers refuse keys with; versitygw answers an
// unknown key with 404 XAdminUserNotFound.
var refusals = []string{"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "XAdminUserNotFound"}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Lock is a lock file Pulumi's backend keeps while a run holds the stack.
type Lock struct {
	Key       string    `json:"-"`
	Pid       int       `json:"pid"`
	Username  string    `json:"username"`
	Hostname  string    `json:"hostname"`
	Timestamp time.Time `json:"timestamp"`
}

// LockDir is where Pulumi's self-managed backend keeps a project stack's
// locks, under the URL's prefix (pulumi/pkg/backend/diy lock.go; stacks
// of a self-managed backend belong to the "organization" organization).
func LockDir(project, stack string) string {
	return path.Join(".pulumi", "locks", "organization", project, stack)
}

// StackFile is where the backend keeps a project stack's checkpoint.
func StackFile(project, stack string) string {
	return path.Join(".pulumi", "stacks", project, stack+".json")
}

func (b *S3) key(p string) string {
	if b.Prefix == "" {
		return p
	}
	return b.Prefix + "/" + p
}

// Locks lists the stack's locks in the bucket.
func (b *S3) Locks(ctx context.Context, c *minio.Client, project, stack string) ([]Lock, error) {
	var out []Lock
	for obj := range c.ListObjects(ctx, b.Bucket, minio.ListObjectsOptions{Prefix: b.key(LockDir(project, stack)) + "/", Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing the stack's locks in %s: %w", b.URL, obj.Err)
		}
		if !strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		r, err := c.GetObject(ctx, b.Bucket, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			return nil, err
		}
		var l Lock
		err = json.NewDecoder(r).Decode(&l)
		r.Close()
		if err != nil {
			continue // not a lock Pulumi wrote; Pulumi will name it
		}
		l.Key = obj.Key
		out = append(out, l)
	}
	return out, nil
}

// RemoveLock deletes a lock file.
func (b *S3) RemoveLock(ctx context.Context, c *minio.Client, l Lock) error {
	return c.RemoveObject(ctx, b.Bucket, l.Key, minio.RemoveObjectOptions{})
}

// HasStack tells whether the backend holds the stack's checkpoint with
// resources in it (a stack destroyed to nothing holds none).
func (b *S3) HasStack(ctx context.Context, c *minio.Client, project, stack string) (bool, error) {
	r, err := c.GetObject(ctx, b.Bucket, b.key(StackFile(project, stack)), minio.GetObjectOptions{})
	if err != nil {
		return false, fmt.Errorf("reading the stack's checkpoint in %s: %w", b.URL, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the stack's checkpoint in %s: %w", b.URL, err)
	}
	return Resources(data) > 0, nil
}

// Resources counts the resources of a checkpoint as the self-managed
// backend stores it; an unreadable one counts as holding some.
func Resources(checkpoint []byte) int {
	var cp struct {
		Checkpoint struct {
			Latest *struct {
				Resources []json.RawMessage `json:"resources"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal(checkpoint, &cp); err != nil {
		return 1
	}
	if cp.Checkpoint.Latest == nil {
		return 0
	}
	return len(cp.Checkpoint.Latest.Resources)
}
