package registry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/homelab-dev/homelab/infra/lab/nodeimages"
)

// layoutsOf are one cached layout per image, as the lab builds them.
func layoutsOf(t *testing.T, refs ...string) []string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range refs {
		img := nodeimages.Image{Ref: r, Files: []nodeimages.File{{Src: bin, Path: "/usr/bin/" + filepath.Base(strings.Split(r, ":")[0])}}}
		d, err := nodeimages.Cached(filepath.Join(dir, "cache"), img)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// A mirror is asked for an image by its path without the registry's
// host: what the layout holds is pulled back whole (remote checks every
// digest), from both registries the lab mirrors; what it lacks is not
// found; nothing can be pushed.
func TestServesTheLayoutAsAMirror(t *testing.T) {
	dirs := layoutsOf(t, "registry.k8s.io/pause:3.10.1", "quay.io/cilium/cilium:v1.18.4")
	h, err := Handler(dirs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // loopback only
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, repo := range []string{"pause:3.10.1", "cilium/cilium:v1.18.4"} {
		ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("%s: %v", repo, err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers %v", repo, len(layers), err)
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Errorf("%s: layer: %v", repo, err)
		}
		rc.Close()
	}
	missing, _ := name.ParseReference(host+"/coredns/coredns:v1.12.1", name.Insecure)
	if _, err := remote.Image(missing); err == nil {
		t.Error("an image the layout lacks was served")
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v2/pause/blobs/uploads/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a push got %d", resp.StatusCode)
	}
}

// Two registries' images at the same path would shadow one another.
func TestRefusesImagesAtOnePath(t *testing.T) {
	dirs := layoutsOf(t, "registry.k8s.io/pause:3.10.1", "quay.io/pause:3.10.1")
	if _, err := Handler(dirs, io.Discard); err == nil || !strings.Contains(err.Error(), "pause:3.10.1") {
		t.Errorf("err = %v", err)
	}
}
