package nodeimages

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The layout is what the lab's registry serves: the reference it names,
// the platform containerd unpacks for, the entrypoint, and the file at its
// path with its mode; built twice from the same file it is the same image.
func TestWriteLayoutReadsBackAsBuilt(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{Ref: "registry.k8s.io/pause:3.10.1", Files: []File{{Src: bin, Path: "/usr/bin/pause"}}, Entrypoint: []string{"/usr/bin/pause"}}
	var digests []string
	for _, out := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")} {
		if err := WriteLayout(out, []Image{img}); err != nil {
			t.Fatal(err)
		}
		p, err := layout.FromPath(out)
		if err != nil {
			t.Fatal(err)
		}
		idx, _ := p.ImageIndex()
		im, err := idx.IndexManifest()
		if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations[RefAnnotation] != img.Ref {
			t.Fatalf("index: %+v %v", im, err)
		}
		i, err := p.Image(im.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := i.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !slices.Equal(cf.Config.Entrypoint, img.Entrypoint) {
			t.Errorf("config: %s/%s entrypoint %q", cf.OS, cf.Architecture, cf.Config.Entrypoint)
		}
		layers, err := i.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers: %d %v", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
			if h.Name == "usr/bin/pause" && h.Mode != 0o755 {
				t.Errorf("pause mode %o", h.Mode)
			}
		}
		rc.Close()
		if !slices.Equal(names, []string{"usr/", "usr/bin/", "usr/bin/pause"}) {
			t.Errorf("layer holds %q", names)
		}
		d, err := i.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("the same files gave two images: %v", digests)
	}
}

func TestWriteLayoutRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, []Image{{Ref: "Not A Ref"}}); err == nil {
		t.Error("accepted a reference that is not one")
	}
	twice := Image{Ref: "registry.k8s.io/pause:3.10.1"}
	if err := WriteLayout(dir, []Image{twice, twice}); err == nil {
		t.Error("accepted one reference twice")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused layout was left at %s: %v", dir, err)
	}
}

// A hard link comes after its target in the layer, whatever their names,
// with its target's mode: containerd extracts in the tar's order, fails a
// link to a file it has not made yet, and chmods the shared inode to the
// link entry's mode.
func TestLinksFollowTheirTargets(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	if err := os.WriteFile(bin, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := layerOf([]File{{Path: "/install-plugin.sh", Link: "/usr/bin/cilium-agent"}, {Src: bin, Path: "/usr/bin/cilium-agent"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeLink && !seen[h.Linkname] {
			t.Errorf("%s links to %s before it is in the layer", h.Name, h.Linkname)
		}
		// containerd gives the shared inode the link entry's mode.
		if h.Typeflag == tar.TypeLink && h.Mode != 0o755 {
			t.Errorf("link %s has mode %o: its target would lose its execute bits", h.Name, h.Mode)
		}
		seen[h.Name] = true
	}
	if !seen["install-plugin.sh"] {
		t.Error("no link in the layer")
	}
}

// A cached image is built once per set of inputs: the same inputs give
// the same directory without a rebuild, a changed source file a new one.
func TestCachedRebuildsOnlyChangedInputs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.WriteFile(bin, []byte("one"), 0o755)
	img := Image{Ref: "registry.k8s.io/kube-apiserver:v1.34.4", Files: []File{{Src: bin, Path: "/usr/local/bin/kube-apiserver"}}}
	cache := filepath.Join(dir, "cache")
	a, err := Cached(cache, img)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(a, "marker")
	os.WriteFile(marker, nil, 0o644)
	if b, err := Cached(cache, img); err != nil || b != a {
		t.Fatalf("same inputs: %s %v, want %s", b, err, a)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the same inputs rebuilt the layout")
	}
	os.WriteFile(bin, []byte("two, longer"), 0o755)
	if c, err := Cached(cache, img); err != nil || c == a {
		t.Errorf("a changed binary: %s %v", c, err)
	}
}
