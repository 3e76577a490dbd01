package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"gopkg.in/ini.v1"

	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/tools"
)

// The lab's S3-compatible storage, as a homelab's NAS runs MinIO or
// Garage: the Versity S3 Gateway (versitygw, built by
// infra/tools/build-versitygw.sh), keeping buckets as directories under
// the lab's s3/data, in the gateway namespace on the gateway's address.
// The Pulumi state (homelab up --state) goes there; nothing outside the
// lab reaches it. Its keys are the lab's own, random, written once to
// s3/credentials (an AWS shared credentials file, profile S3Profile) and
// given to the server in its environment, never in argv.
const (
	S3Port    = "9000"
	S3Bucket  = "homelab"
	S3Profile = "homelab-lab"
	S3Region  = "us-east-1"
)

func (l *Lab) s3Dir() string { return filepath.Join(l.Dir, "s3") }

// S3CredentialsPath is the lab's AWS shared credentials file: give it as
// AWS_SHARED_CREDENTIALS_FILE with AWS_PROFILE=homelab-lab.
func (l *Lab) S3CredentialsPath() string { return filepath.Join(l.s3Dir(), "credentials") }

// S3Endpoint is the server as the nodes and `homelab-lab exec` reach it.
func S3Endpoint(s *State) string { return "http://" + net.JoinHostPort(s.Gateway, S3Port) }

// S3StateURL is a Pulumi state backend in the lab's bucket at endpoint
// (S3Endpoint, or a test's forward of it).
func S3StateURL(endpoint string) string {
	return "s3://" + S3Bucket + "/state?endpoint=" + endpoint + "&region=" + S3Region + "&s3ForcePathStyle=true"
}

// S3Keys are the lab's access key and secret.
func (l *Lab) S3Keys() (id, secret string, err error) {
	cfg, err := ini.Load(l.S3CredentialsPath())
	if err != nil {
		return "", "", fmt.Errorf("the lab's S3 keys: %w", err)
	}
	sec := cfg.Section(S3Profile)
	id, secret = sec.Key("aws_access_key_id").String(), sec.Key("aws_secret_access_key").String()
	if id == "" || secret == "" {
		return "", "", fmt.Errorf("the lab's S3 keys: %s has no profile %s", l.S3CredentialsPath(), S3Profile)
	}
	return id, secret, nil
}

// ensureS3Keys makes the lab's keys once; a lab brought up again over its
// kept data keeps them.
func (l *Lab) ensureS3Keys() (id, secret string, err error) {
	if id, secret, err := l.S3Keys(); err == nil {
		return id, secret, nil
	} else if _, serr := os.Stat(l.S3CredentialsPath()); !errors.Is(serr, os.ErrNotExist) {
		return "", "", err
	}
	buf := make([]byte, 28)
	if _, err := rand.Read(buf); err != nil {
		return "", "", err
	}
	id, secret = "lab"+hex.EncodeToString(buf[:8]), hex.EncodeToString(buf[8:])
	if err := os.MkdirAll(l.s3Dir(), 0o700); err != nil {
		return "", "", err
	}
	body := fmt.Sprintf("[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n", S3Profile, id, secret)
	return id, secret, os.WriteFile(l.S3CredentialsPath(), []byte(body), 0o600)
}

// startS3 starts the server in the gateway namespace and makes the lab's
// bucket if it has none yet.
func (l *Lab) startS3(ctx context.Context, s *State) error {
	bin, err := tools.Path("versitygw")
	if err != nil {
		return err
	}
	id, secret, err := l.ensureS3Keys()
	if err != nil {
		return err
	}
	data := filepath.Join(l.s3Dir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	addr := net.JoinHostPort(s.Gateway, S3Port)
	nsPath := s.Names().GatewayPath()
	if err := l.startGatewayServer(ctx, s, &s.S3Server, gatewayServer{
		what: "the lab's S3 server", argv: []string{bin, "--port", addr, "--quiet", "posix", data},
		argvEnv: []string{"ROOT_ACCESS_KEY_ID=" + id, "ROOT_SECRET_ACCESS_KEY=" + secret},
		nsPath:  nsPath, addr: addr, log: filepath.Join(l.s3Dir(), "server.log"),
	}); err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = netns.DialerFor(nsPath)
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: S3Region, Transport: tr, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	ok, err := c.BucketExists(ctx, S3Bucket)
	if err == nil && !ok {
		err = c.MakeBucket(ctx, S3Bucket, minio.MakeBucketOptions{Region: S3Region})
	}
	if err != nil {
		return fmt.Errorf("the lab's S3 bucket %s: %w", S3Bucket, err)
	}
	return nil
}

func (l *Lab) stopS3(s *State) error {
	return stopGatewayServer(&s.S3Server, "the lab's S3 server")
}
