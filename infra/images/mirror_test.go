package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// registry is an empty, writable OCI registry on loopback: the real
// distribution server go-containerregistry tests crane against.
func registry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ggcr.New(ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(t.TempDir())), ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return srv.URL
}

// layoutOf writes an OCI layout naming each image as the given annotations
// do, returning its directory and each image's digest.
func layoutOf(t *testing.T, entries map[string]map[string]string, index string) (string, map[string]v1.Hash) {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]v1.Hash{}
	for key, ann := range entries {
		if key == index {
			ii, err := random.Index(256, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.AppendIndex(ii, layout.WithAnnotations(ann)); err != nil {
				t.Fatal(err)
			}
			digests[key], _ = ii.Digest()
			continue
		}
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
			t.Fatal(err)
		}
		digests[key], _ = img.Digest()
	}
	return dir, digests
}

// in reads back what the mirror at url serves for ref, as containerd
// asks a mirror: the repository path without the registry's host.
func in(t *testing.T, url, ref string) (v1.Hash, error) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(url, "http://")
	var at name.Reference
	if d, ok := r.(name.Digest); ok {
		at, err = name.NewDigest(host+"/"+r.Context().RepositoryStr()+"@"+d.DigestStr(), name.Insecure)
	} else {
		at, err = name.NewTag(host+"/"+r.Context().RepositoryStr()+":"+r.Identifier(), name.Insecure)
	}
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(at)
	if err != nil {
		return v1.Hash{}, err
	}
	return d.Digest, nil
}

func quiet(string, ...any) {}

// all sends every registry the tests name to one mirror.
func all(url string) map[string]string {
	return map[string]string{"registry.k8s.io": url, "quay.io": url, "nvcr.io": url, "docker.io": url}
}

func TestMirrorFillsAnEmptyRegistryFromALayout(t *testing.T) {
	ctx := context.Background()
	dir, digests := layoutOf(t, map[string]map[string]string{
		"etcd":    {refNameAnnotation: "registry.k8s.io/etcd:3.6.5-0"},
		"agent":   {refNameAnnotation: "v1.18.4"}, // skopeo names by tag alone
		"pause":   {containerdNameAnnotation: "registry.k8s.io/pause:3.10.1", refNameAnnotation: "3.10.1"},
		"plugin":  {refNameAnnotation: "nvcr.io/nvidia/k8s-device-plugin:v0.20.1"},
		"unasked": {refNameAnnotation: "docker.io/library/busybox:1"},
	}, "plugin")
	agent := "quay.io/cilium/cilium:v1.18.4@" + digests["agent"].String()
	imgs := []Image{
		{Ref: "registry.k8s.io/etcd:3.6.5-0", For: ForKubeadm},
		{Ref: "registry.k8s.io/pause:3.10.1", For: ForKubeadm},
		{Ref: agent, For: ForCilium},
		{Ref: "nvcr.io/nvidia/k8s-device-plugin:v0.20.1", For: ForDevicePlugin},
	}
	to := registry(t)
	res, err := Mirror(ctx, imgs, Source{Layouts: []string{dir}}, all(to), quiet)
	if err != nil || res.Copied != 4 || res.Present != 0 {
		t.Fatalf("first mirror: %+v, %v", res, err)
	}
	for ref, key := range map[string]string{
		"registry.k8s.io/etcd:3.6.5-0":                       "etcd",
		"registry.k8s.io/pause:3.10.1":                       "pause",
		"quay.io/cilium/cilium:v1.18.4":                      "agent",
		"quay.io/cilium/cilium@" + digests["agent"].String(): "agent",
		"nvcr.io/nvidia/k8s-device-plugin:v0.20.1":           "plugin",
	} {
		got, err := in(t, to, ref)
		if err != nil || got != digests[key] {
			t.Errorf("the mirror serves %s as %v (%v), want %s", ref, got, err, digests[key])
		}
	}
	if _, err := in(t, to, "docker.io/library/busybox:1"); err == nil {
		t.Error("an image nobody asked for was copied")
	}
	// Again: nothing to copy.
	if res, err := Mirror(ctx, imgs, Source{Layouts: []string{dir}}, all(to), quiet); err != nil || res.Copied != 0 || res.Present != 4 {
		t.Errorf("second mirror: %+v, %v; want all 4 already there", res, err)
	}
	// One mirror fills another, as a staging machine's registry fills the
	// homelab's.
	next := registry(t)
	if res, err := Mirror(ctx, imgs, Source{Registry: to}, all(next), quiet); err != nil || res.Copied != 4 {
		t.Errorf("mirror from a mirror: %+v, %v", res, err)
	}
	if got, err := in(t, next, "registry.k8s.io/pause:3.10.1"); err != nil || got != digests["pause"] {
		t.Errorf("the second mirror serves pause as %v (%v)", got, err)
	}
}

func TestRegistryOf(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/etcd:3.6.5-0": "registry.k8s.io",
		"busybox:1":                    "docker.io",
		"docker.io/library/busybox:1":  "docker.io",
		"quay.io/cilium/cilium:v1@sha256:" + strings.Repeat("a", 64): "quay.io",
		"localhost:5000/x:1": "localhost:5000",
	} {
		if got, err := RegistryOf(ref); err != nil || got != want {
			t.Errorf("RegistryOf(%s) = %q, %v; want %s", ref, got, err, want)
		}
	}
}

func TestMirrorNamesEveryImageItCannotCopy(t *testing.T) {
	ctx := context.Background()
	dir, _ := layoutOf(t, map[string]map[string]string{
		"etcd": {refNameAnnotation: "registry.k8s.io/etcd:3.6.5-0"},
		"a":    {refNameAnnotation: "v1"},
		"b":    {refNameAnnotation: "v1"},
	}, "")
	wrong := "sha256:" + strings.Repeat("0", 64)
	imgs := []Image{
		{Ref: "registry.k8s.io/coredns/coredns:v1.12.1", For: ForKubeadm},
		{Ref: "registry.k8s.io/etcd:3.6.5-0", For: ForKubeadm},
		{Ref: "registry.k8s.io/etcd:3.6.5-0@" + wrong, For: ForKubeadm},
		{Ref: "quay.io/cilium/cilium:v1", For: ForCilium},
	}
	to := registry(t)
	res, err := Mirror(ctx, imgs, Source{Layouts: []string{dir}}, all(to), quiet)
	if res.Copied != 1 {
		t.Errorf("copied %d, want the one image the layout has", res.Copied)
	}
	if err == nil {
		t.Fatal("no error for three images that cannot be copied")
	}
	for _, want := range []string{"coredns/coredns:v1.12.1", "reference pins " + wrong, "cilium:v1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	for _, bad := range []string{"registry.local:5000", "ftp://x", "http://x/path"} {
		if err := CheckURL(bad); err == nil {
			t.Errorf("%s passes as a mirror URL", bad)
		}
	}
	// Every image's registry needs a mirror.
	_, err = Mirror(ctx, imgs[:2], Source{Layouts: []string{dir}}, map[string]string{"registry.k8s.io": "registry.local:5000"}, quiet)
	if err == nil || !strings.Contains(err.Error(), "the mirror of registry.k8s.io") {
		t.Errorf("a bad mirror URL: %v", err)
	}
	_, err = Mirror(ctx, imgs[3:], Source{Layouts: []string{dir}}, map[string]string{"registry.k8s.io": to}, quiet)
	if err == nil || !strings.Contains(err.Error(), `mirrors["quay.io"]`) {
		t.Errorf("no mirror for quay.io: %v", err)
	}
	if _, err := Mirror(ctx, imgs, Source{Layouts: []string{t.TempDir()}}, all(to), quiet); err == nil || !strings.Contains(err.Error(), "--from-layout") {
		t.Errorf("an empty directory as the layout: %v", err)
	}
}
