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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The archive is what containerd imports: the tag it names, the platform
// it unpacks for, the entrypoint, and the file at its path with its mode;
// built twice from the same file it is the same image.
func TestWriteReadsBackAsBuilt(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{Ref: "registry.k8s.io/pause:3.10.1", Files: []File{{Src: bin, Path: "/usr/bin/pause"}}, Entrypoint: []string{"/usr/bin/pause"}}
	var digests []string
	for _, out := range []string{filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")} {
		if err := Write(img, out); err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag(img.Ref)
		i, err := tarball.ImageFromPath(out, &tag)
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

func TestWriteRefusesABadReference(t *testing.T) {
	if err := Write(Image{Ref: "Not A Ref"}, filepath.Join(t.TempDir(), "x.tar")); err == nil {
		t.Error("accepted a reference that is not one")
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
