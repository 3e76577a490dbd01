// Package s3test runs the lab's S3 server (versitygw, built by
// infra/tools/build-versitygw.sh) on loopback for a test: a real
// S3-compatible server, as a homelab's MinIO or Garage would be.
package s3test

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
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

// Rclone is Debian's rclone, the uploader of the off-site etcd snapshots,
// unpacked from the package the lab's nodes install
// (infra/tools/build-distro-debs.sh), never installed on this machine.
func Rclone(t testing.TB) string {
	t.Helper()
	debs, _ := filepath.Glob(filepath.Join(toolstest.Built(t, "distro-debs"), "rclone_*.deb"))
	if len(debs) != 1 {
		toolstest.Missing(t, "no rclone package: run infra/tools/build-distro-debs.sh")
	}
	dir := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], dir).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", debs[0], err, out)
	}
	return filepath.Join(dir, "usr", "bin", "rclone")
}

// Client is a client of the server at endpoint with the keys.
func Client(t testing.TB, endpoint, id, secret string) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
