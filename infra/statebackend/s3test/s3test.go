// Package s3test runs the lab's S3 server (versitygw, built by
// infra/tools/build-versitygw.sh) on loopback for a test: a real
// S3-compatible server, as a homelab's MinIO or Garage would be.
package s3test

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

// Server starts versitygw with root keys id and secret, each bucket named
// made, and returns its endpoint (http://127.0.0.1:PORT). It stops with
// the test.
func Server(t testing.TB, id, secret string, buckets ...string) string {
	t.Helper()
	bin := toolstest.Require(t, "versitygw")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", t.TempDir())
	// Keys in the environment, never in argv, where ps shows them.
	cmd.Env = []string{"ROOT_ACCESS_KEY_ID=" + id, "ROOT_SECRET_ACCESS_KEY=" + secret}
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw does not answer on %s:\n%s", addr, log.String())
		}
	}
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		if err := c.MakeBucket(context.Background(), b, minio.MakeBucketOptions{}); err != nil {
			t.Fatalf("making bucket %s: %v", b, err)
		}
	}
	return "http://" + addr
}
