package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// imagesInventory is the shipped inventory with a local chart, the GPU
// workers' device plugin on, and the mirror at mirror (none for "").
func imagesInventory(t *testing.T, mirror string) string {
	t.Helper()
	dir := t.TempDir()
	chart, err := chartutil.Save(&helmchart.Chart{
		Metadata: &helmchart.Metadata{APIVersion: "v2", Name: "cilium", Version: "1.18.4"},
		Templates: []*helmchart.File{{Name: "templates/ds.yaml", Data: []byte(
			"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: cilium}\nspec: {template: {spec: {containers: [{name: agent, image: quay.io/cilium/cilium:v1.18.4}]}}}\n")}},
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(homelab)
	registry := "{}"
	if mirror != "" {
		registry = "{mirror: \"" + mirror + "\"}"
	}
	s := strings.Replace(string(data), "  registry: {}", "  registry: "+registry+"\n  cilium: {chart: "+chart+"}", 1)
	s = strings.Replace(s, "devicePlugin: {enabled: false", "devicePlugin: {enabled: true", 1)
	p := filepath.Join(dir, "homelab.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImagesListAndMirror(t *testing.T) {
	srv := httptest.NewServer(ggcr.New(ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(t.TempDir())), ggcr.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	inv := imagesInventory(t, srv.URL)

	out, stderr, code := run(t, "images", "list", "-f", inv)
	if code != 0 {
		t.Fatalf("images list: exit %d: %s", code, stderr)
	}
	var refs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		refs = append(refs, strings.Fields(line)[0])
	}
	for _, want := range []string{"registry.k8s.io/kube-apiserver:v1.34.4", "registry.k8s.io/etcd:3.6.5-0", "quay.io/cilium/cilium:v1.18.4", "nvcr.io/nvidia/k8s-device-plugin:v0.20.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("images list lacks %s:\n%s", want, out)
		}
	}

	// An OCI layout holding all but the device plugin, as carried in.
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if strings.HasPrefix(r, "nvcr.io/") {
			continue
		}
		img, _ := random.Image(128, 1)
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": r})); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code = run(t, "images", "mirror", "-f", inv, "--from-layout", dir)
	if code == 0 || !strings.Contains(stderr, "k8s-device-plugin") || !strings.Contains(out, "1 failed") {
		t.Errorf("a layout lacking one image: exit %d, out %q, stderr %s", code, out, stderr)
	}
	img, _ := random.Image(128, 1)
	p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "nvcr.io/nvidia/k8s-device-plugin:v0.20.1"}))
	out, stderr, code = run(t, "images", "mirror", "-f", inv, "--from-layout", dir)
	if code != 0 || !strings.Contains(out, "1 copied, "+strconv.Itoa(len(refs)-1)+" already there, 0 failed") {
		t.Errorf("the full layout: exit %d, out %q, stderr %s", code, out, stderr)
	}

	for _, bad := range [][]string{
		{"--to", "registry.local:5000"},
		{"--from", srv.URL, "--from-layout", dir},
	} {
		if _, stderr, code := run(t, append([]string{"images", "mirror", "-f", inv}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d, stderr %s; want a usage error", bad, code, stderr)
		}
	}
	if _, stderr, code := run(t, "images", "mirror", "-f", imagesInventory(t, ""), "--from-layout", dir); code != 2 || !strings.Contains(stderr, "cluster.registry.mirror") {
		t.Errorf("no mirror declared: exit %d, stderr %s", code, stderr)
	}
}
